/* The DPDK EAL surface XenoFlow's main() needs (lb/emu). In the emulation the EAL allow-list
 * "-a IFNAME[,devargs]" binds DPDK port N (in order) to the Linux interface IFNAME; other EAL
 * options are accepted and ignored. */
#ifndef XB_EMU_RTE_EAL_H
#define XB_EMU_RTE_EAL_H
#ifdef __cplusplus
extern "C" {
#endif
int rte_eal_init(int argc, char **argv);
int rte_eal_cleanup(void);
unsigned int rte_socket_id(void);
#ifdef __cplusplus
}
#endif
#endif
