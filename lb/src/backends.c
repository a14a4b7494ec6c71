/* Backends file reader. XenoFlow is handed the canonical JSON the harness writes
 * (xenobench.backends.write_canonical: json.dumps(indent=2, ensure_ascii=False) of a file it has
 * validated; xenobench/backends.py is the reference for the checks). This reader takes that form
 * and hand-written files of the same shape (the thesis's backends.json, §6.1.3), and refuses
 * anything else safely, in its own words:
 *   - a regular file that only root or the invoking user can have written (open_checked below);
 *   - at most XF_BACKENDS_MAX_BYTES (one byte of slack tells a growing file);
 *   - RFC 8259 syntax, read as the schema leads: nesting is at most 3 by construction, every key
 *     is one it knows, and a key given twice is refused (no "last one wins");
 *   - strings: valid UTF-8, no raw control characters, escapes decoded, U+0000 and unpaired
 *     surrogates refused (a C string cannot carry them); numbers: integers without leading zeros.
 * Messages: "Failed to load backends <path>: <where>: <reason>", <where> a key path such as
 * backends[1].mac_address, or "line L column C" for a syntax error. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends.h"

struct rd {
	const char *s;
	size_t n, pos;
	const char *path;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 3, 4))) static int fail(struct rd *r, const char *where, const char *fmt, ...)
{
	int k = snprintf(r->err, r->errlen, "Failed to load backends %s: %s: ", r->path, where);
	va_list ap;

	va_start(ap, fmt);
	if (k >= 0 && (size_t)k < r->errlen)
		vsnprintf(r->err + k, r->errlen - (size_t)k, fmt, ap);
	va_end(ap);
	return -1;
}

/* a refusal at the current position: a syntax error, or text a C string cannot carry */
static int at(struct rd *r, bool json, const char *what)
{
	size_t line = 1, col = 1;
	char where[64];

	for (size_t i = 0; i < r->pos && i < r->n; i++, col++)
		if (r->s[i] == '\n')
			line++, col = 0;
	snprintf(where, sizeof(where), "line %zu column %zu", line, col);
	return fail(r, where, "%s%s", json ? "not valid JSON: " : "", r->pos < r->n ? what : "unexpected end of file");
}

static int syntax(struct rd *r, const char *what)
{
	return at(r, true, what);
}

static void ws(struct rd *r)
{
	while (r->pos < r->n && strchr(" \t\r\n", r->s[r->pos]) && r->s[r->pos])
		r->pos++;
}

