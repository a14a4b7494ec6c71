#include <stdio.h>
#include <string.h>

#include <doca_log.h>

#include "hash.h"

DOCA_LOG_REGISTER(XENOFLOW_HASH);

static const struct {
	const char *name;
	uint32_t bit;
} FIELDS[] = {
	{"src_ip", XF_HASH_SRC_IP}, {"dst_ip", XF_HASH_DST_IP}, {"proto", XF_HASH_PROTO},
	{"src_port", XF_HASH_SRC_PORT}, {"dst_port", XF_HASH_DST_PORT},
};
#define NFIELDS (sizeof(FIELDS) / sizeof(FIELDS[0]))
#define ALL_FIELDS (XF_HASH_SRC_IP | XF_HASH_DST_IP | XF_HASH_PROTO | XF_HASH_SRC_PORT | XF_HASH_DST_PORT)

static uint32_t field_bit(const char *name, size_t len)
{
	for (size_t i = 0; i < NFIELDS; i++)
		if (strlen(FIELDS[i].name) == len && !strncmp(FIELDS[i].name, name, len))
			return FIELDS[i].bit;
	return 0;
}

#define FIELD_LIST "src_ip, dst_ip, proto, src_port, dst_port"

int xf_hash_parse(const char *s, struct xf_hash *h, char *err, size_t errlen)
{
	memset(h, 0, sizeof(*h));
	if (!strcmp(s, XF_HASH_5TUPLE)) {
		h->fields = ALL_FIELDS;
	} else {
		for (const char *p = s;; p++) {
			size_t len = strcspn(p, ",");
			uint32_t bit = field_bit(p, len);

			if (!bit || (h->fields & bit)) {
				snprintf(err, errlen, "Failed to parse --hash: '%s' %s%.*s%s; give a comma-separated list of "
					 FIELD_LIST " (each once) or " XF_HASH_5TUPLE " (default " XF_HASH_DEFAULT ")", s,
					 !len ? "has an empty field name" : bit ? "names '" : "has '", (int)len, p,
					 !len ? "" : bit ? "' twice" : "', which is not a field");
				return -1;
			}
			h->fields |= bit;
			p += len;
			if (!*p)
				break;
		}
	}
	for (size_t i = 0, n = 0; i < NFIELDS; i++)
		if (h->fields & FIELDS[i].bit)
			n += (size_t)snprintf(h->names + n, sizeof(h->names) - n, "%s\"%s\"", n ? ", " : "", FIELDS[i].name);
	return 0;
}

/* The hash pipe's match_mask (doca-samples 2.9 flow_hash_pipe: "match mask defines which header
 * fields to use in order to calculate the entry index"; the pipe's match is NULL): IPv4, and
 * UDP when a port is hashed (XenoFlow balances DNS over UDP; a frame without those headers
 * misses, as in the class pipe, which matches IPv4 only). */
static void hash_match_mask(const struct xf_hash *h, struct doca_flow_match *mm)
{
	memset(mm, 0, sizeof(*mm));
	mm->outer.l3_type = DOCA_FLOW_L3_TYPE_IP4;
	if (h->fields & XF_HASH_SRC_IP)
		mm->outer.ip4.src_ip = 0xffffffff;
	if (h->fields & XF_HASH_DST_IP)
		mm->outer.ip4.dst_ip = 0xffffffff;
	if (h->fields & XF_HASH_PROTO)
		mm->outer.ip4.next_proto = 0xff;
	if (h->fields & (XF_HASH_SRC_PORT | XF_HASH_DST_PORT))
		mm->outer.l4_type_ext = DOCA_FLOW_L4_TYPE_EXT_UDP;
	if (h->fields & XF_HASH_SRC_PORT)
		mm->outer.udp.l4_port.src_port = 0xffff;
	if (h->fields & XF_HASH_DST_PORT)
		mm->outer.udp.l4_port.dst_port = 0xffff;
}

doca_error_t xf_create_hash_pipe(struct doca_flow_port *port, uint16_t egress_port_id, uint32_t nr_entries,
				 const struct xf_hash *h, struct doca_flow_pipe **pipe)
{
	struct doca_flow_match mm;

	hash_match_mask(h, &mm);
	return xf_create_lb_pipe(port, egress_port_id, DOCA_FLOW_PIPE_HASH, nr_entries, NULL, &mm, pipe);
}

doca_error_t xf_add_hash_entry(struct doca_flow_pipe *pipe, uint32_t idx, const uint8_t dst_mac[6],
			       const uint8_t src_mac[6], uint32_t counter_id, struct xf_entries_status *status,
			       struct doca_flow_pipe_entry **entry)
{
	struct doca_flow_actions actions;
	struct doca_flow_monitor monitor;
	doca_error_t r;

	xf_entry_actions(dst_mac, src_mac, counter_id, &actions, &monitor);
	r = doca_flow_pipe_hash_add_entry(0, pipe, idx, &actions, &monitor, NULL, DOCA_FLOW_NO_WAIT, status, entry);
	if (r != DOCA_SUCCESS)
		DOCA_LOG_ERR("Failed to add hash entry %u: %s", idx, doca_error_get_descr(r));
	return r;
}
