/* Backends file parser. Every check, its order and its message equal xenobench/backends.py's, so
 * XenoFlow and the harness (which drives the eBPF baseline) never disagree on a file:
 *   1. size: at most XF_BACKENDS_MAX_BYTES, checked before and while reading;
 *   2. UTF-8 (as Python's strict decoder: no overlongs, no surrogates);
 *   3. nesting: at most XF_BACKENDS_MAX_DEPTH brackets open at once, counted outside strings
 *      before parsing (so the recursive parser below never goes deeper);
 *   4. JSON (RFC 8259) with Python's json module's reading of it: NaN/Infinity and numbers
 *      outside int64/double refused, nothing but whitespace after the document;
 *   5. a walk over the tree, children first (the order in which Python's json closes objects):
 *      strings holding U+0000 or an unpaired surrogate, then duplicate keys, are refused;
 *   6. the schema (validate()).
 * The parser is our own because json-c, which lb/ used before, silently keeps the last of
 * two equal keys, reads {'a':1} and raw tabs in strict mode, and turns lone surrogates into U+FFFD
 * (json-c 0.16) - each a file XenoFlow would read differently from the harness. Values in messages
 * are shown as Python's ascii() shows them. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends.h"

#define SHOW_MAX 80   /* characters of a value shown in a message (Python: SHOW_MAX) */
#define NUMBER_MAX 40 /* characters of an out-of-range number shown (Python: NUMBER_MAX) */

/* ---- growable string */
struct sb {
	char *p;
	size_t n, cap;
};

