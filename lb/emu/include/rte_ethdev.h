/* The DPDK ethdev surface XenoFlow's port setup needs (lb/emu), with the checks DPDK 22.11 (the
 * DPDK of DOCA 2.9) and its mlx5 driver make, so that a setup the BlueField refuses is refused
 * here too, with the same return value and rte_errno (see lb/README.md, "Enforced constraints").
 * The emulated datapath is XDP on the interface a port is bound to; hairpin queues only decide
 * whether DOCA Flow may forward from one port to the other. */
#ifndef XB_EMU_RTE_ETHDEV_H
#define XB_EMU_RTE_ETHDEV_H
#include <stdint.h>
#include <rte_mbuf.h>
#ifdef __cplusplus
extern "C" {
#endif

#define RTE_MAX_ETHPORTS 8           /* the emulation's port limit (EMU_MAX_PORTS) */
#define RTE_ETH_MAX_HAIRPIN_PEERS 32 /* rte_ethdev.h, DPDK 22.11 */

struct rte_eth_conf {
	struct {
		uint32_t mq_mode;
		uint64_t offloads;
	} rxmode;
	struct {
		uint64_t offloads;
	} txmode;
};

struct rte_eth_hairpin_peer {
	uint16_t port;
	uint16_t queue;
};

/* field order and widths of DPDK 22.11's struct rte_eth_hairpin_conf */
struct rte_eth_hairpin_conf {
	uint32_t peer_count : 16;
	uint32_t tx_explicit : 1; /* the application inserts the Tx part of hairpin flows */
	uint32_t manual_bind : 1; /* Tx and peer Rx queue are bound by rte_eth_hairpin_bind, not at start */
	uint32_t use_locked_device_memory : 1;
	uint32_t use_rte_memory : 1;
	uint32_t force_memory : 1;
	uint32_t reserved : 11;
	struct rte_eth_hairpin_peer peers[RTE_ETH_MAX_HAIRPIN_PEERS];
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
int rte_eth_hairpin_bind(uint16_t tx_port, uint16_t rx_port);
int rte_eth_hairpin_unbind(uint16_t tx_port, uint16_t rx_port);
int rte_eth_promiscuous_enable(uint16_t port_id);
int rte_eth_dev_start(uint16_t port_id);
int rte_eth_dev_stop(uint16_t port_id);
int rte_eth_dev_close(uint16_t port_id);

#ifdef __cplusplus
}
#endif
#endif
