/* XenoFlow's backends parser against the shared vectors (tests/vectors/backends/cases.yaml, the
 * same cases xenobench/backends.py is tested with): every bad JSON case is rejected with exactly
 * "Failed to load backends <path>: <expect>" (or a message starting with <expect_prefix>), every
 * good JSON case gives the expected class_bits and slot table, and every YAML case is refused as
 * YAML (XenoFlow reads the JSON the harness writes). The vectors are read with libyaml (mappings
 * of scalars and one list of ints). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#define YAML_ONLY "(top level): XenoFlow reads JSON only (the thesis's backends.json); `xenobench lb start` writes it from YAML"

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

static void test_bad_cases_give_the_shared_messages(void **state)
{
	yaml_node_t *list = get(yaml_document_get_root_node(&doc), "bad");
	int n = 0;
	(void)state;

	for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++, n++) {
		yaml_node_t *c = yaml_document_get_node(&doc, *it);
		static struct xf_backends bs;
		const char *expect = is_yaml(c) ? YAML_ONLY : str(c, "expect");
		bool prefix = !is_yaml(c) && !expect;
		char err[1024], *want, *path = write_case(c);

		assert_true(asprintf(&want, "Failed to load backends %s: %s", path, prefix ? str(c, "expect_prefix") : expect) > 0);
		assert_int_equal(xf_backends_load(path, &bs, err, sizeof(err)), -1);
		if (prefix ? strncmp(err, want, strlen(want)) : strcmp(err, want))
			fail_msg("case %s:\n  want %s%s\n  got  %s", str(c, "id"), want, prefix ? "..." : "", err);
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

static void test_missing_file_names_path_and_reason(void **state)
{
	static struct xf_backends bs;
	char err[1024];
	(void)state;

	assert_int_equal(xf_backends_load("/nonexistent/b.json", &bs, err, sizeof(err)), -1);
	assert_string_equal(err, "Failed to load backends /nonexistent/b.json: No such file or directory");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_cases_give_the_shared_messages),
		cmocka_unit_test(test_good_cases_give_the_shared_slot_tables),
		cmocka_unit_test(test_missing_file_names_path_and_reason),
	};
	FILE *f = fopen(CASES_YAML, "r");
	yaml_parser_t p;

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
