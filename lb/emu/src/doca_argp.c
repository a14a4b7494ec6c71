/* DOCA argp for the emulation: PROG [EAL args] -- [-h] [-l LEVEL] [program params].
 * The EAL args (with argv[0]) go to the registered DPDK program; the rest are matched against
 * the registered params (long --name VALUE or --name=VALUE, short -n VALUE; booleans take none). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <doca_argp.h>
#include <doca_log.h>

#define MAX_PARAMS 32

struct doca_argp_param {
	char *short_name, *long_name, *arguments, *description;
	doca_argp_param_cb_t cb;
	enum doca_argp_type type;
	bool mandatory, seen;
};

static struct {
	const char *prog;
	void *config;
	struct doca_argp_param *params[MAX_PARAMS];
	int n;
	doca_argp_dpdk_cb_t dpdk;
	doca_argp_validation_cb_t validate;
} A;

doca_error_t doca_argp_init(const char *program_name, void *program_config)
{
	A.prog = program_name;
	A.config = program_config;
	return DOCA_SUCCESS;
}

doca_error_t doca_argp_param_create(struct doca_argp_param **param)
{
	*param = calloc(1, sizeof(**param));
	return *param ? DOCA_SUCCESS : DOCA_ERROR_NO_MEMORY;
}

void doca_argp_param_set_short_name(struct doca_argp_param *p, const char *name) { p->short_name = strdup(name); }
void doca_argp_param_set_long_name(struct doca_argp_param *p, const char *name) { p->long_name = strdup(name); }
void doca_argp_param_set_arguments(struct doca_argp_param *p, const char *a) { p->arguments = strdup(a); }
void doca_argp_param_set_description(struct doca_argp_param *p, const char *d) { p->description = strdup(d); }
void doca_argp_param_set_callback(struct doca_argp_param *p, doca_argp_param_cb_t cb) { p->cb = cb; }
void doca_argp_param_set_type(struct doca_argp_param *p, enum doca_argp_type t) { p->type = t; }
void doca_argp_param_set_mandatory(struct doca_argp_param *p) { p->mandatory = true; }

doca_error_t doca_argp_register_param(struct doca_argp_param *p)
{
	if (A.n >= MAX_PARAMS || !p->cb || p->type == DOCA_ARGP_TYPE_UNKNOWN)
		return DOCA_ERROR_INVALID_VALUE;
	A.params[A.n++] = p;
	return DOCA_SUCCESS;
}

void doca_argp_set_dpdk_program(doca_argp_dpdk_cb_t callback) { A.dpdk = callback; }

doca_error_t doca_argp_register_validation_callback(doca_argp_validation_cb_t callback)
{
	A.validate = callback;
	return DOCA_SUCCESS;
}

void doca_argp_usage(void)
{
	fprintf(stderr, "Usage: %s [DPDK EAL flags] -- [DOCA flags] [program flags]\n\nDOCA flags:\n"
			"  -h, --help                 print this help\n"
			"  -l, --log-level LEVEL      10 disable .. 70 trace (default 50 info)\n\nProgram flags:\n",
		A.prog ? A.prog : "prog");
	for (int i = 0; i < A.n; i++) {
		struct doca_argp_param *p = A.params[i];
		char names[96];

		snprintf(names, sizeof(names), "%s%s%s%s --%s %s", p->short_name ? "-" : "",
			 p->short_name ? p->short_name : "", p->short_name ? "," : "", "", p->long_name,
			 p->type == DOCA_ARGP_TYPE_BOOLEAN ? "" : (p->arguments ? p->arguments : "VALUE"));
		fprintf(stderr, "  %-32s %s%s\n", names, p->description ? p->description : "",
			p->mandatory ? " (mandatory)" : "");
	}
}

/* The value of a DOCA_ARGP_TYPE_INT flag. DOCA hands the callback an int: doca_argp.h (DOCA 2.9)
 * documents DOCA_ARGP_TYPE_INT as "Input type is an integer" and the callback as
 * doca_argp_param_cb_t(void *param, void *config), and the SDK's applications read it as
 * *(int *)param (applications/simple_fwd_vnf/simple_fwd_vnf_core.c, stats_callback). So a value an
 * int cannot hold is refused here, never truncated (strtol's long would wrap 4294967297 to 1). */
