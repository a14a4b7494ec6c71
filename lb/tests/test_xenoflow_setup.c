/* XenoFlow's own bring-up (lb/src/ports.c, lb/src/flow_lb.c: the objects xenoflow links) against
 * the strict emulation: each test checks one thing the DOCA 2.9 stack needs that an earlier
 * XenoFlow got wrong - it passed a lax emulation and would have failed on the BlueField (the
 * "Enforced constraints" table of lb/README.md, rows 1-17, with each check's source) - and
 * fails on that code:
 *   - the hairpin queues are accepted by mlx5's checks and bound both ways (it set attributes 0 0:
 *     -EINVAL from rte_eth_rx_hairpin_queue_setup, exit 3);
 *   - port 1 is paired with port 0, so the root pipe may forward to port 1 (it paired nothing);
 *   - nr_counters covers the root pipe's miss counter (it configured 0);
 *   - the default RSS is set over the regular queues (it set none: a DOCA Flow queue count above
 *     the DPDK queues went unnoticed);
 *   - and, end to end, a class frame arriving on port 0 leaves on port 1 with the backend's MAC.
 * Runs as root in a private network namespace with two veth pairs (xe0, xe1 for ports 0, 1). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <net/if.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <doca_flow.h>
#include <doca_flow_emu.h>
#include <doca_log.h>

#include "flow_lb.h"
#include "update.h"
#include "ports.h"
#include "emu_ports.h"

#define XDP_REDIRECT 4

static const struct xf_dpdk_config DPDK = {.nb_ports = 2, .nb_queues = 2, .nb_hairpin_q = 2};
static const uint8_t LB_OUT[6] = {0x02, 0, 0, 0, 0x05, 0x01};
static const uint8_t MACS[2][6] = {{0x02, 0, 0, 0, 0x0a, 0}, {0x02, 0, 0, 0, 0x0a, 1}};

static struct doca_flow_port *ports[2];
/* the installed entries' user context: it outlives them (xf_install_classes) */
static struct xf_entries_status install_status;
static bool dpdk_up, flow_up;

static int teardown(void **state)
{
	(void)state;
	xf_stop_doca_flow_ports(2, ports);
	if (flow_up)
		doca_flow_destroy();
	if (dpdk_up)
		xf_dpdk_ports_fini(&DPDK);
	dpdk_up = flow_up = false;
	return 0;
}

/* the steps of main.c up to the DOCA Flow ports, with DOCA Flow's queue count `flow_queues` and
 * `nslots` shared counters */
static void bring_up_n(int flow_queues, int nslots)
{
	assert_int_equal(xf_dpdk_ports_init(&DPDK), DOCA_SUCCESS);
	dpdk_up = true;
	assert_int_equal(xf_init_doca_flow(flow_queues, "vnf,hws", XF_NR_COUNTERS, (uint32_t)nslots,
					   xf_check_for_valid_entry),
			 DOCA_SUCCESS);
	flow_up = true;
}

static void bring_up(int flow_queues)
{
	bring_up_n(flow_queues, 2);
}

static void test_hairpin_queues_set_up_and_bound_both_ways(void **state)
{
	(void)state;
	assert_int_equal(xf_dpdk_ports_init(&DPDK), DOCA_SUCCESS);
	dpdk_up = true;
	assert_true(doca_flow_emu_hairpin_ready(0, 1));
	assert_true(doca_flow_emu_hairpin_ready(1, 0));
	/* and fini unbinds and stops: a second init on the same ports works */
	xf_dpdk_ports_fini(&DPDK);
	assert_false(doca_flow_emu_hairpin_ready(0, 1));
	assert_int_equal(xf_dpdk_ports_init(&DPDK), DOCA_SUCCESS);
}

static void test_flow_ports_are_paired(void **state)
{
	struct doca_flow_pipe_cfg *pc;
	struct doca_flow_pipe *pipe = NULL;
	struct doca_flow_fwd to1 = {.type = DOCA_FLOW_FWD_PORT, .port_id = 1}, drop = {.type = DOCA_FLOW_FWD_DROP};
	(void)state;

	bring_up(DPDK.nb_queues);
	assert_int_equal(xf_init_doca_flow_ports(2, ports), DOCA_SUCCESS);
	/* a bare pipe (no counters) forwarding to port 1: only the pair allows it */
	assert_int_equal(doca_flow_pipe_cfg_create(&pc, ports[0]), DOCA_SUCCESS);
	doca_flow_pipe_cfg_set_is_root(pc, true);
	assert_int_equal(doca_flow_pipe_create(pc, &to1, &drop, &pipe), DOCA_SUCCESS);
	doca_flow_pipe_cfg_destroy(pc);
}

