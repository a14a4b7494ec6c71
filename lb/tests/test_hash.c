/* The hash pipe (lb/README.md, "Hash pipes"):
 *   - the emulation's hash (lb/emu/bpf/emu_hash.h) against the fixture table hash_vectors.txt
 *     (values from Python's zlib, lb/tests/hash_vectors.py), and the CRC-32 anchors every IEEE
 *     table has;
 *   - doca_flow_pipe_calc_hash and the XDP datapath (BPF_PROG_TEST_RUN) agree with the table: a
 *     frame of each row leaves with the MAC of the entry at the row's index, or misses where that
 *     index has no entry; the pipe built by XenoFlow's hash mode (lb/src/hash.c, xf_install_slots);
 *   - what the emulation refuses of a hash pipe, with the value it returns (the README's table);
 *   - XenoFlow's runtime change in hash mode: the changed entries updated in place (update.c).
 * Runs as root in a private network namespace with two veth pairs (xe0, xe1 for ports 0, 1).
 * HASH_VECTORS: the table's path (meson passes it). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/types.h>
#include <cmocka.h>

#include <doca_flow.h>
#include <doca_flow_emu.h>
#include <doca_log.h>

#include "emu_common.h"
#include "emu_hash.h"
#include "flow_lb.h"
#include "hash.h"
#include "ports.h"
#include "update.h"
#include "emu_ports.h"

#define XDP_DROP 1
#define XDP_REDIRECT 4
#define MAX_ROWS 64
#define MAX_N EMU_DIRECT_SLOTS

static const struct xf_dpdk_config DPDK = {.nb_ports = 2, .nb_queues = 2, .nb_hairpin_q = 2};
static const uint8_t LB_IN[6] = {0x02, 0, 0, 0, 0x05, 0x00}, LB_OUT[6] = {0x02, 0, 0, 0, 0x05, 0x01};

struct row {
	char fields[32], src[16], dst[16], desc[128];
	uint32_t n, crc, hash, index;
	unsigned sport, dport, proto;
};
static struct row rows[MAX_ROWS];
static int nrows;

static struct doca_flow_port *ports[2];
static struct xf_entries_status status; /* the entries' user context: outlives them */
static bool dpdk_up, flow_up;

/* the fixture table's rows; 0, or 1 after saying why on stderr */
static int load_rows(void)
{
	FILE *f = fopen(HASH_VECTORS, "r");
	char line[512];

	if (!f) {
		perror("Failed to open " HASH_VECTORS);
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		struct row *r = &rows[nrows];
		int used = 0;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (nrows == MAX_ROWS ||
		    sscanf(line, "%31s %u %15s %u %15s %u %u %x %x %u %n", r->fields, &r->n, r->src, &r->sport, r->dst,
			   &r->dport, &r->proto, &r->crc, &r->hash, &r->index, &used) != 10) {
			fprintf(stderr, "Failed to read %s: %s", HASH_VECTORS, nrows == MAX_ROWS ? "too many rows\n" : line);
			fclose(f);
			return 1;
		}
		snprintf(r->desc, sizeof(r->desc), "%.*s", (int)strcspn(line + used, "\n"), line + used);
		nrows++;
	}
	fclose(f);
	return 0;
}

/* the tag the datapath hashes for a row: emu_key with the hashed fields and the selectors */
static void row_tag(const struct row *r, struct emu_key *t)
{
	struct xf_hash h;
	char err[256];

	assert_int_equal(xf_hash_parse(r->fields, &h, err, sizeof(err)), 0);
	memset(t, 0, sizeof(*t));
	t->l3_type = EMU_L3_IP4;
	if (h.fields & (XF_HASH_SRC_PORT | XF_HASH_DST_PORT))
		t->l4_type = EMU_L4_UDP;
	if (h.fields & XF_HASH_SRC_IP)
		inet_pton(AF_INET, r->src, &t->src_ip);
	if (h.fields & XF_HASH_DST_IP)
		inet_pton(AF_INET, r->dst, &t->dst_ip);
	if (h.fields & XF_HASH_PROTO)
		t->next_proto = (uint8_t)r->proto;
	if (h.fields & XF_HASH_SRC_PORT)
		t->src_port = htons((uint16_t)r->sport);
	if (h.fields & XF_HASH_DST_PORT)
		t->dst_port = htons((uint16_t)r->dport);
}

