/* Internal to lb/emu: what the DOCA Flow emulation (doca_flow.c) asks the ethdev emulation
 * (dpdk.c) about a port, the way DOCA Flow builds on the DPDK port it is given. */
#ifndef XB_EMU_DPDK_H
#define XB_EMU_DPDK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

bool emu_eth_started(uint16_t port_id);
/* 1 regular Rx queue, 2 hairpin Rx queue, 0 none (not set up, or beyond nb_rx_queue) */
int emu_eth_rxq_kind(uint16_t port_id, uint16_t queue);
uint16_t emu_eth_nb_rxq(uint16_t port_id);
/* A frame received on `in_port` can leave through `out_port` by a hairpin: an Rx hairpin queue of
 * in_port whose peer is a Tx hairpin queue of out_port, the pair bound. If not, `why` says what
 * is missing. */
bool emu_eth_hairpin_ready(uint16_t in_port, uint16_t out_port, char *why, size_t why_len);

/* The emulated PFs' eSwitch mode is switchdev (DOCA_FLOW_EMU_ESWITCH_MODE=switchdev; default
 * legacy): hairpin queues are refused, as the mlx5 guide says they are not supported then. */
bool emu_eswitch_switchdev(void);

#endif