static void test_counter_pool_holds_the_miss_counter(void **state)
{
	struct doca_flow_pipe *pipe = NULL;
	struct doca_flow_resource_query q;
	(void)state;

	bring_up(DPDK.nb_queues);
	assert_int_equal(xf_init_doca_flow_ports(2, ports), DOCA_SUCCESS);
	assert_int_equal(xf_create_root_pipe(ports[0], 1, 1, &pipe), DOCA_SUCCESS);
	assert_int_equal(doca_flow_resource_query_pipe_miss(pipe, &q), DOCA_SUCCESS);
	assert_int_equal(q.counter.total_pkts, 0);
}

static void test_default_rss_covers_only_the_regular_queues(void **state)
{
	(void)state;
	/* DOCA Flow queues 0..2 over DPDK queues 0..1 (2, 3 are hairpin queues): the default RSS
	 * includes queue 2, a hairpin queue, so the port is refused; with 2 it starts */
	bring_up(DPDK.nb_queues + 1);
	assert_int_equal(xf_init_doca_flow_ports(2, ports), DOCA_ERROR_INVALID_VALUE);
	assert_null(ports[0]);
	doca_flow_destroy();
	flow_up = false;
	assert_int_equal(xf_init_doca_flow(DPDK.nb_queues, "vnf,hws", XF_NR_COUNTERS, 2, xf_check_for_valid_entry),
			 DOCA_SUCCESS);
	flow_up = true;
	assert_int_equal(xf_init_doca_flow_ports(2, ports), DOCA_SUCCESS);
}

/* Ethernet(LB p0) / IPv4 198.18.0.17 → 198.18.0.100 / UDP 1024 → 53 / 22 bytes: class 1 of 2 */
static const uint8_t FRAME[64] = {0x02, 0, 0, 0, 0x05, 0x00, 0x02, 0, 0, 0, 0x04, 0x00, 0x08, 0x00, 0x45, 0, 0,
				  50,   0, 0, 0, 0,    64,   17,   0, 0, 198, 18, 0, 17, 198, 18, 0, 100,
				  0x04, 0x00, 0, 53, 0, 30};

static void test_main_sequence_forwards_a_class_frame_rewritten(void **state)
{
	struct doca_flow_pipe *pipe = NULL;
	uint32_t ids[2], olen;
	uint8_t out[128], want[64];
	int verdict;
	(void)state;

	bring_up(DPDK.nb_queues);
	assert_int_equal(xf_init_doca_flow_ports(2, ports), DOCA_SUCCESS);
	assert_int_equal(xf_setup_class_counters(ports[0], 2, ids), DOCA_SUCCESS);
	assert_int_equal(xf_install_classes(ports[0], 1, 2, MACS, LB_OUT, ids, &install_status, NULL, &pipe), DOCA_SUCCESS);
	olen = sizeof(out);
	assert_int_equal(doca_flow_emu_test_run(0, FRAME, sizeof(FRAME), &verdict, out, &olen), DOCA_SUCCESS);
	assert_int_equal(verdict, XDP_REDIRECT);
	memcpy(want, FRAME, sizeof(FRAME));
	memcpy(want, MACS[1], 6);
	memcpy(want + 6, LB_OUT, 6);
	assert_int_equal(olen, sizeof(FRAME));
	assert_memory_equal(out, want, sizeof(FRAME));
}

/* 256 classes (XF_MAX_CLASS_BITS 8) are more entries than DOCA Flow's queue depth (128 by
 * default: the 2.9 samples' flow_skeleton.c; DPDK 22.11 mlx5_flow_hw.c refuses an operation when
 * the queue holds no free job): XenoFlow queued all 2^k before one doca_flow_entries_process, so
 * the 129th doca_flow_pipe_add_entry failed (exit 5). It now processes in batches of at most the
 * depth it sets less the margin the samples keep (XF_QUEUE_BATCH), and every class forwards. */
