/* Emulation semantics, through the DOCA Flow API and BPF_PROG_TEST_RUN on the generated datapath:
 * entry matching under the pipe mask, miss → drop (and the miss counter), action bytes, shared and
 * per-entry counters, entries pending until doca_flow_entries_process, removal, attach/detach,
 * and DOCA_ERROR_NOT_SUPPORTED for features outside the subset. Then the constraints the real
 * stack enforces (lb/README.md, "Enforced constraints"): mlx5's hairpin queue checks and binding,
 * DPDK port before DOCA Flow port, the default RSS queues, VNF forwarding only to the pair, the
 * nr_counters pool, the pipe cfg contract.
 * Runs as root in a private network namespace (unshare) with two veth pairs for ports 0 and 1,
 * so nothing is left behind. Frames are built by build_udp() below. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <bpf/libbpf.h>
#include <cmocka.h>

#include <doca_flow.h>
#include <doca_flow_emu.h>
#include <doca_log.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include "emu_ports.h"

#define XDP_DROP 1
#define XDP_PASS 2
#define XDP_REDIRECT 4

static const uint8_t LB_IN[6] = {0x02, 0, 0, 0, 0x05, 0x00}, LB_OUT[6] = {0x02, 0, 0, 0, 0x05, 0x01},
		     CLIENT[6] = {0x02, 0, 0, 0, 0x04, 0x00};
static const uint8_t BMAC[4][6] = {{0x02, 0, 0, 0, 0x0a, 0}, {0x02, 0, 0, 0, 0x0a, 1},
				   {0x02, 0, 0, 0, 0x0a, 2}, {0x02, 0, 0, 0, 0x0a, 3}};

static struct doca_flow_port *ports[2];
static int processed, failed, removed, updated, update_failed;
static void *last_update_ctx;
/* the port lb_pipe puts its pipe on (0, the ingress, unless a test says otherwise) */
static int pipe_port;
static struct rte_mempool *pool;

/* what setup() brings up; tests of a constraint start from a setup that leaves a step out */
struct opts {
	uint32_t nr_counters; /* doca_flow_cfg_set_nr_counters */
	bool no_bind;         /* hairpin queues set up, rte_eth_hairpin_bind not called */
	bool no_pair;         /* DOCA Flow ports not paired */
	bool no_flow;         /* DPDK ports only: no DOCA Flow */
	uint32_t queue_depth; /* doca_flow_cfg_set_queue_depth, 0: not called (DOCA's default, 128) */
};
static const struct opts DEFAULT_OPTS = {.nr_counters = 8};

/* DPDK ports 0 and 1 as lb/src/ports.c sets them up: queue 0 regular, queue 1 a hairpin queue to
 * the other port (manual_bind, tx_explicit), started, then bound both ways unless no_bind */
static void dpdk_up(bool bind)
{
	struct rte_eth_conf conf = {0};
	struct rte_eth_hairpin_conf hc = {.peer_count = 1, .manual_bind = 1, .tx_explicit = 1};

	pool = rte_pktmbuf_pool_create("t", 64, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
	for (uint16_t p = 0; p < 2; p++) {
		hc.peers[0].port = (uint16_t)(p ^ 1);
		hc.peers[0].queue = 1;
		assert_int_equal(rte_eth_dev_configure(p, 2, 2, &conf), 0);
		assert_int_equal(rte_eth_rx_queue_setup(p, 0, 64, 0, NULL, pool), 0);
		assert_int_equal(rte_eth_tx_queue_setup(p, 0, 64, 0, NULL), 0);
		assert_int_equal(rte_eth_tx_hairpin_queue_setup(p, 1, 64, &hc), 0);
		assert_int_equal(rte_eth_rx_hairpin_queue_setup(p, 1, 64, &hc), 0);
		assert_int_equal(rte_eth_dev_start(p), 0);
	}
	if (bind) {
		assert_int_equal(rte_eth_hairpin_bind(0, 1), 0);
		assert_int_equal(rte_eth_hairpin_bind(1, 0), 0);
	}
}

static void dpdk_down(void)
{
	for (uint16_t p = 0; p < 2; p++) {
		rte_eth_hairpin_unbind(p, (uint16_t)(p ^ 1));
		rte_eth_dev_stop(p);
		rte_eth_dev_close(p);
	}
	rte_mempool_free(pool);
	pool = NULL;
}

/* Ethernet / IPv4 (no options) / UDP / payload: 42 + plen bytes */
static uint32_t build_udp(uint8_t *f, const char *src, const char *dst, uint16_t sport, uint16_t dport, int plen)
{
	memset(f, 0, 42 + (size_t)plen);
	memcpy(f, LB_IN, 6);
	memcpy(f + 6, CLIENT, 6);
	f[12] = 0x08;
	f[13] = 0x00;
	f[14] = 0x45;
	f[16] = (uint8_t)((20 + 8 + plen) >> 8);
	f[17] = (uint8_t)(20 + 8 + plen);
	f[22] = 64;
	f[23] = 17;
	inet_pton(AF_INET, src, f + 26);
	inet_pton(AF_INET, dst, f + 30);
	f[34] = (uint8_t)(sport >> 8);
	f[35] = (uint8_t)sport;
	f[36] = (uint8_t)(dport >> 8);
	f[37] = (uint8_t)dport;
	f[38] = (uint8_t)((8 + plen) >> 8);
	f[39] = (uint8_t)(8 + plen);
	for (int i = 0; i < plen; i++)
		f[42 + i] = 'q';
	return 42 + (uint32_t)plen;
}

static int run(uint16_t port, const uint8_t *in, uint32_t len, uint8_t *out)
{
	int verdict = -1;
	uint32_t olen = 2048;

	assert_int_equal(doca_flow_emu_test_run(port, in, len, &verdict, out, &olen), DOCA_SUCCESS);
	assert_int_equal(olen, len);
	return verdict;
}

static void cb(struct doca_flow_pipe_entry *e, uint16_t q, enum doca_flow_entry_status st, enum doca_flow_entry_op op,
	       void *ctx)
{
	(void)e, (void)q, (void)ctx;
	if (op == DOCA_FLOW_ENTRY_OP_ADD) {
		processed++;
		if (st != DOCA_FLOW_ENTRY_STATUS_SUCCESS)
			failed++;
	}
	if (op == DOCA_FLOW_ENTRY_OP_DEL && st == DOCA_FLOW_ENTRY_STATUS_SUCCESS)
		removed++;
	if (op == DOCA_FLOW_ENTRY_OP_UPD) {
		updated++;
		if (st != DOCA_FLOW_ENTRY_STATUS_SUCCESS)
			update_failed++;
		last_update_ctx = ctx;
	}
}

static int setup(void **state)
{
	const struct opts *o = *state ? *state : &DEFAULT_OPTS;
	struct doca_flow_cfg *cfg;

	processed = failed = updated = update_failed = 0;
	last_update_ctx = NULL;
	pipe_port = 0;
	ports[0] = ports[1] = NULL;
	dpdk_up(!o->no_bind);
	if (o->no_flow)
		return 0;
	assert_int_equal(doca_flow_cfg_create(&cfg), DOCA_SUCCESS);
	assert_int_equal(doca_flow_cfg_set_nr_counters(cfg, o->nr_counters), DOCA_SUCCESS);
	assert_int_equal(doca_flow_cfg_set_pipe_queues(cfg, 1), DOCA_SUCCESS);
	if (o->queue_depth)
		assert_int_equal(doca_flow_cfg_set_queue_depth(cfg, o->queue_depth), DOCA_SUCCESS);
	assert_int_equal(doca_flow_cfg_set_mode_args(cfg, "vnf,hws"), DOCA_SUCCESS);
	assert_int_equal(doca_flow_cfg_set_nr_shared_resource(cfg, 8, DOCA_FLOW_SHARED_RESOURCE_COUNTER), DOCA_SUCCESS);
	assert_int_equal(doca_flow_cfg_set_cb_entry_process(cfg, cb), DOCA_SUCCESS);
	assert_int_equal(doca_flow_init(cfg), DOCA_SUCCESS);
	doca_flow_cfg_destroy(cfg);
	for (int p = 0; p < 2; p++) {
		struct doca_flow_port_cfg *pc;
		char id[4];

		snprintf(id, sizeof(id), "%d", p);
		assert_int_equal(doca_flow_port_cfg_create(&pc), DOCA_SUCCESS);
		assert_int_equal(doca_flow_port_cfg_set_devargs(pc, id), DOCA_SUCCESS);
		assert_int_equal(doca_flow_port_start(pc, &ports[p]), DOCA_SUCCESS);
		doca_flow_port_cfg_destroy(pc);
	}
	if (!o->no_pair)
		assert_int_equal(doca_flow_port_pair(ports[1], ports[0]), DOCA_SUCCESS);
	for (uint32_t id = 0; id < 8; id++) {
		struct doca_flow_shared_resource_cfg sc = {.domain = DOCA_FLOW_PIPE_DOMAIN_DEFAULT};

		assert_int_equal(doca_flow_shared_resource_set_cfg(DOCA_FLOW_SHARED_RESOURCE_COUNTER, id, &sc), DOCA_SUCCESS);
	}
	uint32_t ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};

	assert_int_equal(doca_flow_shared_resources_bind(DOCA_FLOW_SHARED_RESOURCE_COUNTER, ids, 8, ports[0]),
			 DOCA_SUCCESS);
	return 0;
}

