/* The backends file (xenobench/backends.py is the reference; both readers give the same verdicts
 * on tests/vectors/backends/cases.yaml, each in its own words):
 *   {"class_bits": k (optional), "backends": [{"name", "mac_address", "weight" (optional)}]}
 * JSON only: the thesis's backends.json (thesis §6.1.3), extended. The harness reads
 * YAML too and hands XenoFlow the canonical JSON it writes (xenobench.backends.canonical_json).
 * Class c = ntohl(saddr) & (2^k - 1) goes to backends[slots[c]]; slots repeat "backend i,
 * weight_i times" until 2^k are filled. */
#ifndef XF_BACKENDS_H
#define XF_BACKENDS_H
#include <stddef.h>
#include <stdint.h>

#define XF_MAX_CLASS_BITS 8
#define XF_MAX_SLOTS (1 << XF_MAX_CLASS_BITS)
#define XF_MAX_BACKENDS XF_MAX_SLOTS
/* Equal to MAX_BYTES in xenobench/backends.py: 256 backends take ~20 KiB, so this only stops
 * hostile files before they cost memory. (Nesting needs no limit: the reader follows the schema,
 * three levels deep.) */
#define XF_BACKENDS_MAX_BYTES (1 << 20) /* bytes read at most */

struct xf_backend {
	char *name; /* UTF-8, no NUL inside */
	char *name_json; /* the name as a JSON string, quotes included, for the JSON lines XenoFlow prints */
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

/* 0 on success; otherwise fills err with "Failed to load backends <path>: <where>: <reason>"
 * (<where>: a key path, or "line L column C") or "Failed to load backends <path>: <reason>" for a
 * file it does not read: <strerror>, or a refused file (XenoFlow runs as root): "is a symbolic
 * link; ...", "is not a regular file (a FIFO)", "is writable by group or others (mode 0664); ...",
 * "is owned by uid U, neither root nor the invoking user (uid V)". The file is opened once
 * (O_NOFOLLOW, O_CLOEXEC), checked with fstat and read from that descriptor. */
int xf_backends_load(const char *path, struct xf_backends *out, char *err, size_t errlen);
void xf_backends_free(struct xf_backends *bs);

#endif