static void sb_putn(struct sb *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

static void sb_puts(struct sb *b, const char *s)
{
	sb_putn(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sb *b, const char *fmt, ...)
{
	char *tmp;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&tmp, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
	sb_putn(b, tmp, (size_t)n);
	free(tmp);
}

/* ---- value tree */
enum xv_type { XV_NULL, XV_BOOL, XV_INT, XV_FLOAT, XV_STR, XV_LIST, XV_MAP };

struct xv {
	enum xv_type t;
	long long i;
	double d;
	char *s; /* XV_STR: UTF-8; an unpaired surrogate is kept as its 3-byte form for messages */
	size_t slen;
	bool unsafe; /* XV_STR: holds U+0000 or an unpaired surrogate */
	int n;
	struct xv **items;
	struct xv **keys; /* XV_MAP: XV_STR keys, duplicates kept (refused by check_tree) */
};

static struct xv *xv_new(enum xv_type t)
{
	struct xv *v = calloc(1, sizeof(*v));

	if (!v)
		abort();
	v->t = t;
	return v;
}

static void xv_push(struct xv *v, struct xv *key, struct xv *item)
{
	if ((v->n & (v->n - 1)) == 0) { /* n a power of two (or 0): double the room */
		size_t room = v->n ? 2 * (size_t)v->n : 1;

		v->items = realloc(v->items, sizeof(*v->items) * room);
		if (!v->items)
			abort();
		if (v->t == XV_MAP) {
			v->keys = realloc(v->keys, sizeof(*v->keys) * room);
			if (!v->keys)
				abort();
		}
	}
	if (v->t == XV_MAP)
		v->keys[v->n] = key;
	v->items[v->n++] = item;
}

static void xv_free(struct xv *v)
{
	if (!v)
		return;
	for (int i = 0; i < v->n; i++) {
		xv_free(v->items[i]);
		if (v->keys)
			xv_free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->s);
	free(v);
}

static bool key_is(const struct xv *k, const char *s)
{
	return k->slen == strlen(s) && !memcmp(k->s, s, k->slen);
}

static struct xv *xv_get(const struct xv *m, const char *key)
{
	for (int i = 0; i < m->n; i++)
		if (key_is(m->keys[i], key))
			return m->items[i];
	return NULL;
}

/* ---- Python's ascii() of a value, for messages */
static bool reads_back(long long m, int scale, double want)
{
	char tmp[48];

	snprintf(tmp, sizeof(tmp), "%llde%d", m, scale);
	return strtod(tmp, NULL) == want;
}

static void ascii_float(double d, struct sb *b)
{
	char tmp[48], digits[24];
	double x = d < 0 ? -d : d; /* no libm needed */
	long long m = 0;
	int p, scale = 0, nd, decpt;

	if (d == 0) {
		sb_puts(b, signbit(d) ? "-0.0" : "0.0");
		return;
	}
	/* repr's digits: the fewest that read back as x, the closest to x among those. The correctly
	 * rounded p digits (printf) usually are; next to a power of two, where the doubles below are
	 * twice as dense, the neighbour on the far side can read back when they do not
	 * (2^-24: 5.960464477539063e-08, not ...062e-08) */
	for (p = 1; p <= 17; p++) {
		char *e;

		snprintf(tmp, sizeof(tmp), "%.*e", p - 1, x);
		e = strchr(tmp, 'e');
		m = 0;
		for (const char *c = tmp; c < e; c++)
			if (*c != '.')
				m = m * 10 + (*c - '0');
		scale = atoi(e + 1) - (p - 1);
		if (reads_back(m, scale, x))
			break;
		if (strtod(tmp, NULL) < x ? reads_back(m + 1, scale, x) : m > 1 && reads_back(m - 1, scale, x)) {
			m += strtod(tmp, NULL) < x ? 1 : -1;
			break;
		}
	}
	snprintf(digits, sizeof(digits), "%lld", m);
	nd = (int)strlen(digits);
	while (nd > 1 && digits[nd - 1] == '0') {
		digits[--nd] = 0;
		scale++;
	}
	decpt = nd + scale; /* digits × 10^(decpt - nd) */
	if (d < 0)
		sb_putn(b, "-", 1);
	/* repr's layout: exponent form when the point would sit more than 16 digits right or 4
	 * zeros left */
	if (decpt <= -4 || decpt > 16) {
		int exp = decpt - 1;

		sb_putn(b, digits, 1);
		if (nd > 1) {
			sb_putn(b, ".", 1);
			sb_putn(b, digits + 1, (size_t)nd - 1);
		}
		sb_printf(b, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
	} else if (decpt <= 0) {
		sb_puts(b, "0.");
		for (int z = 0; z < -decpt; z++)
			sb_putn(b, "0", 1);
		sb_puts(b, digits);
	} else if (decpt >= nd) {
		sb_puts(b, digits);
		for (int z = nd; z < decpt; z++)
			sb_putn(b, "0", 1);
		sb_puts(b, ".0");
	} else {
		sb_putn(b, digits, (size_t)decpt);
		sb_putn(b, ".", 1);
		sb_puts(b, digits + decpt);
	}
}

/* next code point of (already validated) UTF-8; 3-byte surrogate forms decode as themselves */
static unsigned utf8_next(const unsigned char **p)
{
	const unsigned char *c = *p;
	unsigned cp;

	if (c[0] < 0x80) {
		cp = c[0];
		*p += 1;
	} else if (c[0] < 0xe0) {
		cp = (c[0] & 0x1fu) << 6 | (c[1] & 0x3fu);
		*p += 2;
	} else if (c[0] < 0xf0) {
		cp = (c[0] & 0x0fu) << 12 | (c[1] & 0x3fu) << 6 | (c[2] & 0x3fu);
		*p += 3;
	} else {
		cp = (c[0] & 0x07u) << 18 | (c[1] & 0x3fu) << 12 | (c[2] & 0x3fu) << 6 | (c[3] & 0x3fu);
		*p += 4;
	}
	return cp;
}

static void ascii_str(const struct xv *v, struct sb *b)
{
	const unsigned char *c = (const unsigned char *)v->s, *end = c + v->slen;
	bool sq = memchr(v->s, '\'', v->slen) != NULL, dq = memchr(v->s, '"', v->slen) != NULL;
	char q = sq && !dq ? '"' : '\'';

	sb_putn(b, &q, 1);
	while (c < end) {
		unsigned cp = utf8_next(&c);

		if (cp == (unsigned)q || cp == '\\')
			sb_printf(b, "\\%c", (char)cp);
		else if (cp == '\t')
			sb_puts(b, "\\t");
		else if (cp == '\n')
			sb_puts(b, "\\n");
		else if (cp == '\r')
			sb_puts(b, "\\r");
		else if (cp < 0x20 || (cp >= 0x7f && cp < 0x100))
			sb_printf(b, "\\x%02x", cp);
		else if (cp >= 0x100 && cp < 0x10000)
			sb_printf(b, "\\u%04x", cp);
		else if (cp >= 0x10000)
			sb_printf(b, "\\U%08x", cp);
		else {
			char ch = (char)cp;

			sb_putn(b, &ch, 1);
		}
	}
	sb_putn(b, &q, 1);
}

static void ascii_value(const struct xv *v, struct sb *b)
{
	switch (v->t) {
	case XV_NULL:
		sb_puts(b, "None");
		return;
	case XV_BOOL:
		sb_puts(b, v->i ? "True" : "False");
		return;
	case XV_INT:
		sb_printf(b, "%lld", v->i);
		return;
	case XV_FLOAT:
		ascii_float(v->d, b);
		return;
	case XV_STR:
		ascii_str(v, b);
		return;
	case XV_LIST:
		sb_putn(b, "[", 1);
		for (int i = 0; i < v->n; i++) {
			if (i)
				sb_puts(b, ", ");
			ascii_value(v->items[i], b);
		}
		sb_putn(b, "]", 1);
		return;
	case XV_MAP:
		sb_putn(b, "{", 1);
		for (int i = 0; i < v->n; i++) {
			if (i)
				sb_puts(b, ", ");
			ascii_str(v->keys[i], b);
			sb_puts(b, ": ");
			ascii_value(v->items[i], b);
		}
		sb_putn(b, "}", 1);
		return;
	}
}

/* ascii(v), cut to SHOW_MAX characters (ascii() output is ASCII: bytes are characters) */
static void show(const struct xv *v, char *out, size_t len)
{
	struct sb b = {0};

	ascii_value(v, &b);
	if (b.n > SHOW_MAX)
		snprintf(out, len, "%.*s...", SHOW_MAX - 3, b.p);
	else
		snprintf(out, len, "%s", b.p);
	free(b.p);
}

/* ---- reading: size, UTF-8, nesting */
/* offset of the first byte that starts no valid UTF-8 sequence, or -1 (Python's utf-8 codec) */
static long utf8_invalid_at(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t k;
		unsigned char lo = 0x80, hi = 0xbf;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			k = 1;
		else if (c >= 0xe0 && c <= 0xef) {
			k = 2;
			if (c == 0xe0)
				lo = 0xa0; /* overlong */
			if (c == 0xed)
				hi = 0x9f; /* surrogates */
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3;
			if (c == 0xf0)
				lo = 0x90; /* overlong */
			if (c == 0xf4)
				hi = 0x8f; /* above U+10FFFF */
		} else {
			return (long)i;
		}
		if (i + 1 >= n || s[i + 1] < lo || s[i + 1] > hi)
			return (long)i;
		for (size_t j = 2; j <= k; j++)
			if (i + j >= n || (s[i + j] & 0xc0) != 0x80)
				return (long)i;
		i += k + 1;
	}
	return -1;
}

/* most '[' and '{' open at once outside strings; stops counting past the limit */
static int nesting(const char *s, size_t n)
{
	int depth = 0, max = 0;
	bool in_str = false, esc = false;

	for (size_t i = 0; i < n && max <= XF_BACKENDS_MAX_DEPTH; i++) {
		char c = s[i];

		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == '[' || c == '{') {
			if (++depth > max)
				max = depth;
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		}
	}
	return max;
}

/* ---- JSON, read as Python's json.loads reads it (Lib/json/scanner.py, Modules/_json.c) */
struct jp {
	const char *s;
	size_t len, pos;
	char *msg; /* the reason, after "(top level): " */
	size_t msglen;
};

static void jp_where(const struct jp *p, size_t pos, char *out, size_t len)
{
	size_t line = 1, col = 1;

	for (size_t i = 0; i < pos && i < p->len; i++) {
		if (p->s[i] == '\n') {
			line++;
			col = 1;
		} else if (((unsigned char)p->s[i] & 0xc0) != 0x80) {
			col++;
		}
	}
	snprintf(out, len, "line %zu column %zu", line, col);
}

__attribute__((format(printf, 3, 4))) static struct xv *jp_fail(struct jp *p, size_t pos, const char *fmt, ...)
{
	char what[128], where[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	jp_where(p, pos, where, sizeof(where));
	snprintf(p->msg, p->msglen, "not valid JSON: %s at %s", what, where);
	return NULL;
}

static void jp_ws(struct jp *p)
{
	while (p->pos < p->len && strchr(" \t\n\r", p->s[p->pos]) && p->s[p->pos])
		p->pos++;
}

static bool jp_at(const struct jp *p, const char *lit)
{
	size_t n = strlen(lit);

	return p->pos + n <= p->len && !memcmp(p->s + p->pos, lit, n);
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool hex4(const struct jp *p, size_t at, unsigned *out)
{
	*out = 0;
	if (at + 4 > p->len)
		return false;
	for (size_t i = at; i < at + 4; i++) {
		int h = hexval(p->s[i]);

		if (h < 0)
			return false;
		*out = *out << 4 | (unsigned)h;
	}
	return true;
}

static void put_utf8(struct sb *b, unsigned cp)
{
	char u[4];

	if (cp < 0x80) {
		u[0] = (char)cp;
		sb_putn(b, u, 1);
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3f));
		sb_putn(b, u, 2);
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | cp >> 12);
		u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		sb_putn(b, u, 3);
	} else {
		u[0] = (char)(0xf0 | cp >> 18);
		u[1] = (char)(0x80 | (cp >> 12 & 0x3f));
		u[2] = (char)(0x80 | (cp >> 6 & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		sb_putn(b, u, 4);
	}
}

static struct xv *jp_string(struct jp *p)
{
	size_t start = p->pos++;
	struct sb b = {0};
	struct xv *v;
	bool unsafe = false;

	sb_putn(&b, "", 0);
	for (;;) {
		unsigned char c;

		if (p->pos >= p->len) {
			free(b.p);
			return jp_fail(p, start, "unterminated string");
		}
		c = (unsigned char)p->s[p->pos];
		if (c == '"') {
			p->pos++;
			break;
		}
		if (c < 0x20) {
			free(b.p);
			return jp_fail(p, p->pos, "control character 0x%02x in a string", c);
		}
		if (c != '\\') {
			sb_putn(&b, p->s + p->pos++, 1);
			continue;
		}
		if (p->pos + 1 >= p->len) {
			free(b.p);
			return jp_fail(p, start, "unterminated string");
		}
		c = (unsigned char)p->s[p->pos + 1];
		p->pos += 2;
		switch (c) {
		case '"':
		case '\\':
		case '/':
			sb_putn(&b, (char *)&c, 1);
			break;
		case 'b':
			sb_putn(&b, "\b", 1);
			break;
		case 'f':
			sb_putn(&b, "\f", 1);
			break;
		case 'n':
			sb_putn(&b, "\n", 1);
			break;
		case 'r':
			sb_putn(&b, "\r", 1);
			break;
		case 't':
			sb_putn(&b, "\t", 1);
			break;
		case 'u': {
			unsigned cp, lo;

			if (!hex4(p, p->pos, &cp)) {
				free(b.p);
				return jp_fail(p, p->pos - 2, "invalid \\uXXXX escape");
			}
			p->pos += 4;
			/* a high surrogate pairs with an immediately following \u low surrogate; anything
			 * else leaves it unpaired (and the next escape is read on its own) */
			if (cp >= 0xd800 && cp <= 0xdbff && jp_at(p, "\\u")) {
				if (!hex4(p, p->pos + 2, &lo)) {
					free(b.p);
					return jp_fail(p, p->pos, "invalid \\uXXXX escape");
				}
				if (lo >= 0xdc00 && lo <= 0xdfff) {
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					p->pos += 6;
				}
			}
			if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff))
				unsafe = true;
			put_utf8(&b, cp);
			break;
		}
		default:
			free(b.p);
			return jp_fail(p, p->pos - 2, "invalid escape");
		}
	}
	v = xv_new(XV_STR);
	v->s = b.p;
	v->slen = b.n;
	v->unsafe = unsafe;
	return v;
}

