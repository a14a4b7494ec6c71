/* XenoFlow's pipe and entries (thesis §6.2.3, generalised): one root BASIC pipe on the ingress
 * port matching outer.l3_type IP4 and outer.ip4.src_ip under the class mask; one entry per class
 * rewriting outer.eth.dst_mac/src_mac and counting with its own shared counter; forward to the
 * egress port; miss → drop. */
#ifndef XF_FLOW_LB_H
#define XF_FLOW_LB_H
#include <stdbool.h>
#include <stdint.h>
#include <doca_flow.h>

struct xf_entries_status {
	bool failure;
	int nb_processed;
};

/* the DOCA Flow entry-process callback (doca_flow_cfg_set_cb_entry_process) */
void xf_check_for_valid_entry(struct doca_flow_pipe_entry *entry, uint16_t pipe_queue,
			      enum doca_flow_entry_status status, enum doca_flow_entry_op op, void *user_ctx);

doca_error_t xf_create_root_pipe(struct doca_flow_port *port, uint16_t egress_port_id, uint32_t class_mask,
				 struct doca_flow_pipe **pipe);

/* one entry: src_ip & class_mask == cls → dst_mac, src_mac, shared counter `counter_id` */
doca_error_t xf_add_class_entry(struct doca_flow_pipe *pipe, uint32_t cls, const uint8_t dst_mac[6],
				const uint8_t src_mac[6], uint32_t counter_id, struct xf_entries_status *status,
				struct doca_flow_pipe_entry **entry);

#endif
