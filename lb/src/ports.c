#include <stdio.h>
#include <string.h>

#include <doca_log.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "flow_lb.h"
#include "ports.h"

DOCA_LOG_REGISTER(XENOFLOW_PORTS);

#define RX_RING 1024
#define TX_RING 1024
#define HAIRPIN_DESC 2048 /* descriptors per hairpin queue, as DOCA 2.9's dpdk_utils.c */
#define MBUFS 8191
#define MAX_RSS_QUEUES 64 /* main.c's --queues limit */

static struct rte_mempool *mbuf_pool;

doca_error_t xf_dpdk_init(int argc, char **argv)
{
	if (rte_eal_init(argc, argv) < 0) {
		DOCA_LOG_ERR("Failed to init EAL: %s", rte_strerror(rte_errno));
		return DOCA_ERROR_DRIVER;
	}
	return DOCA_SUCCESS;
}

/* Hairpin queues to the other port (p ^ 1), same queue index on both sides, Tx then Rx as
 * dpdk_utils.c's setup_hairpin_queues. A hairpin between two ports needs manual_bind and
 * tx_explicit: mlx5 refuses a cross-port hairpin queue without them with EINVAL
 * (drivers/net/mlx5/mlx5_rxq.c mlx5_rx_hairpin_queue_setup, mlx5_txq.c mlx5_tx_hairpin_queue_setup),
 * and with manual_bind the queues only carry frames once rte_eth_hairpin_bind binds them. */
static doca_error_t setup_hairpin_queues(uint16_t p, int nq, int nh)
{
	struct rte_eth_hairpin_conf hc;
	int ret;

	memset(&hc, 0, sizeof(hc));
	hc.peer_count = 1;
	hc.manual_bind = 1;
	hc.tx_explicit = 1;
	hc.peers[0].port = (uint16_t)(p ^ 1);
	for (int h = 0; h < nh; h++) {
		uint16_t q = (uint16_t)(nq + h);

		hc.peers[0].queue = q;
		if ((ret = rte_eth_tx_hairpin_queue_setup(p, q, HAIRPIN_DESC, &hc)) < 0 ||
		    (ret = rte_eth_rx_hairpin_queue_setup(p, q, HAIRPIN_DESC, &hc)) < 0) {
			DOCA_LOG_ERR("Failed to set up hairpin queue %u of port %u (peer port %u): %s", q, p, p ^ 1,
				     strerror(-ret));
			return DOCA_ERROR_DRIVER;
		}
	}
	return DOCA_SUCCESS;
}

static doca_error_t port_init(uint16_t p, int nq, int nh)
{
	struct rte_eth_conf conf;
	int ret;

	memset(&conf, 0, sizeof(conf));
	if ((ret = rte_eth_dev_configure(p, (uint16_t)(nq + nh), (uint16_t)(nq + nh), &conf)) < 0) {
		DOCA_LOG_ERR("Failed to configure port %u: %s", p, strerror(-ret));
		return DOCA_ERROR_DRIVER;
	}
	for (uint16_t q = 0; q < nq; q++) {
		if ((ret = rte_eth_rx_queue_setup(p, q, RX_RING, rte_socket_id(), NULL, mbuf_pool)) < 0 ||
		    (ret = rte_eth_tx_queue_setup(p, q, TX_RING, rte_socket_id(), NULL)) < 0) {
			DOCA_LOG_ERR("Failed to set up queue %u of port %u: %s", q, p, strerror(-ret));
			return DOCA_ERROR_DRIVER;
		}
	}
	if (nh && setup_hairpin_queues(p, nq, nh) != DOCA_SUCCESS)
		return DOCA_ERROR_DRIVER;
	if ((ret = rte_eth_promiscuous_enable(p)) < 0 || (ret = rte_eth_dev_start(p)) < 0) {
		DOCA_LOG_ERR("Failed to start port %u: %s", p, strerror(-ret));
		return DOCA_ERROR_DRIVER;
	}
	return DOCA_SUCCESS;
}

static void ports_down(int nb_ports)
{
	for (int p = nb_ports - 1; p >= 0; p--) {
		rte_eth_dev_stop((uint16_t)p);
		rte_eth_dev_close((uint16_t)p);
	}
	if (mbuf_pool)
		rte_mempool_free(mbuf_pool);
	mbuf_pool = NULL;
}

