/* Shared by the emulated datapath (emu.bpf.c) and the DOCA Flow emulation library
 * (src/doca_flow.c): map layouts, limits, flags. One copy, included by both sides. */
#ifndef XB_EMU_COMMON_H
#define XB_EMU_COMMON_H

#define EMU_MAX_PORTS      8     /* DOCA ports (one XDP attachment each) */
#define EMU_MAX_ENTRIES    4096  /* entries over all pipes (hash map size, entry counters) */
#define EMU_MAX_SHARED_CNT 1024  /* shared counter ids 0..1023 */
#define EMU_MAX_IFINDEX    4096  /* ports must be interfaces with ifindex < 4096 */
#define EMU_DIRECT_BITS    12    /* direct tables: masks of up to 12 contiguous bits */
#define EMU_DIRECT_SLOTS   (1 << EMU_DIRECT_BITS)

/* classified header fields; l3/l4 values are those of enum doca_flow_l3_type / l4_type_ext */
#define EMU_L3_NONE 0
#define EMU_L3_IP4  1
#define EMU_L4_NONE 0
#define EMU_L4_TCP  1
#define EMU_L4_UDP  2

/* The match key: every field the emulation can match, as on the wire (network order).
 * A frame's key is masked with its port's pipe mask and looked up in `entries`, whose keys
 * are the entries' (value & mask). 32 bytes, no holes. */
struct emu_key {
	__u8 dst_mac[6];
	__u8 src_mac[6];
	__u16 eth_type;
	__u8 l3_type;   /* EMU_L3_*: IP4 only if the IPv4 header is complete */
	__u8 l4_type;   /* EMU_L4_*: only if the L4 ports are present */
	__u32 src_ip;
	__u32 dst_ip;
	__u8 next_proto;
	__u8 pad;
	__u16 src_port;
	__u16 dst_port;
	__u16 port;     /* DOCA port the frame arrived on (always matched) */
};

#define EMU_FWD_DROP 0
#define EMU_FWD_PORT 1

#define EMU_ACT_DST_MAC   (1u << 0)
#define EMU_ACT_SRC_MAC   (1u << 1)
#define EMU_CNT_ENTRY     (1u << 2)  /* count in entry_counters[entry_id] */
#define EMU_CNT_SHARED    (1u << 3)  /* count in shared_counters[shared_id] */
#define EMU_VALID         (1u << 4)  /* a direct table slot holds an entry */

/* which field indexes a direct table */
#define EMU_DIRECT_NONE     0  /* general case: hash lookup of the masked key in `entries` */
#define EMU_DIRECT_SRC_IP   1
#define EMU_DIRECT_DST_IP   2
#define EMU_DIRECT_SRC_PORT 3
#define EMU_DIRECT_DST_PORT 4
/* a DOCA_FLOW_PIPE_HASH pipe: index = emu_hash_tag(key & mask) & direct_mask (emu_hash.h); its
 * mask holds the hashed fields and the l3/l4 selectors, never the port; `sel` the selectors'
 * values (a frame without the selected headers misses) */
#define EMU_DIRECT_HASH     5

/* per port: the root pipe's mask and miss behaviour. A pipe whose mask is one contiguous run of
 * at most EMU_DIRECT_BITS bits of one field (plus the l3/l4 selectors and the port) is compiled
 * into a direct table: index = (field in host order >> direct_shift) & direct_mask, the other
 * masked fields must equal `sel`. A hash pipe uses the same table, indexed by its hash
 * (EMU_DIRECT_HASH). */
struct emu_pipe {
	struct emu_key mask;
	struct emu_key sel;   /* direct: masked key with the indexed field zeroed must equal this */
	__u32 valid;
	__u32 miss_fwd;       /* EMU_FWD_* */
	__u32 miss_port;      /* devmap index when miss_fwd is PORT */
	__u32 direct;         /* EMU_DIRECT_* */
	__u32 direct_shift;
	__u32 direct_mask;
	__u32 port;           /* the DOCA port this pipe is the root of */
	__u32 need_macs;      /* the mask covers a MAC: copy them into the key */
};

/* value of `entries`: what a hit does */
struct emu_action {
	__u32 entry_id;
	__u32 flags;        /* EMU_ACT_*, EMU_CNT_* */
	__u8 dst_mac[6];
	__u8 src_mac[6];
	__u32 fwd;          /* EMU_FWD_* */
	__u32 fwd_port;     /* devmap index = DOCA port id */
	__u32 shared_id;
};

struct emu_counter {
	__u64 packets;
	__u64 bytes;
};

#endif
