/* Benchmark: per-frame cost of the emulated datapath with XenoFlow's pipe (2^k entries, shared
 * counters, MAC rewrites, redirect), by BPF_PROG_TEST_RUN with `repeat` on one 64-byte frame
 * (no NIC, no veth: only the XDP program). Prints ns per frame. In a private network namespace.
 * Usage (root): bench_datapath [CLASS_BITS] [REPEAT] */
#define _GNU_SOURCE
#include <arpa/inet.h>
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

int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 1, repeat = argc > 2 ? atoi(argv[2]) : 1000000, n = 1 << k;
	struct doca_flow_cfg *cfg;
	struct doca_flow_port *ports[2];
	struct doca_flow_pipe *pipe;
	uint8_t f[64] = {0x02, 0, 0, 0, 0x05, 0x00, 0x02, 0, 0, 0, 0x04, 0x00, 0x08, 0x00, 0x45, 0, 0, 50, 0, 0, 0, 0,
			 64, 17, 0, 0, 198, 18, 0, 17, 198, 18, 0, 100, 0x04, 0x00, 0, 53, 0, 30};
	uint8_t out[128];

	if (unshare(CLONE_NEWNET) ||
	    system("ip link add xe0 type veth peer name xe0p && ip link add xe1 type veth peer name xe1p && "
		   "for d in xe0 xe0p xe1 xe1p; do ip link set $d up; done")) {
		fprintf(stderr, "Failed to set up the namespace (root needed)\n");
		return 1;
	}
	doca_log_level_set_global_lower_limit(DOCA_LOG_LEVEL_ERROR);
	doca_flow_emu_bind_port(0, "xe0");
	doca_flow_emu_bind_port(1, "xe1");
	doca_flow_cfg_create(&cfg);
	doca_flow_cfg_set_pipe_queues(cfg, 1);
	doca_flow_cfg_set_mode_args(cfg, "vnf,hws");
	doca_flow_cfg_set_nr_shared_resource(cfg, (uint32_t)n, DOCA_FLOW_SHARED_RESOURCE_COUNTER);
	if (doca_flow_init(cfg))
		return 1;
	for (int p = 0; p < 2; p++) {
		struct doca_flow_port_cfg *pc;

		doca_flow_port_cfg_create(&pc);
		doca_flow_port_cfg_set_port_id(pc, (uint16_t)p);
		if (doca_flow_port_start(pc, &ports[p]))
			return 1;
		doca_flow_port_cfg_destroy(pc);
	}
	uint32_t ids[256];
	struct doca_flow_shared_resource_cfg sc = {.domain = DOCA_FLOW_PIPE_DOMAIN_DEFAULT};

	for (int i = 0; i < n; i++) {
		ids[i] = (uint32_t)i;
		doca_flow_shared_resource_set_cfg(DOCA_FLOW_SHARED_RESOURCE_COUNTER, ids[i], &sc);
	}
	doca_flow_shared_resources_bind(DOCA_FLOW_SHARED_RESOURCE_COUNTER, ids, (uint32_t)n, ports[0]);
	{
		struct doca_flow_match m, mm;
		struct doca_flow_actions a, *aa[1] = {&a};
		struct doca_flow_monitor mon;
		struct doca_flow_fwd fwd = {.type = DOCA_FLOW_FWD_PORT, .port_id = 1}, miss = {.type = DOCA_FLOW_FWD_DROP};
		struct doca_flow_pipe_cfg *pc;

		memset(&m, 0, sizeof(m));
		memset(&mm, 0, sizeof(mm));
		memset(&a, 0, sizeof(a));
		memset(&mon, 0, sizeof(mon));
		m.outer.l3_type = DOCA_FLOW_L3_TYPE_IP4;
		m.outer.ip4.src_ip = 0xffffffff;
		mm.outer.ip4.src_ip = htonl((uint32_t)n - 1);
		memset(a.outer.eth.dst_mac, 0xff, 6);
		memset(a.outer.eth.src_mac, 0xff, 6);
		mon.counter_type = DOCA_FLOW_RESOURCE_TYPE_SHARED;
		mon.shared_counter.shared_counter_id = 0xffffffff;
		doca_flow_pipe_cfg_create(&pc, ports[0]);
		doca_flow_pipe_cfg_set_is_root(pc, true);
		doca_flow_pipe_cfg_set_match(pc, &m, &mm);
		doca_flow_pipe_cfg_set_actions(pc, aa, NULL, NULL, 1);
		doca_flow_pipe_cfg_set_monitor(pc, &mon);
		if (doca_flow_pipe_create(pc, &fwd, &miss, &pipe))
			return 1;
		doca_flow_pipe_cfg_destroy(pc);
		for (int c = 0; c < n; c++) {
			struct doca_flow_pipe_entry *e;

			memset(&m, 0, sizeof(m));
			memset(&a, 0, sizeof(a));
			m.outer.ip4.src_ip = htonl((uint32_t)c);
			a.outer.eth.dst_mac[0] = 0x02;
			a.outer.eth.dst_mac[5] = (uint8_t)c;
			a.outer.eth.src_mac[0] = 0x02;
			mon.shared_counter.shared_counter_id = (uint32_t)c;
			if (doca_flow_pipe_add_entry(0, pipe, &m, &a, &mon, NULL, 0, NULL, &e))
				return 1;
		}
		if (doca_flow_entries_process(ports[0], 0, 10000, 0))
			return 1;
	}
	struct xdp_md ctx = {.data_end = sizeof(f), .ingress_ifindex = if_nametoindex("xe0")};
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f, .data_size_in = sizeof(f), .data_out = out,
		    .data_size_out = sizeof(out), .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = repeat);
	if (bpf_prog_test_run_opts(doca_flow_emu_prog_fd(), &o)) {
		perror("Failed to test-run");
		return 1;
	}
	printf("emu_datapath_ns_per_frame=%u verdict=%u classes=%d repeat=%d\n", o.duration, o.retval, n, repeat);
	doca_flow_destroy();
	return 0;
}
