/* The loop driver's plumbing (xg_loop.c): a veth pair in a private network namespace whose far end
 * runs xdpgen_loop, the frames that circulate in it, and the count of those the loop lost.
 * Used by xdpgen.c where the kernel refuses XDP live frames (README.md, "Drivers"). */
#ifndef XG_LOOP_H
#define XG_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <bpf/libbpf.h>

/* the pair's names inside the private namespace (no other device is there, so they never clash
 * with another generator's) */
#define XG_LOOP_SEED_DEV "xgseed"  /* frames are seeded here and come back here */
#define XG_LOOP_RUN_DEV "xgloop"   /* runs xdpgen_loop */

/* frames seeded by default: more than the NAPI budget keeps the loop's CPU busy, and a veth ring
 * holds 256 (a loop with more would overflow it and lose frames) */
#define XG_LOOP_DEFAULT_FRAMES 64
#define XG_LOOP_MAX_FRAMES 192

struct xg_loop {
	int orig_ns;               /* the caller's network namespace (where the target device is) */
	int priv_ns;               /* the loop's own namespace: it and the pair die with the process */
	int pkt_fd;                /* AF_PACKET socket on the seeding end */
	int ctl_fd;                /* ioctl socket in the private namespace (the seeding end's counters) */
	unsigned seed_ifindex;     /* in the private namespace */
	unsigned run_ifindex;
	struct bpf_link *link;     /* xdpgen_loop on the running end: detached when the process ends */
	uint64_t seeded;           /* frames put into the loop, first seeding and replacements */
	uint64_t lost_seen;        /* frames the seeding end's peer refused, as last read */
};

/* Make the private namespace and the pair (MTU for frames of frame_len bytes), attach prog to the
 * running end and point the devmap's loop slot (map_fd, key loop_key) at the seeding end. The
 * calling thread is back in its own namespace on return. On failure: a message in err (the call
 * and its reason), -1, nothing left behind. */
int xg_loop_open(struct xg_loop *lp, uint32_t frame_len, struct bpf_program *prog, int map_fd,
		 uint32_t loop_key, char *err, size_t errlen);

/* Put n copies of frame (len bytes) into the loop; returns how many went in. */
int xg_loop_seed(struct xg_loop *lp, const void *frame, uint32_t len, int n);

/* Frames the loop lost since the last call (the running end's ring refused them): the caller
 * seeds as many again. */
uint64_t xg_loop_newly_lost(struct xg_loop *lp);

void xg_loop_close(struct xg_loop *lp);

#endif