/* the same row as DOCA Flow match values (what doca_flow_pipe_calc_hash reads) */
static void row_match(const struct row *r, struct doca_flow_match *m)
{
	memset(m, 0, sizeof(*m));
	m->outer.l3_type = DOCA_FLOW_L3_TYPE_IP4;
	m->outer.l4_type_ext = DOCA_FLOW_L4_TYPE_EXT_UDP;
	inet_pton(AF_INET, r->src, &m->outer.ip4.src_ip);
	inet_pton(AF_INET, r->dst, &m->outer.ip4.dst_ip);
	m->outer.ip4.next_proto = (uint8_t)r->proto;
	m->outer.udp.l4_port.src_port = htons((uint16_t)r->sport);
	m->outer.udp.l4_port.dst_port = htons((uint16_t)r->dport);
}

/* Ethernet (to the LB) / IPv4 / UDP / 8 bytes: 50 bytes */
static uint32_t row_frame(const struct row *r, uint8_t *f)
{
	memset(f, 0, 50);
	memcpy(f, LB_IN, 6);
	f[6] = 0x02, f[11] = 0x04;
	f[12] = 0x08, f[14] = 0x45, f[17] = 36, f[22] = 64, f[23] = (uint8_t)r->proto;
	inet_pton(AF_INET, r->src, f + 26);
	inet_pton(AF_INET, r->dst, f + 30);
	f[34] = (uint8_t)(r->sport >> 8), f[35] = (uint8_t)r->sport;
	f[36] = (uint8_t)(r->dport >> 8), f[37] = (uint8_t)r->dport;
	f[39] = 16;
	return 50;
}

/* entry i's backend MAC: 02:00:00:0a:<i high>:<i low> */
static void entry_mac(uint32_t i, uint8_t mac[6])
{
	const uint8_t m[6] = {0x02, 0, 0, 0x0a, (uint8_t)(i >> 8), (uint8_t)i};

	memcpy(mac, m, 6);
}

static void bring_up(uint32_t nr_shared)
{
	assert_int_equal(xf_dpdk_ports_init(&DPDK), DOCA_SUCCESS);
	dpdk_up = true;
	assert_int_equal(xf_init_doca_flow(DPDK.nb_queues, "vnf,hws", XF_NR_COUNTERS, nr_shared, xf_check_for_valid_entry),
			 DOCA_SUCCESS);
	flow_up = true;
	assert_int_equal(xf_init_doca_flow_ports(2, ports), DOCA_SUCCESS);
	memset(&status, 0, sizeof(status));
}

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

/* a row's frame through the datapath: the MAC of the entry it took, or a miss (XDP_DROP) */
static void expect_frame(const struct row *r)
{
	uint8_t in[64], out[128], mac[6];
	uint32_t len = row_frame(r, in), olen = sizeof(out);
	int verdict = -1;

	assert_int_equal(doca_flow_emu_test_run(0, in, len, &verdict, out, &olen), DOCA_SUCCESS);
	if (r->index >= r->n) {
		if (verdict != XDP_DROP)
			fail_msg("%s: index %u of %u entries should miss, verdict %d", r->desc, r->index, r->n, verdict);
		return;
	}
	entry_mac(r->index, mac);
	if (verdict != XDP_REDIRECT || memcmp(out, mac, 6) || memcmp(out + 6, LB_OUT, 6))
		fail_msg("%s: want entry %u (%02x:%02x), got verdict %d, dst %02x:%02x:%02x:%02x:%02x:%02x", r->desc,
			 r->index, mac[4], mac[5], verdict, out[0], out[1], out[2], out[3], out[4], out[5]);
}

static void test_crc_function_matches_the_vectors(void **state)
{
	const uint8_t check[] = "123456789";
	struct emu_key t;
	(void)state;

	/* the IEEE table's own entries, and the CRC-32 check string with initial value 0, no final
	 * XOR (zlib.crc32(b"123456789", 0xffffffff) ^ 0xffffffff) */
	assert_int_equal(emu_crc32_table[1], 0x77073096u);
	assert_int_equal(emu_crc32_table[128], 0xedb88320u);
	assert_int_equal(emu_crc32_table[255], 0x2d02ef8du);
	assert_int_equal(emu_crc32(check, 9), 0x2dfd2d88u);
	assert_int_equal(sizeof(struct emu_key), 32);
	assert_true(nrows >= 10);
	for (int i = 0; i < nrows; i++) {
		row_tag(&rows[i], &t);
		if (emu_crc32((const __u8 *)&t, 32) != rows[i].crc || emu_hash_tag(&t) != rows[i].hash)
			fail_msg("%s: crc 0x%08x hash 0x%08x, want 0x%08x 0x%08x", rows[i].desc,
				 emu_crc32((const __u8 *)&t, 32), emu_hash_tag(&t), rows[i].crc, rows[i].hash);
	}
}