static void test_256_classes_are_added_in_batches_within_the_queue_depth(void **state)
{
	static uint8_t macs[256][6];
	struct doca_flow_pipe *pipe = NULL;
	uint32_t ids[256], olen;
	uint8_t frame[64], out[128];
	int verdict;
	(void)state;

	for (int c = 0; c < 256; c++) {
		memcpy(macs[c], MACS[0], 6);
		macs[c][5] = (uint8_t)c;
	}
	bring_up_n(DPDK.nb_queues, 256);
	assert_int_equal(xf_init_doca_flow_ports(2, ports), DOCA_SUCCESS);
	assert_int_equal(xf_setup_class_counters(ports[0], 256, ids), DOCA_SUCCESS);
	assert_int_equal(xf_install_classes(ports[0], 1, 256, (const uint8_t(*)[6])macs, LB_OUT, ids, &install_status, NULL, &pipe),
			 DOCA_SUCCESS);
	/* the last class (src 198.18.0.255 & 0xff = 255) is in the datapath with its backend's MAC */
	memcpy(frame, FRAME, sizeof(frame));
	frame[29] = 255;
	olen = sizeof(out);
	assert_int_equal(doca_flow_emu_test_run(0, frame, sizeof(frame), &verdict, out, &olen), DOCA_SUCCESS);
	assert_int_equal(verdict, XDP_REDIRECT);
	assert_memory_equal(out, macs[255], 6);
}

/* A backend change of every one of 256 classes: one doca_flow_pipe_update_entry per class, in
 * rounds of at most XF_UPDATE_CLASSES_PER_ROUND (the queue's depth less its margin) processed to
 * completion, the entries updated in place (no class is ever without its entry), and an unchanged
 * class is not touched. */
static void test_256_classes_updated_in_place_in_rounds_within_the_margin(void **state)
{
	static uint8_t cur[256][6], next[256][6];
	static struct xf_running rt;
	struct doca_flow_pipe *pipe = NULL;
	uint32_t ids[256], olen;
	uint8_t frame[64], out[128];
	int verdict, changed = -1;
	(void)state;

	for (int c = 0; c < 256; c++) {
		memcpy(cur[c], MACS[0], 6);
		memcpy(next[c], MACS[c == 7 ? 0 : 1], 6); /* class 7 keeps its backend */
	}
	bring_up_n(DPDK.nb_queues, 256);
	assert_int_equal(xf_init_doca_flow_ports(2, ports), DOCA_SUCCESS);
	assert_int_equal(xf_setup_class_counters(ports[0], 256, ids), DOCA_SUCCESS);
	memset(&rt, 0, sizeof(rt));
	assert_int_equal(xf_install_classes(ports[0], 1, 256, (const uint8_t(*)[6])cur, LB_OUT, ids, &rt.status,
					    rt.entries, &pipe),
			 DOCA_SUCCESS);
	assert_int_equal(rt.status.nb_processed, 256);
	rt.ingress = ports[0];
	rt.pipe = pipe;
	rt.ids = ids;
	memcpy(rt.src_mac, LB_OUT, 6);
	assert_int_equal(XF_UPDATE_CLASSES_PER_ROUND, 120);
	assert_int_equal(xf_update_classes(&rt, 256, (const uint8_t(*)[6])cur, (const uint8_t(*)[6])next, &changed),
			 DOCA_SUCCESS);
	assert_int_equal(changed, 255);
	assert_int_equal(rt.status.nb_processed, 256 + 255); /* every update completed (OP_UPD) */
	assert_false(rt.status.failure);
	memcpy(frame, FRAME, sizeof(frame));
	for (int c = 0; c < 256; c++) {
		frame[29] = (uint8_t)c;
		olen = sizeof(out);
		assert_int_equal(doca_flow_emu_test_run(0, frame, sizeof(frame), &verdict, out, &olen), DOCA_SUCCESS);
		assert_int_equal(verdict, XDP_REDIRECT);
		assert_memory_equal(out, next[c], 6);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_hairpin_queues_set_up_and_bound_both_ways, teardown),
		cmocka_unit_test_teardown(test_flow_ports_are_paired, teardown),
		cmocka_unit_test_teardown(test_counter_pool_holds_the_miss_counter, teardown),
		cmocka_unit_test_teardown(test_default_rss_covers_only_the_regular_queues, teardown),
		cmocka_unit_test_teardown(test_main_sequence_forwards_a_class_frame_rewritten, teardown),
		cmocka_unit_test_teardown(test_256_classes_are_added_in_batches_within_the_queue_depth, teardown),
		cmocka_unit_test_teardown(test_256_classes_updated_in_place_in_rounds_within_the_margin, teardown),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "test_xenoflow_setup needs root (network namespace, XDP)\n");
		return 77; /* meson: skipped */
	}
	if (emu_ports_in_private_netns(NULL))
		return 1;
	doca_log_level_set_global_lower_limit(getenv("EMU_TEST_VERBOSE") ? DOCA_LOG_LEVEL_DEBUG : DOCA_LOG_LEVEL_CRIT);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
