/* Backends file parser: JSON (json-c) and YAML (libyaml) are decoded into one small value tree,
 * then validated exactly like xenobench/backends.py (same checks, same order, same messages;
 * values are quoted the way Python's repr() quotes them). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <yaml.h>

#include "backends.h"

enum xv_type { XV_NULL, XV_BOOL, XV_INT, XV_FLOAT, XV_STR, XV_LIST, XV_MAP };

struct xv {
	enum xv_type t;
	long long i;
	double d;
	char *s;
	int n;
	struct xv **items;
	char **keys; /* XV_MAP */
};

static struct xv *xv_new(enum xv_type t)
{
	struct xv *v = calloc(1, sizeof(*v));

	if (!v)
		abort();
	v->t = t;
	return v;
}

static void xv_push(struct xv *v, const char *key, struct xv *item)
{
	v->items = realloc(v->items, sizeof(*v->items) * (size_t)(v->n + 1));
	if (v->t == XV_MAP) {
		v->keys = realloc(v->keys, sizeof(*v->keys) * (size_t)(v->n + 1));
		v->keys[v->n] = strdup(key ? key : "");
	}
	v->items[v->n++] = item;
}

static void xv_free(struct xv *v)
{
	if (!v)
		return;
	for (int i = 0; i < v->n; i++) {
		xv_free(v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->s);
	free(v);
}

static struct xv *xv_get(const struct xv *m, const char *key)
{
	for (int i = 0; i < m->n; i++)
		if (!strcmp(m->keys[i], key))
			return m->items[i];
	return NULL;
}

static bool xv_has(const struct xv *m, const char *key)
{
	return xv_get(m, key) != NULL;
}

/* ---- Python repr() of a value, for messages */
static void repr(const struct xv *v, char *buf, size_t len)
{
	switch (v->t) {
	case XV_NULL:
		snprintf(buf, len, "None");
		return;
	case XV_BOOL:
		snprintf(buf, len, v->i ? "True" : "False");
		return;
	case XV_INT:
		snprintf(buf, len, "%lld", v->i);
		return;
	case XV_FLOAT: {
		for (int p = 1; p <= 17; p++) {
			snprintf(buf, len, "%.*g", p, v->d);
			if (strtod(buf, NULL) == v->d)
				break;
		}
		if (!strpbrk(buf, ".eEn"))
			strncat(buf, ".0", len - strlen(buf) - 1);
		return;
	}
	case XV_STR: {
		char q = strchr(v->s, '\'') && !strchr(v->s, '"') ? '"' : '\'';
		size_t o = 0;

		buf[o++] = q;
		for (const char *c = v->s; *c && o + 6 < len; c++) {
			if (*c == q || *c == '\\') {
				buf[o++] = '\\';
				buf[o++] = *c;
			} else if (*c == '\n') {
				buf[o++] = '\\';
				buf[o++] = 'n';
			} else if (*c == '\t') {
				buf[o++] = '\\';
				buf[o++] = 't';
			} else if (*c == '\r') {
				buf[o++] = '\\';
				buf[o++] = 'r';
			} else {
				buf[o++] = *c;
			}
		}
		buf[o++] = q;
		buf[o] = 0;
		return;
	}
	case XV_LIST:
		snprintf(buf, len, "[...]");
		return;
	case XV_MAP:
		snprintf(buf, len, "{...}");
		return;
	}
}

/* ---- JSON */
static struct xv *from_json(struct json_object *o)
{
	struct xv *v;

	switch (json_object_get_type(o)) {
	case json_type_null:
		return xv_new(XV_NULL);
	case json_type_boolean:
		v = xv_new(XV_BOOL);
		v->i = json_object_get_boolean(o);
		return v;
	case json_type_int:
		v = xv_new(XV_INT);
		v->i = json_object_get_int64(o);
		return v;
	case json_type_double:
		v = xv_new(XV_FLOAT);
		v->d = json_object_get_double(o);
		return v;
	case json_type_string:
		v = xv_new(XV_STR);
		v->s = strdup(json_object_get_string(o));
		return v;
	case json_type_array:
		v = xv_new(XV_LIST);
		for (size_t i = 0; i < json_object_array_length(o); i++)
			xv_push(v, NULL, from_json(json_object_array_get_idx(o, i)));
		return v;
	case json_type_object: {
		v = xv_new(XV_MAP);
		json_object_object_foreach(o, key, val) xv_push(v, key, from_json(val));
		return v;
	}
	}
	return xv_new(XV_NULL);
}

/* ---- YAML (YAML 1.1 scalar resolution, as PyYAML's safe_load) */
/* digits of `base` (8 or 10) with '_' separators (YAML 1.1) → *out; false on anything else */
static bool underscored_digits(const char *c, int base, long long *out)
{
	char clean[64];
	size_t o = 0;

	for (; *c; c++) {
		if (*c == '_')
			continue;
		if (*c < '0' || *c >= '0' + base)
			return false;
		clean[o++] = *c;
		if (o >= sizeof(clean) - 1)
			return false;
	}
	clean[o] = 0;
	*out = strtoll(clean, NULL, base);
	return true;
}

static bool is_int_text(const char *s, long long *out)
{
	const char *p = s;
	char clean[64];
	size_t o = 0;
	bool neg = false;

	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (!*p)
		return false;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X' || p[1] == 'o' || p[1] == 'b')) {
		int base = p[1] == 'x' || p[1] == 'X' ? 16 : p[1] == 'o' ? 8 : 2;
		char *end;

		for (const char *c = p + 2; *c && o < sizeof(clean) - 1; c++)
			if (*c != '_')
				clean[o++] = *c;
		clean[o] = 0;
		if (!o)
			return false;
		*out = strtoll(clean, &end, base);
		if (*end)
			return false;
		if (neg)
			*out = -*out;
		return true;
	}
	if (strchr(p, ':')) { /* sexagesimal: [1-9][0-9_]*(:[0-5]?[0-9])+ */
		long long acc = 0;
		const char *c = p;

		if (*c < '1' || *c > '9')
			return false;
		while (*c && *c != ':') {
			if (!isdigit((unsigned char)*c) && *c != '_')
				return false;
			if (*c != '_')
				acc = acc * 10 + (*c - '0');
			c++;
		}
		while (*c == ':') {
			int d = 0, nd = 0;

			c++;
			while (isdigit((unsigned char)*c) && nd < 3) {
				d = d * 10 + (*c - '0');
				c++;
				nd++;
			}
			if (nd == 0 || nd > 2 || d > 59 || (nd == 2 && c[-2] > '5'))
				return false;
			acc = acc * 60 + d;
		}
		if (*c)
			return false;
		*out = neg ? -acc : acc;
		return true;
	}
	if (p[0] == '0' && p[1]) { /* octal 0[0-7_]+ */
		if (!underscored_digits(p + 1, 8, out))
			return false;
	} else if (!underscored_digits(p, 10, out)) {
		return false;
	}
	if (neg)
		*out = -*out;
	return true;
}