/* every (fields, nr_entries) of the table: XenoFlow's hash pipe with entry i → entry_mac(i) */
static void test_calc_hash_and_datapath_follow_the_vectors(void **state)
{
	static uint8_t macs[MAX_N][6];
	static uint32_t ids[MAX_N];
	(void)state;

	for (uint32_t i = 0; i < MAX_N; i++) {
		entry_mac(i, macs[i]);
		ids[i] = i % 8; /* entries share the 8 shared counters: the emulation has 1024 */
	}
	for (int g = 0; g < nrows; g++) {
		struct doca_flow_pipe *pipe = NULL;
		struct xf_hash h;
		char err[256];
		bool first = true;

		for (int j = 0; j < g; j++)
			if (!strcmp(rows[j].fields, rows[g].fields) && rows[j].n == rows[g].n)
				first = false;
		if (!first)
			continue;
		assert_int_equal(xf_hash_parse(rows[g].fields, &h, err, sizeof(err)), 0);
		bring_up(8);
		assert_int_equal(xf_setup_class_counters(ports[0], 8, ids), DOCA_SUCCESS);
		for (uint32_t i = 0; i < MAX_N; i++)
			ids[i] = i % 8;
		assert_int_equal(xf_install_slots(ports[0], 1, (int)rows[g].n, &h, (const uint8_t(*)[6])macs, LB_OUT, ids,
						  &status, NULL, &pipe),
				 DOCA_SUCCESS);
		assert_int_equal(doca_flow_emu_pipe_is_direct(pipe), 1);
		for (int j = g; j < nrows; j++) {
			struct doca_flow_match m;
			uint32_t idx = ~0u;

			if (strcmp(rows[j].fields, rows[g].fields) || rows[j].n != rows[g].n)
				continue;
			row_match(&rows[j], &m);
			assert_int_equal(doca_flow_pipe_calc_hash(pipe, &m, &idx), DOCA_SUCCESS);
			if (idx != rows[j].index)
				fail_msg("%s: doca_flow_pipe_calc_hash %u, want %u", rows[j].desc, idx, rows[j].index);
			expect_frame(&rows[j]);
		}
		teardown(NULL);
	}
}

/* the bare pipe the refusals start from (named HASH or BASIC by its type): n entries (0: not set),
 * no counters; its refusals' log lines are tests/test_xenoflow_hash.py's table */
static doca_error_t bare_hash_pipe(uint32_t n, const struct doca_flow_match *match, const struct doca_flow_match *mm,
				   uint32_t algorithm, enum doca_flow_pipe_type type, struct doca_flow_pipe **pipe)
{
	struct doca_flow_pipe_cfg *pc;
	struct doca_flow_fwd to1 = {.type = DOCA_FLOW_FWD_PORT, .port_id = 1}, drop = {.type = DOCA_FLOW_FWD_DROP};
	doca_error_t r;

	assert_int_equal(doca_flow_pipe_cfg_create(&pc, ports[0]), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_cfg_set_name(pc, type == DOCA_FLOW_PIPE_HASH ? "HASH" : "BASIC"), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_cfg_set_type(pc, type), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_cfg_set_is_root(pc, true), DOCA_SUCCESS);
	if (n)
		assert_int_equal(doca_flow_pipe_cfg_set_nr_entries(pc, n), DOCA_SUCCESS);
	if ((r = doca_flow_pipe_cfg_set_match(pc, match, mm)) == DOCA_SUCCESS && algorithm)
		r = doca_flow_pipe_cfg_set_hash_map_algorithm(pc, algorithm);
	if (r == DOCA_SUCCESS || r == DOCA_ERROR_NOT_SUPPORTED) /* a deferred refusal comes back from create */
		r = doca_flow_pipe_create(pc, &to1, &drop, pipe);
	doca_flow_pipe_cfg_destroy(pc);
	return r;
}

