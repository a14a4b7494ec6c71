// SPDX-License-Identifier: GPL-2.0
/* xdpgen: the XDP side of the traffic generator, one frame logic for its two drivers.
 * - live (`xdpgen`): run by BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES (kernel >= 5.18): every
 *   repetition gets a frame initialised from the loader's data_in (frame 0 of the cycle).
 * - loop (`xdpgen_loop`): where the kernel refuses live frames, the loader makes a veth pair in a
 *   private network namespace and attaches this program to one end; a few frames seeded into the
 *   other end circulate: each one that arrives becomes the next frame of the cycle and is
 *   broadcast to {target, loop}, so a copy leaves and the frame itself comes round again.
 * Either way the program writes the next frame's template over bytes [0, span_len) and redirects
 * it out of the target. The loader computes span_len so that bytes past it are the same in every
 * frame of the cycle, which makes each frame on the wire byte-identical to the compiled cycle, in
 * order.
 *
 * Pacing is a token bucket on the kernel clock: a run whose frame is not due yet drops it (a
 * cheap page-pool recycle) and the loader's single long test run keeps spinning; when frames are
 * due, `credit` lets them leave without reading the clock for each (so pacing costs little at
 * rates near the maximum). Tokens beyond `bucket` frames are lost: a generator that was held up
 * catches up by at most that burst and otherwise reports a lower achieved rate. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "xdpgen_common.h"

/* knobs, written by the loader through skel->rodata before load (constants to the verifier) */
const volatile __u32 ifindex = 0;     /* device the frames leave on */
const volatile __u32 cycle = 1;       /* frames in one stream cycle (entries of `templates`) */
const volatile __u32 span_len = 1;    /* template bytes per frame: bytes [0, span_len) */
const volatile __u64 period_fp = 0;   /* ns between frames << XG_FP_SHIFT; 0: no pacing */
const volatile __u64 bucket = 1;      /* most frames sent back to back when behind schedule */
const volatile __u64 limit = 0;       /* frames to send in all; 0: no limit */
const volatile __u32 frame_len = 0;   /* loop: the cycle's frame length; any other frame is foreign */

/* frame index in the cycle -> its first span_len bytes; value size set by the loader */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XG_MAX_FRAMES);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, XG_HDR_LEN);
} templates SEC(".maps");

/* XG_TX_TARGET -> the device the frames leave on (a devmap redirect skips the per-frame ifindex
 * lookup); XG_TX_LOOP -> the loop driver's veth end that feeds the frame back (live: unset). A
 * broadcast clones the frame for every entry but the last, so the target gets a copy and the
 * circulating frame stays in its own page. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, XG_TX_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} tx_port SEC(".maps");

struct xg_state st = {};  /* see xdpgen_common.h; one writer: test runs are serialised on one CPU,
                           * the loop's NAPI polls on one CPU at a time */
__u32 halt = 0;           /* loop: set by the loader to end the run; every circulating frame drops */

/* bytes [0, span_len) of the frame from its template: 8-byte words, then the tail byte by byte
 * (direct packet access; span_len is a constant to the verifier, so both loops are bounded) */
static __always_inline int copy_template(struct xdp_md *ctx, const __u8 *t)
{
	__u8 *data = (__u8 *)(long)ctx->data;
	__u8 *end = (__u8 *)(long)ctx->data_end;
	__u32 words = span_len / 8, k;

	if (span_len > XG_MAX_FRAME_LEN || data + span_len > end)
		return -1;
	for (k = 0; k < XG_MAX_FRAME_LEN / 8 && k < words; k++)
		((__u64 *)data)[k] = ((const __u64 *)t)[k];
	for (k = words * 8; k < XG_MAX_FRAME_LEN && k < span_len; k++)
		data[k] = t[k];
	return 0;
}

enum xg_verdict { XG_SEND, XG_NOT_DUE, XG_DONE };

/* the next frame of the cycle into this one, if one is due: the count limit, the token bucket,
 * the template copy; the drivers only decide what happens to a frame that is not sent */
static __always_inline enum xg_verdict next_frame(struct xdp_md *ctx)
{
	if (limit && st.frames >= limit) {
		st.after_limit++;
		return XG_DONE;
	}
	if (!st.t_first_ns)
		st.t_first_ns = bpf_ktime_get_ns();
	if (period_fp && !st.credit) {
		__u64 now = (bpf_ktime_get_ns() - st.t_first_ns) << XG_FP_SHIFT;
		__u64 n;

		if (now < st.due_fp) {
			st.idle++;
			return XG_NOT_DUE;
		}
		n = (now - st.due_fp) / period_fp + 1;
		if (n > bucket) { /* held up: the tokens beyond the bucket are lost (their due times
				   * pass unused, so every token is sent or counted lost) */
			st.tokens_lost += n - bucket;
			st.due_fp += (n - bucket) * period_fp;
			n = bucket;
		}
		st.credit = n;
		st.due_fp += n * period_fp;
	}
	if (period_fp)
		st.credit--;

	__u32 i = st.next_frame;
	void *t = bpf_map_lookup_elem(&templates, &i);

	if (!t) {
		st.no_template++;
		return XG_DONE;
	}
	if (copy_template(ctx, t)) {
		st.store_failed++;
		return XG_DONE;
	}
	st.next_frame = i + 1 < cycle ? i + 1 : 0;
	if (++st.frames == limit)
		st.t_limit_ns = bpf_ktime_get_ns();
	return XG_SEND;
}

/* live frames: a frame not sent goes back to the test run's page pool */
SEC("xdp")
int xdpgen(struct xdp_md *ctx)
{
	if (next_frame(ctx) == XG_SEND)
		return bpf_redirect_map(&tx_port, XG_TX_TARGET, 0);
	return XDP_DROP;
}

/* the loop: a copy of a sent frame leaves, the frame itself goes round again; one not due yet
 * only goes round; once halted or past the limit the frame drops and the loop dies down */
SEC("xdp")
int xdpgen_loop(struct xdp_md *ctx)
{
	if (halt) {
		st.loop_halted++;
		return XDP_DROP;
	}
	if ((__u64)(ctx->data_end - ctx->data) != frame_len) {
		st.loop_foreign++; /* not one of the seeded frames (the loader's namespace is private) */
		return XDP_DROP;
	}
	switch (next_frame(ctx)) {
	case XG_SEND:
		return bpf_redirect_map(&tx_port, 0, BPF_F_BROADCAST);
	case XG_NOT_DUE:
		return bpf_redirect_map(&tx_port, XG_TX_LOOP, 0);
	default:
		return XDP_DROP;
	}
}

/* the driver probe: a live-frames test run of this program sends nothing and tells whether the
 * kernel allows live frames */
SEC("xdp")
int xdpgen_probe(struct xdp_md *ctx)
{
	(void)ctx;
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
