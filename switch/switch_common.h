/* Shared by the switch's XDP fast path (fastpath.bpf.c), the backends' receive sink (sink.bpf.c),
 * the wire reference LB (wire.bpf.c) and their loaders (xenobench/testbed/switch.py,
 * xenobench/agents/wire_lb.py, which pack the same layouts; tests/test_switch_fastpath.py and
 * tests/test_wire_lb.py check them). */
#ifndef XB_SWITCH_COMMON_H
#define XB_SWITCH_COMMON_H

#define SW_MAX_PORTS 64   /* switch ports (one per node interface); the MSN2100 has 16 */
#define SW_MAX_MACS  256  /* static MAC bindings */

/* index into the fast path's per-CPU `sw_stats` array */
enum sw_stat {
	SW_STAT_FORWARDED = 0,  /* bound unicast MAC: redirected to its port at XDP */
	SW_STAT_TO_BRIDGE,      /* broadcast, multicast, unknown or hairpin: passed to the bridge */
	SW_STAT_MALFORMED,      /* shorter than an Ethernet header: dropped */
	SW_STAT_MAX,
};

/* index into the backend sink's per-CPU `sink_stats` array */
enum sink_stat {
	SINK_STAT_DROPPED = 0,  /* IPv4 from the load generator's source block: counted, dropped */
	SINK_STAT_PASSED,       /* anything else (ARP, probes, checks): to the backend's stack */
	SINK_STAT_MAX,
};

/* the load generator's source block (key 0 of `sink_config`), network byte order */
struct sink_config {
	__u32 net;   /* traffic.src_ip_base */
	__u32 mask;  /* its block: sources are src_ip_base + n */
};

/* the wire's classes: the low byte of ntohl(ip.saddr), at this offset of an untagged IPv4 frame
 * (Ethernet 14 + the source address's 12..15); 256 classes hold every k <= 8 (XB_MAX_SLOTS) */
#define WIRE_CLASS_OFFSET 29
#define WIRE_CLASSES      256

/* index into the wire's per-CPU `wire_stats` array: 0..WIRE_CLASSES-1 the frames forwarded per
 * class, then: */
enum wire_stat {
	WIRE_STAT_MALFORMED = WIRE_CLASSES,  /* too short to hold a class byte: dropped */
	WIRE_STAT_MAX,
};

/* what the wire writes into a frame of a class (entry <class> of `wire_slots`) */
struct wire_config {
	__u8 dst_mac[6];  /* the class's backend, as the LBs' slot table has it */
	__u8 src_mac[6];  /* the LB's egress port */
};

struct sw_counter {
	__u64 packets;
	__u64 bytes;
};

#endif
