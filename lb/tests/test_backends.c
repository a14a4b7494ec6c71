/* XenoFlow's backends reader against the shared vectors (tests/vectors/backends/cases.yaml, the
 * cases xenobench/backends.py is tested with): the same verdicts - every bad JSON case refused
 * with a one-line "Failed to load backends <path>: ..." of its own, every good JSON case read to
 * the expected class_bits and slot table, every YAML case refused as YAML (XenoFlow reads the
 * canonical JSON the harness writes; tests/test_backends.py feeds it that for every good case).
 * Then the reader's own messages, on a table of its own. The vectors are read with libyaml
 * (mappings of scalars and one list of ints). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <yaml.h>

#include "backends.h"

static yaml_document_t doc;

static yaml_node_t *get(yaml_node_t *map, const char *key)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(&doc, p->key);

		if (k->type == YAML_SCALAR_NODE && !strcmp((char *)k->data.scalar.value, key))
			return yaml_document_get_node(&doc, p->value);
	}
	return NULL;
}

static const char *str(yaml_node_t *map, const char *key)
{
	yaml_node_t *n = get(map, key);

	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

#define YAML_ONLY "(top level): XenoFlow reads JSON only; `xenobench lb start` writes it from YAML"

static bool is_yaml(yaml_node_t *c)
{
	return !strcmp(str(c, "ext"), "yaml");
}

/* the case's file: `text` or the bytes `hex`, padded with spaces to `pad_to` bytes */
static char *write_case(yaml_node_t *c)
{
	const char *hex = str(c, "hex"), *pad = str(c, "pad_to");
	char *path;
	long n = 0;
	FILE *f;

	assert_true(asprintf(&path, "/tmp/xf-backends-%d-%s.%s", (int)getpid(), str(c, "id"), str(c, "ext")) > 0);
	f = fopen(path, "w");
	assert_non_null(f);
	if (hex) {
		for (const char *h = hex; h[0] && h[1]; h += 2, n++) {
			unsigned b;

			assert_int_equal(sscanf(h, "%2x", &b), 1);
			fputc((int)b, f);
		}
	} else {
		fputs(str(c, "text"), f);
		n = (long)strlen(str(c, "text"));
	}
	for (long want = pad ? atol(pad) : 0; n < want; n++)
		fputc(' ', f);
	fclose(f);
	return path;
}

static void test_bad_cases_are_refused(void **state)
{
	yaml_node_t *list = get(yaml_document_get_root_node(&doc), "bad");
	int n = 0;
	(void)state;

	for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++, n++) {
		yaml_node_t *c = yaml_document_get_node(&doc, *it);
		static struct xf_backends bs;
		char err[1024], *want, *path = write_case(c);

		/* YAML: the whole message; JSON: the verdict and the head naming the file */
		assert_true(asprintf(&want, "Failed to load backends %s: %s", path, is_yaml(c) ? YAML_ONLY : "") > 0);
		if (xf_backends_load(path, &bs, err, sizeof(err)) != -1)
			fail_msg("case %s: accepted", str(c, "id"));
		if (is_yaml(c) ? strcmp(err, want) : strncmp(err, want, strlen(want)) || strchr(err, '\n') ||
							 strlen(err) == strlen(want))
			fail_msg("case %s:\n  want %s%s\n  got  %s", str(c, "id"), want, is_yaml(c) ? "" : "...", err);
		unlink(path);
		free(path);
		free(want);
	}
	assert_true(n >= 61);
}

static void test_good_cases_give_the_shared_slot_tables(void **state)
{
	yaml_node_t *list = get(yaml_document_get_root_node(&doc), "good");
	int n = 0;
	(void)state;

	for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++, n++) {
		yaml_node_t *c = yaml_document_get_node(&doc, *it), *slots = get(c, "slots");
		static struct xf_backends bs;
		char err[1024] = "", *path = write_case(c);
		int i = 0;

		if (is_yaml(c)) {
			char *want;

			assert_true(asprintf(&want, "Failed to load backends %s: " YAML_ONLY, path) > 0);
			assert_int_equal(xf_backends_load(path, &bs, err, sizeof(err)), -1);
			assert_string_equal(err, want);
			free(want);
			unlink(path);
			free(path);
			continue;
		}
		if (xf_backends_load(path, &bs, err, sizeof(err)))
			fail_msg("case %s: %s", str(c, "id"), err);
		assert_int_equal(bs.class_bits, atoi(str(c, "class_bits")));
		for (yaml_node_item_t *s = slots->data.sequence.items.start; s < slots->data.sequence.items.top; s++, i++)
			assert_int_equal(bs.slots[i], atoi((char *)yaml_document_get_node(&doc, *s)->data.scalar.value));
		assert_int_equal(bs.nslots, i);
		xf_backends_free(&bs);
		unlink(path);
		free(path);
	}
	assert_true(n >= 9);
}

