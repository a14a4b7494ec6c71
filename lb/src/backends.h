/* The backends file shared with the eBPF baseline (xenobench/backends.py is the reference; the
 * messages here are identical for tests/vectors/backends/cases.yaml):
 *   {"class_bits": k (optional), "backends": [{"name", "mac_address", "weight" (optional)}]}
 * JSON (the thesis's backends.json) or YAML (.yaml/.yml). Class c = ntohl(saddr) & (2^k - 1) goes
 * to backends[slots[c]]; slots repeat "backend i, weight_i times" until 2^k are filled. */
#ifndef XF_BACKENDS_H
#define XF_BACKENDS_H
#include <stddef.h>
#include <stdint.h>

#define XF_MAX_CLASS_BITS 8
#define XF_MAX_SLOTS (1 << XF_MAX_CLASS_BITS)
#define XF_MAX_BACKENDS XF_MAX_SLOTS

struct xf_backend {
	char *name;
	char mac_str[18]; /* lower-case colon form */
	uint8_t mac[6];
	int weight;
};

struct xf_backends {
	int n;
	struct xf_backend b[XF_MAX_BACKENDS];
	int class_bits;
	int nslots;
	int slots[XF_MAX_SLOTS]; /* class → backend index */
};

/* 0 on success; otherwise fills err with "Failed to load backends <path>: <key>: <reason>". */
int xf_backends_load(const char *path, struct xf_backends *out, char *err, size_t errlen);
void xf_backends_free(struct xf_backends *bs);

#endif