static struct xv *jp_number(struct jp *p)
{
	size_t start = p->pos, i = p->pos;
	const char *s = p->s;
	bool is_float = false;
	char *text, *end;
	struct xv *v;

	if (i < p->len && s[i] == '-')
		i++;
	if (i < p->len && s[i] >= '1' && s[i] <= '9') {
		while (i < p->len && is_digit(s[i]))
			i++;
	} else if (i < p->len && s[i] == '0') {
		i++;
	} else {
		return jp_fail(p, start, "expecting a value");
	}
	if (i + 1 < p->len && s[i] == '.' && is_digit(s[i + 1])) {
		is_float = true;
		i += 2;
		while (i < p->len && is_digit(s[i]))
			i++;
	}
	if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
		size_t e = i++, d;

		if (i < p->len && (s[i] == '+' || s[i] == '-'))
			i++;
		d = i;
		while (i < p->len && is_digit(s[i]))
			i++;
		if (i > d)
			is_float = true;
		else
			i = e; /* "1e" is the number 1 followed by "e" */
	}
	text = strndup(s + start, i - start);
	if (!text)
		abort();
	p->pos = i;
	errno = 0;
	if (is_float) {
		v = xv_new(XV_FLOAT);
		v->d = strtod(text, &end);
		if (!isfinite(v->d)) {
			xv_free(v);
			v = NULL;
		}
	} else {
		v = xv_new(XV_INT);
		v->i = strtoll(text, &end, 10);
		if (errno == ERANGE) {
			xv_free(v);
			v = NULL;
		}
	}
	if (!v) {
		if (strlen(text) > NUMBER_MAX)
			snprintf(p->msg, p->msglen, "number %.*s... is out of range", NUMBER_MAX - 3, text);
		else
			snprintf(p->msg, p->msglen, "number %s is out of range", text);
	}
	free(text);
	return v;
}

