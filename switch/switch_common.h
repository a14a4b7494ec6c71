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
	SINK_STAT_UNRECORDED,   /* a generator frame while arrival recording is on that found no room
				 * in `sink_arrivals` (SINK_ARRIVAL_ENTRIES full): its time is lost */
	SINK_STAT_MAX,
};

/* the load generator's source block (key 0 of `sink_config`), network byte order; and the arrival
 * recording (xenobench.testbed.switch.SinkArrivals): off while bucket_ns is 0 (the sink then costs
 * what it did without it) */
struct sink_config {
	__u32 net;        /* traffic.src_ip_base */
	__u32 mask;       /* its block: sources are src_ip_base + n */
	__u64 t0_ns;      /* recording start, bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
	__u64 bucket_ns;  /* width of one time bucket; 0: recording off */
};

/* arrival records: up to this many (backend, bucket) keys per recording; 2 backends x 4 s at
 * 1 ms buckets fill 8000 */
#define SINK_ARRIVAL_ENTRIES 32768
#define SINK_LAST_BUCKET     0xffff  /* frames later than 65535 buckets after t0 land here */

/* key of `sink_arrivals`: the frame's destination MAC (the backend the LB chose: a MAC, because
 * one program serves every backend and ifindexes repeat across namespaces) and its time bucket */
struct sink_arrival_key {
	__u8 mac[6];
	__u16 bucket;  /* (now - t0_ns) / bucket_ns, at most SINK_LAST_BUCKET */
};

/* value of `sink_arrivals` (per CPU: the harness takes min/max/sum over CPUs) */
struct sink_arrival {
	__u64 first_ns;  /* bpf_ktime_get_ns() of the bucket's first frame on this CPU */
	__u64 last_ns;   /* ... and of its last */
	__u64 packets;
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