static bool is_float_text(const char *s, double *out)
{
	char *end;
	const char *p = s;

	if (*p == '+' || *p == '-')
		p++;
	if (!strcasecmp(p, ".inf") || !strcasecmp(p, ".nan")) {
		*out = strtod(s[0] == '-' ? "-inf" : (strcasecmp(p, ".nan") ? "inf" : "nan"), NULL);
		return true;
	}
	if (!strchr(s, '.') || strchr(s, '_') || strchr(s, ':'))
		return false;
	if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1])))
		return false;
	*out = strtod(s, &end);
	return *end == 0;
}

static struct xv *yaml_scalar(yaml_node_t *n)
{
	const char *s = (const char *)n->data.scalar.value;
	struct xv *v;
	long long i;
	double d;

	if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		static const char *nulls[] = {"", "~", "null", "Null", "NULL"};
		static const char *trues[] = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", "y", "Y"};
		static const char *falses[] = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", "n", "N"};

		for (size_t k = 0; k < sizeof(nulls) / sizeof(*nulls); k++)
			if (!strcmp(s, nulls[k]))
				return xv_new(XV_NULL);
		for (size_t k = 0; k < sizeof(trues) / sizeof(*trues); k++) {
			if (!strcmp(s, trues[k]) && k < 9) {
				v = xv_new(XV_BOOL);
				v->i = 1;
				return v;
			}
			if (!strcmp(s, falses[k]) && k < 9) {
				v = xv_new(XV_BOOL);
				return v;
			}
		}
		if (is_int_text(s, &i)) {
			v = xv_new(XV_INT);
			v->i = i;
			return v;
		}
		if (is_float_text(s, &d)) {
			v = xv_new(XV_FLOAT);
			v->d = d;
			return v;
		}
	}
	v = xv_new(XV_STR);
	v->s = strdup(s);
	return v;
}

