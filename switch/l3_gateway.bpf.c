// SPDX-License-Identifier: GPL-2.0
/* The namespace switch as an L3 gateway, for load balancers that encapsulate (Katran): a frame
 * addressed to the gateway MAC is routed by its (outer) IPv4 destination, as a top-of-rack switch
 * in L3 mode would (the MSN2100 routing to a real): the destination's port, its MAC as the new
 * destination, the gateway MAC as the source, TTL - 1 with the checksum updated (RFC 1624).
 * Everything else goes on to the switch's fast path (gw_next[0], a tail call), or to the bridge
 * when that slot is empty. Attached by xenobench.fabric to the switch port of the LB's ingress,
 * where such an LB sends its frames back (XDP_TX). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define GW_MAX_ROUTES 256
#define GW_MAX_PORTS 64

enum gw_stat { GW_ROUTED, GW_NO_ROUTE, GW_NOT_IPV4, GW_TTL_EXCEEDED, GW_STAT_MAX };

struct gw_config {
	__u8 mac[ETH_ALEN];   /* the gateway MAC */
	__u8 pad[2];
};

struct gw_route {
	__u32 ifindex;         /* the destination's switch port */
	__u8 dst_mac[ETH_ALEN];
	__u8 pad[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gw_config);
} gw_config SEC(".maps");

/* IPv4 destination (network order) -> where it lives */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GW_MAX_ROUTES);
	__type(key, __u32);
	__type(value, struct gw_route);
} gw_routes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, GW_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} gw_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} gw_next SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GW_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} gw_stats SEC(".maps");

static __always_inline int count(__u32 stat, int verdict)
{
	__u64 *n = bpf_map_lookup_elem(&gw_stats, &stat);

	if (n)
		*n += 1;
	return verdict;
}

static __always_inline int same_mac(const __u8 *a, const __u8 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4] && a[5] == b[5];
}

SEC("xdp")
int l3_gateway(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct gw_config *cfg;
	struct gw_route *rt;
	__u32 zero = 0, csum;

	cfg = bpf_map_lookup_elem(&gw_config, &zero);
	if (!cfg)
		goto next;
	if (data + sizeof(*eth) > data_end || !same_mac(eth->h_dest, cfg->mac))
		goto next;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || (void *)(ip + 1) > data_end)
		return count(GW_NOT_IPV4, XDP_DROP);
	rt = bpf_map_lookup_elem(&gw_routes, &ip->daddr);
	if (!rt)
		return count(GW_NO_ROUTE, XDP_DROP);
	if (ip->ttl <= 1)
		return count(GW_TTL_EXCEEDED, XDP_DROP);
	ip->ttl--;
	csum = ip->check + bpf_htons(0x0100);   /* the kernel's ip_decrease_ttl */
	ip->check = (__u16)(csum + (csum >= 0xFFFF));
	__builtin_memcpy(eth->h_dest, rt->dst_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, cfg->mac, ETH_ALEN);
	count(GW_ROUTED, 0);
	return bpf_redirect_map(&gw_ports, rt->ifindex, 0);
next:
	bpf_tail_call(ctx, &gw_next, 0);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
