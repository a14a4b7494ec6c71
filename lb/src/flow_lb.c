#include <arpa/inet.h>
#include <string.h>

#include <doca_log.h>

#include "flow_lb.h"
#include "hash.h"

DOCA_LOG_REGISTER(XENOFLOW_PIPE);

void xf_check_for_valid_entry(struct doca_flow_pipe_entry *entry, uint16_t pipe_queue,
			      enum doca_flow_entry_status status, enum doca_flow_entry_op op, void *user_ctx)
{
	struct xf_entries_status *st = user_ctx;

	(void)entry;
	(void)pipe_queue;
	/* adds (start) and in-place updates (a backend change: lb/src/update.c) are counted; their
	 * user context is the one the entry was added with */
	if (!st || (op != DOCA_FLOW_ENTRY_OP_ADD && op != DOCA_FLOW_ENTRY_OP_UPD))
		return;
	if (status != DOCA_FLOW_ENTRY_STATUS_SUCCESS)
		st->failure = true;
	st->nb_processed++;
}

doca_error_t xf_create_lb_pipe(struct doca_flow_port *port, uint16_t egress_port_id, enum doca_flow_pipe_type type,
			       uint32_t nr_entries, const struct doca_flow_match *match,
			       const struct doca_flow_match *match_mask, struct doca_flow_pipe **pipe)
{
	struct doca_flow_monitor monitor;
	struct doca_flow_actions actions0, *actions_arr[1];
	struct doca_flow_fwd fwd, fwd_miss;
	struct doca_flow_pipe_cfg *cfg;
	bool hash = type == DOCA_FLOW_PIPE_HASH;
	const char *what = hash ? "hash pipe" : "root pipe";
	doca_error_t r;

	memset(&monitor, 0, sizeof(monitor));
	memset(&actions0, 0, sizeof(actions0));
	memset(&fwd, 0, sizeof(fwd));
	memset(&fwd_miss, 0, sizeof(fwd_miss));

	/* both MACs changeable per entry */
	memset(actions0.outer.eth.dst_mac, 0xff, 6);
	memset(actions0.outer.eth.src_mac, 0xff, 6);
	actions_arr[0] = &actions0;
	/* a shared counter per entry: id changeable */
	monitor.counter_type = DOCA_FLOW_RESOURCE_TYPE_SHARED;
	monitor.shared_counter.shared_counter_id = 0xffffffff;

	/* VNF mode: the egress port must be the ingress port's pair (doca_flow_port_pair), the
	 * forward becomes a queue action to its hairpin queues */
	fwd.type = DOCA_FLOW_FWD_PORT;
	fwd.port_id = egress_port_id;
	fwd_miss.type = DOCA_FLOW_FWD_DROP;

	r = doca_flow_pipe_cfg_create(&cfg, port);
	if (r != DOCA_SUCCESS) {
		DOCA_LOG_ERR("Failed to create pipe cfg: %s", doca_error_get_descr(r));
		return r;
	}
	if ((r = doca_flow_pipe_cfg_set_name(cfg, hash ? "XENOFLOW_HASH_PIPE" : "XENOFLOW_LB_PIPE")) ||
	    (r = doca_flow_pipe_cfg_set_type(cfg, type)) ||
	    (r = doca_flow_pipe_cfg_set_is_root(cfg, true)) ||
	    (r = doca_flow_pipe_cfg_set_nr_entries(cfg, nr_entries)) ||
	    /* one counter of the nr_counters pool: XF_NR_COUNTERS */
	    (r = doca_flow_pipe_cfg_set_miss_counter(cfg, true)) ||
	    (r = doca_flow_pipe_cfg_set_match(cfg, match, match_mask)) ||
	    (r = doca_flow_pipe_cfg_set_actions(cfg, actions_arr, NULL, NULL, 1)) ||
	    (r = doca_flow_pipe_cfg_set_monitor(cfg, &monitor))) {
		DOCA_LOG_ERR("Failed to configure the %s: %s", what, doca_error_get_descr(r));
		goto out;
	}
	r = doca_flow_pipe_create(cfg, &fwd, &fwd_miss, pipe);
	if (r != DOCA_SUCCESS)
		DOCA_LOG_ERR("Failed to create the %s: %s", what, doca_error_get_descr(r));
out:
	doca_flow_pipe_cfg_destroy(cfg);
	return r;
}

