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
 * Then the runtime change (update.c): in place, in rounds within the queue's margin, each round
 * back once its updates completed (it asked doca_flow_entries_process for 0 entries, i.e. the
 * whole timeout, every round), and a refused file on SIGHUP keeps the running set.
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <doca_flow.h>
#include <doca_flow_emu.h>
#include <doca_log.h>

#include "backends.h"
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

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* An update round returns once its updates completed, not at the timeout: update.c called
 * doca_flow_entries_process(port, 0, XF_PROCESS_TIMEOUT_US, 0), and 0 "will proceed until timeout"
 * (doca_flow.h), so on a BlueField every round took the whole timeout (10 ms) whatever it changed;
 * the emulation honours the timeout as the hardware does (test_emu.c), and update.c now asks for
 * exactly the round's updates (xf_process_until). 20 changes of one class, one round each: under
 * 100 ms in all (with 0, at least 20 x 10 ms). */
static void test_an_update_round_returns_when_its_updates_completed(void **state)
{
	static struct xf_running rt;
	struct doca_flow_pipe *pipe = NULL;
	uint8_t cur[2][6], next[2][6];
	uint32_t ids[2];
	int changed = -1;
	double t;
	(void)state;

	bring_up(DPDK.nb_queues);
	assert_int_equal(xf_init_doca_flow_ports(2, ports), DOCA_SUCCESS);
	assert_int_equal(xf_setup_class_counters(ports[0], 2, ids), DOCA_SUCCESS);
	memset(&rt, 0, sizeof(rt));
	assert_int_equal(xf_install_classes(ports[0], 1, 2, MACS, LB_OUT, ids, &rt.status, rt.entries, &pipe),
			 DOCA_SUCCESS);
	rt.ingress = ports[0];
	rt.pipe = pipe;
	rt.ids = ids;
	memcpy(rt.src_mac, LB_OUT, 6);
	memcpy(cur, MACS, sizeof(cur));
	memcpy(next, MACS, sizeof(next));
	t = mono_s();
	for (int i = 0; i < 20; i++) { /* class 1: MACS[1] -> MACS[0] -> MACS[1] ... */
		memcpy(next[1], MACS[i % 2 ? 1 : 0], 6);
		assert_int_equal(xf_update_classes(&rt, 2, (const uint8_t(*)[6])cur, (const uint8_t(*)[6])next, &changed),
				 DOCA_SUCCESS);
		assert_int_equal(changed, 1);
		memcpy(cur[1], next[1], 6);
	}
	t = mono_s() - t;
	assert_int_equal(rt.status.nb_processed, 2 + 20);
	assert_false(rt.status.failure);
	if (t >= 0.100)
		fail_msg("20 update rounds of one class took %.1f ms (%.1f ms a round; the process timeout is %d us)",
			 t * 1e3, t * 1e3 / 20, XF_PROCESS_TIMEOUT_US);
}

/* xf_reload's JSON line (stdout) for `path`, into line */
static void reload_line(struct xf_running *rt, const char *path, struct xf_backends *bs, char *line, size_t n)
{
	char out[] = "/tmp/xf-reload-out-XXXXXX";
	int fd = mkstemp(out), saved;
	ssize_t got;

	assert_true(fd >= 0);
	fflush(stdout);
	saved = dup(1);
	dup2(fd, 1);
	xf_reload(rt, path, bs);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	got = pread(fd, line, n - 1, 0);
	line[got > 0 ? got : 0] = 0;
	close(fd);
	unlink(out);
}

static void write_backends(const char *path, const uint8_t mac1[6])
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fprintf(f, "{\"backends\": [{\"name\": \"a\", \"mac_address\": \"02:00:00:00:0a:00\"}, {\"name\": \"b\", "
		   "\"mac_address\": \"%02x:%02x:%02x:%02x:%02x:%02x\"}]}",
		mac1[0], mac1[1], mac1[2], mac1[3], mac1[4], mac1[5]);
	fclose(f);
	assert_int_equal(chmod(path, 0644), 0);
}

/* SIGHUP (xf_reload) with a -b file the reader refuses as a file (here: the name replaced by a
 * symbolic link to a good file) is an update_refused line, and XenoFlow keeps its running set
 * and entries, as for any refused file; the same name as a plain file again is applied. */
static void test_reload_of_a_refused_file_keeps_the_running_table(void **state)
{
	static struct xf_running rt;
	static struct xf_backends bs;
	static const uint8_t OTHER[6] = {0x02, 0, 0, 0, 0x0a, 2};
	char dir[] = "/tmp/xf-reload-XXXXXX", path[64], target[64], err[256], line[4096];
	struct doca_flow_pipe *pipe = NULL;
	uint8_t macs[2][6], out[128];
	uint32_t ids[2], olen;
	int verdict;
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/backends.json", dir);
	snprintf(target, sizeof(target), "%s/other.json", dir);
	write_backends(path, MACS[1]);
	if (xf_backends_load(path, &bs, err, sizeof(err)))
		fail_msg("%s", err);
	bring_up(DPDK.nb_queues);
	assert_int_equal(xf_init_doca_flow_ports(2, ports), DOCA_SUCCESS);
	assert_int_equal(xf_setup_class_counters(ports[0], 2, ids), DOCA_SUCCESS);
	for (int c = 0; c < 2; c++)
		memcpy(macs[c], bs.b[bs.slots[c]].mac, 6);
	memset(&rt, 0, sizeof(rt));
	assert_int_equal(xf_install_classes(ports[0], 1, 2, (const uint8_t(*)[6])macs, LB_OUT, ids, &rt.status,
					    rt.entries, &pipe),
			 DOCA_SUCCESS);
	rt.ingress = ports[0];
	rt.pipe = pipe;
	rt.ids = ids;
	memcpy(rt.src_mac, LB_OUT, 6);
	/* the name becomes a symbolic link to a good file that moves class 1 */
	write_backends(target, OTHER);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink(target, path), 0);
	reload_line(&rt, path, &bs, line, sizeof(line));
	if (!strstr(line, "\"event\": \"update_refused\"") || !strstr(line, "is a symbolic link"))
		fail_msg("%s", line);
	assert_int_equal(rt.status.nb_processed, 2); /* no entry touched */
	assert_memory_equal(bs.b[1].mac, MACS[1], 6);
	olen = sizeof(out);
	assert_int_equal(doca_flow_emu_test_run(0, FRAME, sizeof(FRAME), &verdict, out, &olen), DOCA_SUCCESS);
	assert_int_equal(verdict, XDP_REDIRECT);
	assert_memory_equal(out, MACS[1], 6); /* class 1 still at its backend */
	/* a plain file under the name again: applied */
	assert_int_equal(unlink(path), 0);
	write_backends(path, OTHER);
	reload_line(&rt, path, &bs, line, sizeof(line));
	if (!strstr(line, "\"event\": \"updated\""))
		fail_msg("%s", line);
	assert_memory_equal(bs.b[1].mac, OTHER, 6);
	olen = sizeof(out);
	assert_int_equal(doca_flow_emu_test_run(0, FRAME, sizeof(FRAME), &verdict, out, &olen), DOCA_SUCCESS);
	assert_memory_equal(out, OTHER, 6);
	xf_backends_free(&bs);
	unlink(path);
	unlink(target);
	rmdir(dir);
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
		cmocka_unit_test_teardown(test_an_update_round_returns_when_its_updates_completed, teardown),
		cmocka_unit_test_teardown(test_reload_of_a_refused_file_keeps_the_running_table, teardown),
	};

	int start = emu_test_start("test_xenoflow_setup");

	if (start)
		return start;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
