/* The DPDK mbuf pool surface XenoFlow needs (lb/emu): a pool object that holds nothing. */
#ifndef XB_EMU_RTE_MBUF_H
#define XB_EMU_RTE_MBUF_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
struct rte_mempool;
#define RTE_MBUF_DEFAULT_BUF_SIZE 2176
struct rte_mempool *rte_pktmbuf_pool_create(const char *name, unsigned int n, unsigned int cache_size,
					    uint16_t priv_size, uint16_t data_room_size, int socket_id);
void rte_mempool_free(struct rte_mempool *mp);
#ifdef __cplusplus
}
#endif
#endif