static int teardown(void **state)
{
	const struct opts *o = *state ? *state : &DEFAULT_OPTS;

	if (!o->no_flow)
		doca_flow_destroy();
	dpdk_down();
	return 0;
}

/* XenoFlow's pipe: IPv4, src_ip changeable under `mask`, both MACs changeable, counter kind as
 * given (shared id changeable, or per entry), fwd port 1, miss drop with a miss counter */
static doca_error_t lb_pipe_r(uint32_t mask, enum doca_flow_resource_type counter, struct doca_flow_pipe **pipe);

static struct doca_flow_pipe *lb_pipe(uint32_t mask, enum doca_flow_resource_type counter)
{
	struct doca_flow_pipe *pipe = NULL;

	assert_int_equal(lb_pipe_r(mask, counter, &pipe), DOCA_SUCCESS);
	return pipe;
}

static doca_error_t lb_pipe_r(uint32_t mask, enum doca_flow_resource_type counter, struct doca_flow_pipe **pipe)
{
	struct doca_flow_match m, mm;
	struct doca_flow_actions a, *aa[1] = {&a};
	struct doca_flow_monitor mon;
	struct doca_flow_fwd fwd = {.type = DOCA_FLOW_FWD_PORT, .port_id = 1}, miss = {.type = DOCA_FLOW_FWD_DROP};
	struct doca_flow_pipe_cfg *pc;
	doca_error_t r;

	memset(&m, 0, sizeof(m));
	memset(&mm, 0, sizeof(mm));
	memset(&a, 0, sizeof(a));
	memset(&mon, 0, sizeof(mon));
	m.outer.l3_type = DOCA_FLOW_L3_TYPE_IP4;
	m.outer.ip4.src_ip = 0xffffffff;
	mm.outer.ip4.src_ip = htonl(mask);
	memset(a.outer.eth.dst_mac, 0xff, 6);
	memset(a.outer.eth.src_mac, 0xff, 6);
	mon.counter_type = counter;
	mon.shared_counter.shared_counter_id = 0xffffffff;
	assert_int_equal(doca_flow_pipe_cfg_create(&pc, ports[pipe_port]), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_cfg_set_name(pc, pipe_port ? "LB1" : "LB"), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_cfg_set_type(pc, DOCA_FLOW_PIPE_BASIC), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_cfg_set_is_root(pc, true), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_cfg_set_miss_counter(pc, true), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_cfg_set_match(pc, &m, &mm), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_cfg_set_actions(pc, aa, NULL, NULL, 1), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_cfg_set_monitor(pc, &mon), DOCA_SUCCESS);
	r = doca_flow_pipe_create(pc, &fwd, &miss, pipe);
	doca_flow_pipe_cfg_destroy(pc);
	return r;
}

static doca_error_t add_r(struct doca_flow_pipe *pipe, uint32_t cls, const uint8_t *mac, uint32_t cid,
			  struct doca_flow_pipe_entry **e)
{
	struct doca_flow_match m;
	struct doca_flow_actions a;
	struct doca_flow_monitor mon;

	memset(&m, 0, sizeof(m));
	memset(&a, 0, sizeof(a));
	memset(&mon, 0, sizeof(mon));
	m.outer.ip4.src_ip = htonl(cls);
	memcpy(a.outer.eth.dst_mac, mac, 6);
	memcpy(a.outer.eth.src_mac, LB_OUT, 6);
	mon.shared_counter.shared_counter_id = cid;
	return doca_flow_pipe_add_entry(0, pipe, &m, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, NULL, e);
}

static struct doca_flow_pipe_entry *add(struct doca_flow_pipe *pipe, uint32_t cls, const uint8_t *mac, uint32_t cid)
{
	struct doca_flow_match m;
	struct doca_flow_actions a;
	struct doca_flow_monitor mon;
	struct doca_flow_pipe_entry *e = NULL;

	memset(&m, 0, sizeof(m));
	memset(&a, 0, sizeof(a));
	memset(&mon, 0, sizeof(mon));
	m.outer.ip4.src_ip = htonl(cls);
	memcpy(a.outer.eth.dst_mac, mac, 6);
	memcpy(a.outer.eth.src_mac, LB_OUT, 6);
	mon.shared_counter.shared_counter_id = cid;
	assert_int_equal(doca_flow_pipe_add_entry(0, pipe, &m, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, NULL, &e), DOCA_SUCCESS);
	return e;
}

static void expect_rewritten(const uint8_t *in, const uint8_t *out, uint32_t len, const uint8_t *dst)
{
	uint8_t want[2048];

	memcpy(want, in, len);
	memcpy(want, dst, 6);
	memcpy(want + 6, LB_OUT, 6);
	assert_memory_equal(out, want, len);
}

static void test_entries_match_under_pipe_mask_and_rewrite_macs(void **state)
{
	uint8_t in[128], out[2048];
	struct doca_flow_pipe *pipe = lb_pipe(0x3, DOCA_FLOW_RESOURCE_TYPE_SHARED);
	(void)state;

	assert_true(doca_flow_emu_pipe_is_direct(pipe)); /* the class mask compiles into a direct table */
	for (uint32_t c = 0; c < 4; c++)
		add(pipe, c, BMAC[c], c);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 4), DOCA_SUCCESS);
	assert_int_equal(processed, 4);
	assert_int_equal(failed, 0);
	/* class = low 2 bits of the source: .16→0 .17→1 .18→2 .19→3 .20→0, 10.0.0.255→3 */
	const char *srcs[] = {"198.18.0.16", "198.18.0.17", "198.18.0.18", "198.18.0.19", "198.18.0.20", "10.0.0.255"};
	const int cls[] = {0, 1, 2, 3, 0, 3};

	for (int i = 0; i < 6; i++) {
		uint32_t len = build_udp(in, srcs[i], "198.18.0.100", 1024, 53, 22);

		assert_int_equal(run(0, in, len, out), XDP_REDIRECT);
		expect_rewritten(in, out, len, BMAC[cls[i]]);
	}
	/* shared counters: one per entry, exact packets and bytes (64-byte frames) */
	uint32_t ids[4] = {0, 1, 2, 3};
	struct doca_flow_resource_query q[4];

	assert_int_equal(doca_flow_shared_resources_query(DOCA_FLOW_SHARED_RESOURCE_COUNTER, ids, q, 4), DOCA_SUCCESS);
	assert_int_equal(q[0].counter.total_pkts, 2);
	assert_int_equal(q[0].counter.total_bytes, 128);
	assert_int_equal(q[1].counter.total_pkts, 1);
	assert_int_equal(q[2].counter.total_pkts, 1);
	assert_int_equal(q[3].counter.total_pkts, 2);
	assert_int_equal(q[3].counter.total_bytes, 128);
}

