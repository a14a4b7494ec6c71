// SPDX-License-Identifier: GPL-2.0
/* The emulated DOCA Flow datapath: table-driven, filled by lb/emu/src/doca_flow.c at
 * doca_flow_entries_process. Frame → key → key & pipe mask → entries lookup → actions
 * (MAC rewrites) → counters → redirect to a port's interface or drop; miss → the pipe's miss.
 * A hash pipe's entry is the one at the index its hash of the masked key picks (emu_hash.h). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "emu_common.h"
#include "emu_hash.h"
#include "xb_stats.h"

/* ingress ifindex → the root pipe of the DOCA port on that interface (mask, miss, port id):
 * one array lookup per frame */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, EMU_MAX_IFINDEX);
	__type(key, __u32);
	__type(value, struct emu_pipe);
} pipes SEC(".maps");

/* masked key (with port) → the entry's actions */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, EMU_MAX_ENTRIES);
	__type(key, struct emu_key);
	__type(value, struct emu_action);
} entries SEC(".maps");

/* direct tables: port * EMU_DIRECT_SLOTS + index → the entry's actions (flags & EMU_VALID) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, EMU_MAX_PORTS * EMU_DIRECT_SLOTS);
	__type(key, __u32);
	__type(value, struct emu_action);
} direct SEC(".maps");

/* DOCA port id → its interface, for DOCA_FLOW_FWD_PORT */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, EMU_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports SEC(".maps");

/* per-entry (non-shared) counters, by entry id */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EMU_MAX_ENTRIES);
	__type(key, __u32);
	__type(value, struct emu_counter);
} entry_counters SEC(".maps");

/* shared counters, by shared counter id */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EMU_MAX_SHARED_CNT);
	__type(key, __u32);
	__type(value, struct emu_counter);
} shared_counters SEC(".maps");

/* root pipe miss counters, by port id */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EMU_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct emu_counter);
} miss_counters SEC(".maps");

struct l4ports {
	__u16 src;
	__u16 dst;
};

SEC("xdp")
int xb_emu(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u64 len = end - data;
	struct ethhdr *eth = data;
	struct emu_key k = {};
	__u32 ifindex = ctx->ingress_ifindex;
	__u32 port;
	struct emu_pipe *pipe;
	struct emu_action *act;

	pipe = bpf_map_lookup_elem(&pipes, &ifindex);
	if (!pipe || !pipe->valid)
		return XDP_PASS;
	port = pipe->port;
	if ((void *)(eth + 1) > end)
		goto miss;
	if (pipe->need_macs) {
		__builtin_memcpy(k.dst_mac, eth->h_dest, 6);
		__builtin_memcpy(k.src_mac, eth->h_source, 6);
	}
	k.eth_type = eth->h_proto;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) <= end && ip->ihl >= 5 && (void *)ip + ip->ihl * 4 <= end) {
			k.l3_type = EMU_L3_IP4;
			k.src_ip = ip->saddr;
			k.dst_ip = ip->daddr;
			k.next_proto = ip->protocol;
			if (ip->protocol == IPPROTO_UDP || ip->protocol == IPPROTO_TCP) {
				struct l4ports *l4 = (void *)ip + ip->ihl * 4;

				if ((void *)(l4 + 1) <= end) {
					k.l4_type = ip->protocol == IPPROTO_UDP ? EMU_L4_UDP : EMU_L4_TCP;
					k.src_port = l4->src;
					k.dst_port = l4->dst;
				}
			}
		}
	}
	k.port = port;
	{
		__u64 *kv = (__u64 *)&k, *mv = (__u64 *)&pipe->mask;

		kv[0] &= mv[0];
		kv[1] &= mv[1];
		kv[2] &= mv[2];
		kv[3] &= mv[3];
	}
	if (pipe->direct == EMU_DIRECT_HASH) {
		__u32 idx;

		if (k.l3_type != pipe->sel.l3_type || k.l4_type != pipe->sel.l4_type)
			goto miss;
		idx = port * EMU_DIRECT_SLOTS + (emu_hash_tag(&k) & pipe->direct_mask & (EMU_DIRECT_SLOTS - 1));
		act = bpf_map_lookup_elem(&direct, &idx);
		if (!act || !(act->flags & EMU_VALID))
			goto miss;
	} else if (pipe->direct != EMU_DIRECT_NONE) {
		__u64 *kv = (__u64 *)&k, *sv = (__u64 *)&pipe->sel;
		__u32 v, idx;

		switch (pipe->direct) {
		case EMU_DIRECT_SRC_IP: v = bpf_ntohl(k.src_ip); k.src_ip = 0; break;
		case EMU_DIRECT_DST_IP: v = bpf_ntohl(k.dst_ip); k.dst_ip = 0; break;
		case EMU_DIRECT_SRC_PORT: v = bpf_ntohs(k.src_port); k.src_port = 0; break;
		default: v = bpf_ntohs(k.dst_port); k.dst_port = 0; break;
		}
		if (kv[0] != sv[0] || kv[1] != sv[1] || kv[2] != sv[2] || kv[3] != sv[3])
			goto miss;
		idx = port * EMU_DIRECT_SLOTS + ((v >> pipe->direct_shift) & pipe->direct_mask & (EMU_DIRECT_SLOTS - 1));
		act = bpf_map_lookup_elem(&direct, &idx);
		if (!act || !(act->flags & EMU_VALID))
			goto miss;
	} else {
		act = bpf_map_lookup_elem(&entries, &k);
		if (!act)
			goto miss;
	}
	if (act->flags & EMU_ACT_DST_MAC)
		__builtin_memcpy(eth->h_dest, act->dst_mac, 6);
	if (act->flags & EMU_ACT_SRC_MAC)
		__builtin_memcpy(eth->h_source, act->src_mac, 6);
	if (act->flags & EMU_CNT_ENTRY)
		xb_stats_add(&entry_counters, act->entry_id, len);
	if (act->flags & EMU_CNT_SHARED)
		xb_stats_add(&shared_counters, act->shared_id, len);
	if (act->fwd == EMU_FWD_PORT)
		return bpf_redirect_map(&tx_ports, act->fwd_port, 0);
	return XDP_DROP;

miss:
	xb_stats_add(&miss_counters, port, len);
	if (pipe->miss_fwd == EMU_FWD_PORT)
		return bpf_redirect_map(&tx_ports, pipe->miss_port, 0);
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