static struct xv *jp_value(struct jp *p);

static struct xv *jp_container(struct jp *p, bool map)
{
	struct xv *v = xv_new(map ? XV_MAP : XV_LIST), *key = NULL, *item;
	char close = map ? '}' : ']';

	p->pos++;
	jp_ws(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		return v;
	}
	for (;;) {
		if (map) {
			if (p->pos >= p->len || p->s[p->pos] != '"') {
				xv_free(v);
				return jp_fail(p, p->pos, "expecting a property name in double quotes");
			}
			key = jp_string(p);
			if (!key) {
				xv_free(v);
				return NULL;
			}
			jp_ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':') {
				xv_free(key);
				xv_free(v);
				return jp_fail(p, p->pos, "expecting ':'");
			}
			p->pos++;
			jp_ws(p);
		}
		item = jp_value(p);
		if (!item) {
			xv_free(key);
			xv_free(v);
			return NULL;
		}
		xv_push(v, key, item);
		key = NULL;
		jp_ws(p);
		if (p->pos < p->len && p->s[p->pos] == close) {
			p->pos++;
			return v;
		}
		if (p->pos >= p->len || p->s[p->pos] != ',') {
			xv_free(v);
			return jp_fail(p, p->pos, "expecting ',' or '%c'", close);
		}
		p->pos++;
		jp_ws(p);
	}
}

