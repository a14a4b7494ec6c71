/* DOCA Flow, the DOCA 2.9 API (setter-based cfgs, shared resources bound and queried by id,
 * doca_flow_resource_query): the subset XenoFlow uses, same names, types and signatures.
 *
 * This header belongs to lb/emu, the emulation that compiles pipes and entries into an XDP
 * datapath on Linux interfaces. What is emulated (everything else returns
 * DOCA_ERROR_NOT_SUPPORTED and logs the feature):
 *   - mode "vnf,hws"; ports 0..7 bound to the Linux interfaces given to the EAL (-a IFNAME),
 *     in order; doca_flow_port_cfg_set_devargs("N") or _set_port_id(N); the DPDK port must be
 *     started first; doca_flow_port_pair (VNF: forwarding to the pair goes through its hairpin
 *     queues, which must be bound); default RSS over regular Rx queues
 *   - counters: per-entry counters and pipe miss counters come from the pool of
 *     doca_flow_cfg_set_nr_counters, shared counters from doca_flow_cfg_set_nr_shared_resource
 *   - DOCA_FLOW_PIPE_BASIC and DOCA_FLOW_PIPE_HASH, root pipes only, one per port; a hash pipe
 *     hashes its match_mask's fields (CRC-32, lb/emu/bpf/emu_hash.h) to the index of one of its
 *     nr_entries entries (doca_flow_pipe_hash_add_entry; doca_flow_pipe_calc_hash gives a match's
 *     index; map algorithm DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_HASH only)
 *   - match value/mask on outer.eth.{dst_mac,src_mac,type}, outer.l3_type (IP4),
 *     outer.ip4.{src_ip,dst_ip,next_proto}, outer.l4_type_ext (TCP/UDP) with
 *     outer.{udp,tcp}.l4_port.{src_port,dst_port} / outer.transport
 *   - actions: outer.eth.dst_mac, outer.eth.src_mac (constant or changeable per entry)
 *   - monitor: shared counters (DOCA_FLOW_SHARED_RESOURCE_COUNTER) and per-entry counters
 *   - fwd: DOCA_FLOW_FWD_PORT, DOCA_FLOW_FWD_DROP; fwd_miss: DROP, PORT, NULL (drop)
 *   - doca_flow_pipe_update_entry: a processed entry's actions/monitor replaced in place, a queue
 *     operation completed by doca_flow_entries_process (callback DOCA_FLOW_ENTRY_OP_UPD)
 *   - doca_flow_resource_query_entry, doca_flow_resource_query_pipe_miss,
 *     doca_flow_shared_resources_query */
#ifndef DOCA_FLOW_H_
#define DOCA_FLOW_H_
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <doca_compat.h>
#include <doca_error.h>
#include <doca_types.h>
#include <doca_flow_net.h>