static void test_miss_drops_and_is_counted(void **state)
{
	uint8_t in[128], out[2048], arp[60] = {0};
	struct doca_flow_pipe *pipe = lb_pipe(0x3, DOCA_FLOW_RESOURCE_TYPE_SHARED);
	struct doca_flow_resource_query q;
	(void)state;

	add(pipe, 0, BMAC[0], 0);
	add(pipe, 1, BMAC[1], 1); /* classes 2 and 3 have no entry */
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	uint32_t len = build_udp(in, "198.18.0.18", "198.18.0.100", 1024, 53, 22);

	assert_int_equal(run(0, in, len, out), XDP_DROP);
	assert_memory_equal(out, in, len); /* no action on a miss */
	/* not IPv4: the pipe matches l3_type IP4, so an ARP frame whose bytes at the IPv4 source
	 * offset would match class 0 still misses */
	memcpy(arp, LB_IN, 6);
	arp[12] = 0x08;
	arp[13] = 0x06;
	assert_int_equal(run(0, arp, 60, out), XDP_DROP);
	/* IPv4 header cut short: not parsed as IPv4 → miss */
	assert_int_equal(run(0, in, 30, out), XDP_DROP);
	assert_int_equal(doca_flow_resource_query_pipe_miss(pipe, &q), DOCA_SUCCESS);
	assert_int_equal(q.counter.total_pkts, 3);
	assert_int_equal(q.counter.total_bytes, 64 + 60 + 30);
}

static void test_shared_counter_shared_by_two_entries_and_per_entry_counters(void **state)
{
	uint8_t in[256], out[2048];
	struct doca_flow_pipe *pipe = lb_pipe(0x1, DOCA_FLOW_RESOURCE_TYPE_SHARED);
	(void)state;

	add(pipe, 0, BMAC[0], 5);
	add(pipe, 1, BMAC[1], 5); /* both count in shared counter 5 */
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	uint32_t l0 = build_udp(in, "198.18.0.16", "198.18.0.100", 1024, 53, 10);

	run(0, in, l0, out);
	uint32_t l1 = build_udp(in, "198.18.0.17", "198.18.0.100", 1024, 53, 100);

	run(0, in, l1, out);
	run(0, in, l1, out);
	uint32_t id = 5;
	struct doca_flow_resource_query q;

	assert_int_equal(doca_flow_shared_resources_query(DOCA_FLOW_SHARED_RESOURCE_COUNTER, &id, &q, 1), DOCA_SUCCESS);
	assert_int_equal(q.counter.total_pkts, 3);
	assert_int_equal(q.counter.total_bytes, l0 + 2 * l1);
	/* entries of a shared-counter pipe have no counter of their own */
	struct doca_flow_pipe_entry *e = add(pipe, 0, BMAC[2], 5);

	assert_int_equal(doca_flow_resource_query_entry(e, &q), DOCA_ERROR_INVALID_VALUE);
	doca_flow_pipe_remove_entry(0, 0, e);

	/* per-entry (non-shared) counters on a fresh pipe */
	doca_flow_pipe_destroy(pipe);
	pipe = lb_pipe(0x1, DOCA_FLOW_RESOURCE_TYPE_NON_SHARED);
	struct doca_flow_pipe_entry *e0 = add(pipe, 0, BMAC[0], 0), *e1 = add(pipe, 1, BMAC[1], 0);

	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	l0 = build_udp(in, "198.18.0.16", "198.18.0.100", 1024, 53, 22);
	for (int i = 0; i < 7; i++)
		run(0, in, l0, out);
	assert_int_equal(doca_flow_resource_query_entry(e0, &q), DOCA_SUCCESS);
	assert_int_equal(q.counter.total_pkts, 7);
	assert_int_equal(q.counter.total_bytes, 7 * 64);
	assert_int_equal(doca_flow_resource_query_entry(e1, &q), DOCA_SUCCESS);
	assert_int_equal(q.counter.total_pkts, 0);
}

static void test_entries_pending_until_process_and_removal(void **state)
{
	uint8_t in[128], out[2048];
	struct doca_flow_pipe *pipe = lb_pipe(0x1, DOCA_FLOW_RESOURCE_TYPE_SHARED);
	(void)state;

	add(pipe, 0, BMAC[0], 0);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	struct doca_flow_pipe_entry *e = add(pipe, 1, BMAC[1], 1);

	assert_int_equal(doca_flow_pipe_entry_get_status(e), DOCA_FLOW_ENTRY_STATUS_IN_PROCESS);
	uint32_t len = build_udp(in, "198.18.0.17", "198.18.0.100", 1024, 53, 22);

	assert_int_equal(run(0, in, len, out), XDP_DROP); /* added, not processed: not in the datapath */
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_entry_get_status(e), DOCA_FLOW_ENTRY_STATUS_SUCCESS);
	assert_int_equal(run(0, in, len, out), XDP_REDIRECT);
	expect_rewritten(in, out, len, BMAC[1]);
	/* a removal is a queue operation: in the datapath until processed on its queue (OP_DEL) */
	removed = 0;
	assert_int_equal(doca_flow_pipe_remove_entry(0, 0, e), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_remove_entry(0, 0, e), DOCA_ERROR_INVALID_VALUE); /* queued already */
	assert_int_equal(run(0, in, len, out), XDP_REDIRECT);
	assert_int_equal(removed, 0);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	assert_int_equal(removed, 1);
	assert_int_equal(run(0, in, len, out), XDP_DROP);
	/* a second entry with the same match is refused at processing (status ERROR) */
	add(pipe, 0, BMAC[3], 0);
	failed = 0;
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	assert_int_equal(failed, 1);
}

/* doca_flow_pipe_update_entry(queue, pipe, actions, monitor, fwd, flags, entry): the entry's new
 * MAC and counter from the next doca_flow_entries_process on its queue on (callback OP_UPD with the
 * user context of the add), in place: a frame of the class takes the old backend or the new one,
 * never the miss. Refused: a NULL pipe or entry, an entry of another pipe, a per-entry fwd, an
 * entry not in the datapath, one being removed, a second update before the first is processed,
 * and an update beyond the queue's depth. Both compilations (direct table, hash) alike. */
