// SPDX-License-Identifier: GPL-2.0
/* The backends' receive sink, attached by the namespace testbed to every backend's interface:
 * frames from the load generator's source block are counted and dropped at XDP, everything else
 * (ARP, DNS probes, the testbed check) passes to the stack. Why: on the thesis testbed the
 * backends are separate machines whose NIC counts what arrives (rx_packets_phy); here they share
 * the LB's CPU, and an skb plus a UDP lookup per load frame (~1 us) would bound the LB stage.
 * The veth still counts every frame it receives (rx_queue_N_xdp_packets, in rx_packets), so the
 * harness's counters are unchanged. A DNS server on the backend takes the interface over
 * (xenobench.testbed.NamespaceTestbed.release_backend_sink).
 * While the harness turns recording on (sink_config.bucket_ns), every generator frame also
 * records its arrival time, bpf_ktime_get_ns() (CLOCK_MONOTONIC: the clock of the harness's
 * time.monotonic_ns()), per backend MAC and time bucket: first and last frame and the count, so
 * the harness reads exact arrival times once after a backend change instead of polling counters
 * (xenobench/update.py). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "switch_common.h"
#include "xb_stats.h"

/* the one configuration record (key 0): the generator's source block */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sink_config);
} sink_config SEC(".maps");

/* dropped / passed frames, per CPU (enum sink_stat) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SINK_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} sink_stats SEC(".maps");

/* arrival times per (backend MAC, time bucket), per CPU, while recording is on */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, SINK_ARRIVAL_ENTRIES);
	__type(key, struct sink_arrival_key);
	__type(value, struct sink_arrival);
} sink_arrivals SEC(".maps");

/* one frame's arrival: false when the map had no room for a new key */
static __always_inline int record_arrival(const struct sink_config *cfg, const struct ethhdr *eth)
{
	struct sink_arrival_key key = {};
	struct sink_arrival *a, fresh;
	__u64 now = bpf_ktime_get_ns();
	__u64 b = now > cfg->t0_ns ? (now - cfg->t0_ns) / cfg->bucket_ns : 0;

	__builtin_memcpy(key.mac, eth->h_dest, ETH_ALEN);
	key.bucket = b > SINK_LAST_BUCKET ? SINK_LAST_BUCKET : b;
	a = bpf_map_lookup_elem(&sink_arrivals, &key);
	if (a) {  /* per CPU: no other writer of this copy */
		a->last_ns = now;
		a->packets += 1;
		return 1;
	}
	fresh.first_ns = now;
	fresh.last_ns = now;
	fresh.packets = 1;
	return bpf_map_update_elem(&sink_arrivals, &key, &fresh, BPF_NOEXIST) == 0;
}


SEC("xdp")
int backend_sink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct sink_config *cfg;
	__u32 zero = 0;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return xb_stats_verdict(&sink_stats, SINK_STAT_PASSED, XDP_PASS);
	cfg = bpf_map_lookup_elem(&sink_config, &zero);
	if (!cfg || !cfg->mask || (ip->saddr & cfg->mask) != cfg->net)
		return xb_stats_verdict(&sink_stats, SINK_STAT_PASSED, XDP_PASS);
	if (cfg->bucket_ns && !record_arrival(cfg, eth))
		xb_stats_inc(&sink_stats, SINK_STAT_UNRECORDED);
	return xb_stats_verdict(&sink_stats, SINK_STAT_DROPPED, XDP_DROP);
}

char LICENSE[] SEC("license") = "GPL";
