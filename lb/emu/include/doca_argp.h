/* DOCA 2.9 argument parser (subset): program parameters with callbacks, a DPDK program that
 * receives the arguments before "--". Command line: PROG [EAL args] -- [program args]. */
#ifndef DOCA_ARGP_H_
#define DOCA_ARGP_H_
#include <stdbool.h>
#include <doca_error.h>

#ifdef __cplusplus
extern "C" {
#endif

enum doca_argp_type {
	DOCA_ARGP_TYPE_UNKNOWN = 0,
	DOCA_ARGP_TYPE_STRING,
	DOCA_ARGP_TYPE_INT,
	DOCA_ARGP_TYPE_BOOLEAN,
	DOCA_ARGP_TYPE_JSON_OBJ,
};

struct doca_argp_param;

typedef doca_error_t (*doca_argp_param_cb_t)(void *, void *);
typedef doca_error_t (*doca_argp_dpdk_cb_t)(int argc, char **argv);
typedef doca_error_t (*doca_argp_validation_cb_t)(void *);

doca_error_t doca_argp_init(const char *program_name, void *program_config);
doca_error_t doca_argp_param_create(struct doca_argp_param **param);
void doca_argp_param_set_short_name(struct doca_argp_param *param, const char *name);
void doca_argp_param_set_long_name(struct doca_argp_param *param, const char *name);
void doca_argp_param_set_arguments(struct doca_argp_param *param, const char *arguments);
void doca_argp_param_set_description(struct doca_argp_param *param, const char *description);
void doca_argp_param_set_callback(struct doca_argp_param *param, doca_argp_param_cb_t callback);
void doca_argp_param_set_type(struct doca_argp_param *param, enum doca_argp_type type);
void doca_argp_param_set_mandatory(struct doca_argp_param *param);
doca_error_t doca_argp_register_param(struct doca_argp_param *input_param);
void doca_argp_set_dpdk_program(doca_argp_dpdk_cb_t callback);
doca_error_t doca_argp_register_validation_callback(doca_argp_validation_cb_t callback);
doca_error_t doca_argp_start(int argc, char **argv);
doca_error_t doca_argp_destroy(void);
void doca_argp_usage(void);

#ifdef __cplusplus
}
#endif
#endif