static void update_entry_case(uint32_t mask, const char *src, uint32_t cls)
{
	uint8_t in[128], out[2048];
	struct doca_flow_pipe *pipe = lb_pipe(mask, DOCA_FLOW_RESOURCE_TYPE_SHARED);
	struct doca_flow_match m;
	struct doca_flow_actions a;
	struct doca_flow_monitor mon;
	struct doca_flow_fwd fwd = {.type = DOCA_FLOW_FWD_PORT, .port_id = 1};
	struct doca_flow_pipe_entry *e = NULL;
	static int ctx;
	uint32_t len = build_udp(in, src, "198.18.0.100", 1024, 53, 22), id = 6;
	struct doca_flow_resource_query q;

	memset(&m, 0, sizeof(m));
	memset(&a, 0, sizeof(a));
	memset(&mon, 0, sizeof(mon));
	m.outer.ip4.src_ip = htonl(cls);
	memcpy(a.outer.eth.dst_mac, BMAC[1], 6);
	memcpy(a.outer.eth.src_mac, LB_OUT, 6);
	mon.shared_counter.shared_counter_id = 1;
	assert_int_equal(doca_flow_pipe_add_entry(0, pipe, &m, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, &ctx, &e),
			 DOCA_SUCCESS);
	memcpy(a.outer.eth.dst_mac, BMAC[2], 6);
	mon.shared_counter.shared_counter_id = 6;
	/* its add not processed yet */
	assert_int_equal(doca_flow_pipe_update_entry(0, pipe, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, e),
			 DOCA_ERROR_INVALID_VALUE);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	assert_int_equal(run(0, in, len, out), XDP_REDIRECT);
	expect_rewritten(in, out, len, BMAC[1]);
	/* NULLs, a per-entry fwd, a queue that does not exist */
	assert_int_equal(doca_flow_pipe_update_entry(0, pipe, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, NULL),
			 DOCA_ERROR_INVALID_VALUE);
	assert_int_equal(doca_flow_pipe_update_entry(0, NULL, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, e),
			 DOCA_ERROR_INVALID_VALUE);
	assert_int_equal(doca_flow_pipe_update_entry(0, pipe, &a, &mon, &fwd, DOCA_FLOW_NO_WAIT, e),
			 DOCA_ERROR_NOT_SUPPORTED);
	assert_int_equal(doca_flow_pipe_update_entry(1, pipe, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, e),
			 DOCA_ERROR_INVALID_VALUE);
	/* changeable MACs need actions; the new shared counter must be bound */
	assert_int_equal(doca_flow_pipe_update_entry(0, pipe, NULL, &mon, NULL, DOCA_FLOW_NO_WAIT, e),
			 DOCA_ERROR_INVALID_VALUE);
	mon.shared_counter.shared_counter_id = 9;
	assert_int_equal(doca_flow_pipe_update_entry(0, pipe, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, e),
			 DOCA_ERROR_INVALID_VALUE);
	mon.shared_counter.shared_counter_id = 6;
	/* an entry of another pipe (port 1's root pipe) */
	pipe_port = 1;
	struct doca_flow_pipe *pipe1 = lb_pipe(mask, DOCA_FLOW_RESOURCE_TYPE_SHARED);

	pipe_port = 0;
	assert_int_equal(doca_flow_pipe_update_entry(0, pipe1, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, e),
			 DOCA_ERROR_INVALID_VALUE);
	/* queued: the old actions until processed, then the new ones; never a miss */
	assert_int_equal(doca_flow_pipe_update_entry(0, pipe, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, e), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_update_entry(0, pipe, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, e),
			 DOCA_ERROR_INVALID_VALUE); /* its first update not processed */
	assert_int_equal(run(0, in, len, out), XDP_REDIRECT);
	expect_rewritten(in, out, len, BMAC[1]);
	assert_int_equal(updated, 0);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	assert_int_equal(updated, 1);
	assert_int_equal(update_failed, 0);
	assert_ptr_equal(last_update_ctx, &ctx);
	assert_int_equal(processed, 1); /* the add's completion only: an update is not an add */
	assert_int_equal(doca_flow_pipe_entry_get_status(e), DOCA_FLOW_ENTRY_STATUS_SUCCESS);
	assert_int_equal(run(0, in, len, out), XDP_REDIRECT);
	expect_rewritten(in, out, len, BMAC[2]);
	assert_int_equal(doca_flow_shared_resources_query(DOCA_FLOW_SHARED_RESOURCE_COUNTER, &id, &q, 1), DOCA_SUCCESS);
	assert_int_equal(q.counter.total_pkts, 1); /* counted in its new shared counter */
	/* an entry whose removal is queued */
	assert_int_equal(doca_flow_pipe_remove_entry(0, 0, e), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_update_entry(0, pipe, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, e),
			 DOCA_ERROR_INVALID_VALUE);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	assert_int_equal(run(0, in, len, out), XDP_DROP);
	/* an update takes a place of the queue: 128 updates fill the default depth */
	doca_flow_pipe_destroy(pipe1);
}

static void test_update_entry_in_place_direct_table(void **state)
{
	(void)state;
	update_entry_case(0x3, "198.18.0.17", 1);
}

static void test_update_entry_in_place_hash_table(void **state)
{
	(void)state;
	/* a mask of two bits apart is looked up by hash */
	update_entry_case(0x101, "198.18.1.1", 0x101);
}

static void test_update_entry_takes_a_place_of_the_queue(void **state)
{
	struct doca_flow_pipe *pipe = lb_pipe(0xff, DOCA_FLOW_RESOURCE_TYPE_SHARED);
	struct doca_flow_pipe_entry *e[4];
	struct doca_flow_actions a;
	struct doca_flow_monitor mon;
	(void)state;

	for (uint32_t c = 0; c < 4; c++)
		assert_int_equal(add_r(pipe, c, BMAC[c], c, &e[c]), DOCA_SUCCESS);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	memset(&a, 0, sizeof(a));
	memset(&mon, 0, sizeof(mon));
	memcpy(a.outer.eth.dst_mac, BMAC[0], 6);
	memcpy(a.outer.eth.src_mac, LB_OUT, 6);
	for (uint32_t c = 0; c < 3; c++)
		assert_int_equal(doca_flow_pipe_update_entry(0, pipe, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, e[c]),
				 DOCA_SUCCESS);
	assert_int_equal(add_r(pipe, 4, BMAC[0], 4, &e[0]), DOCA_SUCCESS); /* the 4th operation of depth 4 */
	assert_int_equal(doca_flow_pipe_update_entry(0, pipe, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, e[3]),
			 DOCA_ERROR_DRIVER);
	/* max_processed_entries counts updates as operations */
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 2), DOCA_SUCCESS);
	assert_int_equal(updated, 2);
	assert_int_equal(doca_flow_pipe_update_entry(0, pipe, &a, &mon, NULL, DOCA_FLOW_NO_WAIT, e[3]), DOCA_SUCCESS);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	assert_int_equal(updated, 4);
	assert_int_equal(processed, 5);
}

static void test_constant_fields_and_udp_port_match(void **state)
{
	uint8_t in[128], out[2048];
	struct doca_flow_match m, mm;
	struct doca_flow_actions a, *aa[1] = {&a};
	struct doca_flow_fwd fwd = {.type = DOCA_FLOW_FWD_PORT, .port_id = 1}, miss = {.type = DOCA_FLOW_FWD_DROP};
	struct doca_flow_pipe_cfg *pc;
	struct doca_flow_pipe *pipe;
	struct doca_flow_pipe_entry *e;
	(void)state;

	/* no match_mask: non-zero fields are matched exactly; dst_ip and UDP dst_port constant,
	 * src_ip changeable; dst_mac constant action (all entries), no counters */
	memset(&m, 0, sizeof(m));
	memset(&a, 0, sizeof(a));
	m.outer.l3_type = DOCA_FLOW_L3_TYPE_IP4;
	m.outer.ip4.dst_ip = htonl(0xc6120064); /* 198.18.0.100 */
	m.outer.ip4.src_ip = 0xffffffff;
	m.outer.l4_type_ext = DOCA_FLOW_L4_TYPE_EXT_UDP;
	m.outer.udp.l4_port.dst_port = htons(53);
	memcpy(a.outer.eth.dst_mac, BMAC[2], 6);
	assert_int_equal(doca_flow_pipe_cfg_create(&pc, ports[0]), DOCA_SUCCESS);
	doca_flow_pipe_cfg_set_is_root(pc, true);
	assert_int_equal(doca_flow_pipe_cfg_set_match(pc, &m, NULL), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_cfg_set_actions(pc, aa, NULL, NULL, 1), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_create(pc, &fwd, &miss, &pipe), DOCA_SUCCESS);
	doca_flow_pipe_cfg_destroy(pc);
	assert_false(doca_flow_emu_pipe_is_direct(pipe)); /* several fields masked: hash lookup */
	memset(&mm, 0, sizeof(mm));
	mm.outer.ip4.src_ip = htonl(0xc6120010); /* 198.18.0.16 exactly */
	assert_int_equal(doca_flow_pipe_add_entry(0, pipe, &mm, NULL, NULL, NULL, 0, NULL, &e), DOCA_SUCCESS);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	uint32_t len = build_udp(in, "198.18.0.16", "198.18.0.100", 1024, 53, 22);

	assert_int_equal(run(0, in, len, out), XDP_REDIRECT);
	uint8_t want[128];

	memcpy(want, in, len);
	memcpy(want, BMAC[2], 6); /* only dst_mac rewritten */
	assert_memory_equal(out, want, len);
	len = build_udp(in, "198.18.0.16", "198.18.0.100", 1024, 54, 22); /* other port */
	assert_int_equal(run(0, in, len, out), XDP_DROP);
	len = build_udp(in, "198.18.0.16", "198.18.0.101", 1024, 53, 22); /* other dst */
	assert_int_equal(run(0, in, len, out), XDP_DROP);
	len = build_udp(in, "198.18.0.17", "198.18.0.100", 1024, 53, 22); /* other src */
	assert_int_equal(run(0, in, len, out), XDP_DROP);
}

/* masks the direct table cannot index (non-contiguous bits) fall back to the hash lookup, and
 * shifted contiguous masks index by the shifted bits; the matching is the same either way */
