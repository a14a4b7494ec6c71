/* Emulation-only extras (not part of DOCA): what tests and benchmarks need to look inside the
 * emulated datapath. Applications built against the real SDK must not include this. */
#ifndef DOCA_FLOW_EMU_H_
#define DOCA_FLOW_EMU_H_
#include <stddef.h>
#include <stdint.h>
#include <doca_flow.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bind DPDK/DOCA port `port_id` to a Linux interface (what rte_eal_init does for "-a IFNAME").
 * The port registry and the hairpin check are the ethdev emulation's (src/dpdk.c); the rest is
 * the DOCA Flow emulation's (src/doca_flow.c), which builds on it. */
doca_error_t doca_flow_emu_bind_port(uint16_t port_id, const char *ifname);
/* fd of the loaded XDP program (after the first doca_flow_entries_process), -1 before. */
int doca_flow_emu_prog_fd(void);
/* Run a frame through the datapath as if it arrived on `port_id` (BPF_PROG_TEST_RUN):
 * *verdict is the XDP action, out/out_len the frame after actions. */
doca_error_t doca_flow_emu_test_run(uint16_t port_id, const void *frame, uint32_t len, int *verdict, void *out,
				    uint32_t *out_len);
/* 1 if the pipe was compiled into a direct table (one contiguous mask of <= 12 bits on one IP
 * address or L4 port), 0 if its entries are looked up by hash. */
int doca_flow_emu_pipe_is_direct(const struct doca_flow_pipe *pipe);
/* 1 if a frame received on DPDK port in_port can leave through out_port by a bound hairpin (what
 * DOCA Flow's VNF mode forwards to the pair port through), 0 if not. */
int doca_flow_emu_hairpin_ready(uint16_t in_port, uint16_t out_port);
/* The interface a port is bound to ("" if none). */
const char *doca_flow_emu_port_ifname(uint16_t port_id);

#ifdef __cplusplus
}
#endif
#endif
