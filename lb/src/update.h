/* XenoFlow's runtime backend change (SIGHUP: the -b file is read again): the difference between
 * the running slot table and the new one applied to the root pipe as DOCA Flow entry removes and
 * adds on pipe queue 0, completed by doca_flow_entries_process, while the pipe keeps forwarding.
 * Only classes whose backend MAC changes are touched; the pipe (its class mask) stays, so a file
 * with another class_bits is refused, as is any file the reader refuses: XenoFlow then runs on
 * the set it had. */
#ifndef XF_UPDATE_H
#define XF_UPDATE_H
#include <stdint.h>
#include <doca_flow.h>

#include "backends.h"
#include "flow_lb.h"

/* Classes changed per round: a remove and an add each, so a round's operations stay within the
 * queue's batch (XF_QUEUE_BATCH: the depth less the margin the 2.9 samples keep) before
 * doca_flow_entries_process completes them. */
#define XF_UPDATE_CLASSES_PER_ROUND (XF_QUEUE_BATCH / 2)
_Static_assert(2 * XF_UPDATE_CLASSES_PER_ROUND <= XF_QUEUE_BATCH, "a round keeps the queue's margin free");

/* What a running XenoFlow holds of its pipe, for the next change. `status` is the entries'
 * user context (the entry-process callback's): it must outlive them, unlike a stack variable. */
struct xf_running {
	struct doca_flow_port *ingress;
	struct doca_flow_pipe *pipe;
	struct doca_flow_pipe_entry *entries[XF_MAX_SLOTS]; /* class → its entry */
	uint8_t src_mac[6];
	const uint32_t *ids; /* class → its shared counter */
	struct xf_entries_status status;
	unsigned long updates;
};

/* Replace the entry of every class c whose MAC differs between cur[c] and next[c] (remove, then
 * add with the same match and counter), XF_UPDATE_CLASSES_PER_ROUND classes a round, each round
 * processed until its adds completed; *changed: classes replaced. */
doca_error_t xf_update_classes(struct xf_running *rt, int nslots, const uint8_t (*cur)[6], const uint8_t (*next)[6],
			       int *changed);

/* Read `path` again and apply it to the running pipe; prints one JSON line, {"event": "updated",
 * "update": n, "t_received", "t_done" (CLOCK_MONOTONIC s), "apply_s", "changed", "ops", "added",
 * "removed", "backends", "slots"} or {"event": "update_refused", "update": n, "error"}. On success
 * *bs becomes the new set (stats name its backends), else it is left as it was. */
void xf_reload(struct xf_running *rt, const char *path, struct xf_backends *bs);

#endif