static void test_direct_and_hash_compilation_match_alike(void **state)
{
	uint8_t in[128], out[2048];
	char src[32];
	const struct {
		uint32_t mask;
		int direct;
	} cases[] = {{0x5, 0}, {0xc, 1}, {0xff, 1}, {0xfff0, 1}, {0x1fff, 0}};
	(void)state;

	for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
		struct doca_flow_pipe *pipe = lb_pipe(cases[t].mask, DOCA_FLOW_RESOURCE_TYPE_NONE);
		uint32_t vals[2] = {0, cases[t].mask & 0x5}; /* two classes: masked value 0 and bits of 0b101 */

		if (!vals[1])
			vals[1] = cases[t].mask & (cases[t].mask << 1) ? cases[t].mask & ~(cases[t].mask << 1) : cases[t].mask;
		assert_int_equal(doca_flow_emu_pipe_is_direct(pipe), cases[t].direct);
		add(pipe, vals[0], BMAC[0], 0);
		add(pipe, vals[1], BMAC[1], 0);
		assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
		for (uint32_t x = 0; x < 64; x++) {
			uint32_t ip = 0xc6120000u | (x * 0x111u & 0xffffu), cls = ip & cases[t].mask;
			int want = cls == vals[0] ? 0 : cls == vals[1] ? 1 : -1;

			snprintf(src, sizeof(src), "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
			uint32_t len = build_udp(in, src, "198.18.0.100", 1024, 53, 22);
			int v = run(0, in, len, out);

			if (want < 0) {
				assert_int_equal(v, XDP_DROP);
			} else {
				assert_int_equal(v, XDP_REDIRECT);
				expect_rewritten(in, out, len, BMAC[want]);
			}
		}
		doca_flow_pipe_destroy(pipe);
	}
}

static void test_datapath_attached_on_process_detached_on_port_stop(void **state)
{
	uint32_t id = 0;
	int ifindex = (int)if_nametoindex(doca_flow_emu_port_ifname(0));
	struct doca_flow_pipe *pipe = lb_pipe(0x1, DOCA_FLOW_RESOURCE_TYPE_SHARED);
	(void)state;

	assert_int_equal(bpf_xdp_query_id(ifindex, 0, &id), 0);
	assert_int_equal(id, 0); /* created, not processed: nothing attached yet */
	add(pipe, 0, BMAC[0], 0);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	assert_int_equal(bpf_xdp_query_id(ifindex, XDP_FLAGS_DRV_MODE, &id), 0);
	assert_int_not_equal(id, 0);
	assert_int_equal(doca_flow_port_stop(ports[0]), DOCA_SUCCESS);
	assert_int_equal(bpf_xdp_query_id(ifindex, 0, &id), 0);
	assert_int_equal(id, 0);
	assert_int_equal(doca_flow_port_stop(ports[1]), DOCA_SUCCESS);
}

static void test_unsupported_features_return_not_supported(void **state)
{
	struct doca_flow_pipe_cfg *pc;
	struct doca_flow_match m;
	struct doca_flow_monitor mon;
	struct doca_flow_fwd rss = {.type = DOCA_FLOW_FWD_RSS};
	struct doca_flow_pipe *pipe = NULL;
	struct doca_flow_shared_resource_cfg sc = {0};
	struct doca_flow_actions a, *aa[1] = {&a};
	(void)state;

	assert_int_equal(doca_flow_pipe_cfg_create(&pc, ports[0]), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_cfg_set_type(pc, DOCA_FLOW_PIPE_CONTROL), DOCA_ERROR_NOT_SUPPORTED);
	assert_int_equal(doca_flow_pipe_cfg_set_type(pc, DOCA_FLOW_PIPE_LPM), DOCA_ERROR_NOT_SUPPORTED);
	memset(&m, 0, sizeof(m));
	m.outer.l3_type = DOCA_FLOW_L3_TYPE_IP6;
	assert_int_equal(doca_flow_pipe_cfg_set_match(pc, &m, NULL), DOCA_ERROR_NOT_SUPPORTED);
	memset(&m, 0, sizeof(m));
	m.outer.ip4.ttl = 64;
	assert_int_equal(doca_flow_pipe_cfg_set_match(pc, &m, NULL), DOCA_ERROR_NOT_SUPPORTED);
	memset(&m, 0, sizeof(m));
	m.tun.type = DOCA_FLOW_TUN_VXLAN;
	assert_int_equal(doca_flow_pipe_cfg_set_match(pc, &m, NULL), DOCA_ERROR_NOT_SUPPORTED);
	memset(&m, 0, sizeof(m));
	m.meta.pkt_meta = 1;
	assert_int_equal(doca_flow_pipe_cfg_set_match(pc, &m, NULL), DOCA_ERROR_NOT_SUPPORTED);
	memset(&a, 0, sizeof(a));
	a.outer.ip4.dst_ip = 1; /* NAT-style rewrite */
	assert_int_equal(doca_flow_pipe_cfg_set_actions(pc, aa, NULL, NULL, 1), DOCA_ERROR_NOT_SUPPORTED);
	memset(&mon, 0, sizeof(mon));
	mon.meter_type = DOCA_FLOW_RESOURCE_TYPE_SHARED;
	assert_int_equal(doca_flow_pipe_cfg_set_monitor(pc, &mon), DOCA_ERROR_NOT_SUPPORTED);
	doca_flow_pipe_cfg_destroy(pc);

	/* an unsupported fwd fails the create, and a non-root pipe is refused */
	assert_int_equal(doca_flow_pipe_cfg_create(&pc, ports[0]), DOCA_SUCCESS);
	doca_flow_pipe_cfg_set_is_root(pc, true);
	assert_int_equal(doca_flow_pipe_create(pc, &rss, NULL, &pipe), DOCA_ERROR_NOT_SUPPORTED);
	doca_flow_pipe_cfg_set_is_root(pc, false);
	struct doca_flow_fwd drop = {.type = DOCA_FLOW_FWD_DROP};

	assert_int_equal(doca_flow_pipe_create(pc, &drop, NULL, &pipe), DOCA_ERROR_NOT_SUPPORTED);
	doca_flow_pipe_cfg_destroy(pc);
	assert_null(pipe);

	assert_int_equal(doca_flow_shared_resource_set_cfg(DOCA_FLOW_SHARED_RESOURCE_METER, 0, &sc),
			 DOCA_ERROR_NOT_SUPPORTED);
	struct doca_flow_cfg *cfg;

	doca_flow_cfg_create(&cfg);
	assert_int_equal(doca_flow_cfg_set_mode_args(cfg, "switch,hws"), DOCA_ERROR_NOT_SUPPORTED);
	doca_flow_cfg_destroy(cfg);
}

/* ---------------------------------------------------------------- what the real stack refuses */

/* mlx5_rxq.c mlx5_rx_hairpin_queue_setup, mlx5_txq.c mlx5_tx_hairpin_queue_setup: a hairpin queue
 * whose peer is another port needs manual_bind and tx_explicit (lb/src/ports.c before the fix set
 * neither: -EINVAL, rte_errno EINVAL); one peer exactly; a same-port hairpin needs neither;
 * rte_ethdev.c: queue ids within what rte_eth_dev_configure asked, nothing set up on a started port */
