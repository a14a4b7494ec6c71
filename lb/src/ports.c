#include <stdio.h>
#include <string.h>

#include <doca_log.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "ports.h"

DOCA_LOG_REGISTER(XENOFLOW_PORTS);

#define RX_RING 1024
#define TX_RING 1024
#define MBUFS 8191

static struct rte_mempool *mbuf_pool;

doca_error_t xf_dpdk_init(int argc, char **argv)
{
	if (rte_eal_init(argc, argv) < 0) {
		DOCA_LOG_ERR("Failed to init EAL: %s", rte_strerror(rte_errno));
		return DOCA_ERROR_DRIVER;
	}
	return DOCA_SUCCESS;
}

doca_error_t xf_dpdk_ports_init(const struct xf_dpdk_config *cfg)
{
	struct rte_eth_conf conf;
	int nq = cfg->nb_queues, nh = cfg->nb_hairpin_q;

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
	for (uint16_t p = 0; p < cfg->nb_ports; p++) {
		memset(&conf, 0, sizeof(conf));
		if (rte_eth_dev_configure(p, (uint16_t)(nq + nh), (uint16_t)(nq + nh), &conf)) {
			DOCA_LOG_ERR("Failed to configure port %u", p);
			return DOCA_ERROR_DRIVER;
		}
		for (uint16_t q = 0; q < nq; q++) {
			if (rte_eth_rx_queue_setup(p, q, RX_RING, rte_socket_id(), NULL, mbuf_pool) ||
			    rte_eth_tx_queue_setup(p, q, TX_RING, rte_socket_id(), NULL)) {
				DOCA_LOG_ERR("Failed to set up queue %u of port %u", q, p);
				return DOCA_ERROR_DRIVER;
			}
		}
		/* hairpin queues to the peer port (0 <-> 1), as the thesis's dpdk_config asks for */
		for (uint16_t h = 0; h < nh; h++) {
			struct rte_eth_hairpin_conf hc;
			uint16_t q = (uint16_t)(nq + h);

			memset(&hc, 0, sizeof(hc));
			hc.peer_count = 1;
			hc.peers[0].port = (uint16_t)(p ^ 1);
			hc.peers[0].queue = q;
			if (rte_eth_rx_hairpin_queue_setup(p, q, RX_RING, &hc) ||
			    rte_eth_tx_hairpin_queue_setup(p, q, TX_RING, &hc)) {
				DOCA_LOG_ERR("Failed to set up hairpin queue %u of port %u", q, p);
				return DOCA_ERROR_DRIVER;
			}
		}
		if (rte_eth_promiscuous_enable(p) || rte_eth_dev_start(p)) {
			DOCA_LOG_ERR("Failed to start port %u", p);
			return DOCA_ERROR_DRIVER;
		}
	}
	return DOCA_SUCCESS;
}

void xf_dpdk_ports_fini(const struct xf_dpdk_config *cfg)
{
	for (uint16_t p = 0; p < cfg->nb_ports; p++) {
		rte_eth_dev_stop(p);
		rte_eth_dev_close(p);
	}
	if (mbuf_pool)
		rte_mempool_free(mbuf_pool);
	mbuf_pool = NULL;
}

doca_error_t xf_init_doca_flow(int nb_queues, const char *mode, uint32_t nr_shared_counters,
			       doca_flow_entry_process_cb cb)
{
	struct doca_flow_cfg *cfg;
	doca_error_t r;

	if ((r = doca_flow_cfg_create(&cfg))) {
		DOCA_LOG_ERR("Failed to create doca_flow_cfg: %s", doca_error_get_descr(r));
		return r;
	}
	if ((r = doca_flow_cfg_set_pipe_queues(cfg, (uint16_t)nb_queues)) ||
	    (r = doca_flow_cfg_set_mode_args(cfg, mode)) ||
	    (r = doca_flow_cfg_set_nr_counters(cfg, 0)) ||
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
		if ((r = doca_flow_port_cfg_create(&cfg)))
			return r;
		r = doca_flow_port_cfg_set_devargs(cfg, devargs);
		if (r == DOCA_SUCCESS)
			r = doca_flow_port_start(cfg, &ports[p]);
		doca_flow_port_cfg_destroy(cfg);
		if (r != DOCA_SUCCESS) {
			DOCA_LOG_ERR("Failed to start DOCA Flow port %d: %s", p, doca_error_get_descr(r));
			xf_stop_doca_flow_ports(p, ports);
			return r;
		}
	}
	return DOCA_SUCCESS;
}

void xf_stop_doca_flow_ports(int nb_ports, struct doca_flow_port *ports[])
{
	for (int p = nb_ports - 1; p >= 0; p--)
		if (ports[p])
			doca_flow_port_stop(ports[p]);
}
