// SPDX-License-Identifier: GPL-2.0
/* A traffic sink for benchmarks: drop every frame at XDP, so a receiving veth costs as little as
 * it can (the veth counts them in ethtool -S rx_queue_N_xdp_drops). Attach with
 * `ip link set dev DEV xdp obj build/xdp_sink.bpf.o sec xdp`. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_sink(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