static void test_hairpin_queue_setup_refused_as_mlx5_does(void **state)
{
	struct rte_eth_hairpin_conf zero, hc;
	(void)state;

	dpdk_down(); /* setup started them: start from unconfigured ports */
	pool = rte_pktmbuf_pool_create("t", 64, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
	assert_int_equal(rte_eth_dev_configure(0, 3, 3, &(struct rte_eth_conf){0}), 0);
	memset(&zero, 0, sizeof(zero));
	zero.peer_count = 1;
	zero.peers[0].port = 1; /* the old ports.c: peer port 1, attributes 0 0 */
	zero.peers[0].queue = 1;
	errno = 0;
	assert_int_equal(rte_eth_rx_hairpin_queue_setup(0, 1, 1024, &zero), -EINVAL);
	assert_int_equal(rte_errno, EINVAL);
	errno = 0;
	assert_int_equal(rte_eth_tx_hairpin_queue_setup(0, 1, 1024, &zero), -EINVAL);
	assert_int_equal(rte_errno, EINVAL);
	hc = zero;
	hc.manual_bind = 1; /* one of the two is not enough */
	assert_int_equal(rte_eth_rx_hairpin_queue_setup(0, 1, 1024, &hc), -EINVAL);
	hc.manual_bind = 0;
	hc.tx_explicit = 1;
	assert_int_equal(rte_eth_tx_hairpin_queue_setup(0, 1, 1024, &hc), -EINVAL);
	hc.manual_bind = 1;
	assert_int_equal(rte_eth_tx_hairpin_queue_setup(0, 1, 1024, &hc), 0);
	assert_int_equal(rte_eth_rx_hairpin_queue_setup(0, 1, 1024, &hc), 0);
	hc.peer_count = 2;
	assert_int_equal(rte_eth_rx_hairpin_queue_setup(0, 2, 1024, &hc), -EINVAL);
	hc.peer_count = 0;
	assert_int_equal(rte_eth_rx_hairpin_queue_setup(0, 2, 1024, &hc), -EINVAL);
	assert_int_equal(rte_eth_rx_hairpin_queue_setup(0, 2, 1024, NULL), -EINVAL);
	/* a hairpin to the same port: attributes 0 0 are fine (bound at start), the peer queue must exist */
	memset(&hc, 0, sizeof(hc));
	hc.peer_count = 1;
	hc.peers[0].port = 0;
	hc.peers[0].queue = 3;
	assert_int_equal(rte_eth_rx_hairpin_queue_setup(0, 2, 1024, &hc), -EINVAL);
	hc.peers[0].queue = 2;
	assert_int_equal(rte_eth_rx_hairpin_queue_setup(0, 2, 1024, &hc), 0);
	assert_int_equal(rte_eth_tx_hairpin_queue_setup(0, 2, 1024, &hc), 0);
	assert_int_equal(rte_eth_rx_hairpin_queue_setup(0, 3, 1024, &hc), -EINVAL); /* beyond configure */
	assert_int_equal(rte_eth_rx_queue_setup(0, 0, 64, 0, NULL, pool), 0);
	assert_int_equal(rte_eth_tx_queue_setup(0, 0, 64, 0, NULL), 0);
	assert_int_equal(rte_eth_dev_start(0), 0);
	assert_int_equal(rte_eth_rx_queue_setup(0, 0, 64, 0, NULL, pool), -EBUSY);
	assert_int_equal(rte_eth_dev_close(0), -EINVAL); /* "Cannot close started device" */
	assert_int_equal(rte_eth_dev_start(1), -EINVAL); /* not configured */
	/* rte_eth_hairpin_bind: Tx port started (-EBUSY), peer port started (rte_errno EBUSY) */
	assert_int_equal(rte_eth_hairpin_bind(1, 0), -EBUSY);
	errno = 0;
	assert_int_equal(rte_eth_hairpin_bind(0, 1), -EBUSY);
	assert_int_equal(rte_errno, EBUSY);
	assert_false(doca_flow_emu_hairpin_ready(1, 0));
}

/* DOCA 2.9's dpdk_utils.c binds the manual_bind queues after rte_eth_dev_start; mlx5 binds only
 * same-port queues at start (mlx5_hairpin_auto_bind), so without rte_eth_hairpin_bind nothing
 * crosses: the pipe is created and the entries processed, the frames forwarded to port 1 are not
 * transmitted */
static const struct opts NO_BIND = {.nr_counters = 8, .no_bind = true};

static void test_forward_over_an_unbound_hairpin_is_dropped(void **state)
{
	uint8_t in[128], out[2048];
	struct doca_flow_pipe *pipe = lb_pipe(0x1, DOCA_FLOW_RESOURCE_TYPE_SHARED);
	uint32_t len = build_udp(in, "198.18.0.16", "198.18.0.100", 1024, 53, 22);
	(void)state;

	assert_false(doca_flow_emu_hairpin_ready(0, 1));
	add(pipe, 0, BMAC[0], 0);
	add(pipe, 1, BMAC[1], 1);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	assert_int_equal(failed, 0);
	assert_int_equal(run(0, in, len, out), XDP_DROP);
	/* bound, a new entry's frames cross */
	assert_int_equal(rte_eth_hairpin_bind(1, 0), 0);
	assert_true(doca_flow_emu_hairpin_ready(0, 1));
	assert_false(doca_flow_emu_hairpin_ready(1, 0)); /* one direction per bind */
	doca_flow_pipe_destroy(pipe);
	pipe = lb_pipe(0x1, DOCA_FLOW_RESOURCE_TYPE_SHARED);
	add(pipe, 0, BMAC[0], 0);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	assert_int_equal(run(0, in, len, out), XDP_REDIRECT);
}

/* doca_flow.h (2.9) doca_flow_port_pair: in VNF mode the pair is how a port forwards to another
 * port; FWD_PORT (or a PORT miss) to another port without it is refused */
static const struct opts NO_PAIR = {.nr_counters = 8, .no_pair = true};

static void test_forward_to_another_port_needs_the_pair(void **state)
{
	struct doca_flow_pipe *pipe = NULL;
	struct doca_flow_pipe_cfg *pc;
	struct doca_flow_fwd drop = {.type = DOCA_FLOW_FWD_DROP}, to1 = {.type = DOCA_FLOW_FWD_PORT, .port_id = 1},
			     to0 = {.type = DOCA_FLOW_FWD_PORT, .port_id = 0};
	(void)state;

	assert_int_equal(lb_pipe_r(0x1, DOCA_FLOW_RESOURCE_TYPE_SHARED, &pipe), DOCA_ERROR_INVALID_VALUE);
	assert_null(pipe);
	assert_int_equal(doca_flow_pipe_cfg_create(&pc, ports[0]), DOCA_SUCCESS);
	doca_flow_pipe_cfg_set_is_root(pc, true);
	assert_int_equal(doca_flow_pipe_create(pc, &drop, &to1, &pipe), DOCA_ERROR_INVALID_VALUE); /* miss too */
	assert_int_equal(doca_flow_pipe_create(pc, &to0, &drop, &pipe), DOCA_SUCCESS); /* its own port: no pair */
	doca_flow_pipe_destroy(pipe);
	/* the pair: not with itself, not with NULL, no order */
	assert_int_equal(doca_flow_port_pair(ports[0], ports[0]), DOCA_ERROR_INVALID_VALUE);
	assert_int_equal(doca_flow_port_pair(ports[0], NULL), DOCA_ERROR_INVALID_VALUE);
	assert_int_equal(doca_flow_port_pair(ports[1], ports[0]), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_create(pc, &to1, &drop, &pipe), DOCA_SUCCESS);
	doca_flow_pipe_cfg_destroy(pc);
	doca_flow_pipe_destroy(pipe);
	pipe = lb_pipe(0x1, DOCA_FLOW_RESOURCE_TYPE_SHARED);
	assert_non_null(pipe);
}

/* pipe miss counters and per-entry counters come from the nr_counters pool (the 2.9 fwd_miss
 * sample sizes nr_counters to its miss counters): with 0 (lb/src/ports.c before the fix) the pipe
 * with a miss counter is refused; the pool is shared, released on removal and destroy */
static const struct opts NO_COUNTERS = {.nr_counters = 0};
static const struct opts TWO_COUNTERS = {.nr_counters = 2};

static void test_miss_counter_needs_a_counter_of_the_pool(void **state)
{
	struct doca_flow_pipe *pipe = NULL;
	(void)state;

	assert_int_equal(lb_pipe_r(0x1, DOCA_FLOW_RESOURCE_TYPE_SHARED, &pipe), DOCA_ERROR_DRIVER);
	assert_null(pipe);
}

static void test_per_entry_counters_beyond_nr_counters_are_refused(void **state)
{
	struct doca_flow_pipe *pipe = lb_pipe(0x3, DOCA_FLOW_RESOURCE_TYPE_NON_SHARED); /* miss: 1 of 2 */
	struct doca_flow_pipe_entry *e = add(pipe, 0, BMAC[0], 0), *e2 = NULL;                  /* 2 of 2 */
	struct doca_flow_match m = {0};
	struct doca_flow_actions a = {0};
	(void)state;

	m.outer.ip4.src_ip = htonl(1);
	memcpy(a.outer.eth.dst_mac, BMAC[1], 6);
	memcpy(a.outer.eth.src_mac, LB_OUT, 6);
	assert_int_equal(doca_flow_pipe_add_entry(0, pipe, &m, &a, NULL, NULL, 0, NULL, &e2), DOCA_ERROR_DRIVER);
	assert_int_equal(doca_flow_pipe_remove_entry(0, 0, e), DOCA_SUCCESS); /* back to the pool */
	assert_int_equal(doca_flow_pipe_add_entry(0, pipe, &m, &a, NULL, NULL, 0, NULL, &e2), DOCA_SUCCESS);
	doca_flow_pipe_destroy(pipe); /* all of them back */
	pipe = lb_pipe(0x3, DOCA_FLOW_RESOURCE_TYPE_NON_SHARED);
	add(pipe, 0, BMAC[0], 0);
}

/* A pipe queue holds at most queue_depth operations until doca_flow_entries_process pulls their
 * completions, DOCA_FLOW_NO_WAIT included (DPDK 22.11 mlx5_flow_hw.c flow_hw_async_flow_create:
 * no free job of the queue → ENOMEM; the 2.9 samples' flow_skeleton.c: default depth 128). The
 * one past the depth is refused (DOCA_ERROR_DRIVER, doca_flow.h's driver error) and nothing of
 * it reaches the datapath; processing makes room again. */
static void test_queue_depth_default_128_bounds_unprocessed_entries(void **state)
{
	struct doca_flow_pipe *pipe = lb_pipe(0xff, DOCA_FLOW_RESOURCE_TYPE_SHARED);
	struct doca_flow_pipe_entry *e = NULL;
	(void)state;

	for (uint32_t c = 0; c < 128; c++)
		assert_int_equal(add_r(pipe, c, BMAC[c % 4], c % 8, &e), DOCA_SUCCESS);
	assert_int_equal(add_r(pipe, 128, BMAC[0], 0, &e), DOCA_ERROR_DRIVER);
	assert_int_equal(processed, 0);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	assert_int_equal(processed, 128);
	assert_int_equal(failed, 0);
	for (uint32_t c = 128; c < 256; c++)
		assert_int_equal(add_r(pipe, c, BMAC[c % 4], c % 8, &e), DOCA_SUCCESS);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	assert_int_equal(processed, 256);
	assert_int_equal(failed, 0);
}

static const struct opts DEPTH_4 = {.nr_counters = 8, .queue_depth = 4};

static void test_queue_depth_set_explicitly_and_partial_processing(void **state)
{
	struct doca_flow_pipe *pipe = lb_pipe(0xff, DOCA_FLOW_RESOURCE_TYPE_SHARED);
	struct doca_flow_pipe_entry *e = NULL;
	uint8_t in[128], out[2048];
	(void)state;

	for (uint32_t c = 0; c < 4; c++)
		assert_int_equal(add_r(pipe, c, BMAC[c], c, &e), DOCA_SUCCESS);
	assert_int_equal(add_r(pipe, 4, BMAC[0], 0, &e), DOCA_ERROR_DRIVER);
	/* max_processed_entries 2: two completions pulled, room for two */
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 2), DOCA_SUCCESS);
	assert_int_equal(processed, 2);
	assert_int_equal(add_r(pipe, 4, BMAC[0], 4, &e), DOCA_SUCCESS);
	assert_int_equal(add_r(pipe, 5, BMAC[1], 5, &e), DOCA_SUCCESS);
	assert_int_equal(add_r(pipe, 6, BMAC[2], 6, &e), DOCA_ERROR_DRIVER);
	/* a removed, unprocessed entry gives its place back */
	assert_int_equal(doca_flow_pipe_remove_entry(0, 0, e), DOCA_SUCCESS);
	assert_int_equal(add_r(pipe, 6, BMAC[2], 6, &e), DOCA_SUCCESS);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 10000, 0), DOCA_SUCCESS);
	assert_int_equal(processed, 6);
	assert_int_equal(failed, 0);
	/* the refused entry never reached the datapath: class 7 misses */
	uint32_t len = build_udp(in, "198.18.0.7", "198.18.0.100", 1024, 53, 22);

	assert_int_equal(run(0, in, len, out), XDP_DROP);
	len = build_udp(in, "198.18.0.6", "198.18.0.100", 1024, 53, 22);
	assert_int_equal(run(0, in, len, out), XDP_REDIRECT);
	/* a queue that does not exist */
	assert_int_equal(doca_flow_entries_process(ports[0], 1, 10000, 0), DOCA_ERROR_INVALID_VALUE);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* doca_flow.h (2.x): doca_flow_entries_process's max_processed_entries is the "flow entries number
 * to process", and "if it is 0, it will proceed until timeout" (microseconds; "process once if
 * timeout is 0"). 0 completes what is queued and returns only once the timeout has passed; N
 * returns as soon as N operations completed; N above what is queued completes them and waits out
 * the timeout. The emulation ignored the timeout, so a caller passing 0 (XenoFlow's update
 * rounds did) looked as fast here as it is slow on the hardware. Coarse bounds (a 200 ms timeout,
 * a noisy machine): waiting >= 150 ms, not waiting < 100 ms. */