doca_error_t xf_create_root_pipe(struct doca_flow_port *port, uint16_t egress_port_id, uint32_t class_mask,
				 struct doca_flow_pipe **pipe)
{
	struct doca_flow_match match, match_mask;

	memset(&match, 0, sizeof(match));
	memset(&match_mask, 0, sizeof(match_mask));
	/* IPv4 only; src_ip all-ones = changeable (each entry gives its class), masked to the class bits */
	match.outer.l3_type = DOCA_FLOW_L3_TYPE_IP4;
	match.outer.ip4.src_ip = 0xffffffff;
	match_mask.outer.l3_type = DOCA_FLOW_L3_TYPE_IP4;
	match_mask.outer.ip4.src_ip = htonl(class_mask);
	return xf_create_lb_pipe(port, egress_port_id, DOCA_FLOW_PIPE_BASIC, class_mask + 1, &match, &match_mask, pipe);
}

void xf_entry_actions(const uint8_t dst_mac[6], const uint8_t src_mac[6], uint32_t counter_id,
		      struct doca_flow_actions *actions, struct doca_flow_monitor *monitor)
{
	memset(actions, 0, sizeof(*actions));
	memset(monitor, 0, sizeof(*monitor));
	actions->action_idx = 0;
	memcpy(actions->outer.eth.dst_mac, dst_mac, 6);
	memcpy(actions->outer.eth.src_mac, src_mac, 6);
	monitor->counter_type = DOCA_FLOW_RESOURCE_TYPE_SHARED;
	monitor->shared_counter.shared_counter_id = counter_id;
}

doca_error_t xf_update_class_entry(struct doca_flow_pipe *pipe, struct doca_flow_pipe_entry *entry, uint32_t cls,
				   const uint8_t dst_mac[6], const uint8_t src_mac[6], uint32_t counter_id)
{
	struct doca_flow_actions actions;
	struct doca_flow_monitor monitor;
	doca_error_t r;

	xf_entry_actions(dst_mac, src_mac, counter_id, &actions, &monitor);
	r = doca_flow_pipe_update_entry(0, pipe, &actions, &monitor, NULL, DOCA_FLOW_NO_WAIT, entry);
	if (r != DOCA_SUCCESS)
		DOCA_LOG_ERR("Failed to update entry %u: %s", cls, doca_error_get_descr(r));
	return r;
}

doca_error_t xf_add_class_entry(struct doca_flow_pipe *pipe, uint32_t cls, const uint8_t dst_mac[6],
				const uint8_t src_mac[6], uint32_t counter_id, struct xf_entries_status *status,
				struct doca_flow_pipe_entry **entry)
{
	struct doca_flow_match match;
	struct doca_flow_actions actions;
	struct doca_flow_monitor monitor;
	doca_error_t r;

	memset(&match, 0, sizeof(match));
	match.outer.ip4.src_ip = htonl(cls);
	xf_entry_actions(dst_mac, src_mac, counter_id, &actions, &monitor);
	r = doca_flow_pipe_add_entry(0, pipe, &match, &actions, &monitor, NULL, DOCA_FLOW_NO_WAIT, status, entry);
	if (r != DOCA_SUCCESS)
		DOCA_LOG_ERR("Failed to add the entry for class %u: %s", cls, doca_error_get_descr(r));
	return r;
}