static struct xv *from_yaml(yaml_document_t *doc, yaml_node_t *n, int depth)
{
	struct xv *v;

	if (!n || depth > 64)
		return xv_new(XV_NULL);
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return yaml_scalar(n);
	case YAML_SEQUENCE_NODE:
		v = xv_new(XV_LIST);
		for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++)
			xv_push(v, NULL, from_yaml(doc, yaml_document_get_node(doc, *it), depth + 1));
		return v;
	case YAML_MAPPING_NODE:
		v = xv_new(XV_MAP);
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(doc, p->key);
			char kbuf[128];
			struct xv *kv = k && k->type == YAML_SCALAR_NODE ? yaml_scalar(k) : xv_new(XV_NULL);

			if (kv->t == XV_STR)
				snprintf(kbuf, sizeof(kbuf), "%s", kv->s);
			else
				repr(kv, kbuf, sizeof(kbuf));
			xv_free(kv);
			xv_push(v, kbuf, from_yaml(doc, yaml_document_get_node(doc, p->value), depth + 1));
		}
		return v;
	default:
		return xv_new(XV_NULL);
	}
}

/* ---- validation (xenobench/backends.py: parse_backends) */
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

static bool parse_mac(const struct xv *v, uint8_t mac[6], char out[18])
{
	if (v->t != XV_STR || strlen(v->s) != 17)
		return false;
	for (int i = 0; i < 6; i++) {
		const char *p = v->s + i * 3;

		if (!isxdigit((unsigned char)p[0]) || !isxdigit((unsigned char)p[1]) || (i < 5 && p[2] != ':'))
			return false;
		char h[3] = {p[0], p[1], 0};

		mac[i] = (uint8_t)strtoul(h, NULL, 16);
	}
	for (int i = 0; i < 17; i++)
		out[i] = (char)tolower((unsigned char)v->s[i]);
	out[17] = 0;
	return true;
}

