/* The per-CPU stats helpers of every XDP program here (like xdp-tools'
 * headers/xdp/xdp_stats_kern.h). A counter is one slot of a BPF_MAP_TYPE_PERCPU_ARRAY declared
 * with libbpf's __type(value, ...): a __u64 (events) or a struct with __u64 packets and bytes
 * fields; the macros take the value type from the map, so the map layouts stay those of each
 * program's *_common.h, which its loader reads (bpftool map dump sums the CPUs' copies).
 * Per-CPU, so a plain add is exact: no other CPU writes this copy, and XDP does not preempt
 * itself on one CPU. */
#ifndef XB_STATS_H
#define XB_STATS_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

/* one event in slot key_ of a per-CPU array of __u64 */
#define xb_stats_inc(map_, key_)                                                     \
	({                                                                           \
		__u32 xb_key_ = (key_);                                              \
		typeof(*(map_)->value) *xb_v_ = bpf_map_lookup_elem((map_), &xb_key_); \
		if (xb_v_)                                                           \
			*xb_v_ += 1;                                                 \
	})

/* xb_stats_inc(), then verdict_: return xb_stats_verdict(&stats, STAT_X, XDP_DROP); */
#define xb_stats_verdict(map_, key_, verdict_) ({ xb_stats_inc(map_, key_); (verdict_); })

/* one frame of len_ bytes in slot key_ of a per-CPU array of {packets, bytes}
 * (the parameters end in _ so they cannot stand for the fields) */
#define xb_stats_add(map_, key_, len_)                                               \
	({                                                                           \
		__u32 xb_key_ = (key_);                                              \
		typeof(*(map_)->value) *xb_c_ = bpf_map_lookup_elem((map_), &xb_key_); \
		if (xb_c_) {                                                         \
			xb_c_->packets += 1;                                         \
			xb_c_->bytes += (len_);                                      \
		}                                                                    \
	})

#endif
