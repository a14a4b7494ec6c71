/* XenoFlow's pipe and entries (thesis §6.2.3, generalised): one root BASIC pipe on the ingress
 * port matching outer.l3_type IP4 and outer.ip4.src_ip under the class mask; one entry per class
 * rewriting outer.eth.dst_mac/src_mac and counting with its own shared counter; forward to the
 * egress port (the ingress port's pair: doca_flow_port_pair); miss → drop, counted by the pipe's
 * miss counter. */
#ifndef XF_FLOW_LB_H
#define XF_FLOW_LB_H
#include <stdbool.h>
#include <stdint.h>
#include <doca_flow.h>

/* Counters XenoFlow takes from the nr_counters pool (doca_flow_cfg_set_nr_counters): the root
 * pipe's miss counter, and nothing else — the per-class counters are shared counters, a separate
 * pool (doca_flow_cfg_set_nr_shared_resource). DOCA 2.9's fwd_miss sample sizes nr_counters to
 * exactly its miss counters (4 = 2 ports x 2 pipes); with 0, as before, the pipe cannot get its
 * miss counter. Kept rather than dropped as the thesis code did (it set no miss counter): the
 * stats line's "miss" is what tells a bad class mask or a wrong destination from a lost frame. */
#define XF_NR_COUNTERS 1

/* DOCA Flow's queue depth, set explicitly (doca_flow_cfg_set_queue_depth) and honoured: a pipe
 * queue holds at most this many entry operations until doca_flow_entries_process completes them,
 * DOCA_FLOW_NO_WAIT included (DPDK 22.11 mlx5_flow_hw.c: one job of the queue per operation,
 * given back when its completion is pulled). 128 is DOCA's default (the 2.9 samples'
 * applications/common/flow_skeleton.c DEFAULT_QUEUE_DEPTH). */
#define XF_QUEUE_DEPTH 128

/* Slots of the queue never used. The 2.9 samples (doca-samples 2.9.0072) never fill a queue to its
 * last slot: applications/ipsec_security_gw/flow_decrypt.c pushes its rules until QUEUE_DEPTH - 8
 * are in the queue, then processes them (QUEUE_DEPTH 512, flow_common.h); applications/common/
 * flow_skeleton.c keeps half (it refuses a batch above queue_depth / 2). XenoFlow keeps the
 * ipsec_security_gw margin: it pushes at most XF_QUEUE_BATCH operations with DOCA_FLOW_NO_WAIT,
 * then processes them to completion: its 2^k class entries (up to 256) at start, a change's
 * in-place updates (one per class changed) at run time. */
#define XF_QUEUE_MARGIN 8
#define XF_QUEUE_BATCH (XF_QUEUE_DEPTH - XF_QUEUE_MARGIN)

struct xf_entries_status {
	bool failure;
	int nb_processed;
};

/* doca_flow_entries_process's timeout in microseconds (the 2.9 samples' DEFAULT_TIMEOUT_US) */
#define XF_PROCESS_TIMEOUT_US 10000

/* Process queue 0 of `port` until st->nb_processed (the entry-process callback counts completions
 * of the entries whose user context st is) reaches `target`. Each call asks for exactly the
 * operations still outstanding: doca_flow_entries_process returns once it completed that many,
 * whereas max_processed_entries 0 "will proceed until timeout" (doca_flow.h), i.e. takes the whole
 * timeout every call. A failed entry, or a call that completes none (a stall), is an error. The
 * start's batches of adds and each update round (update.c) go through here. */
doca_error_t xf_process_until(struct doca_flow_port *port, struct xf_entries_status *st, int target);

/* the DOCA Flow entry-process callback (doca_flow_cfg_set_cb_entry_process) */
void xf_check_for_valid_entry(struct doca_flow_pipe_entry *entry, uint16_t pipe_queue,
			      enum doca_flow_entry_status status, enum doca_flow_entry_op op, void *user_ctx);

/* the pipe of both modes on `port`: `type` (BASIC: the class pipe; HASH: hash.c's), nr_entries,
 * the match and its mask; both MACs and the shared counter id changeable per entry; forward to
 * `egress_port_id`; miss → drop, counted by the pipe's miss counter */
doca_error_t xf_create_lb_pipe(struct doca_flow_port *port, uint16_t egress_port_id, enum doca_flow_pipe_type type,
			       uint32_t nr_entries, const struct doca_flow_match *match,
			       const struct doca_flow_match *match_mask, struct doca_flow_pipe **pipe);

/* the class pipe: src_ip changeable under class_mask, class_mask + 1 entries */
doca_error_t xf_create_root_pipe(struct doca_flow_port *port, uint16_t egress_port_id, uint32_t class_mask,
				 struct doca_flow_pipe **pipe);

/* an entry's changeable parts (both modes): both MACs, its shared counter */
void xf_entry_actions(const uint8_t dst_mac[6], const uint8_t src_mac[6], uint32_t counter_id,
		      struct doca_flow_actions *actions, struct doca_flow_monitor *monitor);

/* one entry: src_ip & class_mask == cls → dst_mac, src_mac, shared counter `counter_id` */
doca_error_t xf_add_class_entry(struct doca_flow_pipe *pipe, uint32_t cls, const uint8_t dst_mac[6],
				const uint8_t src_mac[6], uint32_t counter_id, struct xf_entries_status *status,
				struct doca_flow_pipe_entry **entry);

/* entry `cls` (a class, or a hash pipe's index) rewritten in place (doca_flow_pipe_update_entry on
 * queue 0, DOCA_FLOW_NO_WAIT):
 * dst_mac, src_mac, the same shared counter; the entry's user context (its status) counts the
 * update's completion (DOCA_FLOW_ENTRY_OP_UPD) as it counted the add */
doca_error_t xf_update_class_entry(struct doca_flow_pipe *pipe, struct doca_flow_pipe_entry *entry, uint32_t cls,
				   const uint8_t dst_mac[6], const uint8_t src_mac[6], uint32_t counter_id);

/* shared counters 0..n-1 (ids[c] = c), configured and bound to `port` */
doca_error_t xf_setup_class_counters(struct doca_flow_port *port, int n, uint32_t *ids);

/* the root pipe on `ingress` and one entry per class c → dst_macs[c], counted in ids[c], processed
 * and checked (every entry added). nslots is a power of two (the class mask is nslots - 1).
 * status: the entries' user context (the callback's), which must outlive them: a later update's
 * completion is reported to it (lb/src/update.c). entries (NULL: not kept): class c's entry. */
doca_error_t xf_install_classes(struct doca_flow_port *ingress, uint16_t egress_port_id, int nslots,
				const uint8_t (*dst_macs)[6], const uint8_t src_mac[6], const uint32_t *ids,
				struct xf_entries_status *status, struct doca_flow_pipe_entry **entries,
				struct doca_flow_pipe **pipe);

struct xf_hash;
/* xf_install_classes, or with `hash` (not NULL) the hash pipe over its fields and entry i → slot
 * i (hash.h): nslots entries either way, added and processed in the same batches */
doca_error_t xf_install_slots(struct doca_flow_port *ingress, uint16_t egress_port_id, int nslots,
			      const struct xf_hash *hash, const uint8_t (*dst_macs)[6], const uint8_t src_mac[6],
			      const uint32_t *ids, struct xf_entries_status *status, struct doca_flow_pipe_entry **entries,
			      struct doca_flow_pipe **pipe);

#endif