static struct xv *jp_value(struct jp *p)
{
	struct xv *v;
	char c = p->pos < p->len ? p->s[p->pos] : 0;

	switch (c) {
	case '{':
		return jp_container(p, true);
	case '[':
		return jp_container(p, false);
	case '"':
		return jp_string(p);
	}
	if (jp_at(p, "null")) {
		p->pos += 4;
		return xv_new(XV_NULL);
	}
	if (jp_at(p, "true") || jp_at(p, "false")) {
		v = xv_new(XV_BOOL);
		v->i = c == 't';
		p->pos += c == 't' ? 4 : 5;
		return v;
	}
	/* Python's json reads these (as floats); JSON has no such numbers */
	for (const char **k = (const char *[]){"NaN", "Infinity", "-Infinity", NULL}; *k; k++)
		if (jp_at(p, *k)) {
			snprintf(p->msg, p->msglen, "not valid JSON: %s is not a JSON number", *k);
			return NULL;
		}
	return jp_number(p);
}

/* ---- the tree walk (xenobench/backends.py: _check_tree) */
struct ctx {
	const char *path;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 3, 4))) static int fail(struct ctx *c, const char *key, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(c->err, c->errlen, "Failed to load backends %s: %s: %s", c->path, key, msg);
	return -1;
}

/* a key as a path component: `.name` for plain keys, `['odd key']` (ascii()) for any other, so a
 * path stays one readable line whatever the file holds */
static void key_component(const struct xv *k, bool top, struct sb *path)
{
	bool plain = k->slen > 0 && k->slen <= 64;
	char r[SHOW_MAX + 8];

	for (size_t i = 0; plain && i < k->slen; i++) {
		char ch = k->s[i];

		plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || is_digit(ch) || ch == '_' || ch == '-';
	}
	if (plain) {
		if (!top)
			sb_putn(path, ".", 1);
		sb_putn(path, k->s, k->slen);
	} else {
		show(k, r, sizeof(r));
		sb_printf(path, "[%s]", r);
	}
}

