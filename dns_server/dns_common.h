/* Shared by the XDP DNS responder (xdp_responder.bpf.c) and its loader (xenobench/dns/xdp.py,
 * which writes struct xdns_config and reads the per-CPU stats; tests/test_dns.py checks the
 * sizes and the stat order against this file). */
#ifndef XDNS_COMMON_H
#define XDNS_COMMON_H

#define XDNS_MAX_ZONE   64   /* bytes of the zone in wire format (example.com. = 13) */
#define XDNS_MAX_LABELS 32   /* labels in a question name the responder walks */
#define XDNS_MAX_NAME   255  /* bytes of a name in wire format (RFC 1035 2.3.4) */
#define XDNS_MAX_PEERS  256  /* client addresses with a known MAC */

/* what the responder does with a well-formed A/IN query for a name in the zone */
#define XDNS_MODE_ANSWER  0  /* reply in place: QR, AA, one A record (the configured address) */
#define XDNS_MODE_REFLECT 1  /* swap addresses and ports, set QR, send the query back unchanged */

/* how a reply leaves (out of the port it came in on either way) */
#define XDNS_EGRESS_TX       0  /* XDP_TX: the fast path on a NIC driver */
#define XDNS_EGRESS_REDIRECT 1  /* bpf_redirect to the ingress ifindex: veth, whose XDP_TX only
				 * wakes the peer when the peer runs an XDP program itself */

/* index into the per-CPU `stats` array */
enum xdns_stat {
	XDNS_STAT_ANSWERED = 0,  /* A/IN in the zone: answered (or reflected) */
	XDNS_STAT_REFUSED,       /* name outside the zone: REFUSED sent */
	XDNS_STAT_PASSED,        /* not IPv4/UDP to vip:port: XDP_PASS to the kernel */
	XDNS_STAT_NOT_A,         /* query for another type or class: XDP_PASS (no record) */
	XDNS_STAT_MALFORMED,     /* truncated header/question, pointer in the question, bad counts: dropped */
	XDNS_STAT_NOT_QUERY,     /* QR already set or opcode != QUERY: dropped (never answer answers) */
	XDNS_STAT_PEER_MISS,     /* answered, but the client MAC came from the frame (no peer entry) */
	XDNS_STAT_TX_ERROR,      /* bpf_xdp_adjust_tail failed: dropped */
	XDNS_STAT_MAX,
};

struct xdns_config {
	__u32 vip;                   /* network byte order */
	__u16 port;                  /* network byte order */
	__u8 mode;                   /* XDNS_MODE_* */
	__u8 zone_len;               /* bytes used in zone[] */
	__u32 answer;                /* A record, network byte order */
	__u32 ttl;                   /* seconds, network byte order */
	__u8 src_mac[6];             /* this backend's MAC: source of every reply */
	__u8 egress;                 /* XDNS_EGRESS_* */
	__u8 pad;
	__u8 zone[XDNS_MAX_ZONE];    /* lower-case wire format, ending in the root label */
};

struct xdns_peer {
	__u8 mac[6];
	__u8 pad[2];
};

#endif