static void test_hash_pipe_refusals(void **state)
{
	struct doca_flow_match mm, m;
	struct doca_flow_pipe *pipe = NULL, *basic = NULL;
	struct doca_flow_pipe_entry *e = NULL, *e2 = NULL;
	uint32_t idx;
	(void)state;

	bring_up(8);
	memset(&mm, 0, sizeof(mm));
	mm.outer.l3_type = DOCA_FLOW_L3_TYPE_IP4;
	mm.outer.ip4.src_ip = 0xffffffff;
	/* nr_entries not set: DOCA's default of 8k entries is more than the emulation's table */
	assert_int_equal(bare_hash_pipe(0, NULL, &mm, 0, DOCA_FLOW_PIPE_HASH, &pipe), DOCA_ERROR_NOT_SUPPORTED);
	/* match values on a hash pipe, a match_mask naming no field, ports without an L4 type */
	memset(&m, 0, sizeof(m));
	m.outer.ip4.src_ip = htonl(1);
	assert_int_equal(bare_hash_pipe(4, &m, &mm, 0, DOCA_FLOW_PIPE_HASH, &pipe), DOCA_ERROR_NOT_SUPPORTED);
	memset(&m, 0, sizeof(m));
	m.outer.l3_type = DOCA_FLOW_L3_TYPE_IP4;
	assert_int_equal(bare_hash_pipe(4, NULL, &m, 0, DOCA_FLOW_PIPE_HASH, &pipe), DOCA_ERROR_INVALID_VALUE);
	m.outer.udp.l4_port.src_port = 0xffff;
	assert_int_equal(bare_hash_pipe(4, NULL, &m, 0, DOCA_FLOW_PIPE_HASH, &pipe), DOCA_ERROR_INVALID_VALUE);
	/* map algorithms: only HASH; a hash map algorithm on a BASIC pipe */
	assert_int_equal(bare_hash_pipe(4, NULL, &mm, DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_RANDOM, DOCA_FLOW_PIPE_HASH, &pipe),
			 DOCA_ERROR_NOT_SUPPORTED);
	m = mm;
	m.outer.ip4.src_ip = 0xffffffff;
	assert_int_equal(bare_hash_pipe(4, &m, &mm, DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_HASH, DOCA_FLOW_PIPE_BASIC, &basic),
			 DOCA_ERROR_INVALID_VALUE);
	assert_null(pipe);
	assert_null(basic);

	/* a pipe of 3 entries (not a power of 2: accepted, a 4-index table) */
	assert_int_equal(bare_hash_pipe(3, NULL, &mm, DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_HASH, DOCA_FLOW_PIPE_HASH, &pipe),
			 DOCA_SUCCESS);
	/* by match: refused; by index: at most nr_entries - 1; per-entry fwd: not emulated */
	memset(&m, 0, sizeof(m));
	assert_int_equal(doca_flow_pipe_add_entry(0, pipe, &m, NULL, NULL, NULL, 0, &status, &e), DOCA_ERROR_INVALID_VALUE);
	assert_int_equal(doca_flow_pipe_hash_add_entry(0, pipe, 3, NULL, NULL, NULL, 0, &status, &e),
			 DOCA_ERROR_INVALID_VALUE);
	struct doca_flow_fwd to1 = {.type = DOCA_FLOW_FWD_PORT, .port_id = 1};

	assert_int_equal(doca_flow_pipe_hash_add_entry(0, pipe, 2, NULL, NULL, &to1, 0, &status, &e),
			 DOCA_ERROR_NOT_SUPPORTED);
	assert_null(e);
	/* a second entry at an index that has one fails at processing (status ERROR), as a second
	 * BASIC entry with the same match does */
	assert_int_equal(doca_flow_pipe_hash_add_entry(0, pipe, 2, NULL, NULL, NULL, 0, &status, &e), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_hash_add_entry(0, pipe, 2, NULL, NULL, NULL, 0, &status, &e2), DOCA_SUCCESS);
	assert_int_equal(doca_flow_entries_process(ports[0], 0, 0, 2), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_entry_get_status(e), DOCA_FLOW_ENTRY_STATUS_SUCCESS);
	assert_int_equal(doca_flow_pipe_entry_get_status(e2), DOCA_FLOW_ENTRY_STATUS_ERROR);
	/* calc_hash: a hash pipe and a match */
	assert_int_equal(doca_flow_pipe_calc_hash(pipe, NULL, &idx), DOCA_ERROR_INVALID_VALUE);
	doca_flow_pipe_destroy(pipe);
	m = mm;
	m.outer.ip4.src_ip = 0xffffffff;
	assert_int_equal(bare_hash_pipe(4, &m, &mm, 0, DOCA_FLOW_PIPE_BASIC, &basic), DOCA_SUCCESS);
	assert_int_equal(doca_flow_pipe_calc_hash(basic, &m, &idx), DOCA_ERROR_INVALID_VALUE);
	assert_int_equal(doca_flow_pipe_hash_add_entry(0, basic, 0, NULL, NULL, NULL, 0, &status, &e),
			 DOCA_ERROR_INVALID_VALUE);
}