doca_error_t xf_setup_class_counters(struct doca_flow_port *port, int n, uint32_t *ids)
{
	struct doca_flow_shared_resource_cfg scfg = {.domain = DOCA_FLOW_PIPE_DOMAIN_DEFAULT};
	doca_error_t r;

	for (int c = 0; c < n; c++) {
		ids[c] = (uint32_t)c;
		if ((r = doca_flow_shared_resource_set_cfg(DOCA_FLOW_SHARED_RESOURCE_COUNTER, ids[c], &scfg))) {
			DOCA_LOG_ERR("Failed to configure shared counter %d: %s", c, doca_error_get_descr(r));
			return r;
		}
	}
	if ((r = doca_flow_shared_resources_bind(DOCA_FLOW_SHARED_RESOURCE_COUNTER, ids, (uint32_t)n, port)))
		DOCA_LOG_ERR("Failed to bind %d shared counters to the ingress port: %s", n, doca_error_get_descr(r));
	return r;
}

doca_error_t xf_process_until(struct doca_flow_port *port, struct xf_entries_status *st, int target)
{
	while (st->nb_processed < target) {
		int before = st->nb_processed;
		doca_error_t r = doca_flow_entries_process(port, 0, XF_PROCESS_TIMEOUT_US, (uint32_t)(target - before));

		if (r != DOCA_SUCCESS)
			return r;
		if (st->failure)
			return DOCA_ERROR_BAD_STATE;
		if (st->nb_processed == before)
			return DOCA_ERROR_TIME_OUT;
	}
	return DOCA_SUCCESS;
}

doca_error_t xf_install_classes(struct doca_flow_port *ingress, uint16_t egress_port_id, int nslots,
				const uint8_t (*dst_macs)[6], const uint8_t src_mac[6], const uint32_t *ids,
				struct xf_entries_status *status, struct doca_flow_pipe_entry **entries,
				struct doca_flow_pipe **pipe)
{
	return xf_install_slots(ingress, egress_port_id, nslots, NULL, dst_macs, src_mac, ids, status, entries, pipe);
}

doca_error_t xf_install_slots(struct doca_flow_port *ingress, uint16_t egress_port_id, int nslots,
			      const struct xf_hash *hash, const uint8_t (*dst_macs)[6], const uint8_t src_mac[6],
			      const uint32_t *ids, struct xf_entries_status *status, struct doca_flow_pipe_entry **entries,
			      struct doca_flow_pipe **pipe)
{
	struct doca_flow_pipe_entry *entry;
	int first = status->nb_processed;
	doca_error_t r;

	*pipe = NULL;
	r = hash ? xf_create_hash_pipe(ingress, egress_port_id, (uint32_t)nslots, hash, pipe)
		 : xf_create_root_pipe(ingress, egress_port_id, (uint32_t)nslots - 1, pipe);
	if (r)
		return r;
	/* at most XF_QUEUE_BATCH entries in the queue before they are processed (its margin kept) */
	for (int c0 = 0; c0 < nslots; c0 += XF_QUEUE_BATCH) {
		int n = nslots - c0 < XF_QUEUE_BATCH ? nslots - c0 : XF_QUEUE_BATCH;

		for (int c = c0; c < c0 + n; c++) {
			struct doca_flow_pipe_entry **e = entries ? &entries[c] : &entry;

			r = hash ? xf_add_hash_entry(*pipe, (uint32_t)c, dst_macs[c], src_mac, ids[c], status, e)
				 : xf_add_class_entry(*pipe, (uint32_t)c, dst_macs[c], src_mac, ids[c], status, e);
			if (r)
				return r;
		}
		if ((r = xf_process_until(ingress, status, status->nb_processed + n)) != DOCA_SUCCESS) {
			DOCA_LOG_ERR("Failed to process entries: %s (%d of %d processed%s)", doca_error_get_descr(r),
				     status->nb_processed - first, nslots, status->failure ? ", some failed" : "");
			return r;
		}
	}
	return DOCA_SUCCESS;
}