static int validate(struct ctx *c, const struct xv *doc, struct xf_backends *out)
{
	char key[64], r[256];
	const struct xv *lst;
	int total = 0, k;

	if (doc->t != XV_MAP)
		return fail(c, "(top level)", "expected an object with a 'backends' list");
	for (int i = 0; i < doc->n; i++)
		if (strcmp(doc->keys[i], "backends") && strcmp(doc->keys[i], "class_bits"))
			return fail(c, doc->keys[i], "unknown key (known: backends, class_bits)");
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
			if (strcmp(b->keys[j], "name") && strcmp(b->keys[j], "mac_address") && strcmp(b->keys[j], "weight")) {
				char k2[192];

				snprintf(k2, sizeof(k2), "%s.%s", key, b->keys[j]);
				return fail(c, k2, "unknown key (known: mac_address, name, weight)");
			}
		name = xv_get(b, "name");
		if (!name || name->t != XV_STR || !name->s[0]) {
			snprintf(key, sizeof(key), "backends[%d].name", i);
			return fail(c, key, "missing or not a non-empty string");
		}
		snprintf(key, sizeof(key), "backends[%d].mac_address", i);
		if (!xv_has(b, "mac_address"))
			return fail(c, key, "missing");
		mac = xv_get(b, "mac_address");
		if (!parse_mac(mac, be->mac, be->mac_str)) {
			repr(mac, r, sizeof(r));
			return fail(c, key, "%s is not a MAC address", r);
		}
		w = xv_get(b, "weight");
		be->weight = 1;
		if (w) {
			if (w->t != XV_INT || w->i < 1 || w->i > XF_MAX_SLOTS) {
				snprintf(key, sizeof(key), "backends[%d].weight", i);
				repr(w, r, sizeof(r));
				if (w->t == XV_INT && w->i > XF_MAX_SLOTS) /* Python accepts it, then the slot check fails */
					be->weight = XF_MAX_SLOTS + 1;
				else
					return fail(c, key, "%s is not a positive integer", r);
			} else {
				be->weight = (int)w->i;
			}
		}
		for (int j = 0; j < i; j++) {
			if (!strcmp(out->b[j].name, name->s)) {
				snprintf(key, sizeof(key), "backends[%d].name", i);
				repr(name, r, sizeof(r));
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
		out->n = i + 1;
		total += be->weight;
	}
	const struct xv *kb = xv_get(doc, "class_bits");

	if (kb) {
		if (kb->t != XV_INT || kb->i < 0 || kb->i > XF_MAX_CLASS_BITS) {
			repr(kb, r, sizeof(r));
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

int xf_backends_load(const char *path, struct xf_backends *out, char *err, size_t errlen)
{
	struct ctx c = {path, err, errlen};
	struct xv *doc = NULL;
	FILE *f;
	char *text = NULL;
	size_t len = 0;
	bool yaml = has_suffix(path, ".yaml") || has_suffix(path, ".yml");
	int rc;

	memset(out, 0, sizeof(*out));
	f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "Failed to load backends %s: %s", path, strerror(errno));
		return -1;
	}
	{
		FILE *m = open_memstream(&text, &len);
		char buf[4096];
		size_t n;

		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			fwrite(buf, 1, n, m);
		fclose(m);
		fclose(f);
	}
	if (yaml) {
		yaml_parser_t p;
		yaml_document_t d;

		yaml_parser_initialize(&p);
		yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
		if (!yaml_parser_load(&p, &d)) {
			snprintf(err, errlen, "Failed to load backends %s: (top level): not valid YAML: %s at line %zu",
				 path, p.problem ? p.problem : "parse error", p.problem_mark.line + 1);
			yaml_parser_delete(&p);
			free(text);
			return -1;
		}
		doc = from_yaml(&d, yaml_document_get_root_node(&d), 0);
		yaml_document_delete(&d);
		yaml_parser_delete(&p);
	} else {
		enum json_tokener_error jerr;
		struct json_tokener *tok = json_tokener_new();
		struct json_object *o = json_tokener_parse_ex(tok, text, (int)len);

		jerr = json_tokener_get_error(tok);
		if (!o || (jerr != json_tokener_success)) {
			snprintf(err, errlen, "Failed to load backends %s: (top level): not valid JSON: %s", path,
				 json_tokener_error_desc(jerr == json_tokener_continue ? json_tokener_error_parse_eof : jerr));
			json_tokener_free(tok);
			json_object_put(o);
			free(text);
			return -1;
		}
		doc = from_json(o);
		json_object_put(o);
		json_tokener_free(tok);
	}
	free(text);
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
		bs->b[i].name = NULL;
	}
	bs->n = 0;
}
