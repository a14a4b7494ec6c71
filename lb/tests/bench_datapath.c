/* Benchmark: per-frame cost of XenoFlow's datapath on the emulation, by BPF_PROG_TEST_RUN with
 * `repeat` on one 64-byte frame (no NIC, no veth: only the XDP program). The table is the shipped
 * one: the DPDK ports, DOCA Flow, the paired ports, the shared counters, the root pipe and its 2^k
 * entries are brought up by lb/src/ports.c and lb/src/flow_lb.c exactly as xenoflow's main() does
 * (the same objects, linked from libxf_app), so this measures what xenoflow runs. Prints ns per
 * frame. In a private network namespace.
 * Usage (root): bench_datapath [CLASS_BITS] [REPEAT] */
#define _GNU_SOURCE
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>

#include <doca_flow.h>
#include <doca_flow_emu.h>
#include <doca_log.h>

#include "flow_lb.h"
#include "ports.h"
#include "emu_ports.h"

int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 1, repeat = argc > 2 ? atoi(argv[2]) : 1000000, n = 1 << k;
	/* main.c's defaults: 2 ports, 4 queues, 2 hairpin queues */
	const struct xf_dpdk_config dpdk = {.nb_ports = 2, .nb_queues = 4, .nb_hairpin_q = 2};
	const uint8_t src_mac[6] = {0x02, 0, 0, 0, 0x05, 0x01};
	static struct xf_entries_status install_status; /* outlives the entries */
	struct doca_flow_port *ports[2] = {0};
	struct doca_flow_pipe *pipe = NULL;
	static uint8_t macs[4096][6];
	static uint32_t ids[4096];
	/* Ethernet(LB p0) / IPv4 198.18.0.17 → 198.18.0.100 / UDP 1024 → 53 / 22 bytes */
	uint8_t f[64] = {0x02, 0, 0, 0, 0x05, 0x00, 0x02, 0, 0, 0, 0x04, 0x00, 0x08, 0x00, 0x45, 0, 0, 50, 0, 0, 0, 0,
			 64, 17, 0, 0, 198, 18, 0, 17, 198, 18, 0, 100, 0x04, 0x00, 0, 53, 0, 30};
	uint8_t out[128];
	int rc = 1;

	if (k < 0 || k > 12) {
		fprintf(stderr, "Failed to parse CLASS_BITS: %d is not in 0..12\n", k);
		return 1;
	}
	if (emu_ports_in_private_netns(NULL))
		return 1;
	doca_log_level_set_global_lower_limit(DOCA_LOG_LEVEL_ERROR);
	for (int c = 0; c < n; c++) {
		memcpy(macs[c], (uint8_t[6]){0x02, 0, 0, 0, (uint8_t)(c >> 8), (uint8_t)c}, 6);
	}
	if (xf_dpdk_ports_init(&dpdk) != DOCA_SUCCESS)
		return 1;
	if (xf_init_doca_flow(dpdk.nb_queues, "vnf,hws", XF_NR_COUNTERS, (uint32_t)n, xf_check_for_valid_entry))
		goto out_dpdk;
	if (xf_init_doca_flow_ports(2, ports) || xf_setup_class_counters(ports[0], n, ids) ||
	    xf_install_classes(ports[0], 1, n, (const uint8_t(*)[6])macs, src_mac, ids, &install_status, NULL, &pipe))
		goto out;
	{
		struct xdp_md ctx = {.data_end = sizeof(f), .ingress_ifindex = if_nametoindex("xe0")};
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f, .data_size_in = sizeof(f), .data_out = out,
			    .data_size_out = sizeof(out), .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = repeat);

		if (bpf_prog_test_run_opts(doca_flow_emu_prog_fd(), &o)) {
			perror("Failed to test-run the datapath");
			goto out;
		}
		/* 4 = XDP_REDIRECT: the frame was forwarded, not dropped */
		printf("emu_datapath_ns_per_frame=%u verdict=%u classes=%d repeat=%d\n", o.duration, o.retval, n, repeat);
		rc = o.retval == 4 ? 0 : 1;
	}
out:
	if (pipe)
		doca_flow_pipe_destroy(pipe);
	xf_stop_doca_flow_ports(2, ports);
	doca_flow_destroy();
out_dpdk:
	xf_dpdk_ports_fini(&dpdk);
	return rc;
}
