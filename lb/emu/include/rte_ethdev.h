/* The DPDK ethdev surface XenoFlow's port setup needs (lb/emu): configure/queue setup/start/
 * stop/close succeed for bound ports (the emulated datapath is XDP on the bound interface). */
#ifndef XB_EMU_RTE_ETHDEV_H
#define XB_EMU_RTE_ETHDEV_H
#include <stdint.h>
#include <rte_mbuf.h>
#ifdef __cplusplus
extern "C" {
#endif

struct rte_eth_conf {
	struct {
		uint32_t mq_mode;
		uint64_t offloads;
	} rxmode;
	struct {
		uint64_t offloads;
	} txmode;
};

struct rte_eth_hairpin_conf {
	uint32_t peer_count : 16;
	uint32_t tx_explicit : 1;
	uint32_t manual_bind : 1;
	struct {
		uint16_t port;
		uint16_t queue;
	} peers[32];
};

struct rte_eth_rxconf;
struct rte_eth_txconf;

uint16_t rte_eth_dev_count_avail(void);
int rte_eth_dev_configure(uint16_t port_id, uint16_t nb_rx_queue, uint16_t nb_tx_queue,
			  const struct rte_eth_conf *eth_conf);
int rte_eth_rx_queue_setup(uint16_t port_id, uint16_t rx_queue_id, uint16_t nb_rx_desc, unsigned int socket_id,
			   const struct rte_eth_rxconf *rx_conf, struct rte_mempool *mb_pool);
int rte_eth_tx_queue_setup(uint16_t port_id, uint16_t tx_queue_id, uint16_t nb_tx_desc, unsigned int socket_id,
			   const struct rte_eth_txconf *tx_conf);
int rte_eth_rx_hairpin_queue_setup(uint16_t port_id, uint16_t rx_queue_id, uint16_t nb_rx_desc,
				   const struct rte_eth_hairpin_conf *conf);
int rte_eth_tx_hairpin_queue_setup(uint16_t port_id, uint16_t tx_queue_id, uint16_t nb_tx_desc,
				   const struct rte_eth_hairpin_conf *conf);
int rte_eth_promiscuous_enable(uint16_t port_id);
int rte_eth_dev_start(uint16_t port_id);
int rte_eth_dev_stop(uint16_t port_id);
int rte_eth_dev_close(uint16_t port_id);

#ifdef __cplusplus
}
#endif
#endif
