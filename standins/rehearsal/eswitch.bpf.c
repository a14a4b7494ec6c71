// SPDX-License-Identifier: GPL-2.0
/* The rehearsal DPU's stand-in for OVS's offloaded datapath (standins/rehearsal/lab.py, eswitch):
 * while the lab's Open vSwitch has other_config:hw-offload=true, a frame arriving on a port of a
 * stock bridge (pf0hpf, pf1hpf, p1) leaves by the other port of that bridge here, at XDP, before the
 * node's kernel stack and OVS's packet socket see it, as the eSwitch forwards offloaded flows
 * without the Arm cores. A port without an entry passes the frame on (to OVS's userspace path). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* ingress ifindex -> egress ifindex (the other port of the ingress port's bridge) */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u32);
} pairs SEC(".maps");

SEC("xdp")
int eswitch(struct xdp_md *ctx)
{
	return bpf_redirect_map(&pairs, ctx->ingress_ifindex, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
