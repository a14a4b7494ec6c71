// SPDX-License-Identifier: GPL-2.0
/* The switch's fast path, attached to every port of the namespace testbed's switch: a frame to a
 * statically bound unicast MAC goes straight to that MAC's port (devmap redirect), like the
 * MSN2100 forwarding on its static MAC bindings in hardware; broadcast, multicast and unknown
 * destinations (ARP, anything unbound) and hairpins pass to the Linux bridge, whose static FDB
 * holds the same bindings. Why: through the bridge every frame costs an skb and a bridge lookup,
 * which made the switch, not the load balancer, the bottleneck of the namespace testbed. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include "switch_common.h"
#include "xb_stats.h"

/* destination MAC (6 bytes in a u64, little end first) -> ifindex of its switch port */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SW_MAX_MACS);
	__type(key, __u64);
	__type(value, __u32);
} fdb SEC(".maps");

/* switch ports by ifindex (the redirect targets; a port missing here sends frames to the bridge) */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, SW_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} ports SEC(".maps");

/* forwarded / to-bridge / malformed frames, per CPU (enum sw_stat) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SW_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} sw_stats SEC(".maps");


SEC("xdp")
int sw_fastpath(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u64 key = 0;
	__u32 *port;
	int verdict;

	if (data + sizeof(*eth) > data_end)
		return xb_stats_verdict(&sw_stats, SW_STAT_MALFORMED, XDP_DROP);
	if (eth->h_dest[0] & 1)  /* group bit: broadcast or multicast, the bridge floods it */
		return xb_stats_verdict(&sw_stats, SW_STAT_TO_BRIDGE, XDP_PASS);
	__builtin_memcpy(&key, eth->h_dest, ETH_ALEN);
	port = bpf_map_lookup_elem(&fdb, &key);
	if (!port || *port == ctx->ingress_ifindex)
		return xb_stats_verdict(&sw_stats, SW_STAT_TO_BRIDGE, XDP_PASS);
	/* XDP_PASS if the port is not in the devmap (yet): the bridge still knows the way */
	verdict = bpf_redirect_map(&ports, *port, XDP_PASS);
	return xb_stats_verdict(&sw_stats, verdict == XDP_REDIRECT ? SW_STAT_FORWARDED : SW_STAT_TO_BRIDGE, verdict);
}

char LICENSE[] SEC("license") = "GPL";
