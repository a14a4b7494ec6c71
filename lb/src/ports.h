/* DPDK and DOCA Flow bring-up/teardown for XenoFlow, the way DOCA 2.9's dpdk_utils.c and
 * flow_common.c do it, reduced to XenoFlow's needs: EAL through doca_argp's DPDK program; ethdev
 * ports with RX/TX queues and hairpin queues to the other port (manual_bind, tx_explicit), started,
 * then bound in both directions; DOCA Flow in "vnf,hws" mode with the default RSS; DOCA Flow ports,
 * port 1 paired with port 0. */
#ifndef XF_PORTS_H
#define XF_PORTS_H
#include <stdint.h>
#include <doca_flow.h>

struct xf_dpdk_config {
	int nb_ports;
	int nb_queues;    /* regular RX/TX queues per port: 0..nb_queues-1 (the default RSS queues) */
	int nb_hairpin_q; /* hairpin queues per port: nb_queues..nb_queues+nb_hairpin_q-1, peer port p^1 */
};

doca_error_t xf_dpdk_init(int argc, char **argv); /* doca_argp_set_dpdk_program callback */
/* configure, set up and start every port, then bind the hairpin queues; on failure nothing is
 * left started */
doca_error_t xf_dpdk_ports_init(const struct xf_dpdk_config *cfg);
void xf_dpdk_ports_fini(const struct xf_dpdk_config *cfg);

/* DOCA Flow: `nb_queues` pipe queues and default RSS queues 0..nb_queues-1, `nr_counters` counters
 * (per-entry and miss counters: XF_NR_COUNTERS), `nr_shared_counters` shared counters */
doca_error_t xf_init_doca_flow(int nb_queues, const char *mode, uint32_t nr_counters, uint32_t nr_shared_counters,
			       doca_flow_entry_process_cb cb);
/* DOCA Flow ports 0..nb_ports-1 on the DPDK ports of the same ids; every odd port paired with the
 * port before it. On failure the ports started so far are stopped. */
doca_error_t xf_init_doca_flow_ports(int nb_ports, struct doca_flow_port *ports[]);
void xf_stop_doca_flow_ports(int nb_ports, struct doca_flow_port *ports[]);

#endif
