// SPDX-License-Identifier: GPL-2.0
/* The "wire" reference load balancer: every frame from p0 leaves through p1 to one backend, with
 * no parsing and no lookup beyond its one configuration record. It measures what the testbed
 * itself can forward (its physical limit line); a load balancer's rate below it is the cost of
 * its classification. The MACs are rewritten as any LB must (the frame arrives addressed to the
 * LB; unchanged, the switch would send it straight back to p0). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include "switch_common.h"
#include "xb_stats.h"

/* the one configuration record (key 0): destination and source MAC, written before attaching */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct wire_config);
} wire_config SEC(".maps");

/* the egress port (key 0 -> ifindex of p1) */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} wire_egress SEC(".maps");

/* forwarded / malformed packets and bytes, per CPU (enum wire_stat) */
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
	__u32 zero = 0;
	struct wire_config *cfg;

	if (data + sizeof(*eth) > data_end) {
		xb_stats_add(&wire_stats, WIRE_STAT_MALFORMED, data_end - data);
		return XDP_DROP;
	}
	cfg = bpf_map_lookup_elem(&wire_config, &zero);
	if (!cfg)
		return XDP_ABORTED;
	__builtin_memcpy(eth->h_dest, cfg->dst_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, cfg->src_mac, ETH_ALEN);
	xb_stats_add(&wire_stats, WIRE_STAT_FORWARDED, data_end - data);
	return bpf_redirect_map(&wire_egress, 0, 0);
}

char LICENSE[] SEC("license") = "GPL";
