// SPDX-License-Identifier: GPL-2.0
/* XDP_PASS on the rehearsal DPU's host representors (pf0hpf, pf1hpf; standins/rehearsal/lab.py):
 * a veth receives the frames its peer sends with XDP_TX (the eBPF LB on the host port) only
 * through native XDP; with an XDP program here they reach the stack, and OVS's netdev datapath. */
#include <linux/bpf.h>

__attribute__((section("xdp"), used)) int rep_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] __attribute__((section("license"), used)) = "GPL";
