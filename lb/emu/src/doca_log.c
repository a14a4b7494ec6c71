/* DOCA logging for the emulation: "[time][LEVEL][source] message" on stderr (or the SDK
 * backend's FILE*), filtered by the global lower limit (default INFO). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <doca_log.h>

#define MAX_SOURCES 64

struct doca_log_backend {
	FILE *f;
	uint32_t level;
};

static const char *sources[MAX_SOURCES];
static int nsources;
static uint32_t global_level = DOCA_LOG_LEVEL_INFO;
static struct doca_log_backend sdk = {NULL, DOCA_LOG_LEVEL_WARNING};

doca_error_t doca_log_backend_create_standard(void)
{
	return DOCA_SUCCESS;
}

doca_error_t doca_log_backend_create_with_file_sdk(FILE *fptr, struct doca_log_backend **backend)
{
	if (!fptr || !backend)
		return DOCA_ERROR_INVALID_VALUE;
	sdk.f = fptr;
	*backend = &sdk;
	return DOCA_SUCCESS;
}

doca_error_t doca_log_backend_set_sdk_level(struct doca_log_backend *backend, uint32_t level)
{
	if (!backend)
		return DOCA_ERROR_INVALID_VALUE;
	backend->level = level;
	return DOCA_SUCCESS;
}

doca_error_t doca_log_level_set_global_lower_limit(uint32_t level)
{
	global_level = level;
	return DOCA_SUCCESS;
}

uint32_t doca_log_level_get_global_lower_limit(void)
{
	return global_level;
}

doca_error_t doca_log_register_source(const char *source_name, int *source)
{
	if (nsources >= MAX_SOURCES)
		return DOCA_ERROR_FULL;
	sources[nsources] = source_name;
	*source = nsources++;
	return DOCA_SUCCESS;
}

static const char *level_name(uint32_t l)
{
	switch (l) {
	case DOCA_LOG_LEVEL_CRIT: return "CRIT";
	case DOCA_LOG_LEVEL_ERROR: return "ERR";
	case DOCA_LOG_LEVEL_WARNING: return "WARN";
	case DOCA_LOG_LEVEL_INFO: return "INFO";
	case DOCA_LOG_LEVEL_DEBUG: return "DBG";
	default: return "TRACE";
	}
}

void doca_log(uint32_t level, int source, int line, const char *func, const char *format, ...)
{
	const char *src = source >= 0 && source < nsources ? sources[source] : "?";
	bool is_sdk = !strncmp(src, "DOCA_", 5);
	FILE *f = is_sdk && sdk.f ? sdk.f : stderr;
	va_list ap;
	struct timespec ts;
	struct tm tm;
	char tbuf[32];

	(void)line;
	(void)func;
	if (level > global_level || (is_sdk && level > sdk.level && level > DOCA_LOG_LEVEL_ERROR))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(tbuf, sizeof(tbuf), "%H:%M:%S", &tm);
	fprintf(f, "[%s:%03ld][%s][%s] ", tbuf, ts.tv_nsec / 1000000, level_name(level), src);
	va_start(ap, format);
	vfprintf(f, format, ap);
	va_end(ap);
	fputc('\n', f);
	fflush(f);
}