/* XenoFlow's hash mode, 256 slots (XF_MAX_SLOTS) over two backends: a frame of each 256-entry
 * row leaves with its slot's backend; a change of backends updates exactly the slots whose
 * backend differs, in place, and the frames follow */
static void test_xenoflow_hash_mode_updates_changed_entries_in_place(void **state)
{
	static uint8_t cur[256][6], next[256][6];
	static struct xf_running rt;
	uint32_t ids[256];
	struct xf_hash h;
	char err[256];
	int changed = -1, want = 0;
	(void)state;

	for (uint32_t i = 0; i < 256; i++) {
		entry_mac(i, cur[i]);
		entry_mac(i, next[i]);
		if (i % 3 == 0) { /* every third slot to another backend */
			next[i][3] = 0x0b;
			want++;
		}
	}
	assert_int_equal(xf_hash_parse(XF_HASH_DEFAULT, &h, err, sizeof(err)), 0);
	bring_up(256);
	assert_int_equal(xf_setup_class_counters(ports[0], 256, ids), DOCA_SUCCESS);
	memset(&rt, 0, sizeof(rt));
	assert_int_equal(xf_install_slots(ports[0], 1, 256, &h, (const uint8_t(*)[6])cur, LB_OUT, ids, &rt.status,
					  rt.entries, &rt.pipe),
			 DOCA_SUCCESS);
	rt.ingress = ports[0];
	rt.ids = ids;
	rt.hash = true;
	memcpy(rt.src_mac, LB_OUT, 6);
	for (int i = 0; i < nrows; i++)
		if (rows[i].n == 256 && !strcmp(rows[i].fields, XF_HASH_DEFAULT))
			expect_frame(&rows[i]);
	assert_int_equal(xf_update_classes(&rt, 256, (const uint8_t(*)[6])cur, (const uint8_t(*)[6])next, &changed),
			 DOCA_SUCCESS);
	assert_int_equal(changed, want);
	for (int i = 0; i < nrows; i++) {
		uint8_t in[64], out[128];
		uint32_t olen = sizeof(out), len;
		int verdict;

		if (rows[i].n != 256 || strcmp(rows[i].fields, XF_HASH_DEFAULT))
			continue;
		len = row_frame(&rows[i], in);
		assert_int_equal(doca_flow_emu_test_run(0, in, len, &verdict, out, &olen), DOCA_SUCCESS);
		assert_int_equal(verdict, XDP_REDIRECT);
		assert_memory_equal(out, next[rows[i].index], 6);
	}
}

static void test_hash_field_names(void **state)
{
	struct xf_hash h;
	char err[512];
	(void)state;

	assert_int_equal(xf_hash_parse("5-tuple", &h, err, sizeof(err)), 0);
	assert_string_equal(h.names, "\"src_ip\", \"dst_ip\", \"proto\", \"src_port\", \"dst_port\"");
	assert_int_equal(xf_hash_parse("src_port,src_ip", &h, err, sizeof(err)), 0);
	assert_int_equal(h.fields, XF_HASH_SRC_IP | XF_HASH_SRC_PORT);
	assert_string_equal(h.names, "\"src_ip\", \"src_port\"");
	assert_int_equal(xf_hash_parse("src_ip,sport", &h, err, sizeof(err)), -1);
	assert_string_equal(err, "Failed to parse --hash: 'src_ip,sport' has 'sport', which is not a field; give a "
				 "comma-separated list of src_ip, dst_ip, proto, src_port, dst_port (each once) or "
				 "5-tuple (default src_ip,src_port)");
	assert_int_equal(xf_hash_parse("src_ip,src_ip", &h, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "'src_ip,src_ip' names 'src_ip' twice;"));
	assert_int_equal(xf_hash_parse("src_ip,", &h, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "'src_ip,' has an empty field name;"));
	assert_int_equal(xf_hash_parse("", &h, err, sizeof(err)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash_field_names),
		cmocka_unit_test(test_crc_function_matches_the_vectors),
		cmocka_unit_test_teardown(test_calc_hash_and_datapath_follow_the_vectors, teardown),
		cmocka_unit_test_teardown(test_hash_pipe_refusals, teardown),
		cmocka_unit_test_teardown(test_xenoflow_hash_mode_updates_changed_entries_in_place, teardown),
	};

	int start = emu_test_start("test_hash");

	if (start)
		return start;
	if (load_rows())
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
