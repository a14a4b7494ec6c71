/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Katran's XDP decapsulation in front of a backend's own XDP program (the receive sink, the XDP DNS
 * responder, or none: then the kernel's stack, for bind9 and the Python server).
 *
 * Built by xenobench.katran against a located Katran checkout with Katran's own flags (not by
 * switch/Makefile): it compiles Katran's katran/decap/bpf/decap.bpf.c unchanged, with its program
 * section set to .text, so that `xdpdecap` (its entry point) becomes a function this program
 * calls. What Katran's decap passes on (XDP_PASS: the decapsulated frame, or any frame it does not
 * decapsulate) goes on to the program in xb_next[0] by a tail call, or to the stack when the slot is
 * empty; what it drops or sends stays its verdict.
 */
#define DECAP_PROG_SEC ".text"
#include "katran/decap/bpf/decap.bpf.c"

struct {
  __uint(type, BPF_MAP_TYPE_PROG_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} xb_next SEC(".maps");

SEC("xdp")
int xb_decap_chain(struct xdp_md* ctx) {
  int action = xdpdecap(ctx);
  if (action != XDP_PASS) {
    return action;
  }
  bpf_tail_call(ctx, &xb_next, 0);
  return XDP_PASS;
}