/* fail at <parent><key component> */
static int fail_at(struct ctx *c, const char *parent, const struct xv *k, const char *msg)
{
	struct sb path = {0};
	int rc;

	sb_puts(&path, parent);
	key_component(k, !*parent, &path);
	rc = fail(c, path.p, "%s", msg);
	free(path.p);
	return rc;
}

static int key_cmp(const struct xv *a, const struct xv *b)
{
	int d = memcmp(a->s, b->s, a->slen < b->slen ? a->slen : b->slen);

	return d ? d : (a->slen > b->slen) - (a->slen < b->slen);
}

static const struct xv *sort_map; /* the map first_duplicate() sorts the key indexes of */

static int by_key_then_index(const void *a, const void *b)
{
	int i = *(const int *)a, j = *(const int *)b, d = key_cmp(sort_map->keys[i], sort_map->keys[j]);

	return d ? d : (i > j) - (i < j);
}

/* the index of the first key (in file order) equal to an earlier one, or -1; sorted, so a file of
 * 10^5 distinct keys costs milliseconds, not the minute a pairwise check took */
static int first_duplicate(const struct xv *m)
{
	int *idx, best = -1;

	if (m->n < 2)
		return -1;
	idx = malloc(sizeof(*idx) * (size_t)m->n);
	if (!idx)
		abort();
	for (int i = 0; i < m->n; i++)
		idx[i] = i;
	sort_map = m;
	qsort(idx, (size_t)m->n, sizeof(*idx), by_key_then_index);
	for (int i = 1; i < m->n; i++) /* in a run of equal keys, the second index is its first repeat */
		if (!key_cmp(m->keys[idx[i]], m->keys[idx[i - 1]]) &&
		    (i < 2 || key_cmp(m->keys[idx[i - 1]], m->keys[idx[i - 2]])) && (best < 0 || idx[i] < best))
			best = idx[i];
	free(idx);
	return best;
}

static int check_tree(struct ctx *c, const struct xv *v, struct sb *path)
{
	const char *here = path->n ? path->p : "(top level)";
	char r[SHOW_MAX + 8];
	size_t keep = path->n;

	if (v->t == XV_STR && v->unsafe)
		return fail(c, here, "text holds U+0000 or an unpaired surrogate");
	if (v->t == XV_LIST)
		for (int i = 0; i < v->n; i++) {
			sb_printf(path, "[%d]", i);
			if (check_tree(c, v->items[i], path))
				return -1;
			path->n = keep;
			path->p[keep] = 0;
		}
	if (v->t != XV_MAP)
		return 0;
	for (int i = 0; i < v->n; i++) {
		if (v->keys[i]->unsafe) {
			show(v->keys[i], r, sizeof(r));
			return fail(c, path->n ? path->p : "(top level)", "key %s holds U+0000 or an unpaired surrogate", r);
		}
		key_component(v->keys[i], !path->n, path);
		if (check_tree(c, v->items[i], path))
			return -1;
		path->n = keep;
		path->p[keep] = 0;
	}
	{
		int dup = first_duplicate(v);

		if (dup >= 0) {
			show(v->keys[dup], r, sizeof(r));
			return fail(c, path->n ? path->p : "(top level)", "duplicate key %s", r);
		}
	}
	return 0;
}

/* ---- the schema (xenobench/backends.py: parse_backends) */
/* a JSON string literal of UTF-8 text without NUL: only '"', '\\' and control characters need escapes */
static char *json_quote(const char *s)
{
	struct sb b = {0};

	sb_putn(&b, "\"", 1);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			sb_printf(&b, "\\%c", *c);
		else if (*c < 0x20)
			sb_printf(&b, "\\u%04x", *c);
		else
			sb_putn(&b, (const char *)c, 1);
	}
	sb_putn(&b, "\"", 1);
	return b.p;
}

static bool parse_mac(const struct xv *v, uint8_t mac[6], char out[18])
{
	if (v->t != XV_STR || v->slen != 17)
		return false;
	for (int i = 0; i < 6; i++) {
		const char *p = v->s + i * 3;

		if (hexval(p[0]) < 0 || hexval(p[1]) < 0 || (i < 5 && p[2] != ':'))
			return false;
		mac[i] = (uint8_t)(hexval(p[0]) << 4 | hexval(p[1]));
	}
	for (int i = 0; i < 17; i++)
		out[i] = v->s[i] >= 'A' && v->s[i] <= 'F' ? (char)(v->s[i] - 'A' + 'a') : v->s[i];
	out[17] = 0;
	return true;
}

