#include <stdio.h>
#include <string.h>
#include <time.h>

#include <doca_log.h>

#include "update.h"

DOCA_LOG_REGISTER(XENOFLOW_UPDATE);

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

doca_error_t xf_update_classes(struct xf_running *rt, int nslots, const uint8_t (*cur)[6], const uint8_t (*next)[6],
			       int *changed)
{
	doca_error_t r;

	*changed = 0;
	rt->status.failure = false;
	for (int c0 = 0; c0 < nslots; c0 += XF_UPDATE_CLASSES_PER_ROUND) {
		int end = c0 + XF_UPDATE_CLASSES_PER_ROUND < nslots ? c0 + XF_UPDATE_CLASSES_PER_ROUND : nslots;
		int target = rt->status.nb_processed;

		for (int c = c0; c < end; c++) {
			if (!memcmp(cur[c], next[c], 6))
				continue;
			r = xf_update_class_entry(rt->pipe, rt->entries[c], (uint32_t)c, next[c], rt->src_mac, rt->ids[c]);
			if (r != DOCA_SUCCESS)
				return r;
			target++;
			(*changed)++;
		}
		/* exactly this round's updates (target: the completions counted so far plus them) */
		if ((r = xf_process_until(rt->ingress, &rt->status, target)) != DOCA_SUCCESS) {
			DOCA_LOG_ERR("Failed to process the changed entries: %s", doca_error_get_descr(r));
			return r;
		}
	}
	return DOCA_SUCCESS;
}

static bool has_name(const struct xf_backends *bs, const char *name_json)
{
	for (int i = 0; i < bs->n; i++)
		if (!strcmp(bs->b[i].name_json, name_json))
			return true;
	return false;
}

/* the names of `a` that `b` lacks, as JSON array items */
static void print_missing(const struct xf_backends *a, const struct xf_backends *b)
{
	int k = 0;

	for (int i = 0; i < a->n; i++)
		if (!has_name(b, a->b[i].name_json))
			printf("%s%s", k++ ? ", " : "", a->b[i].name_json);
}

void xf_reload(struct xf_running *rt, const char *path, struct xf_backends *bs)
{
	static struct xf_backends next;
	static uint8_t cur_macs[XF_MAX_SLOTS][6], next_macs[XF_MAX_SLOTS][6];
	char err[1024];
	double t0 = mono(), t1;
	unsigned long n = ++rt->updates;
	int changed = 0;
	doca_error_t r;

	memset(&next, 0, sizeof(next));
	if (xf_backends_load(path, &next, err, sizeof(err))) {
		goto refuse;
	}
	if (next.class_bits != bs->class_bits) {
		snprintf(err, sizeof(err),
			 "Failed to update XenoFlow from %s: class_bits %d -> %d changes the %s of the running "
			 "pipe; restart it with the new file",
			 path, bs->class_bits, next.class_bits, rt->hash ? "number of entries" : "class mask");
		xf_backends_free(&next);
		goto refuse;
	}
	for (int c = 0; c < bs->nslots; c++) {
		memcpy(cur_macs[c], bs->b[bs->slots[c]].mac, 6);
		memcpy(next_macs[c], next.b[next.slots[c]].mac, 6);
	}
	r = xf_update_classes(rt, bs->nslots, (const uint8_t(*)[6])cur_macs, (const uint8_t(*)[6])next_macs, &changed);
	if (r != DOCA_SUCCESS) {
		/* the file was good, the driver failed: classes changed before the failure forward to
		 * their new backend, the others (the failing one included) to their old one */
		snprintf(err, sizeof(err), "Failed to update XenoFlow from %s: %s after %d changed %s (see the log)",
			 path, doca_error_get_descr(r), changed, rt->hash ? "hash entries" : "classes");
		xf_backends_free(&next);
		goto refuse;
	}
	t1 = mono();
	printf("{\"event\": \"updated\", \"update\": %lu, \"t_received\": %.6f, \"t_done\": %.6f, \"apply_s\": %.6f, "
	       "\"changed\": %d, \"ops\": %d, \"entry_unit\": \"%s\", \"added\": [",
	       n, t0, t1, t1 - t0, changed, changed, rt->hash ? XF_HASH_ENTRY_UNIT : XF_ENTRY_UNIT);
	print_missing(&next, bs);
	printf("], \"removed\": [");
	print_missing(bs, &next);
	printf("], \"backends\": [");
	for (int i = 0; i < next.n; i++)
		printf("%s%s", i ? ", " : "", next.b[i].name_json);
	printf("], \"slots\": [");
	for (int c = 0; c < next.nslots; c++)
		printf("%s%d", c ? ", " : "", next.slots[c]);
	printf("]}\n");
	fflush(stdout);
	xf_backends_free(bs);
	*bs = next;
	return;
refuse:
	printf("{\"event\": \"update_refused\", \"update\": %lu, \"t_received\": %.6f, \"error\": \"", n, t0);
	for (const char *p = err; *p; p++) {
		if (*p == '"' || *p == '\\')
			putchar('\\');
		if ((unsigned char)*p < 0x20)
			printf("\\u%04x", (unsigned char)*p);
		else
			putchar(*p);
	}
	printf("\"}\n");
	fflush(stdout);
}
