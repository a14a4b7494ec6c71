// SPDX-License-Identifier: GPL-2.0
/* "mylb": a small XDP load balancer kept outside xenobench, the example of an out-of-tree LB.
 *
 * It takes IPv4 frames on its ingress port and picks a backend by a hash of the source address and
 * source port (mylb_hash; the port is 0 for a frame that is not UDP or TCP or has IP options): the
 * hash's low bits, masked by mylb_cfg.mask, index the backends file's slot table. It writes that
 * backend's MAC as destination and the egress port's MAC as source, and redirects the frame out of
 * the egress port through a one-entry devmap. xenobench_mylb/agent.py's flow_hash is the same
 * function in Python: the harness's answer to "which backend does this flow reach". Per CPU it counts packets and bytes
 * per backend, frames that are not IPv4 (passed to the stack) and frames too short to parse
 * (dropped). Its maps are filled by its agent (xenobench_mylb/agent.py). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MYLB_BACKENDS 64
#define MYLB_SLOTS 256
#define MYLB_NOT_IPV4 MYLB_BACKENDS          /* mylb_count entries after the backends' */
#define MYLB_SHORT (MYLB_BACKENDS + 1)
#define MYLB_COUNTERS (MYLB_BACKENDS + 2)

struct mylb_cfg {
	__u32 mask;        /* 2^k - 1 */
	__u8 src_mac[6];   /* the egress port's MAC */
	__u8 pad[2];
};

struct mylb_mac {
	__u8 addr[6];
	__u8 pad[2];
};

struct mylb_counter {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mylb_cfg);
} mylb_config SEC(".maps");

/* class -> backend index (the backends file's slot table) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MYLB_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} mylb_slots SEC(".maps");

/* backend index -> its MAC */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MYLB_BACKENDS);
	__type(key, __u32);
	__type(value, struct mylb_mac);
} mylb_backends SEC(".maps");

/* key 0 -> the egress port's ifindex */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} mylb_egress SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MYLB_COUNTERS);
	__type(key, __u32);
	__type(value, struct mylb_counter);
} mylb_count SEC(".maps");

static __always_inline void count(__u32 key, __u64 len)
{
	struct mylb_counter *c = bpf_map_lookup_elem(&mylb_count, &key);

	if (c) {  /* per-CPU: no other writer on this CPU */
		c->packets++;
		c->bytes += len;
	}
}

/* MurmurHash3's 32-bit finalizer over the host-order source address xor the port times 2^16 + 1 */
static __always_inline __u32 mylb_hash(__u32 saddr, __u16 sport)
{
	__u32 x = saddr ^ ((__u32)sport * 0x10001u);

	x ^= x >> 16;
	x *= 0x85ebca6bu;
	x ^= x >> 13;
	x *= 0xc2b2ae35u;
	x ^= x >> 16;
	return x;
}

SEC("xdp")
int mylb(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct mylb_cfg *cfg;
	struct mylb_mac *mac;
	struct udphdr *l4 = (void *)(ip + 1);  /* UDP and TCP both begin with the two ports */
	__u32 zero = 0, cls, *backend;
	__u16 sport = 0;

	if ((void *)(eth + 1) > end) {
		count(MYLB_SHORT, end - data);
		return XDP_DROP;
	}
	if (eth->h_proto != bpf_htons(ETH_P_IP)) {
		count(MYLB_NOT_IPV4, end - data);
		return XDP_PASS;
	}
	if ((void *)(ip + 1) > end) {
		count(MYLB_SHORT, end - data);
		return XDP_DROP;
	}
	cfg = bpf_map_lookup_elem(&mylb_config, &zero);
	if (!cfg)
		return XDP_ABORTED;
	if (ip->ihl == 5 && (ip->protocol == IPPROTO_UDP || ip->protocol == IPPROTO_TCP) &&
	    (void *)(l4 + 1) <= end)
		sport = bpf_ntohs(l4->source);
	cls = mylb_hash(bpf_ntohl(ip->saddr), sport) & cfg->mask & (MYLB_SLOTS - 1);
	backend = bpf_map_lookup_elem(&mylb_slots, &cls);
	if (!backend)
		return XDP_ABORTED;
	mac = bpf_map_lookup_elem(&mylb_backends, backend);
	if (!mac)
		return XDP_ABORTED;
	__builtin_memcpy(eth->h_dest, mac->addr, ETH_ALEN);
	__builtin_memcpy(eth->h_source, cfg->src_mac, ETH_ALEN);
	count(*backend, end - data);
	return bpf_redirect_map(&mylb_egress, 0, 0);
}

char LICENSE[] SEC("license") = "GPL";
