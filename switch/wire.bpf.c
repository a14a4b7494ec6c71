// SPDX-License-Identifier: GPL-2.0
/* The "wire" reference load balancer: the cheapest program that sends every frame from p0 through
 * p1 to the same backend the load balancers would, so its rate is a like-for-like limit: the same
 * backends, the same class split, the same hops after the LB. No parsing and no check but one
 * bound: the class is the byte where an IPv4 source address ends (offset 29, the low byte of
 * ntohl(saddr), which holds every class of k <= 8 bits), the one lookup (an array, inlined by the
 * verifier) gives both MACs. For an IPv4 frame without VLAN tag that is the LBs' class; anything
 * else is classed by whatever byte sits there and forwarded all the same (a wire looks at
 * nothing). The MACs are rewritten as any LB must (the frame arrives addressed to the LB;
 * unchanged, the switch would send it straight back to p0). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include "switch_common.h"
#include "xb_stats.h"

/* class (the source address's last byte) -> destination and source MAC. All WIRE_CLASSES entries
 * are filled, the backends file's 2^k-slot table repeated (entry c = slot c & (2^k - 1)), so the
 * program needs no mask (xenobench/agents/wire_lb.py) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, WIRE_CLASSES);
	__type(key, __u32);
	__type(value, struct wire_config);
} wire_slots SEC(".maps");

/* the egress port (key 0 -> ifindex of p1) */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} wire_egress SEC(".maps");

/* packets and bytes per class, per CPU; entry WIRE_STAT_MALFORMED: frames too short for a class */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, WIRE_STAT_MAX);
	__type(key, __u32);
	__type(value, struct sw_counter);
} wire_stats SEC(".maps");

SEC("xdp")
int wire(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u8 *cls_byte = data + WIRE_CLASS_OFFSET;
	struct wire_config *to;
	__u32 cls;

	if ((void *)(cls_byte + 1) > data_end) {
		xb_stats_add(&wire_stats, WIRE_STAT_MALFORMED, data_end - data);
		return XDP_DROP;
	}
	cls = *cls_byte;
	to = bpf_map_lookup_elem(&wire_slots, &cls);
	if (!to)
		return XDP_ABORTED;
	__builtin_memcpy(eth->h_dest, to->dst_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, to->src_mac, ETH_ALEN);
	xb_stats_add(&wire_stats, cls, data_end - data);
	return bpf_redirect_map(&wire_egress, 0, 0);
}

char LICENSE[] SEC("license") = "GPL";
