/* The emulated DOCA argp (lb/emu/src/doca_argp.c) on integer flags: DOCA hands a
 * DOCA_ARGP_TYPE_INT callback an int, so every value an int holds reaches it unchanged and every
 * other one is refused with a message naming the flag and the value - never truncated (the
 * parser once wrapped -q 4294967297 to 1 queue and read -i 4294967295 as -1). A table of
 * (argument, verdict, value or message); stderr is captured to check the message. */
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

#include <doca_argp.h>

static struct {
	int value, calls;
} got;

static doca_error_t int_cb(void *param, void *config)
{
	(void)config;
	got.value = *(int *)param;
	got.calls++;
	return DOCA_SUCCESS;
}

/* doca_argp_start(prog -- FLAG VALUE) with one INT flag -q/--queues; returns its result and
 * fills err with what it wrote to stderr */
static doca_error_t run(const char *flag, const char *value, char *err, size_t errlen)
{
	char *argv[] = {"xf", "--", (char *)flag, (char *)value, NULL};
	struct doca_argp_param *p;
	FILE *cap = tmpfile();
	int saved = dup(2);
	doca_error_t r;
	size_t n;

	assert_non_null(cap);
	memset(&got, 0, sizeof(got));
	assert_int_equal(doca_argp_init("xf", NULL), DOCA_SUCCESS);
	assert_int_equal(doca_argp_param_create(&p), DOCA_SUCCESS);
	doca_argp_param_set_short_name(p, "q");
	doca_argp_param_set_long_name(p, "queues");
	doca_argp_param_set_callback(p, int_cb);
	doca_argp_param_set_type(p, DOCA_ARGP_TYPE_INT);
	assert_int_equal(doca_argp_register_param(p), DOCA_SUCCESS);
	fflush(stderr);
	dup2(fileno(cap), 2);
	r = doca_argp_start(value ? 4 : 3, argv);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(cap);
	n = fread(err, 1, errlen - 1, cap);
	err[n] = 0;
	fclose(cap);
	doca_argp_destroy();
	return r;
}

static const struct {
	const char *flag, *value;
	int want;         /* accepted: the value the callback gets */
	const char *err;  /* refused: the message (no callback) */
} rows[] = {
	{"-q", "4", 4, NULL},
	{"--queues", "2147483647", 2147483647, NULL},
	{"--queues=-2147483648", NULL, -2147483647 - 1, NULL},
	{"-q", "-1", -1, NULL},
	{"-q", "0x10", 16, NULL},
	{"-q", "4294967297", 0, "Failed to parse arguments: -q: 4294967297 is out of range (an int: -2147483648..2147483647)\n"},
	{"-q", "4294967295", 0, "Failed to parse arguments: -q: 4294967295 is out of range (an int: -2147483648..2147483647)\n"},
	{"-q", "99999999999", 0, "Failed to parse arguments: -q: 99999999999 is out of range (an int: -2147483648..2147483647)\n"},
	{"-q", "2147483648", 0, "Failed to parse arguments: -q: 2147483648 is out of range (an int: -2147483648..2147483647)\n"},
	{"-q", "-2147483649", 0, "Failed to parse arguments: -q: -2147483649 is out of range (an int: -2147483648..2147483647)\n"},
	{"-q", "99999999999999999999999", 0,
	 "Failed to parse arguments: -q: 99999999999999999999999 is out of range (an int: -2147483648..2147483647)\n"},
	{"--queues=18446744073709551617", NULL, 0,
	 "Failed to parse arguments: --queues=18446744073709551617: 18446744073709551617 is out of range (an int: "
	 "-2147483648..2147483647)\n"},
	{"-q", "4x", 0, "Failed to parse arguments: -q: '4x' is not an integer\n"},
	{"-q", "", 0, "Failed to parse arguments: -q: '' is not an integer\n"},
	{"-q", NULL, 0, "Failed to parse arguments: -q needs a value\n"},
};

static void test_int_flags_keep_the_full_width_or_are_refused(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char err[512];
		doca_error_t r = run(rows[i].flag, rows[i].value, err, sizeof(err));

		if (!rows[i].err && (r != DOCA_SUCCESS || got.calls != 1 || got.value != rows[i].want))
			fail_msg("%s %s: want %d, got r=%d calls=%d value=%d (%s)", rows[i].flag, rows[i].value ? rows[i].value : "",
				 rows[i].want, r, got.calls, got.value, err);
		if (rows[i].err && (r != DOCA_ERROR_INVALID_VALUE || got.calls || strcmp(err, rows[i].err)))
			fail_msg("%s %s: want refused with\n  %s  got r=%d calls=%d\n  %s", rows[i].flag,
				 rows[i].value ? rows[i].value : "", rows[i].err, r, got.calls, err);
	}
}

/* DOCA's own -l/--log-level takes an int too, within the log levels */
static void test_log_level_is_checked(void **state)
{
	char err[512];
	(void)state;

	assert_int_equal(run("-l", "4294967346", err, sizeof(err)), DOCA_ERROR_INVALID_VALUE);
	assert_string_equal(err, "Failed to parse arguments: -l: 4294967346 is out of range (an int: -2147483648..2147483647)\n");
	assert_int_equal(run("-l", "80", err, sizeof(err)), DOCA_ERROR_INVALID_VALUE);
	assert_string_equal(err, "Failed to parse arguments: -l: 80 is not a log level (10..70)\n");
	assert_int_equal(run("--log-level", "40", err, sizeof(err)), DOCA_SUCCESS);
	assert_string_equal(err, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_int_flags_keep_the_full_width_or_are_refused),
		cmocka_unit_test(test_log_level_is_checked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