/* doca_flow_entries_process(port 0, queue 0, timeout_us, max) must succeed with `processed` then at
 * `want_processed`, and return after at least `min_s` (waiting) or before `max_s` (not waiting) */
static void timed_process(uint64_t timeout_us, uint32_t max, int want_processed, double min_s, double max_s,
			  const char *what)
{
	double t = mono_s();

	assert_int_equal(doca_flow_entries_process(ports[0], 0, timeout_us, max), DOCA_SUCCESS);
	t = mono_s() - t;
	assert_int_equal(processed, want_processed);
	if (t < min_s || t >= max_s)
		fail_msg("%s took %.1f ms (timeout %.0f ms)", what, t * 1e3, timeout_us / 1e3);
}

static void test_entries_process_honours_the_timeout(void **state)
{
	struct doca_flow_pipe *pipe = lb_pipe(0x7, DOCA_FLOW_RESOURCE_TYPE_SHARED);
	(void)state;

	add(pipe, 0, BMAC[0], 0);
	add(pipe, 1, BMAC[1], 1);
	timed_process(200000, 0, 2, 0.150, 1e9, "max_processed_entries 0 (before its timeout?)");
	/* N = what is queued: back as soon as they completed */
	add(pipe, 2, BMAC[2], 2);
	add(pipe, 3, BMAC[3], 3);
	timed_process(200000, 2, 4, 0, 0.100, "max_processed_entries 2 with 2 queued");
	/* N below what is queued: N completed, the rest stays queued, no wait */
	add(pipe, 4, BMAC[0], 4);
	add(pipe, 5, BMAC[1], 5);
	timed_process(200000, 1, 5, 0, 0.100, "max_processed_entries 1 with 2 queued");
	/* N above what is queued (1 left, 2 asked): it completes and the call waits out the timeout */
	timed_process(200000, 2, 6, 0.150, 1e9, "max_processed_entries 2 with 1 queued (before its timeout?)");
	/* timeout 0: one pass, whatever max_processed_entries says */
	add(pipe, 6, BMAC[2], 6);
	timed_process(0, 0, 7, 0, 0.100, "timeout 0");
	assert_int_equal(failed, 0);
}

/* DPDK 22.11 doc/guides/nics/mlx5.rst, Limitations: "Hairpin in switchdev SR-IOV mode is not
 * supported till now"; a BlueField in DPU mode has its Arm PFs in switchdev (DOCA Switching). The
 * emulated PFs are switchdev with DOCA_FLOW_EMU_ESWITCH_MODE=switchdev: the hairpin queue that
 * legacy mode accepts is refused (the emulation's choice of call and value: mlx5 has no check) */
