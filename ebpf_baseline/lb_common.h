/* Shared by the XDP program (lb.bpf.c) and the loader (xenobench/lb/ebpf.py reads the same
 * layouts; keep them in sync through tests/test_ebpf_lb.py, which checks every size here). */
#ifndef XB_LB_COMMON_H
#define XB_LB_COMMON_H

#define XB_MAX_SLOTS    256  /* 2^k classes, k <= 8 (xenobench.backends.MAX_CLASS_BITS) */
#define XB_MAX_BACKENDS 256

/* what happens to frames that are not IPv4/UDP to the service */
#define XB_POLICY_PASS 0
#define XB_POLICY_DROP 1

/* how a classified frame leaves */
#define XB_EGRESS_REDIRECT 0  /* devmap redirect to the egress port (p0 -> p1) */
#define XB_EGRESS_TX       1  /* XDP_TX out of the ingress port (one-port setup) */

/* index into the per-CPU `stats` array */
enum xb_stat {
	XB_STAT_MISS = 0,     /* service frame whose slot has no backend */
	XB_STAT_NON_IPV4,     /* not IPv4 (ARP, IPv6, VLAN-tagged, ...) */
	XB_STAT_NON_SERVICE,  /* IPv4 but not UDP to vip:port */
	XB_STAT_MALFORMED,    /* truncated headers, bad IHL */
	XB_STAT_TX_ERROR,     /* redirect refused: no egress port in the devmap (lb.bpf.c) */
	XB_STAT_MAX,
};

struct xb_config {
	__u32 vip;        /* network byte order */
	__u16 port;       /* network byte order */
	__u8 policy;      /* XB_POLICY_* */
	__u8 egress;      /* XB_EGRESS_* */
	__u32 mask;       /* class mask, host order: 2^k - 1 */
	__u8 src_mac[6];  /* written as the source MAC of every forwarded frame */
	__u8 pad[2];
};

struct xb_backend {
	__u8 mac[6];
	__u8 valid;
	__u8 pad;
};

struct xb_counter {
	__u64 packets;
	__u64 bytes;
};

#endif