/* the reader's own words: where (key path or line and column) and why */
static const struct {
	const char *text, *expect;
} own[] = {
	{"{\"backends\":[{\"name\":\"a\",\"mac_address\":\"02:00:00:00:00:zz\"}]}",
	 "backends[0].mac_address: not a MAC address (want six hex pairs like 02:00:00:00:02:00)"},
	{"{\n  \"backends\": [\n    {\"name\": \"a\" \"mac_address\": \"02:00:00:00:00:01\"}\n  ]\n}\n",
	 "line 3 column 18: not valid JSON: expected ',' or '}'"},
	{"{\"backends\":[{\"name\":\"a\",\"mac_address\":\"02:00:00:00:00:01\",\"ip\":1}]}",
	 "backends[0]: unknown key 'ip' (known: name, mac_address, weight)"},
	{"{\"backends\":[{\"name\":\"a\",\"mac_address\":\"02:00:00:00:00:01\"}],\"backends\":[]}",
	 "(top level): repeated key 'backends' (known: class_bits, backends)"},
	{"{\"backends\":[{\"name\":\"a\",\"mac_address\":\"02:00:00:00:00:01\"},{\"name\":\"b\",\"mac_address\":\"02:00:00:00:00:01\"}]}",
	 "backends[1].mac_address: 02:00:00:00:00:01, the same as backends[0]'s"},
	{"{\"backends\":[{\"name\":\"a\",\"mac_address\":\"02:00:00:00:00:01\"},{\"name\":\"a\",\"mac_address\":\"02:00:00:00:00:02\"}]}",
	 "backends[1].name: the same as backends[0]'s"},
	{"{\"backends\":[{\"name\":\"a\",\"mac_address\":\"02:00:00:00:00:01\",\"weight\":2.0}]}",
	 "backends[0].weight: expected an integer in 1..256"},
	{"{\"class_bits\":123456789012345678901234567890,\"backends\":[]}",
	 "class_bits: 123456789012345678901234... is not an integer in 0..8"},
	{"{\"class_bits\":1,\"backends\":[{\"name\":\"a\",\"mac_address\":\"02:00:00:00:00:01\",\"weight\":3}]}",
	 "backends: 1 backends with total weight 3 do not fit in the 2 slots of class_bits 1"},
	{"{\"class_bits\":2,\"backends\":[{\"name\":\"a\",\"mac_address\":\"02:00:00:00:00:01\",\"weight\":3}]}",
	 "backends: total weight 3 does not divide the 4 slots of class_bits 2 (splits would not be exact)"},
	{"{\"backends\":[{\"name\":\"a\",\"mac_address\":\"02:00:00:00:00:01\",\"weight\":3}]}",
	 "backends: total weight 3 divides no table of up to 256 slots; give weights summing to a power of two"},
	{"{\"backends\":[{\"name\":\"a\\u0000\",\"mac_address\":\"02:00:00:00:00:01\"}]}",
	 "line 1 column 24: U+0000 in a string (a C string cannot carry it)"},
	{"{\"backends\":[{\"name\":\"\\udc00\",\"mac_address\":\"02:00:00:00:00:01\"}]}",
	 "line 1 column 23: unpaired surrogate in a string (a C string cannot carry it)"},
	{"{\"backends\":[{\"name\":\"\xc0\xaf\",\"mac_address\":\"02:00:00:00:00:01\"}]}",
	 "line 1 column 23: not valid JSON: not UTF-8"},
	{"{\"backends\":[]}", "backends: no backends given"},
	{"{\"backends\":[{\"name\":\"\",\"mac_address\":\"02:00:00:00:00:01\"}]}", "backends[0].name: empty"},
	{"{\"backends\":[{\"name\":\"a\",\"mac_address\":\"02:00:00:00:00:01\"}]} {}",
	 "line 1 column 63: not valid JSON: trailing data after the document"},
	{"{\"backends\":[{\"name\":\"a\",", "line 1 column 26: not valid JSON: unexpected end of file"},
};

