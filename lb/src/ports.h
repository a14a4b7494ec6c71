/* DPDK and DOCA Flow bring-up/teardown for XenoFlow (what the DOCA samples' dpdk_utils.c and
 * flow_common.c do, reduced to XenoFlow's needs): EAL through doca_argp's DPDK program, ethdev
 * ports with RX/TX and hairpin queues, DOCA Flow in "vnf,hws" mode, DOCA Flow ports. */
#ifndef XF_PORTS_H
#define XF_PORTS_H
#include <stdint.h>
#include <doca_flow.h>

struct xf_dpdk_config {
	int nb_ports;
	int nb_queues;
	int nb_hairpin_q;
};

doca_error_t xf_dpdk_init(int argc, char **argv); /* doca_argp_set_dpdk_program callback */
doca_error_t xf_dpdk_ports_init(const struct xf_dpdk_config *cfg);
void xf_dpdk_ports_fini(const struct xf_dpdk_config *cfg);

doca_error_t xf_init_doca_flow(int nb_queues, const char *mode, uint32_t nr_shared_counters,
			       doca_flow_entry_process_cb cb);
doca_error_t xf_init_doca_flow_ports(int nb_ports, struct doca_flow_port *ports[]);
void xf_stop_doca_flow_ports(int nb_ports, struct doca_flow_port *ports[]);

#endif
