/* XenoFlow's runtime backend change (SIGHUP: the -b file is read again): the difference between
 * the running slot table and the new one applied to the root pipe in place, one
 * doca_flow_pipe_update_entry per class (hash mode: per hash entry) whose backend MAC changes (its entry's dst_mac; match,
 * source MAC and shared counter stay), on pipe queue 0 with DOCA_FLOW_NO_WAIT, completed by
 * doca_flow_entries_process, while the pipe keeps forwarding: a frame of a changed class takes
 * its old backend or its new one, never the pipe's miss (drop), as the eBPF LB's and Katran's map
 * writes. The pipe (its class mask) stays, so a file with another class_bits is refused, as is
 * any file the reader refuses: XenoFlow then runs on the set it had. */
#ifndef XF_UPDATE_H
#define XF_UPDATE_H
#include <stdint.h>
#include <doca_flow.h>

#include "backends.h"
#include "flow_lb.h"

/* Classes changed per round: one update each, so a round's operations stay within the queue's
 * batch (XF_QUEUE_BATCH: the depth less the margin the 2.9 samples keep) before
 * doca_flow_entries_process completes them. */
#define XF_UPDATE_CLASSES_PER_ROUND XF_QUEUE_BATCH
_Static_assert(XF_UPDATE_CLASSES_PER_ROUND <= XF_QUEUE_DEPTH - XF_QUEUE_MARGIN, "a round keeps the queue's margin free");

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
	bool hash; /* hash mode (hash.h): the entries are a hash pipe's, one per slot */
};

/* Update in place the entry of every class c whose MAC differs between cur[c] and next[c] (same
 * match, source MAC and counter), at most XF_UPDATE_CLASSES_PER_ROUND updates a round, each round
 * processed until its updates completed; *changed: classes updated (one operation each). */
doca_error_t xf_update_classes(struct xf_running *rt, int nslots, const uint8_t (*cur)[6], const uint8_t (*next)[6],
			       int *changed);

/* What one entry of a change is, in the "updated" line's "entry_unit" (the update kind's entries
 * per second count these) */
#define XF_ENTRY_UNIT "one doca_flow_pipe_update_entry per class whose backend changed, in place"
#define XF_HASH_ENTRY_UNIT "one doca_flow_pipe_update_entry per hash entry whose backend changed, in place"

/* Read `path` again and apply it to the running pipe; prints one JSON line, {"event": "updated",
 * "update": n, "t_received", "t_done" (CLOCK_MONOTONIC s), "apply_s", "changed" (classes, or
 * hash entries, updated), "ops" (queue operations: one per entry changed), "entry_unit"
 * (XF_ENTRY_UNIT, XF_HASH_ENTRY_UNIT),
 * "added", "removed", "backends", "slots"} or {"event": "update_refused", "update": n, "error"}.
 * On success *bs becomes the new set (stats name its backends), else it is left as it was. */
void xf_reload(struct xf_running *rt, const char *path, struct xf_backends *bs);

#endif