static void test_refusals_say_where_and_why(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		static struct xf_backends bs;
		char path[64], err[1024], want[1024];
		FILE *f;

		snprintf(path, sizeof(path), "/tmp/xf-backends-%d-own.json", (int)getpid());
		f = fopen(path, "w");
		assert_non_null(f);
		fputs(own[i].text, f);
		fclose(f);
		snprintf(want, sizeof(want), "Failed to load backends %s: %s", path, own[i].expect);
		assert_int_equal(xf_backends_load(path, &bs, err, sizeof(err)), -1);
		if (strcmp(err, want))
			fail_msg("row %zu: %s\n  want %s\n  got  %s", i, own[i].text, want, err);
		unlink(path);
	}
}

/* names come back decoded, and as the JSON text of the file for the lines XenoFlow prints */
static void test_names_decoded_and_kept_as_json(void **state)
{
	static struct xf_backends bs;
	char path[64], err[1024] = "";
	FILE *f;
	(void)state;

	snprintf(path, sizeof(path), "/tmp/xf-backends-%d-names.json", (int)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"backends\":[{\"name\":\"\\u00e9t\\u00e9 \\ud83d\\ude00\\\"\",\"mac_address\":\"02:00:00:00:00:0A\"}]}", f);
	fclose(f);
	if (xf_backends_load(path, &bs, err, sizeof(err)))
		fail_msg("%s", err);
	assert_string_equal(bs.b[0].name, "\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80\"");
	assert_string_equal(bs.b[0].name_json, "\"\\u00e9t\\u00e9 \\ud83d\\ude00\\\"\"");
	assert_string_equal(bs.b[0].mac_str, "02:00:00:00:00:0a");
	assert_int_equal(bs.b[0].mac[5], 10);
	assert_int_equal(bs.class_bits, 0);
	xf_backends_free(&bs);
	unlink(path);
}

static void test_missing_file_names_path_and_reason(void **state)
{
	static struct xf_backends bs;
	char err[1024];
	(void)state;

	assert_int_equal(xf_backends_load("/nonexistent/b.json", &bs, err, sizeof(err)), -1);
	assert_string_equal(err, "Failed to load backends /nonexistent/b.json: No such file or directory");
}

/* The file itself (XenoFlow runs as root through a sudo rule and reads it at start and on every
 * SIGHUP): one a user other than root or the invoking one could have written, or one that is not a
 * plain file, is refused before a byte of it is read. A fixture table; each row is one file in a
 * fresh directory: `kind` what it is, `mode`, `owner` (-1: as created), SUDO_UID for the call
 * (NULL: unset), then the verdict (NULL: read). */
#define GOOD_JSON "{\"backends\":[{\"name\":\"a\",\"mac_address\":\"02:00:00:00:00:01\"}]}"

enum fixture { REGULAR, SYMLINK, FIFO, DIRECTORY, DEVICE };

static const struct {
	const char *name;
	enum fixture kind;
	mode_t mode;
	int owner;
	const char *sudo_uid;
	const char *expect;
} file_rows[] = {
	{"good", REGULAR, 0644, -1, NULL, NULL},
	{"good-0600", REGULAR, 0600, -1, NULL, NULL},
	{"symlink", SYMLINK, 0644, -1, NULL, "is a symbolic link; give the file itself"},
	{"fifo", FIFO, 0644, -1, NULL, "is not a regular file (a FIFO)"},
	{"directory", DIRECTORY, 0755, -1, NULL, "Is a directory"},
	{"device", DEVICE, 0, -1, NULL, "is not a regular file (a character device)"},
	{"group-writable", REGULAR, 0664, -1, NULL, "is writable by group or others (mode 0664); chmod go-w it"},
	{"others-writable", REGULAR, 0646, -1, NULL, "is writable by group or others (mode 0646); chmod go-w it"},
	/* the rows below chown: root only */
	{"owned-by-another", REGULAR, 0644, 12345, NULL,
	 "is owned by uid 12345, not by root (the invoking user)"},
	{"owned-by-the-sudo-user", REGULAR, 0644, 12345, "12345", NULL},
	{"owned-by-another-than-the-sudo-user", REGULAR, 0644, 12345, "12346",
	 "is owned by uid 12345, neither root nor the invoking user (uid 12346)"},
	{"bad-sudo-uid-is-root", REGULAR, 0644, 12345, "12345x",
	 "is owned by uid 12345, not by root (the invoking user)"},
};