static int validate(struct ctx *c, const struct xv *doc, struct xf_backends *out)
{
	char key[64], r[SHOW_MAX + 8];
	const struct xv *lst, *kb;
	int total = 0, k;

	if (doc->t != XV_MAP)
		return fail(c, "(top level)", "expected an object with a 'backends' list");
	for (int i = 0; i < doc->n; i++)
		if (!key_is(doc->keys[i], "backends") && !key_is(doc->keys[i], "class_bits"))
			return fail_at(c, "", doc->keys[i], "unknown key (known: backends, class_bits)");
	lst = xv_get(doc, "backends");
	if (!lst || lst->t == XV_NULL)
		return fail(c, "backends", "missing");
	if (lst->t != XV_LIST)
		return fail(c, "backends", "expected a list");
	if (lst->n == 0)
		return fail(c, "backends", "no backends given");
	if (lst->n > XF_MAX_BACKENDS)
		return fail(c, "backends", "%d backends do not fit in %d slots", lst->n, XF_MAX_SLOTS);
	for (int i = 0; i < lst->n; i++) {
		const struct xv *b = lst->items[i], *name, *mac, *w;
		struct xf_backend *be = &out->b[i];

		snprintf(key, sizeof(key), "backends[%d]", i);
		if (b->t != XV_MAP)
			return fail(c, key, "expected an object with name and mac_address");
		for (int j = 0; j < b->n; j++)
			if (!key_is(b->keys[j], "name") && !key_is(b->keys[j], "mac_address") && !key_is(b->keys[j], "weight"))
				return fail_at(c, key, b->keys[j], "unknown key (known: mac_address, name, weight)");
		name = xv_get(b, "name");
		if (!name || name->t != XV_STR || !name->slen) {
			snprintf(key, sizeof(key), "backends[%d].name", i);
			return fail(c, key, "missing or not a non-empty string");
		}
		snprintf(key, sizeof(key), "backends[%d].mac_address", i);
		mac = xv_get(b, "mac_address");
		if (!mac)
			return fail(c, key, "missing");
		if (!parse_mac(mac, be->mac, be->mac_str)) {
			show(mac, r, sizeof(r));
			return fail(c, key, "%s is not a MAC address", r);
		}
		w = xv_get(b, "weight");
		be->weight = 1;
		if (w) {
			if (w->t != XV_INT || w->i < 1 || w->i > XF_MAX_SLOTS) {
				snprintf(key, sizeof(key), "backends[%d].weight", i);
				show(w, r, sizeof(r));
				return fail(c, key, "%s is not an integer in 1..%d", r, XF_MAX_SLOTS);
			}
			be->weight = (int)w->i;
		}
		for (int j = 0; j < i; j++) {
			if (!strcmp(out->b[j].name, name->s)) {
				snprintf(key, sizeof(key), "backends[%d].name", i);
				show(name, r, sizeof(r));
				return fail(c, key, "duplicate name %s (also backends[%d])", r, j);
			}
		}
		for (int j = 0; j < i; j++) {
			if (!strcmp(out->b[j].mac_str, be->mac_str)) {
				snprintf(key, sizeof(key), "backends[%d].mac_address", i);
				return fail(c, key, "duplicate MAC %s (also backends[%d])", be->mac_str, j);
			}
		}
		be->name = strdup(name->s);
		if (!be->name)
			abort();
		be->name_json = json_quote(name->s);
		out->n = i + 1;
		total += be->weight;
	}
	kb = xv_get(doc, "class_bits");
	if (kb) {
		if (kb->t != XV_INT || kb->i < 0 || kb->i > XF_MAX_CLASS_BITS) {
			show(kb, r, sizeof(r));
			return fail(c, "class_bits", "%s is not an integer in 0..%d", r, XF_MAX_CLASS_BITS);
		}
		k = (int)kb->i;
		if (total > (1 << k))
			return fail(c, "backends", "%d backends with total weight %d do not fit in %d slots (class_bits %d)",
				    out->n, total, 1 << k, k);
	} else {
		k = 0;
		while ((1 << k) < total || (1 << k) % total) {
			k++;
			if (k > XF_MAX_CLASS_BITS)
				return fail(c, "backends",
					    "total weight %d divides no table of up to %d slots; give weights summing to "
					    "a power of two", total, 1 << XF_MAX_CLASS_BITS);
		}
	}
	if ((1 << k) % total)
		return fail(c, "backends",
			    "total weight %d does not divide %d slots (class_bits %d); splits would not be exact", total,
			    1 << k, k);
	out->class_bits = k;
	out->nslots = 1 << k;
	{
		int seq[XF_MAX_SLOTS], n = 0;

		for (int i = 0; i < out->n; i++)
			for (int j = 0; j < out->b[i].weight; j++)
				seq[n++] = i;
		for (int s = 0; s < out->nslots; s++)
			out->slots[s] = seq[s % total];
	}
	return 0;
}