doca_error_t xf_dpdk_ports_init(const struct xf_dpdk_config *cfg)
{
	int nq = cfg->nb_queues, nh = cfg->nb_hairpin_q, ret;

	if (rte_eth_dev_count_avail() < cfg->nb_ports) {
		DOCA_LOG_ERR("Failed to init ports: %u available, %d needed (EAL -a ...)", rte_eth_dev_count_avail(),
			     cfg->nb_ports);
		return DOCA_ERROR_INVALID_VALUE;
	}
	mbuf_pool = rte_pktmbuf_pool_create("xf_mbufs", MBUFS * (unsigned)cfg->nb_ports, 250, 0,
					    RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
	if (!mbuf_pool) {
		DOCA_LOG_ERR("Failed to create mbuf pool: %s", rte_strerror(rte_errno));
		return DOCA_ERROR_NO_MEMORY;
	}
	for (int p = 0; p < cfg->nb_ports; p++) {
		if (port_init((uint16_t)p, nq, nh) != DOCA_SUCCESS) {
			ports_down(p + 1);
			return DOCA_ERROR_DRIVER;
		}
	}
	/* Bind after every port is started (rte_eth_hairpin_bind needs both started): Tx of p to Rx
	 * of its peer, for each p — with two ports that is both directions, 0→1 and 1→0, what
	 * dpdk_utils.c's enable_hairpin_queues does per port with rte_eth_hairpin_get_peer_ports. */
	for (int p = 0; nh && p < cfg->nb_ports; p++) {
		if ((ret = rte_eth_hairpin_bind((uint16_t)p, (uint16_t)(p ^ 1))) < 0) {
			DOCA_LOG_ERR("Failed to bind the hairpin queues of port %d (Tx) to port %d (Rx): %s", p, p ^ 1,
				     strerror(-ret));
			for (int u = 0; u < p; u++)
				rte_eth_hairpin_unbind((uint16_t)u, (uint16_t)(u ^ 1));
			ports_down(cfg->nb_ports);
			return DOCA_ERROR_DRIVER;
		}
	}
	return DOCA_SUCCESS;
}

void xf_dpdk_ports_fini(const struct xf_dpdk_config *cfg)
{
	/* unbind before stopping, as dpdk_utils.c's dpdk_queues_and_ports_fini */
	for (int p = 0; cfg->nb_hairpin_q && p < cfg->nb_ports; p++)
		rte_eth_hairpin_unbind((uint16_t)p, (uint16_t)(p ^ 1));
	ports_down(cfg->nb_ports);
}

doca_error_t xf_init_doca_flow(int nb_queues, const char *mode, uint32_t nr_counters, uint32_t nr_shared_counters,
			       doca_flow_entry_process_cb cb)
{
	struct doca_flow_cfg *cfg;
	/* the default RSS: missed packets spread over the regular queues 0..nb_queues-1, as every 2.9
	 * sample does (flow_common.c init_doca_flow_cb); XenoFlow drops its misses in the pipe, but
	 * the port's own default rules (VNF mode: "missed packets go to RSS") use it */
	uint16_t rss_queues[MAX_RSS_QUEUES];
	struct doca_flow_resource_rss_cfg rss;
	doca_error_t r;

	if (nb_queues < 1 || nb_queues > MAX_RSS_QUEUES) {
		DOCA_LOG_ERR("Failed to init DOCA Flow: %d queues (1..%d)", nb_queues, MAX_RSS_QUEUES);
		return DOCA_ERROR_INVALID_VALUE;
	}
	memset(&rss, 0, sizeof(rss));
	for (int q = 0; q < nb_queues; q++)
		rss_queues[q] = (uint16_t)q;
	rss.queues_array = rss_queues;
	rss.nr_queues = nb_queues;
	if ((r = doca_flow_cfg_create(&cfg))) {
		DOCA_LOG_ERR("Failed to create doca_flow_cfg: %s", doca_error_get_descr(r));
		return r;
	}
	if ((r = doca_flow_cfg_set_default_rss(cfg, &rss)) ||
	    (r = doca_flow_cfg_set_pipe_queues(cfg, (uint16_t)nb_queues)) ||
	    (r = doca_flow_cfg_set_queue_depth(cfg, XF_QUEUE_DEPTH)) ||
	    (r = doca_flow_cfg_set_mode_args(cfg, mode)) ||
	    (r = doca_flow_cfg_set_nr_counters(cfg, nr_counters)) ||
	    (r = doca_flow_cfg_set_nr_shared_resource(cfg, nr_shared_counters, DOCA_FLOW_SHARED_RESOURCE_COUNTER)) ||
	    (r = doca_flow_cfg_set_cb_entry_process(cfg, cb)) || (r = doca_flow_init(cfg)))
		DOCA_LOG_ERR("Failed to init DOCA Flow: %s", doca_error_get_descr(r));
	doca_flow_cfg_destroy(cfg);
	return r;
}

doca_error_t xf_init_doca_flow_ports(int nb_ports, struct doca_flow_port *ports[])
{
	for (int p = 0; p < nb_ports; p++) {
		struct doca_flow_port_cfg *cfg;
		char devargs[16];
		doca_error_t r;

		snprintf(devargs, sizeof(devargs), "%d", p);
		if ((r = doca_flow_port_cfg_create(&cfg))) {
			xf_stop_doca_flow_ports(p, ports);
			return r;
		}
		r = doca_flow_port_cfg_set_devargs(cfg, devargs);
		if (r == DOCA_SUCCESS)
			r = doca_flow_port_start(cfg, &ports[p]);
		doca_flow_port_cfg_destroy(cfg);
		if (r != DOCA_SUCCESS) {
			DOCA_LOG_ERR("Failed to start DOCA Flow port %d: %s", p, doca_error_get_descr(r));
			xf_stop_doca_flow_ports(p, ports);
			return r;
		}
		/* VNF mode forwards to another port only through the pair ("pair information will be
		 * translated to queue action", doca_flow.h doca_flow_port_pair): pair each odd port with
		 * the one before it, port 1 with port 0, as flow_common.c and the thesis code do */
		if (p % 2 && (r = doca_flow_port_pair(ports[p], ports[p ^ 1])) != DOCA_SUCCESS) {
			DOCA_LOG_ERR("Failed to pair DOCA Flow ports %d and %d: %s", p, p ^ 1, doca_error_get_descr(r));
			xf_stop_doca_flow_ports(p + 1, ports);
			return r;
		}
	}
	return DOCA_SUCCESS;
}

void xf_stop_doca_flow_ports(int nb_ports, struct doca_flow_port *ports[])
{
	/* reverse order, as flow_common.c stop_doca_flow_ports */
	for (int p = nb_ports - 1; p >= 0; p--) {
		if (ports[p])
			doca_flow_port_stop(ports[p]);
		ports[p] = NULL;
	}
}
