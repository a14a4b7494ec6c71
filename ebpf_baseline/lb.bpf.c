// SPDX-License-Identifier: GPL-2.0
/* The eBPF baseline: XenoFlow's classification in XDP.
 * class = ntohl(ip.saddr) & mask -> slot table -> backend MAC; rewrite dst MAC to the backend's
 * and src MAC to the LB's egress MAC; send out of the egress port (devmap) or back (XDP_TX). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "lb_common.h"
#include "xb_stats.h"

/* the one configuration record (key 0), written by the loader before attaching */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xb_config);
} config SEC(".maps");

/* class (slot) -> backend index */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XB_MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} slots SEC(".maps");

/* backend index -> MAC */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XB_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct xb_backend);
} backends SEC(".maps");

/* packets and bytes per slot, per CPU */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XB_MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct xb_counter);
} slot_stats SEC(".maps");

/* packets and bytes per backend, per CPU */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XB_MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct xb_counter);
} backend_stats SEC(".maps");

/* miss / non-IPv4 / non-service / malformed / tx-error counts, per CPU (enum xb_stat) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XB_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* key 0: the egress port's ifindex (resolved in the namespace of the process that writes it) */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} egress SEC(".maps");

static __always_inline int other(const struct xb_config *cfg, __u32 which)
{
	xb_stats_inc(&stats, which);
	return cfg->policy == XB_POLICY_DROP ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xb_lb(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct xb_config *cfg = bpf_map_lookup_elem(&config, &zero);
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct udphdr *udp;

	if (!cfg)
		return XDP_ABORTED;
	if ((void *)(eth + 1) > end) {
		xb_stats_inc(&stats, XB_STAT_MALFORMED);
		return XDP_DROP;
	}
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return other(cfg, XB_STAT_NON_IPV4);
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->ihl < 5 || ip->version != 4) {
		xb_stats_inc(&stats, XB_STAT_MALFORMED);
		return XDP_DROP;
	}
	if (ip->protocol != IPPROTO_UDP || ip->daddr != cfg->vip)
		return other(cfg, XB_STAT_NON_SERVICE);
	udp = (void *)ip + ip->ihl * 4;  /* IPv4 options are skipped, not parsed */
	if ((void *)(udp + 1) > end) {
		xb_stats_inc(&stats, XB_STAT_MALFORMED);
		return XDP_DROP;
	}
	if (udp->dest != cfg->port)
		return other(cfg, XB_STAT_NON_SERVICE);

	__u32 slot = bpf_ntohl(ip->saddr) & cfg->mask & (XB_MAX_SLOTS - 1);
	__u32 *bidx = bpf_map_lookup_elem(&slots, &slot);
	struct xb_backend *be;

	if (!bidx || !(be = bpf_map_lookup_elem(&backends, bidx)) || !be->valid) {
		xb_stats_inc(&stats, XB_STAT_MISS);
		return XDP_DROP;
	}
	__u64 len = (__u64)(end - data);

	if (cfg->egress != XB_EGRESS_TX &&
	    bpf_redirect_map(&egress, 0, XDP_ABORTED) != XDP_REDIRECT) {
		/* the egress slot is empty: the one redirect failure the program sees (the flags'
		 * low bits are the verdict on a failed lookup); one after the program returns is
		 * the kernel's (tracepoint xdp:xdp_redirect_err, the veth's xdp_tx_errors) */
		xb_stats_inc(&stats, XB_STAT_TX_ERROR);
		return XDP_ABORTED;
	}
	xb_stats_add(&slot_stats, slot, len);
	xb_stats_add(&backend_stats, *bidx, len);
	/* the frame leaves after the program returns, so rewriting after the redirect call is in time */
	__builtin_memcpy(eth->h_dest, be->mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, cfg->src_mac, ETH_ALEN);
	return cfg->egress == XB_EGRESS_TX ? XDP_TX : XDP_REDIRECT;
}

/* the benchmark's reference: forward every frame to the egress port, touching nothing */
SEC("xdp")
int xb_noop_redirect(struct xdp_md *ctx)
{
	return bpf_redirect_map(&egress, 0, 0);
}

/* the forwarding benchmark's sink on the switch side of p1: counts (veth XDP counters) and drops */
SEC("xdp")
int xb_sink(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