static void test_file_not_plain_or_writable_by_others_is_refused(void **state)
{
	char dir[] = "/tmp/xf-backends-file-XXXXXX";
	bool root = getuid() == 0;
	(void)state;

	assert_non_null(mkdtemp(dir));
	alarm(10); /* a FIFO opened for reading without O_NONBLOCK would block here */
	for (size_t i = 0; i < sizeof(file_rows) / sizeof(file_rows[0]); i++) {
		static struct xf_backends bs;
		char path[256], target[256], err[1024] = "", want[1024];
		FILE *f;
		int rc;

		if (file_rows[i].owner >= 0 && !root)
			continue;
		snprintf(path, sizeof(path), "%s/%s.json", dir, file_rows[i].name);
		snprintf(target, sizeof(target), "%s/%s.target.json", dir, file_rows[i].name);
		switch (file_rows[i].kind) {
		case REGULAR:
		case SYMLINK:
			f = fopen(file_rows[i].kind == SYMLINK ? target : path, "w");
			assert_non_null(f);
			fputs(GOOD_JSON, f);
			fclose(f);
			assert_int_equal(chmod(file_rows[i].kind == SYMLINK ? target : path, file_rows[i].mode), 0);
			if (file_rows[i].kind == SYMLINK) /* to a good file */
				assert_int_equal(symlink(target, path), 0);
			break;
		case FIFO:
			assert_int_equal(mkfifo(path, file_rows[i].mode), 0);
			break;
		case DIRECTORY:
			assert_int_equal(mkdir(path, file_rows[i].mode), 0);
			break;
		case DEVICE:
			snprintf(path, sizeof(path), "/dev/null");
			break;
		}
		if (file_rows[i].owner >= 0)
			assert_int_equal(chown(path, (uid_t)file_rows[i].owner, (gid_t)-1), 0);
		if (file_rows[i].sudo_uid)
			setenv("SUDO_UID", file_rows[i].sudo_uid, 1);
		else
			unsetenv("SUDO_UID");
		rc = xf_backends_load(path, &bs, err, sizeof(err));
		unsetenv("SUDO_UID");
		if (!file_rows[i].expect) {
			if (rc)
				fail_msg("row %s: refused: %s", file_rows[i].name, err);
			assert_int_equal(bs.n, 1);
			assert_string_equal(bs.b[0].mac_str, "02:00:00:00:00:01");
			xf_backends_free(&bs);
		} else {
			snprintf(want, sizeof(want), "Failed to load backends %s: %s", path, file_rows[i].expect);
			assert_int_equal(rc, -1);
			if (strcmp(err, want))
				fail_msg("row %s:\n  want %s\n  got  %s", file_rows[i].name, want, err);
		}
		if (file_rows[i].kind == DIRECTORY)
			rmdir(path);
		else if (file_rows[i].kind != DEVICE)
			unlink(path);
		unlink(target);
	}
	alarm(0);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_cases_are_refused),
		cmocka_unit_test(test_good_cases_give_the_shared_slot_tables),
		cmocka_unit_test(test_refusals_say_where_and_why),
		cmocka_unit_test(test_names_decoded_and_kept_as_json),
		cmocka_unit_test(test_missing_file_names_path_and_reason),
		cmocka_unit_test(test_file_not_plain_or_writable_by_others_is_refused),
	};
	FILE *f = fopen(CASES_YAML, "r");
	yaml_parser_t p;

	umask(022); /* the files the tests write are refused if group- or others-writable */
	if (!f) {
		perror("Failed to open " CASES_YAML);
		return 1;
	}
	yaml_parser_initialize(&p);
	yaml_parser_set_input_file(&p, f);
	if (!yaml_parser_load(&p, &doc)) {
		fprintf(stderr, "Failed to parse %s\n", CASES_YAML);
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