#ifdef __cplusplus
extern "C" {
#endif

struct doca_flow_port;
struct doca_flow_pipe;
struct doca_flow_pipe_entry;
struct doca_flow_cfg;
struct doca_flow_port_cfg;
struct doca_flow_pipe_cfg;

enum doca_flow_shared_resource_type {
	DOCA_FLOW_SHARED_RESOURCE_METER,
	DOCA_FLOW_SHARED_RESOURCE_COUNTER,
	DOCA_FLOW_SHARED_RESOURCE_RSS,
	DOCA_FLOW_SHARED_RESOURCE_MIRROR,
	DOCA_FLOW_SHARED_RESOURCE_PSP,
	DOCA_FLOW_SHARED_RESOURCE_ENCAP,
	DOCA_FLOW_SHARED_RESOURCE_DECAP,
	DOCA_FLOW_SHARED_RESOURCE_IPSEC_SA,
	DOCA_FLOW_SHARED_RESOURCE_MAX,
};

enum doca_flow_flags_type {
	DOCA_FLOW_NO_WAIT = 0,
	DOCA_FLOW_WAIT_FOR_BATCH = (1 << 0),
};

enum doca_flow_entry_op {
	DOCA_FLOW_ENTRY_OP_ADD,
	DOCA_FLOW_ENTRY_OP_DEL,
	DOCA_FLOW_ENTRY_OP_UPD,
	DOCA_FLOW_ENTRY_OP_AGED,
};

enum doca_flow_entry_status {
	DOCA_FLOW_ENTRY_STATUS_IN_PROCESS,
	DOCA_FLOW_ENTRY_STATUS_SUCCESS,
	DOCA_FLOW_ENTRY_STATUS_ERROR,
};

enum doca_flow_rss_hash_function {
	DOCA_FLOW_RSS_HASH_FUNCTION_TOEPLITZ,
	DOCA_FLOW_RSS_HASH_FUNCTION_SYMMETRIC_TOEPLITZ,
};

/* RSS: the queues (DPDK Rx queue ids of the port) missed packets are spread over */
struct doca_flow_resource_rss_cfg {
	uint32_t outer_flags;
	uint32_t inner_flags;
	uint16_t *queues_array;
	int nr_queues;
	enum doca_flow_rss_hash_function rss_hash_func;
};

typedef void (*doca_flow_entry_process_cb)(struct doca_flow_pipe_entry *entry, uint16_t pipe_queue,
					   enum doca_flow_entry_status status, enum doca_flow_entry_op op,
					   void *user_ctx);

enum doca_flow_pipe_type {
	DOCA_FLOW_PIPE_BASIC,
	DOCA_FLOW_PIPE_CONTROL,
	DOCA_FLOW_PIPE_LPM,
	DOCA_FLOW_PIPE_CT,
	DOCA_FLOW_PIPE_ACL,
	DOCA_FLOW_PIPE_ORDERED_LIST,
	DOCA_FLOW_PIPE_HASH,
};

/* doca_flow_pipe_cfg_set_hash_map_algorithm's flags (a hash pipe's entry pick) */
enum doca_flow_pipe_hash_map_algorithm {
	DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_HASH = 1 << 0, /* the default */
	DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_RANDOM = 1 << 1,
	DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_IDENTITY = 1 << 2,
	DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_ROUND_ROBIN = 1 << 3,
	DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_FLOODING = 1 << 4,
	DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_SELECT_ENABLED = 1 << 5,
};

enum doca_flow_pipe_domain {
	DOCA_FLOW_PIPE_DOMAIN_DEFAULT = 0,
	DOCA_FLOW_PIPE_DOMAIN_SECURE_INGRESS,
	DOCA_FLOW_PIPE_DOMAIN_EGRESS,
	DOCA_FLOW_PIPE_DOMAIN_SECURE_EGRESS,
};

#define DOCA_FLOW_META_SCRATCH_PAD_MAX 10

struct doca_flow_meta {
	doca_be32_t pkt_meta;
	doca_be32_t u32[DOCA_FLOW_META_SCRATCH_PAD_MAX];
};

struct doca_flow_parser_meta {
	uint16_t port_id;
	uint8_t outer_l3_ok;
	uint8_t outer_l4_ok;
	uint8_t outer_ip4_checksum_ok;
	uint8_t outer_ip_fragmented;
};

#define DOCA_FLOW_VLAN_MAX 2

struct doca_flow_header_format {
	struct doca_flow_header_eth eth;
	uint16_t l2_valid_headers;
	struct doca_flow_header_eth_vlan eth_vlan[DOCA_FLOW_VLAN_MAX];
	enum doca_flow_l3_type l3_type;
	union {
		struct doca_flow_header_ip4 ip4;
		struct doca_flow_header_ip6 ip6;
	};
	enum doca_flow_l4_type_ext l4_type_ext;
	union {
		struct doca_flow_header_icmp icmp;
		struct doca_flow_header_udp udp;
		struct doca_flow_header_tcp tcp;
		struct doca_flow_header_l4_port transport;
	};
};

struct doca_flow_match {
	uint32_t flags;
	struct doca_flow_meta meta;
	struct doca_flow_parser_meta parser_meta;
	struct doca_flow_header_format outer;
	struct doca_flow_tun tun;
	struct doca_flow_header_format inner;
};

enum doca_flow_resource_type {
	DOCA_FLOW_RESOURCE_TYPE_NONE,
	DOCA_FLOW_RESOURCE_TYPE_SHARED,
	DOCA_FLOW_RESOURCE_TYPE_NON_SHARED,
};

struct doca_flow_actions {
	uint8_t action_idx;
	uint32_t flags;
	enum doca_flow_resource_type decap_type;
	struct doca_flow_meta meta;
	struct doca_flow_header_format outer;
	struct doca_flow_tun tun;
	bool has_encap;
};

struct doca_flow_action_descs; /* not emulated: pass NULL */

enum doca_flow_meter_limit_type {
	DOCA_FLOW_METER_LIMIT_TYPE_BYTES = 0,
	DOCA_FLOW_METER_LIMIT_TYPE_PACKETS,
};

struct doca_flow_monitor {
	enum doca_flow_resource_type meter_type;
	union {
		struct {
			enum doca_flow_meter_limit_type limit_type;
			uint64_t cir;
			uint64_t cbs;
		} non_shared_meter;
		struct {
			uint32_t shared_meter_id;
		} shared_meter;
	};
	enum doca_flow_resource_type counter_type;
	union {
		struct {
			uint32_t shared_counter_id;
		} shared_counter;
	};
	uint32_t shared_mirror_id;
	bool aging_enabled;
	uint32_t aging_sec;
};

enum doca_flow_fwd_type {
	DOCA_FLOW_FWD_NONE = 0,
	DOCA_FLOW_FWD_RSS,
	DOCA_FLOW_FWD_PORT,
	DOCA_FLOW_FWD_PIPE,
	DOCA_FLOW_FWD_DROP,
	DOCA_FLOW_FWD_TARGET,
	DOCA_FLOW_FWD_ORDERED_LIST_PIPE,
	DOCA_FLOW_FWD_CHANGEABLE,
};

struct doca_flow_fwd {
	enum doca_flow_fwd_type type;
	union {
		struct {
			uint16_t port_id;
		};
		struct {
			struct doca_flow_pipe *next_pipe;
		};
	};
};

struct doca_flow_resource_query {
	union {
		struct {
			uint64_t total_bytes;
			uint64_t total_pkts;
		} counter;
	};
};

struct doca_flow_shared_resource_cfg {
	enum doca_flow_pipe_domain domain;
	union {
		uint8_t opaque[64]; /* meter/rss/mirror configs: not emulated */
	};
};

/* global */
doca_error_t doca_flow_cfg_create(struct doca_flow_cfg **cfg);
doca_error_t doca_flow_cfg_destroy(struct doca_flow_cfg *cfg);
doca_error_t doca_flow_cfg_set_pipe_queues(struct doca_flow_cfg *cfg, uint16_t pipe_queues);
doca_error_t doca_flow_cfg_set_nr_counters(struct doca_flow_cfg *cfg, uint32_t nr_counters);
doca_error_t doca_flow_cfg_set_nr_meters(struct doca_flow_cfg *cfg, uint32_t nr_meters);
doca_error_t doca_flow_cfg_set_queue_depth(struct doca_flow_cfg *cfg, uint32_t queue_depth);
doca_error_t doca_flow_cfg_set_mode_args(struct doca_flow_cfg *cfg, const char *mode_args);
doca_error_t doca_flow_cfg_set_nr_shared_resource(struct doca_flow_cfg *cfg, uint32_t nr_shared_resource,
						  enum doca_flow_shared_resource_type type);
doca_error_t doca_flow_cfg_set_cb_entry_process(struct doca_flow_cfg *cfg, doca_flow_entry_process_cb cb);
doca_error_t doca_flow_cfg_set_default_rss(struct doca_flow_cfg *cfg, const struct doca_flow_resource_rss_cfg *rss);
doca_error_t doca_flow_init(const struct doca_flow_cfg *cfg);
void doca_flow_destroy(void);

/* ports */
doca_error_t doca_flow_port_cfg_create(struct doca_flow_port_cfg **cfg);
doca_error_t doca_flow_port_cfg_destroy(struct doca_flow_port_cfg *cfg);
doca_error_t doca_flow_port_cfg_set_devargs(struct doca_flow_port_cfg *cfg, const char *devargs);
doca_error_t doca_flow_port_cfg_set_port_id(struct doca_flow_port_cfg *cfg, uint16_t port_id);
doca_error_t doca_flow_port_cfg_set_dev(struct doca_flow_port_cfg *cfg, struct doca_dev *dev);
doca_error_t doca_flow_port_start(const struct doca_flow_port_cfg *cfg, struct doca_flow_port **port);
doca_error_t doca_flow_port_stop(struct doca_flow_port *port);
doca_error_t doca_flow_port_pair(struct doca_flow_port *port, struct doca_flow_port *pair_port);

/* pipes */
doca_error_t doca_flow_pipe_cfg_create(struct doca_flow_pipe_cfg **cfg, struct doca_flow_port *port);
doca_error_t doca_flow_pipe_cfg_destroy(struct doca_flow_pipe_cfg *cfg);
doca_error_t doca_flow_pipe_cfg_set_name(struct doca_flow_pipe_cfg *cfg, const char *name);
doca_error_t doca_flow_pipe_cfg_set_type(struct doca_flow_pipe_cfg *cfg, enum doca_flow_pipe_type type);
doca_error_t doca_flow_pipe_cfg_set_is_root(struct doca_flow_pipe_cfg *cfg, bool is_root);
doca_error_t doca_flow_pipe_cfg_set_domain(struct doca_flow_pipe_cfg *cfg, enum doca_flow_pipe_domain domain);
doca_error_t doca_flow_pipe_cfg_set_nr_entries(struct doca_flow_pipe_cfg *cfg, uint32_t nr_entries);
doca_error_t doca_flow_pipe_cfg_set_miss_counter(struct doca_flow_pipe_cfg *cfg, bool miss_counter);
doca_error_t doca_flow_pipe_cfg_set_match(struct doca_flow_pipe_cfg *cfg, const struct doca_flow_match *match,
					  const struct doca_flow_match *match_mask);
doca_error_t doca_flow_pipe_cfg_set_actions(struct doca_flow_pipe_cfg *cfg, struct doca_flow_actions *const *actions,
					    struct doca_flow_actions *const *actions_masks,
					    struct doca_flow_action_descs *const *action_descs, size_t nr_actions);
doca_error_t doca_flow_pipe_cfg_set_monitor(struct doca_flow_pipe_cfg *cfg, const struct doca_flow_monitor *monitor);
doca_error_t doca_flow_pipe_cfg_set_hash_map_algorithm(struct doca_flow_pipe_cfg *cfg, uint32_t algorithm_flags);
doca_error_t doca_flow_pipe_create(const struct doca_flow_pipe_cfg *cfg, const struct doca_flow_fwd *fwd,
				   const struct doca_flow_fwd *fwd_miss, struct doca_flow_pipe **pipe);
void doca_flow_pipe_destroy(struct doca_flow_pipe *pipe);
doca_error_t doca_flow_pipe_update_miss(struct doca_flow_pipe *pipe, const struct doca_flow_fwd *fwd_miss);

/* entries */
doca_error_t doca_flow_pipe_add_entry(uint16_t pipe_queue, struct doca_flow_pipe *pipe,
				      const struct doca_flow_match *match, const struct doca_flow_actions *actions,
				      const struct doca_flow_monitor *monitor, const struct doca_flow_fwd *fwd,
				      uint32_t flags, void *usr_ctx, struct doca_flow_pipe_entry **entry);
doca_error_t doca_flow_pipe_update_entry(uint16_t pipe_queue, struct doca_flow_pipe *pipe,
					 const struct doca_flow_actions *actions, const struct doca_flow_monitor *monitor,
					 const struct doca_flow_fwd *fwd, const enum doca_flow_flags_type flags,
					 struct doca_flow_pipe_entry *entry);
/* a hash pipe's entry at `entry_index` (below the pipe's nr_entries) */
doca_error_t doca_flow_pipe_hash_add_entry(uint16_t pipe_queue, struct doca_flow_pipe *pipe, uint32_t entry_index,
					   const struct doca_flow_actions *actions,
					   const struct doca_flow_monitor *monitor, const struct doca_flow_fwd *fwd,
					   const enum doca_flow_flags_type flags, void *usr_ctx,
					   struct doca_flow_pipe_entry **entry);
/* the index of the entry a frame whose headers are `match` takes in the hash pipe `pipe` */
doca_error_t doca_flow_pipe_calc_hash(struct doca_flow_pipe *pipe, const struct doca_flow_match *match, uint32_t *hash);
doca_error_t doca_flow_pipe_remove_entry(uint16_t pipe_queue, uint32_t flags, struct doca_flow_pipe_entry *entry);
doca_error_t doca_flow_entries_process(struct doca_flow_port *port, uint16_t pipe_queue, uint64_t timeout,
				       uint32_t max_processed_entries);
enum doca_flow_entry_status doca_flow_pipe_entry_get_status(struct doca_flow_pipe_entry *entry);

/* shared resources and counters */
doca_error_t doca_flow_shared_resource_set_cfg(enum doca_flow_shared_resource_type type, uint32_t id,
					       struct doca_flow_shared_resource_cfg *cfg);
doca_error_t doca_flow_shared_resources_bind(enum doca_flow_shared_resource_type type, uint32_t *res_array,
					     uint32_t res_array_len, void *bindable_obj);
doca_error_t doca_flow_shared_resources_query(enum doca_flow_shared_resource_type type, uint32_t *res_array,
					      struct doca_flow_resource_query *query_results_array, uint32_t array_len);
doca_error_t doca_flow_resource_query_entry(struct doca_flow_pipe_entry *entry,
					    struct doca_flow_resource_query *query_stats);
doca_error_t doca_flow_resource_query_pipe_miss(struct doca_flow_pipe *pipe,
						struct doca_flow_resource_query *query_stats);

#ifdef __cplusplus
}
#endif
#endif
