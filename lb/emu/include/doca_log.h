/* DOCA 2.9 logging (the subset XenoFlow's main() uses): standard backend, an SDK backend on a
 * FILE*, levels, and the DOCA_LOG_* macros. Messages go to stderr as "[LEVEL][source] message". */
#ifndef DOCA_LOG_H_
#define DOCA_LOG_H_
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <doca_error.h>

#ifdef __cplusplus
extern "C" {
#endif

enum doca_log_level {
	DOCA_LOG_LEVEL_DISABLE = 10,
	DOCA_LOG_LEVEL_CRIT = 20,
	DOCA_LOG_LEVEL_ERROR = 30,
	DOCA_LOG_LEVEL_WARNING = 40,
	DOCA_LOG_LEVEL_INFO = 50,
	DOCA_LOG_LEVEL_DEBUG = 60,
	DOCA_LOG_LEVEL_TRACE = 70,
};

struct doca_log_backend;

doca_error_t doca_log_backend_create_standard(void);
doca_error_t doca_log_backend_create_with_file_sdk(FILE *fptr, struct doca_log_backend **backend);
doca_error_t doca_log_backend_set_sdk_level(struct doca_log_backend *backend, uint32_t level);
doca_error_t doca_log_level_set_global_lower_limit(uint32_t level);
uint32_t doca_log_level_get_global_lower_limit(void);
doca_error_t doca_log_register_source(const char *source_name, int *source);
void doca_log(uint32_t level, int source, int line, const char *func, const char *format, ...)
	__attribute__((format(printf, 5, 6)));

#define DOCA_LOG_REGISTER(SOURCE) \
	static int log_source; \
	static void __attribute__((constructor)) doca_log_register_##SOURCE(void) \
	{ \
		doca_log_register_source(#SOURCE, &log_source); \
	}

#define DOCA_LOG(level, format, ...) doca_log(DOCA_LOG_LEVEL_##level, log_source, __LINE__, __func__, format, ##__VA_ARGS__)
#define DOCA_LOG_CRIT(format, ...) DOCA_LOG(CRIT, format, ##__VA_ARGS__)
#define DOCA_LOG_ERR(format, ...) DOCA_LOG(ERROR, format, ##__VA_ARGS__)
#define DOCA_LOG_WARN(format, ...) DOCA_LOG(WARNING, format, ##__VA_ARGS__)
#define DOCA_LOG_INFO(format, ...) DOCA_LOG(INFO, format, ##__VA_ARGS__)
#define DOCA_LOG_DBG(format, ...) DOCA_LOG(DEBUG, format, ##__VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