static bool eat(struct rd *r, char c)
{
	ws(r);
	if (r->pos < r->n && r->s[r->pos] == c) {
		r->pos++;
		return true;
	}
	return false;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int hex4(struct rd *r, unsigned *cp)
{
	*cp = 0;
	for (int i = 0; i < 4; i++, r->pos++) {
		int v = r->pos < r->n ? hexval(r->s[r->pos]) : -1;

		if (v < 0)
			return syntax(r, "bad \\u escape");
		*cp = *cp << 4 | (unsigned)v;
	}
	return 0;
}

/* one UTF-8 sequence at pos (strict: no overlongs, no surrogates, at most U+10FFFF) → its length */
static size_t utf8_len(const unsigned char *p, size_t left)
{
	size_t len = p[0] < 0x80 ? 1 : (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
	unsigned cp = len == 1 ? p[0] : len == 2 ? p[0] & 0x1fu : len == 3 ? p[0] & 0x0fu : p[0] & 0x07u;
	static const unsigned min[] = {0, 0, 0x80, 0x800, 0x10000};

	if (!len || len > left)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	return cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? 0 : len;
}

static void put_utf8(char *o, size_t *k, unsigned cp)
{
	if (cp < 0x80) {
		o[(*k)++] = (char)cp;
	} else if (cp < 0x800) {
		o[(*k)++] = (char)(0xc0 | cp >> 6);
		o[(*k)++] = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		o[(*k)++] = (char)(0xe0 | cp >> 12);
		o[(*k)++] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[(*k)++] = (char)(0x80 | (cp & 0x3f));
	} else {
		o[(*k)++] = (char)(0xf0 | cp >> 18);
		o[(*k)++] = (char)(0x80 | (cp >> 12 & 0x3f));
		o[(*k)++] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[(*k)++] = (char)(0x80 | (cp & 0x3f));
	}
}

/* a string at pos (after whitespace): *out its decoded UTF-8 (malloc'd; never holds U+0000),
 * raw and rawlen its JSON text, quotes included */
static int string(struct rd *r, char **out, const char **raw, size_t *rawlen)
{
	size_t start, k = 0, esc = 0; /* esc: where the last escape starts */
	char *o;

	if (!eat(r, '"'))
		return syntax(r, "expected a string");
	start = r->pos - 1;
	o = malloc(r->n - r->pos + 1); /* decoding never grows the text */
	if (!o)
		abort();
	while (r->pos < r->n && r->s[r->pos] != '"') {
		unsigned char c = (unsigned char)r->s[r->pos];
		unsigned cp, lo;
		size_t l;

		if (c < 0x20)
			goto bad;
		esc = r->pos;
		if (c != '\\') {
			if (!(l = utf8_len((const unsigned char *)r->s + r->pos, r->n - r->pos))) {
				free(o);
				return syntax(r, "not UTF-8");
			}
			memcpy(o + k, r->s + r->pos, l);
			k += l, r->pos += l;
			continue;
		}
		c = (unsigned char)(++r->pos < r->n ? r->s[r->pos++] : 0);
		if (c != 'u') {
			static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
			const char *e = c ? strchr(from, c) : NULL;

			if (!e)
				goto bad;
			o[k++] = to[e - from];
			continue;
		}
		if (hex4(r, &cp))
			goto free;
		if (cp >= 0xd800 && cp <= 0xdbff && r->pos + 1 < r->n && r->s[r->pos] == '\\' && r->s[r->pos + 1] == 'u') {
			r->pos += 2;
			if (hex4(r, &lo))
				goto free;
			if (lo < 0xdc00 || lo > 0xdfff)
				goto surrogate;
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		} else if (cp >= 0xd800 && cp <= 0xdfff) {
			goto surrogate;
		}
		if (!cp) {
			free(o);
			r->pos = esc;
			return at(r, false, "U+0000 in a string (a C string cannot carry it)");
		}
		put_utf8(o, &k, cp);
	}
	if (!eat(r, '"'))
		goto bad;
	o[k] = 0;
	*out = o;
	if (raw) {
		*raw = r->s + start;
		*rawlen = r->pos - start;
	}
	return 0;
surrogate:
	free(o);
	r->pos = esc;
	return at(r, false, "unpaired surrogate in a string (a C string cannot carry it)");
bad:
	free(o);
	return syntax(r, r->pos < r->n && (unsigned char)r->s[r->pos] < 0x20 ? "control character in a string"
									     : "bad escape in a string");
free:
	free(o);
	return -1;
}

/* an integer in lo..hi; anything else (a fraction, a string, a list...) is refused at `where` */
static int integer(struct rd *r, const char *where, int lo, int hi, int *out)
{
	size_t start, digits;
	long long v = 0;
	int shown;

	ws(r);
	start = r->pos;
	if (r->pos < r->n && r->s[r->pos] == '-')
		r->pos++;
	for (digits = 0; r->pos < r->n && r->s[r->pos] >= '0' && r->s[r->pos] <= '9'; digits++, r->pos++)
		if (digits < 12)
			v = v * 10 + (r->s[r->pos] - '0');
	if (!digits || (r->pos < r->n && strchr(".eE", r->s[r->pos]) && r->s[r->pos]))
		return fail(r, where, "expected an integer in %d..%d", lo, hi);
	if (digits > 1 && r->s[r->pos - digits] == '0')
		return r->pos = start, syntax(r, "number with a leading zero");
	if (r->s[start] == '-')
		v = -v;
	shown = (int)(r->pos - start) > 24 ? 24 : (int)(r->pos - start);
	if (digits > 11 || v < lo || v > hi)
		return fail(r, where, "%.*s%s is not an integer in %d..%d", shown, r->s + start,
			    shown < (int)(r->pos - start) ? "..." : "", lo, hi);
	*out = (int)v;
	return 0;
}

/* the known keys of one object, each at most once; returns the index of the next key or -1 at
 * '}' (*first: no ',' before it); -2 with err filled */
static int next_key(struct rd *r, const char *where, const char *const *known, bool *seen, bool *first)
{
	char *key;
	int i;

	if (eat(r, '}'))
		return -1;
	if (!*first && !eat(r, ','))
		return syntax(r, "expected ',' or '}'"), -2;
	*first = false;
	if (string(r, &key, NULL, NULL))
		return -2;
	for (i = 0; known[i] && strcmp(known[i], key); i++)
		;
	if (!known[i] || seen[i]) {
		fail(r, where, "%s key '%.40s' (known: %s, %s%s%s)", known[i] ? "repeated" : "unknown", key, known[0],
		     known[1], known[2] ? ", " : "", known[2] ? known[2] : "");
		free(key);
		return -2;
	}
	free(key);
	seen[i] = true;
	return eat(r, ':') ? i : (syntax(r, "expected ':'"), -2);
}

static int backend(struct rd *r, int i, struct xf_backend *be, struct xf_backends *out)
{
	static const char *const known[] = {"name", "mac_address", "weight", NULL};
	bool seen[3] = {0}, first = true;
	char where[64], *mac = NULL;
	const char *raw;
	size_t rawlen;
	int k;

	snprintf(where, sizeof(where), "backends[%d]", i);
	be->weight = 1;
	if (!eat(r, '{'))
		return fail(r, where, "expected an object with name and mac_address");
	while ((k = next_key(r, where, known, seen, &first)) >= 0) {
		snprintf(where, sizeof(where), "backends[%d].%s", i, known[k]);
		ws(r);
		if (k == 2 && integer(r, where, 1, XF_MAX_SLOTS, &be->weight))
			return -1;
		if (k < 2 && (r->pos >= r->n || r->s[r->pos] != '"'))
			return fail(r, where, "expected a string");
		if (k == 0 && string(r, &be->name, &raw, &rawlen))
			return -1;
		if (k == 0 && !(be->name_json = strndup(raw, rawlen)))
			abort();
		if (k == 1 && string(r, &mac, NULL, NULL))
			return -1;
		snprintf(where, sizeof(where), "backends[%d]", i);
	}
	if (k == -2)
		return -1;
	snprintf(where, sizeof(where), "backends[%d].%s", i, !seen[0] ? "name" : "mac_address");
	if (!seen[0] || !seen[1])
		return free(mac), fail(r, where, "missing");
	snprintf(where, sizeof(where), "backends[%d].%s", i, be->name[0] ? "mac_address" : "name");
	if (!be->name[0])
		return free(mac), fail(r, where, "empty");
	k = strlen(mac) == 17 ? 6 : 0;
	for (int j = 0; j < k; j++) {
		const char *p = mac + 3 * j;

		if (hexval(p[0]) < 0 || hexval(p[1]) < 0 || (j < 5 && p[2] != ':'))
			k = 0;
		else
			be->mac[j] = (uint8_t)(hexval(p[0]) << 4 | hexval(p[1]));
	}
	free(mac);
	if (!k)
		return fail(r, where, "not a MAC address (want six hex pairs like 02:00:00:00:02:00)");
	snprintf(be->mac_str, sizeof(be->mac_str), "%02x:%02x:%02x:%02x:%02x:%02x", be->mac[0], be->mac[1], be->mac[2],
		 be->mac[3], be->mac[4], be->mac[5]);
	for (int j = 0; j < i; j++) {
		snprintf(where, sizeof(where), "backends[%d].name", i);
		if (!strcmp(out->b[j].name, be->name))
			return fail(r, where, "the same as backends[%d]'s", j);
		snprintf(where, sizeof(where), "backends[%d].mac_address", i);
		if (!strcmp(out->b[j].mac_str, be->mac_str))
			return fail(r, where, "%s, the same as backends[%d]'s", be->mac_str, j);
	}
	return 0;
}

static int document(struct rd *r, struct xf_backends *out)
{
	static const char *const known[] = {"class_bits", "backends", NULL};
	bool seen[2] = {0}, first = true;
	int k, total = 0;

	out->class_bits = -1;
	if (!eat(r, '{'))
		return syntax(r, "expected an object with a 'backends' list");
	while ((k = next_key(r, "(top level)", known, seen, &first)) >= 0) {
		if (k == 0 && integer(r, "class_bits", 0, XF_MAX_CLASS_BITS, &out->class_bits))
			return -1;
		if (k == 1 && !eat(r, '['))
			return fail(r, "backends", "expected a list");
		for (int i = 0; k == 1 && !eat(r, ']'); i++) {
			if (i && !eat(r, ','))
				return syntax(r, "expected ',' or ']'");
			if (i == XF_MAX_BACKENDS)
				return fail(r, "backends", "more than %d backends do not fit in %d slots", XF_MAX_BACKENDS,
					    XF_MAX_SLOTS);
			out->n = i + 1; /* so xf_backends_free() frees what this one holds */
			if (backend(r, i, &out->b[i], out))
				return -1;
			total += out->b[i].weight;
		}
	}
	if (k == -2)
		return -1;
	if (!seen[1])
		return fail(r, "backends", "missing");
	if (!out->n)
		return fail(r, "backends", "no backends given");
	ws(r);
	if (r->pos < r->n)
		return syntax(r, "trailing data after the document");
	if (!seen[0]) /* the smallest table the weights divide */
		for (k = 0; k <= XF_MAX_CLASS_BITS && out->class_bits < 0; k++)
			if ((1 << k) >= total && (1 << k) % total == 0)
				out->class_bits = k;
	if (out->class_bits < 0)
		return fail(r, "backends", "total weight %d divides no table of up to %d slots; give weights summing to "
			    "a power of two", total, XF_MAX_SLOTS);
	if ((1 << out->class_bits) < total)
		return fail(r, "backends", "%d backends with total weight %d do not fit in the %d slots of class_bits %d",
			    out->n, total, 1 << out->class_bits, out->class_bits);
	if ((1 << out->class_bits) % total)
		return fail(r, "backends", "total weight %d does not divide the %d slots of class_bits %d (splits would "
			    "not be exact)", total, 1 << out->class_bits, out->class_bits);
	out->nslots = 1 << out->class_bits;
	for (int s = 0, i = 0, w = 0; s < out->nslots; s++) { /* backend i, weight_i times, repeated */
		out->slots[s] = i;
		if (++w == out->b[i].weight)
			w = 0, i = (i + 1) % out->n;
	}
	return 0;
}

static const char *file_kind(mode_t m)
{
	return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" :
	       S_ISSOCK(m) ? "a socket" : "of an unknown type";
}

/* The user XenoFlow acts for: its real uid, or, when that is root and sudo started it, the user
 * who ran sudo (SUDO_UID, which sudo sets itself; on the DPU the login that owns the file runs
 * XenoFlow through a sudo rule, so the real uid is root's). */
static uid_t invoking_uid(void)
{
	const char *s = getenv("SUDO_UID");
	char *end;
	unsigned long v;

	if (getuid() != 0 || !s || *s < '0' || *s > '9')
		return getuid();
	errno = 0;
	v = strtoul(s, &end, 10);
	return errno || *end || v != (unsigned long)(uid_t)v || (uid_t)v == (uid_t)-1 ? 0 : (uid_t)v;
}

__attribute__((format(printf, 5, 6))) static int refuse(int fd, char *err, size_t errlen, const char *path,
							  const char *fmt, ...)
{
	int k = snprintf(err, errlen, "Failed to load backends %s: ", path);
	va_list ap;

	va_start(ap, fmt);
	if (k >= 0 && (size_t)k < errlen)
		vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
	va_end(ap);
	if (fd >= 0)
		close(fd);
	return -1;
}

/* a file that is not a regular one: a directory in the words of open/read (xenobench/backends.py
 * says the same), anything else by its kind */
static int not_regular(int fd, char *err, size_t errlen, const char *path, mode_t m)
{
	if (S_ISDIR(m))
		return refuse(fd, err, errlen, path, "%s", strerror(EISDIR));
	return refuse(fd, err, errlen, path, "is not a regular file (%s)", file_kind(m));
}

/* Open the backends file for reading (the descriptor), or refuse it (err filled, -1). XenoFlow
 * runs as root (a sudo rule on the DPU) and reads the file at start and on every SIGHUP, so the
 * file must be one only root or the invoking user can have written: not a symbolic link
 * (O_NOFOLLOW: ELOOP), a regular file (a FIFO would block the reader, a device may act when
 * opened), not writable by group or others, owned by root or the invoking user. lstat first, so
 * that nothing but a regular file is opened; the verdict is fstat's, on the descriptor opened (the
 * name may have been replaced in between), and the file is read from that descriptor only. */
static int open_checked(const char *path, char *err, size_t errlen)
{
	struct stat st;
	uid_t me = invoking_uid();
	int fd, flags;

	if (lstat(path, &st))
		return refuse(-1, err, errlen, path, "%s", strerror(errno));
	if (S_ISLNK(st.st_mode))
		return refuse(-1, err, errlen, path, "is a symbolic link; give the file itself");
	if (!S_ISREG(st.st_mode))
		return not_regular(-1, err, errlen, path, st.st_mode);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ELOOP)
		return refuse(-1, err, errlen, path, "is a symbolic link; give the file itself");
	if (fd < 0 || fstat(fd, &st))
		return refuse(fd, err, errlen, path, "%s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return not_regular(fd, err, errlen, path, st.st_mode);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return refuse(fd, err, errlen, path, "is writable by group or others (mode %04o); chmod go-w it",
			      (unsigned)(st.st_mode & 07777));
	if (st.st_uid != 0 && st.st_uid != me) {
		if (me)
			return refuse(fd, err, errlen, path, "is owned by uid %u, neither root nor the invoking user (uid %u)",
				      (unsigned)st.st_uid, (unsigned)me);
		return refuse(fd, err, errlen, path, "is owned by uid %u, not by root (the invoking user)",
			      (unsigned)st.st_uid);
	}
	if ((flags = fcntl(fd, F_GETFL)) >= 0) /* O_NONBLOCK only kept a FIFO from blocking the open */
		fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
	return fd;
}

int xf_backends_load(const char *path, struct xf_backends *out, char *err, size_t errlen)
{
	struct rd r = {.path = path, .err = err, .errlen = errlen};
	size_t len = strlen(path);
	char *text;
	ssize_t got = 1;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	if ((len >= 5 && !strcmp(path + len - 5, ".yaml")) || (len >= 4 && !strcmp(path + len - 4, ".yml")))
		return fail(&r, "(top level)", "XenoFlow reads JSON only; `xenobench lb start` writes it from YAML");
	if ((fd = open_checked(path, err, errlen)) < 0)
		return -1;
	text = malloc(XF_BACKENDS_MAX_BYTES + 1);
	if (!text)
		abort();
	while (r.n <= XF_BACKENDS_MAX_BYTES && (got = read(fd, text + r.n, XF_BACKENDS_MAX_BYTES + 1 - r.n)) != 0) {
		if (got < 0 && errno != EINTR)
			break;
		r.n += got > 0 ? (size_t)got : 0;
	}
	if (got < 0)
		snprintf(err, errlen, "Failed to load backends %s: %s", path, strerror(errno));
	close(fd);
	r.s = text;
	if (got < 0)
		rc = -1;
	else if (r.n > XF_BACKENDS_MAX_BYTES)
		rc = fail(&r, "(top level)", "larger than %d bytes", XF_BACKENDS_MAX_BYTES);
	else
		rc = document(&r, out);
	free(text);
	if (rc)
		xf_backends_free(out);
	return rc;
}

void xf_backends_free(struct xf_backends *bs)
{
	for (int i = 0; i < XF_MAX_BACKENDS; i++) {
		free(bs->b[i].name);
		free(bs->b[i].name_json);
		bs->b[i].name = bs->b[i].name_json = NULL;
	}
	bs->n = 0;
}
