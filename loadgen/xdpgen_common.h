/* Shared by the XDP program (xdpgen.bpf.c) and its loader (xdpgen.c): limits, the fixed-point
 * format of the pacing knobs and the program's state. The Python executor
 * (xenobench/traffic/xdpgen.py) only reads the loader's JSON, never these layouts. */
#ifndef XDPGEN_COMMON_H
#define XDPGEN_COMMON_H

/* frames in one compiled stream cycle (xenobench.traffic.profiles.MAX_CYCLE_FRAMES); the
 * templates map is sized to the cycle's own count at load time */
#define XG_MAX_FRAMES 4194304

/* bytes of a frame: live-frame pages hold at most PAGE_SIZE minus XDP headroom, the page head
 * and skb_shared_info (net/bpf/test_run.c); 3000 B stays inside that on 4 KiB pages, and a veth
 * refuses anything above MTU + 18 anyway */
#define XG_MAX_FRAME_LEN 3000
#define XG_MIN_FRAME_LEN 14   /* an Ethernet header */

/* every frame's first XG_HDR_LEN bytes (Ethernet + IPv4 + UDP) are rewritten from its template,
 * even where all frames agree: live-frame pages are recycled without resetting their data, and
 * a program further down the path (a load balancer rewriting MACs in place) would otherwise leak
 * its edits into later frames (Documentation/bpf/bpf_prog_run.rst, "live frame mode") */
#define XG_HDR_LEN 42

/* pacing times are nanoseconds << XG_FP_SHIFT (a period of 1e9/rate ns keeps its fraction: the
 * long-run rate is exact to 1 part in 2^16 of a nanosecond per frame) */
#define XG_FP_SHIFT 16

/* slots of the tx_port devmap: where frames leave, and the loop driver's way back round */
#define XG_TX_TARGET 0
#define XG_TX_LOOP 1
#define XG_TX_SLOTS 2

/* the program's state, in .bss (the loader reads it through the skeleton's mmap while running) */
struct xg_state {
	__u64 frames;        /* frames redirected to the device */
	__u64 idle;          /* runs dropped because the next frame was not due yet (pacing) */
	__u64 after_limit;   /* runs dropped because `limit` frames had been sent */
	__u64 no_template;   /* template lookup failed: frame dropped (a loader bug if ever non-zero) */
	__u64 store_failed;  /* bpf_xdp_store_bytes() failed: frame dropped */
	__u64 t_first_ns;    /* bpf_ktime_get_ns() of the first run (CLOCK_MONOTONIC) */
	__u64 t_limit_ns;    /* bpf_ktime_get_ns() when the limit-th frame left (0: not reached) */
	__u64 due_fp;        /* when the next frame is due, fixed point, relative to t_first_ns */
	__u64 credit;        /* frames that may leave before the clock is read again */
	__u64 tokens_lost;   /* paced: frames that fell due while the run was held up longer than
	                      * the bucket and were never sent (the achieved rate's shortfall) */
	__u64 loop_halted;   /* loop: circulating frames dropped after the loader set `halt` */
	__u64 loop_foreign;  /* loop: frames of another length that reached the loop, dropped */
	__u32 next_frame;    /* index of the next frame in the cycle */
	__u32 pad;
};

#endif