static doca_error_t parse_int(const char *flag, const char *val, int *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(val, &end, 0);
	if (end == val || *end) {
		fprintf(stderr, "Failed to parse arguments: %s: '%s' is not an integer\n", flag, val);
		return DOCA_ERROR_INVALID_VALUE;
	}
	if (errno == ERANGE || v < INT_MIN || v > INT_MAX) {
		fprintf(stderr, "Failed to parse arguments: %s: %s is out of range (an int: %d..%d)\n", flag, val,
			INT_MIN, INT_MAX);
		return DOCA_ERROR_INVALID_VALUE;
	}
	*out = (int)v;
	return DOCA_SUCCESS;
}

static struct doca_argp_param *find(const char *arg, const char **inline_val)
{
	*inline_val = NULL;
	for (int i = 0; i < A.n; i++) {
		struct doca_argp_param *p = A.params[i];

		if (arg[1] == '-' && p->long_name) {
			size_t l = strlen(p->long_name);

			if (!strncmp(arg + 2, p->long_name, l) && (arg[2 + l] == 0 || arg[2 + l] == '=')) {
				if (arg[2 + l] == '=')
					*inline_val = arg + 3 + l;
				return p;
			}
		} else if (arg[1] != '-' && p->short_name && !strcmp(arg + 1, p->short_name)) {
			return p;
		}
	}
	return NULL;
}

doca_error_t doca_argp_start(int argc, char **argv)
{
	int sep = argc, i;
	doca_error_t r;

	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			sep = i;
			break;
		}
	if (A.dpdk) {
		/* DPDK's view: argv[0] and everything before "--" */
		char **dargv = calloc((size_t)sep + 1, sizeof(char *));

		for (i = 0; i < sep; i++)
			dargv[i] = argv[i];
		r = A.dpdk(sep, dargv);
		free(dargv);
		if (r != DOCA_SUCCESS)
			return r;
	}
	for (i = sep + 1; i < argc; i++) {
		const char *a = argv[i], *val;
		struct doca_argp_param *p;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			doca_argp_usage();
			exit(0);
		}
		if (!strcmp(a, "-l") || !strcmp(a, "--log-level")) {
			int level;

			if (i + 1 >= argc) {
				fprintf(stderr, "Failed to parse arguments: %s needs a value\n", a);
				return DOCA_ERROR_INVALID_VALUE;
			}
			if (parse_int(a, argv[++i], &level) != DOCA_SUCCESS)
				return DOCA_ERROR_INVALID_VALUE;
			if (level < DOCA_LOG_LEVEL_DISABLE || level > DOCA_LOG_LEVEL_TRACE) {
				fprintf(stderr, "Failed to parse arguments: %s: %d is not a log level (%d..%d)\n", a, level,
					DOCA_LOG_LEVEL_DISABLE, DOCA_LOG_LEVEL_TRACE);
				return DOCA_ERROR_INVALID_VALUE;
			}
			doca_log_level_set_global_lower_limit((uint32_t)level);
			continue;
		}
		if (a[0] != '-' || !(p = find(a, &val))) {
			fprintf(stderr, "Failed to parse arguments: unknown argument '%s'\n", a);
			doca_argp_usage();
			return DOCA_ERROR_INVALID_VALUE;
		}
		if (p->type == DOCA_ARGP_TYPE_BOOLEAN) {
			bool t = true;

			r = p->cb(&t, A.config);
		} else {
			if (!val) {
				if (i + 1 >= argc) {
					fprintf(stderr, "Failed to parse arguments: %s needs a value\n", a);
					return DOCA_ERROR_INVALID_VALUE;
				}
				val = argv[++i];
			}
			if (p->type == DOCA_ARGP_TYPE_INT) {
				int iv;

				if (parse_int(a, val, &iv) != DOCA_SUCCESS)
					return DOCA_ERROR_INVALID_VALUE;
				r = p->cb(&iv, A.config);
			} else {
				r = p->cb((void *)val, A.config);
			}
		}
		if (r != DOCA_SUCCESS)
			return r;
		p->seen = true;
	}
	for (i = 0; i < A.n; i++)
		if (A.params[i]->mandatory && !A.params[i]->seen) {
			fprintf(stderr, "Failed to parse arguments: --%s is mandatory\n", A.params[i]->long_name);
			return DOCA_ERROR_INVALID_VALUE;
		}
	if (A.validate)
		return A.validate(A.config);
	return DOCA_SUCCESS;
}

doca_error_t doca_argp_destroy(void)
{
	for (int i = 0; i < A.n; i++) {
		free(A.params[i]->short_name);
		free(A.params[i]->long_name);
		free(A.params[i]->arguments);
		free(A.params[i]->description);
		free(A.params[i]);
	}
	A.n = 0;
	return DOCA_SUCCESS;
}