static bool has_suffix(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && !strcmp(s + a - b, suf);
}

/* the whole file, at most XF_BACKENDS_MAX_BYTES; NULL with err filled otherwise */
static char *read_capped(struct ctx *c, size_t *len)
{
	struct stat st;
	char *text;
	size_t n = 0;
	int fd = open(c->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) || S_ISDIR(st.st_mode)) {
		int e = fd < 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : errno;

		if (fd >= 0)
			close(fd);
		snprintf(c->err, c->errlen, "Failed to load backends %s: %s", c->path, strerror(e));
		return NULL;
	}
	if (S_ISREG(st.st_mode) && st.st_size > XF_BACKENDS_MAX_BYTES) {
		close(fd);
		fail(c, "(top level)", "larger than %d bytes", XF_BACKENDS_MAX_BYTES);
		return NULL;
	}
	text = malloc(XF_BACKENDS_MAX_BYTES + 2);
	if (!text)
		abort();
	for (;;) { /* one byte more than the limit tells a growing file or a device like /dev/zero */
		ssize_t r = read(fd, text + n, XF_BACKENDS_MAX_BYTES + 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;

			close(fd);
			free(text);
			snprintf(c->err, c->errlen, "Failed to load backends %s: %s", c->path, strerror(e));
			return NULL;
		}
		n += (size_t)r;
		if (r == 0 || n > XF_BACKENDS_MAX_BYTES)
			break;
	}
	close(fd);
	if (n > XF_BACKENDS_MAX_BYTES) {
		free(text);
		fail(c, "(top level)", "larger than %d bytes", XF_BACKENDS_MAX_BYTES);
		return NULL;
	}
	text[n] = 0;
	*len = n;
	return text;
}

int xf_backends_load(const char *path, struct xf_backends *out, char *err, size_t errlen)
{
	struct ctx c = {path, err, errlen};
	struct xv *doc;
	char *text, msg[256] = "";
	size_t len;
	long bad;
	int rc;

	memset(out, 0, sizeof(*out));
	if (has_suffix(path, ".yaml") || has_suffix(path, ".yml"))
		return fail(&c, "(top level)", "XenoFlow reads JSON only (the thesis's backends.json); "
						"`xenobench lb start` writes it from YAML");
	text = read_capped(&c, &len);
	if (!text)
		return -1;
	bad = utf8_invalid_at((const unsigned char *)text, len);
	if (bad >= 0) {
		rc = fail(&c, "(top level)", "not UTF-8: byte 0x%02x at offset %ld", (unsigned char)text[bad], bad);
		free(text);
		return rc;
	}
	if (nesting(text, len) > XF_BACKENDS_MAX_DEPTH) {
		free(text);
		return fail(&c, "(top level)", "nested deeper than %d levels", XF_BACKENDS_MAX_DEPTH);
	}
	{
		struct jp p = {text, len, 0, msg, sizeof(msg)};

		jp_ws(&p);
		doc = jp_value(&p);
		if (doc) {
			jp_ws(&p);
			if (p.pos != len) {
				char where[64];

				jp_where(&p, p.pos, where, sizeof(where));
				snprintf(msg, sizeof(msg), "not valid JSON: trailing data at %s", where);
				xv_free(doc);
				doc = NULL;
			}
		}
	}
	free(text);
	if (!doc)
		return fail(&c, "(top level)", "%s", msg);
	{
		struct sb path = {0};

		sb_putn(&path, "", 0);
		rc = check_tree(&c, doc, &path);
		free(path.p);
	}
	if (!rc)
		rc = validate(&c, doc, out);
	xv_free(doc);
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