static void test_hairpin_refused_with_pfs_in_switchdev(void **state)
{
	struct rte_eth_hairpin_conf hc = {.peer_count = 1, .manual_bind = 1, .tx_explicit = 1};
	(void)state;

	dpdk_down();
	assert_int_equal(rte_eth_dev_configure(0, 2, 2, &(struct rte_eth_conf){0}), 0);
	hc.peers[0].port = 1;
	hc.peers[0].queue = 1;
	setenv("DOCA_FLOW_EMU_ESWITCH_MODE", "switchdev", 1);
	errno = 0;
	assert_int_equal(rte_eth_tx_hairpin_queue_setup(0, 1, 1024, &hc), -ENOTSUP);
	assert_int_equal(rte_errno, ENOTSUP);
	assert_int_equal(rte_eth_rx_hairpin_queue_setup(0, 1, 1024, &hc), -ENOTSUP);
	setenv("DOCA_FLOW_EMU_ESWITCH_MODE", "legacy", 1);
	assert_int_equal(rte_eth_tx_hairpin_queue_setup(0, 1, 1024, &hc), 0);
	unsetenv("DOCA_FLOW_EMU_ESWITCH_MODE");
	assert_int_equal(rte_eth_rx_hairpin_queue_setup(0, 1, 1024, &hc), 0);
}

/* DOCA Flow ports after the DPDK ports are started (the 2.9 samples' order); the default RSS
 * queues must be regular Rx queues of the port (mlx5_flow.c: "queue index out of range",
 * "combining hairpin and regular RSS queues is not supported"); doca_flow.h contracts: default
 * RSS with queues, pipe actions with nr_actions > 0, the miss counter queried only if enabled */
static const struct opts DPDK_ONLY = {.no_flow = true};

static doca_error_t flow_init_rss(const uint16_t *queues, int n)
{
	struct doca_flow_cfg *cfg;
	struct doca_flow_resource_rss_cfg rss = {.queues_array = (uint16_t *)queues, .nr_queues = n};
	doca_error_t r;

	assert_int_equal(doca_flow_cfg_create(&cfg), DOCA_SUCCESS);
	doca_flow_cfg_set_pipe_queues(cfg, 1);
	doca_flow_cfg_set_mode_args(cfg, "vnf,hws");
	doca_flow_cfg_set_nr_counters(cfg, 1);
	r = doca_flow_cfg_set_default_rss(cfg, &rss);
	if (r == DOCA_SUCCESS)
		assert_int_equal(doca_flow_init(cfg), DOCA_SUCCESS);
	doca_flow_cfg_destroy(cfg);
	return r;
}

static doca_error_t start_port(uint16_t id, struct doca_flow_port **port)
{
	struct doca_flow_port_cfg *pc;
	doca_error_t r;

	assert_int_equal(doca_flow_port_cfg_create(&pc), DOCA_SUCCESS);
	assert_int_equal(doca_flow_port_cfg_set_port_id(pc, id), DOCA_SUCCESS);
	r = doca_flow_port_start(pc, port);
	doca_flow_port_cfg_destroy(pc);
	return r;
}

static void test_port_start_order_rss_queues_and_cfg_contracts(void **state)
{
	const uint16_t regular[1] = {0}, hairpin[2] = {0, 1}, beyond[1] = {2};
	struct doca_flow_port *p0 = NULL, *p1 = NULL;
	struct doca_flow_pipe_cfg *pc;
	struct doca_flow_pipe *pipe = NULL;
	struct doca_flow_fwd drop = {.type = DOCA_FLOW_FWD_DROP};
	struct doca_flow_resource_query q;
	struct doca_flow_actions a = {0}, *aa[1] = {&a};
	(void)state;

	assert_int_equal(flow_init_rss(regular, 0), DOCA_ERROR_INVALID_VALUE);
	assert_int_equal(flow_init_rss(NULL, 1), DOCA_ERROR_INVALID_VALUE);
	/* RSS on a hairpin queue, then beyond the configured queues */
	assert_int_equal(flow_init_rss(hairpin, 2), DOCA_SUCCESS);
	assert_int_equal(start_port(0, &p0), DOCA_ERROR_INVALID_VALUE);
	doca_flow_destroy();
	assert_int_equal(flow_init_rss(beyond, 1), DOCA_SUCCESS);
	assert_int_equal(start_port(0, &p0), DOCA_ERROR_INVALID_VALUE);
	doca_flow_destroy();
	/* the DPDK port stopped: no DOCA Flow port on it */
	assert_int_equal(flow_init_rss(regular, 1), DOCA_SUCCESS);
	assert_int_equal(rte_eth_dev_stop(1), 0);
	assert_int_equal(start_port(1, &p1), DOCA_ERROR_INVALID_VALUE);
	assert_int_equal(start_port(0, &p0), DOCA_SUCCESS);
	/* pipe cfg: no actions array or 0 of them */
	assert_int_equal(doca_flow_pipe_cfg_create(&pc, p0), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_cfg_set_actions(pc, aa, NULL, NULL, 0), DOCA_ERROR_INVALID_VALUE);
	assert_int_equal(doca_flow_pipe_cfg_set_actions(pc, NULL, NULL, NULL, 1), DOCA_ERROR_INVALID_VALUE);
	/* no miss counter: nothing to query */
	doca_flow_pipe_cfg_set_is_root(pc, true);
	assert_int_equal(doca_flow_pipe_create(pc, &drop, &drop, &pipe), DOCA_SUCCESS);
	assert_int_equal(doca_flow_resource_query_pipe_miss(pipe, &q), DOCA_ERROR_INVALID_VALUE);
	doca_flow_pipe_cfg_destroy(pc);
	doca_flow_destroy();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_entries_match_under_pipe_mask_and_rewrite_macs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_miss_drops_and_is_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shared_counter_shared_by_two_entries_and_per_entry_counters, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_entries_pending_until_process_and_removal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_constant_fields_and_udp_port_match, setup, teardown),
		cmocka_unit_test_setup_teardown(test_update_entry_in_place_direct_table, setup, teardown),
		cmocka_unit_test_setup_teardown(test_update_entry_in_place_hash_table, setup, teardown),
		cmocka_unit_test_prestate_setup_teardown(test_update_entry_takes_a_place_of_the_queue, setup, teardown,
							 (void *)&DEPTH_4),
		cmocka_unit_test_setup_teardown(test_direct_and_hash_compilation_match_alike, setup, teardown),
		cmocka_unit_test_setup_teardown(test_datapath_attached_on_process_detached_on_port_stop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsupported_features_return_not_supported, setup, teardown),
		cmocka_unit_test_prestate_setup_teardown(test_hairpin_queue_setup_refused_as_mlx5_does, setup, teardown,
							 (void *)&DPDK_ONLY),
		cmocka_unit_test_prestate_setup_teardown(test_forward_over_an_unbound_hairpin_is_dropped, setup, teardown,
							 (void *)&NO_BIND),
		cmocka_unit_test_prestate_setup_teardown(test_forward_to_another_port_needs_the_pair, setup, teardown,
							 (void *)&NO_PAIR),
		cmocka_unit_test_prestate_setup_teardown(test_miss_counter_needs_a_counter_of_the_pool, setup, teardown,
							 (void *)&NO_COUNTERS),
		cmocka_unit_test_prestate_setup_teardown(test_per_entry_counters_beyond_nr_counters_are_refused, setup,
							 teardown, (void *)&TWO_COUNTERS),
		cmocka_unit_test_prestate_setup_teardown(test_port_start_order_rss_queues_and_cfg_contracts, setup,
							 teardown, (void *)&DPDK_ONLY),
		cmocka_unit_test_setup_teardown(test_queue_depth_default_128_bounds_unprocessed_entries, setup, teardown),
		cmocka_unit_test_prestate_setup_teardown(test_queue_depth_set_explicitly_and_partial_processing, setup,
							 teardown, (void *)&DEPTH_4),
		cmocka_unit_test_setup_teardown(test_entries_process_honours_the_timeout, setup, teardown),
		cmocka_unit_test_prestate_setup_teardown(test_hairpin_refused_with_pfs_in_switchdev, setup, teardown,
							 (void *)&DPDK_ONLY),
	};

	int start = emu_test_start("test_emu");

	if (start)
		return start;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
