/* XenoFlow's hash mode (-H/--hash FIELDS): instead of the class pipe (flow_lb.h: one entry per
 * value of the source address's low bits), one root DOCA_FLOW_PIPE_HASH pipe (DOCA 2.9; the
 * samples' flow_hash_pipe) whose hardware hashes the named header fields to the index of one of
 * its entries. The backends file's slot table gives the entries: nr_entries = its 2^class_bits
 * slots, entry i rewrites the MACs to backends[slots[i]]'s and counts in shared counter i, so a
 * weight is a number of entries. Same ports, counters, forward (to the pair) and miss (drop,
 * counted) as the class pipe; a backend change updates the changed entries in place (update.c). */
#ifndef XF_HASH_H
#define XF_HASH_H
#include <stddef.h>
#include <stdint.h>
#include <doca_flow.h>

#include "flow_lb.h"

/* the fields a hash pipe can hash (the names -H takes, and the "started" line prints) */
enum xf_hash_field {
	XF_HASH_SRC_IP = 1 << 0,   /* outer.ip4.src_ip */
	XF_HASH_DST_IP = 1 << 1,   /* outer.ip4.dst_ip */
	XF_HASH_PROTO = 1 << 2,    /* outer.ip4.next_proto */
	XF_HASH_SRC_PORT = 1 << 3, /* outer.udp source port (DNS over UDP: a port field selects UDP) */
	XF_HASH_DST_PORT = 1 << 4, /* outer.udp destination port */
};
#define XF_HASH_DEFAULT "src_ip,src_port" /* the source address and port of the client's socket */
#define XF_HASH_5TUPLE "5-tuple"          /* shorthand for all five */

struct xf_hash {
	uint32_t fields;  /* enum xf_hash_field bits; 0: class mode */
	char names[96];   /* the fields as a JSON array's items, in the enum's order */
};

/* Parse -H's FIELDS: comma-separated names of enum xf_hash_field (src_ip, dst_ip, proto,
 * src_port, dst_port) or "5-tuple". 0, or -1 with "Failed to parse --hash: ..." in err. */
int xf_hash_parse(const char *s, struct xf_hash *h, char *err, size_t errlen);

/* the hash pipe on `port` over h's fields, nr_entries entries (a power of 2: the slot table),
 * forwarding to `egress_port_id` (the pair), miss → drop with the pipe's miss counter; each
 * entry's MACs and shared counter id changeable, as the class pipe's */
doca_error_t xf_create_hash_pipe(struct doca_flow_port *port, uint16_t egress_port_id, uint32_t nr_entries,
				 const struct xf_hash *h, struct doca_flow_pipe **pipe);

/* entry `idx` (doca_flow_pipe_hash_add_entry on queue 0, DOCA_FLOW_NO_WAIT): dst_mac, src_mac,
 * shared counter `counter_id` */
doca_error_t xf_add_hash_entry(struct doca_flow_pipe *pipe, uint32_t idx, const uint8_t dst_mac[6],
			       const uint8_t src_mac[6], uint32_t counter_id, struct xf_entries_status *status,
			       struct doca_flow_pipe_entry **entry);

#endif
