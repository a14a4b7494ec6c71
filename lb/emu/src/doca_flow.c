/* DOCA Flow 2.9 on XDP: pipes and entries are kept here and compiled, at
 * doca_flow_entries_process, into the maps of the table-driven datapath (bpf/emu.bpf.c).
 * Ports are Linux interfaces, bound in the ethdev emulation below this file (dpdk.c: rte_eal_init's
 * "-a IFNAME" or doca_flow_emu_bind_port), as DOCA Flow builds on the DPDK port it is given.
 * Anything outside the emulated subset returns DOCA_ERROR_NOT_SUPPORTED and logs the feature.
 * What the real stack refuses is refused here too; each such check cites its source (the DOCA 2.9
 * doca_flow.h contract, the 2.9 samples, DPDK's mlx5 driver) and lb/README.md tables them. */
#define _GNU_SOURCE
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <doca_flow.h>
#include <doca_flow_emu.h>
#include <doca_log.h>

#include "emu_common.h"
#include "emu_hash.h"
#include "emu.skel.h"
#include "emu_dpdk.h"

DOCA_LOG_REGISTER(DOCA_FLOW_EMU);

#define NOT_SUPPORTED(...) (DOCA_LOG_ERR("not supported by the DOCA Flow emulation: " __VA_ARGS__), \
			    DOCA_ERROR_NOT_SUPPORTED)
#define INVALID(...) (DOCA_LOG_ERR(__VA_ARGS__), DOCA_ERROR_INVALID_VALUE)
#define CHANGEABLE_ID 0xffffffffu
#define MAX_ACTIONS 8
#define MAX_RSS_QUEUES 128
/* DOCA Flow's default queue depth: the 2.9 samples' applications/common/flow_skeleton.c
 * (DEFAULT_QUEUE_DEPTH 128, "DOCA Flow default queue depth", used when queue_depth is 0) */
#define DEFAULT_QUEUE_DEPTH 128
#define MAX_PIPE_QUEUES 64

struct doca_flow_cfg {
	uint16_t pipe_queues;
	uint32_t queue_depth; /* doca_flow_cfg_set_queue_depth; 0: DEFAULT_QUEUE_DEPTH */
	uint32_t nr_counters;
	uint32_t nr_shared_counters;
	char mode_args[64];
	doca_flow_entry_process_cb cb;
	int nr_rss_queues; /* default RSS (doca_flow_cfg_set_default_rss), 0: none */
	uint16_t rss_queues[MAX_RSS_QUEUES];
};

struct doca_flow_port_cfg {
	int port_id;
};

struct doca_flow_pipe_cfg {
	struct doca_flow_port *port;
	char name[64];
	enum doca_flow_pipe_type type;
	bool is_root;
	enum doca_flow_pipe_domain domain;
	uint32_t nr_entries;
	bool miss_counter;
	bool has_match;
	bool actions_set;
	struct doca_flow_match match, match_mask;
	bool has_mask;
	size_t nr_actions;
	struct doca_flow_actions actions[MAX_ACTIONS];
	bool has_monitor;
	struct doca_flow_monitor monitor;
	uint32_t hash_algorithm; /* doca_flow_pipe_cfg_set_hash_map_algorithm, 0: not set */
	doca_error_t deferred; /* a setter saw something unsupported: pipe_create returns it */
};

struct emu_field_map {
	const char *name;
	size_t moff;  /* offset in struct doca_flow_match */
	size_t koff;  /* offset in struct emu_key */
	size_t size;
	bool ip4, l4;
};

#define MF(n, m, k, s, ip, l4) {n, offsetof(struct doca_flow_match, m), offsetof(struct emu_key, k), s, ip, l4}
static const struct emu_field_map FIELDS[] = {
	MF("outer.eth.dst_mac", outer.eth.dst_mac, dst_mac, 6, false, false),
	MF("outer.eth.src_mac", outer.eth.src_mac, src_mac, 6, false, false),
	MF("outer.eth.type", outer.eth.type, eth_type, 2, false, false),
	MF("outer.ip4.src_ip", outer.ip4.src_ip, src_ip, 4, true, false),
	MF("outer.ip4.dst_ip", outer.ip4.dst_ip, dst_ip, 4, true, false),
	MF("outer.ip4.next_proto", outer.ip4.next_proto, next_proto, 1, true, false),
	MF("outer.l4 src_port", outer.transport.src_port, src_port, 2, false, true),
	MF("outer.l4 dst_port", outer.transport.dst_port, dst_port, 2, false, true),
};
#define NFIELDS (sizeof(FIELDS) / sizeof(FIELDS[0]))

struct region {
	const char *name;
	size_t off, size;
};
#define MR(n, m) {n, offsetof(struct doca_flow_match, m), sizeof(((struct doca_flow_match *)0)->m)}
static const struct region MATCH_REGIONS[] = {
	MR("match.flags", flags),
	MR("meta", meta),
	MR("parser_meta", parser_meta),
	MR("outer.l2_valid_headers (VLAN)", outer.l2_valid_headers),
	MR("outer.eth_vlan", outer.eth_vlan),
	MR("outer.ip4/ip6 fields other than ip4.src_ip, ip4.dst_ip, ip4.next_proto", outer.ip6),
	MR("outer L4 fields other than src_port, dst_port (tcp.flags, icmp, ...)", outer.tcp),
	MR("tun", tun),
	MR("inner", inner),
};
#define AR(n, m) {n, offsetof(struct doca_flow_actions, m), sizeof(((struct doca_flow_actions *)0)->m)}
static const struct region ACTION_REGIONS[] = {
	AR("actions.flags", flags),
	AR("decap", decap_type),
	AR("meta modification", meta),
	AR("outer header modification other than eth.dst_mac, eth.src_mac", outer),
	AR("tunnel modification", tun),
	AR("encap", has_encap),
};

struct emu_pipe_state;

struct doca_flow_port {
	int id;
	bool started;
	char ifname[IF_NAMESIZE];
	int ifindex;
	bool attached;
	int link_fd; /* BPF link of the XDP attachment: closed on detach, or by the kernel on exit */
	struct doca_flow_pipe *root;
	struct doca_flow_port *pair; /* doca_flow_port_pair */
	uint32_t in_queue[MAX_PIPE_QUEUES]; /* operations per pipe queue not yet completed (entries_process) */
};

struct doca_flow_pipe {
	struct doca_flow_port *port;
	char name[64];
	enum doca_flow_pipe_type type; /* BASIC or HASH */
	uint32_t hash_entries; /* a HASH pipe's nr_entries: its entries' indices are below it */
	struct emu_key mask, const_key;
	bool changeable[NFIELDS];
	uint32_t nr_actions;
	struct emu_action act_tmpl[MAX_ACTIONS];
	bool act_dst_changeable[MAX_ACTIONS], act_src_changeable[MAX_ACTIONS];
	enum doca_flow_resource_type counter_type;
	uint32_t shared_id; /* CHANGEABLE_ID: per entry */
	struct emu_pipe miss;
	size_t direct_koff, direct_size;
	bool pushed;
	uint32_t nr_entries;
	bool miss_counter; /* holds one counter of the nr_counters pool */
};

struct doca_flow_pipe_entry {
	struct doca_flow_pipe *pipe;
	struct emu_key key;
	struct emu_action act;
	uint32_t direct_idx; /* slot in the direct table, if the pipe has one */
	enum doca_flow_entry_status status;
	uint16_t queue; /* the pipe queue it was added on (its completion is pulled from there) */
	bool pending, pushed;
	void *usr_ctx;
	struct doca_flow_pipe_entry *next_pending;
	bool removing;	   /* doca_flow_pipe_remove_entry queued it; gone at the next process of del_queue */
	uint16_t del_queue; /* the pipe queue its removal was queued on */
	/* doca_flow_pipe_update_entry queued new actions: written in place at the next process of
	 * upd_queue (the entry is in g.upd_head's list through next_update meanwhile) */
	bool updating;
	uint16_t upd_queue;
	struct emu_action upd_act;
	struct doca_flow_pipe_entry *next_update;
};

static struct {
	bool initialized;
	struct doca_flow_cfg cfg;
	struct doca_flow_port ports[EMU_MAX_PORTS];
	struct emu_bpf *skel;
	bool entry_ids[EMU_MAX_ENTRIES];
	bool shared_cfg[EMU_MAX_SHARED_CNT], shared_bound[EMU_MAX_SHARED_CNT];
	struct doca_flow_pipe_entry *pending_head, **pending_tail;
	struct doca_flow_pipe_entry *upd_head; /* entries with a queued update, in the order queued */
	uint32_t xdp_flags;
	/* DOCA_FLOW_EMU_ATTACH=pin:<path>: the datapath program is pinned there instead of attached
	 * (emulation only: a harness attaches it, e.g. to swap it atomically with other XDP programs on
	 * the same port); "" = attach by a BPF link, as DOCA's hardware steering takes effect at once */
	char pin_path[256];
	bool pinned;
	uint32_t counters_used; /* of g.cfg.nr_counters: pipe miss counters and per-entry counters */
} g = {.pending_tail = &g.pending_head};

static bool all_zero(const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		if (c[i])
			return false;
	return true;
}

static bool all_ones(const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		if (c[i] != 0xff)
			return false;
	return true;
}

/* ---------------------------------------------------------------- global */
doca_error_t doca_flow_cfg_create(struct doca_flow_cfg **cfg)
{
	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	*cfg = calloc(1, sizeof(**cfg));
	return *cfg ? DOCA_SUCCESS : DOCA_ERROR_NO_MEMORY;
}

doca_error_t doca_flow_cfg_destroy(struct doca_flow_cfg *cfg)
{
	free(cfg);
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_cfg_set_pipe_queues(struct doca_flow_cfg *cfg, uint16_t pipe_queues)
{
	if (!cfg || !pipe_queues)
		return DOCA_ERROR_INVALID_VALUE;
	if (pipe_queues > MAX_PIPE_QUEUES)
		return NOT_SUPPORTED("%u pipe queues (at most %d)", pipe_queues, MAX_PIPE_QUEUES);
	cfg->pipe_queues = pipe_queues;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_cfg_set_nr_counters(struct doca_flow_cfg *cfg, uint32_t nr_counters)
{
	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	if (nr_counters > EMU_MAX_ENTRIES)
		return NOT_SUPPORTED("%u counters (at most %u)", nr_counters, EMU_MAX_ENTRIES);
	cfg->nr_counters = nr_counters;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_cfg_set_nr_meters(struct doca_flow_cfg *cfg, uint32_t nr_meters)
{
	(void)cfg;
	if (nr_meters)
		return NOT_SUPPORTED("meters (doca_flow_cfg_set_nr_meters %u)", nr_meters);
	return DOCA_SUCCESS;
}

/* The queue depth bounds the operations a pipe queue holds until doca_flow_entries_process
 * completes them (checked in doca_flow_pipe_add_entry). 0: the default, 128. */
doca_error_t doca_flow_cfg_set_queue_depth(struct doca_flow_cfg *cfg, uint32_t queue_depth)
{
	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	cfg->queue_depth = queue_depth;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_cfg_set_mode_args(struct doca_flow_cfg *cfg, const char *mode_args)
{
	if (!cfg || !mode_args)
		return DOCA_ERROR_INVALID_VALUE;
	if (strcmp(mode_args, "vnf,hws") && strcmp(mode_args, "vnf,hws,isolated"))
		return NOT_SUPPORTED("mode_args '%s' (only \"vnf,hws\")", mode_args);
	snprintf(cfg->mode_args, sizeof(cfg->mode_args), "%s", mode_args);
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_cfg_set_nr_shared_resource(struct doca_flow_cfg *cfg, uint32_t nr_shared_resource,
						  enum doca_flow_shared_resource_type type)
{
	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	if (type != DOCA_FLOW_SHARED_RESOURCE_COUNTER) {
		if (!nr_shared_resource)
			return DOCA_SUCCESS;
		return NOT_SUPPORTED("shared resource type %d (only DOCA_FLOW_SHARED_RESOURCE_COUNTER)", type);
	}
	if (nr_shared_resource > EMU_MAX_SHARED_CNT)
		return NOT_SUPPORTED("%u shared counters (at most %u)", nr_shared_resource, EMU_MAX_SHARED_CNT);
	cfg->nr_shared_counters = nr_shared_resource;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_cfg_set_cb_entry_process(struct doca_flow_cfg *cfg, doca_flow_entry_process_cb cb)
{
	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	cfg->cb = cb;
	return DOCA_SUCCESS;
}

/* doca_flow.h (2.9): doca_flow_cfg_set_default_rss "received invalid input" → INVALID_VALUE; every
 * 2.9 sample (flow_common.c init_doca_flow_cb) sets it: queues 0..nb_queues-1 */
doca_error_t doca_flow_cfg_set_default_rss(struct doca_flow_cfg *cfg, const struct doca_flow_resource_rss_cfg *rss)
{
	if (!cfg || !rss || rss->nr_queues <= 0 || !rss->queues_array)
		return INVALID("Failed to set the default RSS: %s", !rss ? "no configuration"
						      : rss->nr_queues <= 0 ? "no queues (nr_queues)"
									    : "no queues_array");
	if (rss->nr_queues > MAX_RSS_QUEUES)
		return NOT_SUPPORTED("%d default RSS queues (at most %d)", rss->nr_queues, MAX_RSS_QUEUES);
	cfg->nr_rss_queues = rss->nr_queues;
	memcpy(cfg->rss_queues, rss->queues_array, sizeof(uint16_t) * (size_t)rss->nr_queues);
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_init(const struct doca_flow_cfg *cfg)
{
	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	if (g.initialized)
		return INVALID("Failed to init DOCA Flow: already initialized");
	if (!cfg->mode_args[0])
		return INVALID("Failed to init DOCA Flow: no mode_args (doca_flow_cfg_set_mode_args)");
	g.cfg = *cfg;
	if (!g.cfg.queue_depth)
		g.cfg.queue_depth = DEFAULT_QUEUE_DEPTH;
	g.counters_used = 0;
	for (int i = 0; i < EMU_MAX_PORTS; i++)
		g.ports[i].id = i;
	const char *mode = getenv("DOCA_FLOW_EMU_XDP_MODE");
	g.xdp_flags = XDP_FLAGS_UPDATE_IF_NOEXIST |
		      (mode && !strcmp(mode, "generic") ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE);
	const char *att = getenv("DOCA_FLOW_EMU_ATTACH");

	g.pin_path[0] = '\0';
	g.pinned = false;
	if (att && *att && strcmp(att, "link")) {
		if (strncmp(att, "pin:", 4) || att[4] != '/' || strlen(att + 4) >= sizeof(g.pin_path))
			return INVALID("Failed to init DOCA Flow: DOCA_FLOW_EMU_ATTACH=%s is not \"link\" or "
				       "\"pin:<absolute path on a bpffs, at most %zu bytes>\"",
				       att, sizeof(g.pin_path) - 1);
		snprintf(g.pin_path, sizeof(g.pin_path), "%s", att + 4);
	}
	g.initialized = true;
	return DOCA_SUCCESS;
}

/* ---------------------------------------------------------------- ports */
doca_error_t doca_flow_port_cfg_create(struct doca_flow_port_cfg **cfg)
{
	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	*cfg = calloc(1, sizeof(**cfg));
	if (!*cfg)
		return DOCA_ERROR_NO_MEMORY;
	(*cfg)->port_id = -1;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_port_cfg_destroy(struct doca_flow_port_cfg *cfg)
{
	free(cfg);
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_port_cfg_set_devargs(struct doca_flow_port_cfg *cfg, const char *devargs)
{
	char *end;
	long id;

	if (!cfg || !devargs)
		return DOCA_ERROR_INVALID_VALUE;
	id = strtol(devargs, &end, 10);
	if (end == devargs || *end || id < 0 || id >= EMU_MAX_PORTS)
		return NOT_SUPPORTED("port devargs '%s' (only a DPDK port id 0..%d)", devargs, EMU_MAX_PORTS - 1);
	cfg->port_id = (int)id;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_port_cfg_set_port_id(struct doca_flow_port_cfg *cfg, uint16_t port_id)
{
	if (!cfg || port_id >= EMU_MAX_PORTS)
		return DOCA_ERROR_INVALID_VALUE;
	cfg->port_id = port_id;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_port_cfg_set_dev(struct doca_flow_port_cfg *cfg, struct doca_dev *dev)
{
	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	if (dev)
		return NOT_SUPPORTED("doca_dev ports (bind ports with the EAL: -a IFNAME)");
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_port_start(const struct doca_flow_port_cfg *cfg, struct doca_flow_port **port)
{
	struct doca_flow_port *p;
	const char *ifname;

	if (!g.initialized)
		return INVALID("Failed to start port: DOCA Flow not initialized");
	if (!cfg || !port || cfg->port_id < 0)
		return INVALID("Failed to start port: no port id (doca_flow_port_cfg_set_devargs)");
	p = &g.ports[cfg->port_id];
	if (p->started)
		return INVALID("Failed to start port %d: already started", p->id);
	ifname = doca_flow_emu_port_ifname((uint16_t)p->id);
	if (!ifname[0])
		return INVALID("Failed to start port %d: not bound to an interface (EAL -a IFNAME)", p->id);
	/* the 2.9 samples' order (flow_hairpin_vnf_main.c, flow_fwd_miss_main.c): DPDK ports are
	 * configured and started (dpdk_queues_and_ports_init) before DOCA Flow starts on them; in VNF
	 * mode a DOCA Flow port is the DPDK port of that id */
	if (!emu_eth_started((uint16_t)p->id))
		return INVALID("Failed to start port %d: DPDK port %d is not started (rte_eth_dev_start first)", p->id,
			       p->id);
	/* the default RSS spreads the port's missed packets over its Rx queues: mlx5_flow.c
	 * (mlx5_validate_action_rss) refuses a queue beyond the configured ones ("queue index out of
	 * range") and a hairpin queue among regular ones */
	for (int i = 0; i < g.cfg.nr_rss_queues; i++) {
		uint16_t q = g.cfg.rss_queues[i];
		int kind = emu_eth_rxq_kind((uint16_t)p->id, q);

		if (kind != 1)
			return INVALID("Failed to start port %d: default RSS queue %u %s", p->id, q,
				       q >= emu_eth_nb_rxq((uint16_t)p->id) ? "is out of range (rte_eth_dev_configure)"
				       : kind == 2 ? "is a hairpin queue (combining hairpin and regular RSS queues "
						     "is not supported)"
						   : "is not set up");
	}
	p->ifindex = (int)if_nametoindex(ifname);
	if (!p->ifindex)
		return INVALID("Failed to start port %d: interface %s: %s", p->id, ifname, strerror(errno));
	if (p->ifindex >= EMU_MAX_IFINDEX)
		return NOT_SUPPORTED("port %d: interface %s has ifindex %d (at most %d)", p->id, ifname,
				     p->ifindex, EMU_MAX_IFINDEX - 1);
	snprintf(p->ifname, IF_NAMESIZE, "%s", ifname);
	memset(p->in_queue, 0, sizeof(p->in_queue));
	p->started = true;
	p->attached = false;
	p->root = NULL;
	p->pair = NULL;
	*port = p;
	DOCA_LOG_INFO("port %d started on %s (ifindex %d)", p->id, p->ifname, p->ifindex);
	return DOCA_SUCCESS;
}

/* doca_flow.h (2.9): "pair two doca flow ports ... the same as the actual physical layer paired
 * information. Those two pair ports have no order, a port cannot be paired with itself. ... In VNF
 * mode, pair information will be translated to queue action to redirect packets to its pair
 * port." Invalid input → DOCA_ERROR_INVALID_VALUE. The samples pair port 1 with port 0
 * (flow_common.c init_doca_flow_ports_with_op_state), as the thesis code does. */
doca_error_t doca_flow_port_pair(struct doca_flow_port *port, struct doca_flow_port *pair_port)
{
	if (!port || !pair_port || !port->started || !pair_port->started)
		return INVALID("Failed to pair ports: %s", !port || !pair_port ? "NULL port" : "port not started");
	if (port == pair_port)
		return INVALID("Failed to pair port %d with itself", port->id);
	/* one pair per port (the physical pairing); pairing the same two again is harmless */
	if ((port->pair && port->pair != pair_port) || (pair_port->pair && pair_port->pair != port))
		return INVALID("Failed to pair ports %d and %d: already paired (%d with %d)", port->id, pair_port->id,
			       port->pair ? port->id : pair_port->id, port->pair ? port->pair->id : pair_port->pair->id);
	port->pair = pair_port;
	pair_port->pair = port;
	DOCA_LOG_INFO("ports %d and %d paired", port->id, pair_port->id);
	return DOCA_SUCCESS;
}

static void detach(struct doca_flow_port *p)
{
	if (!p->attached)
		return;
	p->attached = false;
	if (p->link_fd < 0) { /* DOCA_FLOW_EMU_ATTACH=pin: the pin goes with the last port using it */
		for (int i = 0; i < EMU_MAX_PORTS; i++)
			if (g.ports[i].attached)
				return;
		if (g.pinned && unlink(g.pin_path))
			DOCA_LOG_ERR("Failed to unpin the datapath at %s: %s", g.pin_path, strerror(errno));
		else
			DOCA_LOG_INFO("datapath unpinned from %s", g.pin_path);
		g.pinned = false;
		return;
	}
	/* a BPF link: closing it detaches; if the process dies instead, the kernel closes it, so a
	 * crashed application never leaves the datapath attached */
	close(p->link_fd);
	p->link_fd = -1;
	DOCA_LOG_INFO("port %d: XDP detached from %s", p->id, p->ifname);
}

doca_error_t doca_flow_port_stop(struct doca_flow_port *port)
{
	if (!port || !port->started)
		return DOCA_ERROR_INVALID_VALUE;
	if (port->root)
		doca_flow_pipe_destroy(port->root);
	detach(port);
	if (port->pair) {
		port->pair->pair = NULL;
		port->pair = NULL;
	}
	if (g.skel) {
		uint32_t k = port->ifindex, id = port->id;
		struct emu_pipe off = {0};

		bpf_map_update_elem(bpf_map__fd(g.skel->maps.pipes), &k, &off, BPF_ANY);
		bpf_map_delete_elem(bpf_map__fd(g.skel->maps.tx_ports), &id);
	}
	port->started = false;
	return DOCA_SUCCESS;
}

void doca_flow_destroy(void)
{
	for (int i = 0; i < EMU_MAX_PORTS; i++)
		if (g.ports[i].started)
			doca_flow_port_stop(&g.ports[i]);
	if (g.skel)
		emu_bpf__destroy(g.skel);
	g.skel = NULL;
	memset(g.shared_cfg, 0, sizeof(g.shared_cfg));
	memset(g.shared_bound, 0, sizeof(g.shared_bound));
	memset(g.entry_ids, 0, sizeof(g.entry_ids));
	g.counters_used = 0;
	g.initialized = false;
}

/* ---------------------------------------------------------------- pipe cfg */
doca_error_t doca_flow_pipe_cfg_create(struct doca_flow_pipe_cfg **cfg, struct doca_flow_port *port)
{
	if (!cfg || !port)
		return DOCA_ERROR_INVALID_VALUE;
	*cfg = calloc(1, sizeof(**cfg));
	if (!*cfg)
		return DOCA_ERROR_NO_MEMORY;
	(*cfg)->port = port;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_pipe_cfg_destroy(struct doca_flow_pipe_cfg *cfg)
{
	free(cfg);
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_pipe_cfg_set_name(struct doca_flow_pipe_cfg *cfg, const char *name)
{
	if (!cfg || !name)
		return DOCA_ERROR_INVALID_VALUE;
	snprintf(cfg->name, sizeof(cfg->name), "%s", name);
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_pipe_cfg_set_type(struct doca_flow_pipe_cfg *cfg, enum doca_flow_pipe_type type)
{
	static const char *names[] = {"BASIC", "CONTROL", "LPM", "CT", "ACL", "ORDERED_LIST", "HASH"};

	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	if (type != DOCA_FLOW_PIPE_BASIC && type != DOCA_FLOW_PIPE_HASH)
		return NOT_SUPPORTED("pipe type DOCA_FLOW_PIPE_%s (only BASIC, HASH)",
				     (unsigned)type < 7 ? names[type] : "?");
	cfg->type = type;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_pipe_cfg_set_is_root(struct doca_flow_pipe_cfg *cfg, bool is_root)
{
	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	cfg->is_root = is_root;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_pipe_cfg_set_domain(struct doca_flow_pipe_cfg *cfg, enum doca_flow_pipe_domain domain)
{
	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	if (domain != DOCA_FLOW_PIPE_DOMAIN_DEFAULT)
		return NOT_SUPPORTED("pipe domain %d (only DOCA_FLOW_PIPE_DOMAIN_DEFAULT)", domain);
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_pipe_cfg_set_nr_entries(struct doca_flow_pipe_cfg *cfg, uint32_t nr_entries)
{
	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	if (nr_entries > EMU_MAX_ENTRIES)
		return NOT_SUPPORTED("%u entries in a pipe (at most %u)", nr_entries, EMU_MAX_ENTRIES);
	cfg->nr_entries = nr_entries;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_pipe_cfg_set_miss_counter(struct doca_flow_pipe_cfg *cfg, bool miss_counter)
{
	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	cfg->miss_counter = miss_counter;
	return DOCA_SUCCESS;
}

/* doca_flow.h: "Set pipe map algorithm - supported only in hash pipe" (the pipe's type is checked
 * at doca_flow_pipe_create, since the setters may come in any order). The emulation picks entries
 * by hash only (DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_HASH, the default). */
doca_error_t doca_flow_pipe_cfg_set_hash_map_algorithm(struct doca_flow_pipe_cfg *cfg, uint32_t algorithm_flags)
{
	if (!cfg || !algorithm_flags)
		return INVALID("Failed to set the hash map algorithm: %s", !cfg ? "no cfg" : "no algorithm (0)");
	if (algorithm_flags != DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_HASH)
		return cfg->deferred = NOT_SUPPORTED("hash map algorithm flags 0x%x (only "
						     "DOCA_FLOW_PIPE_HASH_MAP_ALGORITHM_HASH)", algorithm_flags);
	cfg->hash_algorithm = algorithm_flags;
	return DOCA_SUCCESS;
}

static doca_error_t check_regions(const void *obj, const struct region *r, size_t n, const void *skip_obj,
				  const char *what)
{
	const unsigned char *o = obj, *s = skip_obj;

	for (size_t i = 0; i < n; i++) {
		for (size_t b = r[i].off; b < r[i].off + r[i].size; b++) {
			if (o[b] && !(s && s[b]))
				return NOT_SUPPORTED("%s: %s", what, r[i].name);
		}
	}
	return DOCA_SUCCESS;
}

/* supported match bytes: set to 0xff in a "skip" image so check_regions ignores them */
static void match_skip_image(struct doca_flow_match *skip)
{
	memset(skip, 0, sizeof(*skip));
	for (size_t f = 0; f < NFIELDS; f++)
		memset((unsigned char *)skip + FIELDS[f].moff, 0xff, FIELDS[f].size);
}

static doca_error_t check_match(const struct doca_flow_match *m, const char *what)
{
	struct doca_flow_match skip;

	if (!m)
		return DOCA_SUCCESS;
	if (m->outer.l3_type != DOCA_FLOW_L3_TYPE_NONE && m->outer.l3_type != DOCA_FLOW_L3_TYPE_IP4)
		return NOT_SUPPORTED("%s: outer.l3_type %d (only IP4)", what, m->outer.l3_type);
	if (m->outer.l4_type_ext != DOCA_FLOW_L4_TYPE_EXT_NONE && m->outer.l4_type_ext != DOCA_FLOW_L4_TYPE_EXT_UDP &&
	    m->outer.l4_type_ext != DOCA_FLOW_L4_TYPE_EXT_TCP)
		return NOT_SUPPORTED("%s: outer.l4_type_ext %d (only UDP, TCP)", what, m->outer.l4_type_ext);
	match_skip_image(&skip);
	return check_regions(m, MATCH_REGIONS, sizeof(MATCH_REGIONS) / sizeof(MATCH_REGIONS[0]), &skip, what);
}

doca_error_t doca_flow_pipe_cfg_set_match(struct doca_flow_pipe_cfg *cfg, const struct doca_flow_match *match,
					  const struct doca_flow_match *match_mask)
{
	doca_error_t r;

	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	if ((r = check_match(match, "pipe match")) || (r = check_match(match_mask, "pipe match_mask"))) {
		cfg->deferred = r;
		return r;
	}
	memset(&cfg->match, 0, sizeof(cfg->match));
	memset(&cfg->match_mask, 0, sizeof(cfg->match_mask));
	if (match)
		cfg->match = *match;
	cfg->has_mask = match_mask != NULL;
	if (match_mask)
		cfg->match_mask = *match_mask;
	cfg->has_match = match != NULL;
	return DOCA_SUCCESS;
}

static doca_error_t check_actions(const struct doca_flow_actions *a, const char *what)
{
	struct doca_flow_actions skip;

	memset(&skip, 0, sizeof(skip));
	memset(skip.outer.eth.dst_mac, 0xff, 6);
	memset(skip.outer.eth.src_mac, 0xff, 6);
	return check_regions(a, ACTION_REGIONS, sizeof(ACTION_REGIONS) / sizeof(ACTION_REGIONS[0]), &skip, what);
}

doca_error_t doca_flow_pipe_cfg_set_actions(struct doca_flow_pipe_cfg *cfg, struct doca_flow_actions *const *actions,
					    struct doca_flow_actions *const *actions_masks,
					    struct doca_flow_action_descs *const *action_descs, size_t nr_actions)
{
	doca_error_t r;

	/* doca_flow.h (2.9): "nr_actions must not be zero, and actions must not be NULL" */
	if (!cfg || !nr_actions || !actions)
		return INVALID("Failed to set pipe actions: %s", !cfg ? "no cfg" : !nr_actions ? "nr_actions is 0"
											: "actions is NULL");
	if (actions_masks)
		return cfg->deferred = NOT_SUPPORTED("action masks (pass NULL: fields set to all-ones are changeable)");
	if (action_descs)
		return cfg->deferred = NOT_SUPPORTED("action descriptors (doca_flow_action_descs)");
	if (nr_actions > MAX_ACTIONS)
		return cfg->deferred = NOT_SUPPORTED("%zu action templates (at most %d)", nr_actions, MAX_ACTIONS);
	for (size_t i = 0; i < nr_actions; i++) {
		if (!actions[i])
			return DOCA_ERROR_INVALID_VALUE;
		if ((r = check_actions(actions[i], "pipe actions")))
			return cfg->deferred = r;
		cfg->actions[i] = *actions[i];
	}
	cfg->nr_actions = nr_actions;
	cfg->actions_set = true;
	return DOCA_SUCCESS;
}

static doca_error_t check_monitor(const struct doca_flow_monitor *m, const char *what)
{
	if (m->meter_type != DOCA_FLOW_RESOURCE_TYPE_NONE)
		return NOT_SUPPORTED("%s: meters", what);
	if (m->shared_mirror_id)
		return NOT_SUPPORTED("%s: shared mirror %u", what, m->shared_mirror_id);
	if (m->aging_enabled)
		return NOT_SUPPORTED("%s: aging", what);
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_pipe_cfg_set_monitor(struct doca_flow_pipe_cfg *cfg, const struct doca_flow_monitor *monitor)
{
	doca_error_t r;

	if (!cfg || !monitor)
		return DOCA_ERROR_INVALID_VALUE;
	if ((r = check_monitor(monitor, "pipe monitor")))
		return cfg->deferred = r;
	cfg->monitor = *monitor;
	cfg->has_monitor = true;
	return DOCA_SUCCESS;
}

static doca_error_t fwd_to_emu(const struct doca_flow_port *from, const struct doca_flow_fwd *fwd, bool miss,
			       uint32_t *kind, uint32_t *port)
{
	if (!fwd || fwd->type == DOCA_FLOW_FWD_NONE || fwd->type == DOCA_FLOW_FWD_DROP) {
		if (!miss && (!fwd || fwd->type == DOCA_FLOW_FWD_NONE))
			return INVALID("pipe fwd: none given (DOCA_FLOW_FWD_PORT or DOCA_FLOW_FWD_DROP)");
		*kind = EMU_FWD_DROP;
		*port = 0;
		return DOCA_SUCCESS;
	}
	if (fwd->type == DOCA_FLOW_FWD_PORT) {
		if (fwd->port_id >= EMU_MAX_PORTS || !g.ports[fwd->port_id].started)
			return INVALID("fwd: port %u is not started", fwd->port_id);
		/* doca_flow.h (2.9) doca_flow_port_pair: in VNF mode the pair "will be translated to queue
		 * action to redirect packets to its pair port" — forwarding to another port goes through
		 * the pair's hairpin queues, so there is no way to another port without a pair */
		if (fwd->port_id != from->id && (!from->pair || from->pair->id != fwd->port_id))
			return INVALID("%s: port %d forwards to port %u, which is not its pair (doca_flow_port_pair)",
				       miss ? "fwd_miss" : "fwd", from->id, fwd->port_id);
		*kind = EMU_FWD_PORT;
		*port = fwd->port_id;
		return DOCA_SUCCESS;
	}
	return NOT_SUPPORTED("%s type %d (only DOCA_FLOW_FWD_PORT, DOCA_FLOW_FWD_DROP)", miss ? "fwd_miss" : "fwd",
			     fwd->type);
}

/* A mask that is one contiguous run of <= EMU_DIRECT_BITS bits of one IP address or L4 port
 * (besides the l3/l4 selectors and the port) compiles into a direct table instead of a hash
 * lookup: XenoFlow's class mask is the case this is for. */
static void compile_direct(struct doca_flow_pipe *p)
{
	static const struct {
		size_t koff, size;
		uint32_t kind;
	} D[] = {{offsetof(struct emu_key, src_ip), 4, EMU_DIRECT_SRC_IP},
		 {offsetof(struct emu_key, dst_ip), 4, EMU_DIRECT_DST_IP},
		 {offsetof(struct emu_key, src_port), 2, EMU_DIRECT_SRC_PORT},
		 {offsetof(struct emu_key, dst_port), 2, EMU_DIRECT_DST_PORT}};
	int nmasked = 0, which = -1;
	uint32_t m = 0, shift = 0, w;

	p->miss.direct = EMU_DIRECT_NONE;
	for (size_t f = 0; f < NFIELDS; f++)
		if (!all_zero((unsigned char *)&p->mask + FIELDS[f].koff, FIELDS[f].size))
			nmasked++;
	if (nmasked != 1)
		return;
	for (int d = 0; d < 4; d++) {
		unsigned char *b = (unsigned char *)&p->mask + D[d].koff;

		if (!all_zero(b, D[d].size)) {
			which = d;
			for (size_t i = 0; i < D[d].size; i++)
				m = (m << 8) | b[i]; /* network → host order */
		}
	}
	if (which < 0)
		return;
	while (!((m >> shift) & 1))
		shift++;
	w = m >> shift;
	if ((w & (w + 1)) || __builtin_popcount(w) > EMU_DIRECT_BITS)
		return;
	p->miss.direct = D[which].kind;
	p->miss.direct_shift = shift;
	p->miss.direct_mask = w;
	p->direct_koff = D[which].koff;
	p->direct_size = D[which].size;
	p->miss.sel = p->const_key;
	for (size_t b = 0; b < sizeof(p->miss.sel); b++)
		((unsigned char *)&p->miss.sel)[b] &= ((unsigned char *)&p->mask)[b];
	memset((unsigned char *)&p->miss.sel + D[which].koff, 0, D[which].size);
	p->miss.sel.port = (uint16_t)p->port->id;
}

static uint32_t direct_index(const struct doca_flow_pipe *p, const struct emu_key *key)
{
	const unsigned char *b = (const unsigned char *)key + p->direct_koff;
	uint32_t v = 0;

	for (size_t i = 0; i < p->direct_size; i++)
		v = (v << 8) | b[i];
	return (uint32_t)p->port->id * EMU_DIRECT_SLOTS + ((v >> p->miss.direct_shift) & p->miss.direct_mask);
}

int doca_flow_emu_pipe_is_direct(const struct doca_flow_pipe *pipe)
{
	return pipe && pipe->miss.direct != EMU_DIRECT_NONE;
}

/* A BASIC pipe's match: per field a mask (the match_mask's bytes, or all-ones where the match is
 * non-zero), and either a constant (the pipe's value) or "changeable" (all-ones: the entry's value) */
static doca_error_t compile_basic_match(const struct doca_flow_pipe_cfg *cfg, struct doca_flow_pipe *p)
{
	bool any_ip4 = false, any_l4 = false;

	for (size_t f = 0; f < NFIELDS; f++) {
		const unsigned char *v = (const unsigned char *)&cfg->match + FIELDS[f].moff;
		const unsigned char *mk = (const unsigned char *)&cfg->match_mask + FIELDS[f].moff;
		unsigned char *m = (unsigned char *)&p->mask + FIELDS[f].koff;
		unsigned char *c = (unsigned char *)&p->const_key + FIELDS[f].koff;

		for (size_t b = 0; b < FIELDS[f].size; b++)
			m[b] = cfg->has_mask ? mk[b] : (all_zero(v, FIELDS[f].size) ? 0 : 0xff);
		p->changeable[f] = all_ones(v, FIELDS[f].size);
		if (!p->changeable[f])
			memcpy(c, v, FIELDS[f].size);
		if (!all_zero(m, FIELDS[f].size)) {
			any_ip4 |= FIELDS[f].ip4;
			any_l4 |= FIELDS[f].l4;
		}
	}
	/* l3_type / l4_type_ext select the header: always matched when given; IPv4 fields imply IP4 */
	if (cfg->match.outer.l3_type == DOCA_FLOW_L3_TYPE_IP4 || any_ip4) {
		p->mask.l3_type = 0xff;
		p->const_key.l3_type = EMU_L3_IP4;
	}
	if (cfg->match.outer.l4_type_ext != DOCA_FLOW_L4_TYPE_EXT_NONE) {
		p->mask.l4_type = 0xff;
		p->const_key.l4_type = cfg->match.outer.l4_type_ext == DOCA_FLOW_L4_TYPE_EXT_UDP ? EMU_L4_UDP : EMU_L4_TCP;
		p->mask.l3_type = 0xff;
		p->const_key.l3_type = EMU_L3_IP4;
	} else if (any_l4) {
		return INVALID("Failed to create pipe %s: L4 ports matched without outer.l4_type_ext", cfg->name);
	}
	p->mask.port = 0xffff;
	compile_direct(p);
	return DOCA_SUCCESS;
}

/* A HASH pipe's match (doca-samples 2.9 flow_hash_pipe, flow_ecmp: match NULL, "match mask
 * defines which header fields to use in order to calculate the entry index"): the match_mask's
 * fields are hashed (emu_hash.h) together with the l3/l4 selectors, never the port; the hash,
 * masked to nr_entries rounded up to a power of 2, is the index of the entry a frame takes
 * (mlx5dr_rule_hash_calculate's index mode: the table's log2 size). DOCA's flow_ecmp sample warns
 * on nr_entries that is not a power of 2 that "part of traffic will be lost" instead of refusing
 * it: the indices from nr_entries up to the power of 2 never get an entry, so their frames miss.
 * The emulation's choices (DOCA documents neither): match values on a hash pipe, and a
 * match_mask naming no field, are refused. */
static doca_error_t compile_hash_match(const struct doca_flow_pipe_cfg *cfg, struct doca_flow_pipe *p)
{
	bool any = false, any_ip4 = false, any_l4 = false;
	enum doca_flow_l3_type l3 = cfg->match_mask.outer.l3_type;
	enum doca_flow_l4_type_ext l4 = cfg->match_mask.outer.l4_type_ext;
	uint32_t size = 1;

	for (size_t f = 0; f < NFIELDS; f++) {
		const unsigned char *mk = (const unsigned char *)&cfg->match_mask + FIELDS[f].moff;

		if (cfg->has_match && !all_zero((const unsigned char *)&cfg->match + FIELDS[f].moff, FIELDS[f].size))
			return NOT_SUPPORTED("match values on hash pipe %s (%s: it hashes the fields of its match_mask; "
					     "pass match NULL)", cfg->name, FIELDS[f].name);
		memcpy((unsigned char *)&p->mask + FIELDS[f].koff, mk, FIELDS[f].size);
		if (!all_zero(mk, FIELDS[f].size)) {
			any = true;
			any_ip4 |= FIELDS[f].ip4;
			any_l4 |= FIELDS[f].l4;
		}
	}
	if (!any)
		return INVALID("Failed to create hash pipe %s: its match_mask names no field to hash "
			       "(doca_flow_pipe_cfg_set_match(cfg, NULL, match_mask))", cfg->name);
	if (cfg->has_match) {
		l3 = l3 ? l3 : cfg->match.outer.l3_type;
		l4 = l4 ? l4 : cfg->match.outer.l4_type_ext;
	}
	if (l3 == DOCA_FLOW_L3_TYPE_IP4 || any_ip4 || l4 != DOCA_FLOW_L4_TYPE_EXT_NONE) {
		p->mask.l3_type = 0xff;
		p->miss.sel.l3_type = EMU_L3_IP4;
	}
	if (l4 != DOCA_FLOW_L4_TYPE_EXT_NONE) {
		p->mask.l4_type = 0xff;
		p->miss.sel.l4_type = l4 == DOCA_FLOW_L4_TYPE_EXT_UDP ? EMU_L4_UDP : EMU_L4_TCP;
	} else if (any_l4) {
		return INVALID("Failed to create hash pipe %s: L4 ports hashed without outer.l4_type_ext", cfg->name);
	}
	/* doca_flow.h: nr_entries "default is 8k if not set", more than the emulation's table holds */
	if (!cfg->nr_entries)
		return NOT_SUPPORTED("hash pipe %s of DOCA's default 8192 entries (at most %u: "
				     "doca_flow_pipe_cfg_set_nr_entries)", cfg->name, EMU_DIRECT_SLOTS);
	while (size < cfg->nr_entries)
		size <<= 1;
	if (size != cfg->nr_entries)
		DOCA_LOG_WARN("hash pipe %s: nr_entries %u is not a power of 2: its hash picks one of %u indices and "
			      "the frames of the %u without an entry miss", cfg->name, cfg->nr_entries, size,
			      size - cfg->nr_entries);
	p->hash_entries = cfg->nr_entries;
	p->miss.direct = EMU_DIRECT_HASH;
	p->miss.direct_mask = size - 1;
	p->mask.port = 0;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_pipe_create(const struct doca_flow_pipe_cfg *cfg, const struct doca_flow_fwd *fwd,
				   const struct doca_flow_fwd *fwd_miss, struct doca_flow_pipe **pipe)
{
	struct doca_flow_pipe *p;
	uint32_t kind, port;
	doca_error_t r;

	if (!cfg || !pipe)
		return DOCA_ERROR_INVALID_VALUE;
	if (cfg->deferred)
		return cfg->deferred;
	if (!cfg->port->started)
		return INVALID("Failed to create pipe %s: port %d not started", cfg->name, cfg->port->id);
	if (!cfg->is_root)
		return NOT_SUPPORTED("non-root pipes (pipe %s; chaining with DOCA_FLOW_FWD_PIPE)", cfg->name);
	if (cfg->port->root)
		return NOT_SUPPORTED("a second root pipe on port %d (pipe %s)", cfg->port->id, cfg->name);
	/* doca_flow.h doca_flow_pipe_cfg_set_hash_map_algorithm: "supported only in hash pipe" */
	if (cfg->hash_algorithm && cfg->type != DOCA_FLOW_PIPE_HASH)
		return INVALID("Failed to create pipe %s: a hash map algorithm is set, and only a hash pipe has one",
			       cfg->name);
	p = calloc(1, sizeof(*p));
	if (!p)
		return DOCA_ERROR_NO_MEMORY;
	p->port = cfg->port;
	p->type = cfg->type;
	snprintf(p->name, sizeof(p->name), "%s", cfg->name);

	r = cfg->type == DOCA_FLOW_PIPE_HASH ? compile_hash_match(cfg, p) : compile_basic_match(cfg, p);
	if (r) {
		free(p);
		return r;
	}
	p->miss.port = (uint32_t)cfg->port->id;
	p->miss.need_macs = !all_zero(p->mask.dst_mac, 6) || !all_zero(p->mask.src_mac, 6);

	/* actions: all-ones fields are set per entry, other non-zero fields are constants */
	p->nr_actions = (uint32_t)cfg->nr_actions;
	for (size_t i = 0; i < cfg->nr_actions; i++) {
		const struct doca_flow_actions *a = &cfg->actions[i];
		struct emu_action *t = &p->act_tmpl[i];

		if (!all_zero(a->outer.eth.dst_mac, 6)) {
			t->flags |= EMU_ACT_DST_MAC;
			p->act_dst_changeable[i] = all_ones(a->outer.eth.dst_mac, 6);
			memcpy(t->dst_mac, a->outer.eth.dst_mac, 6);
		}
		if (!all_zero(a->outer.eth.src_mac, 6)) {
			t->flags |= EMU_ACT_SRC_MAC;
			p->act_src_changeable[i] = all_ones(a->outer.eth.src_mac, 6);
			memcpy(t->src_mac, a->outer.eth.src_mac, 6);
		}
	}
	p->counter_type = cfg->has_monitor ? cfg->monitor.counter_type : DOCA_FLOW_RESOURCE_TYPE_NONE;
	if (p->counter_type == DOCA_FLOW_RESOURCE_TYPE_SHARED)
		p->shared_id = cfg->monitor.shared_counter.shared_counter_id;
	if ((r = fwd_to_emu(cfg->port, fwd, false, &kind, &port))) {
		free(p);
		return r;
	}
	for (size_t i = 0; i < MAX_ACTIONS; i++) {
		p->act_tmpl[i].fwd = kind;
		p->act_tmpl[i].fwd_port = port;
	}
	if (p->nr_actions == 0) {
		p->act_tmpl[0].fwd = kind;
		p->act_tmpl[0].fwd_port = port;
	}
	if ((r = fwd_to_emu(cfg->port, fwd_miss, true, &kind, &port))) {
		free(p);
		return r;
	}
	/* the miss counter is a counter of the nr_counters pool: the 2.9 fwd_miss sample sizes
	 * nr_counters to exactly its pipes with a miss counter (flow_fwd_miss_sample.c: 4 = 2 ports x
	 * 2 pipes); doca_flow.h lists DOCA_ERROR_DRIVER for a driver failure of doca_flow_pipe_create */
	if (cfg->miss_counter) {
		if (g.counters_used >= g.cfg.nr_counters) {
			free(p);
			DOCA_LOG_ERR("Failed to create pipe %s: no counter left for its miss counter (%u of nr_counters %u "
				     "in use: doca_flow_cfg_set_nr_counters)", cfg->name, g.counters_used,
				     g.cfg.nr_counters);
			return DOCA_ERROR_DRIVER;
		}
		g.counters_used++;
		p->miss_counter = true;
	}
	p->miss.mask = p->mask;
	p->miss.miss_fwd = kind;
	p->miss.miss_port = port;
	p->miss.valid = 1;
	cfg->port->root = p;
	*pipe = p;
	DOCA_LOG_INFO("pipe %s created on port %d (compiled at doca_flow_entries_process)", p->name, p->port->id);
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_pipe_update_miss(struct doca_flow_pipe *pipe, const struct doca_flow_fwd *fwd_miss)
{
	(void)pipe;
	(void)fwd_miss;
	return NOT_SUPPORTED("doca_flow_pipe_update_miss");
}

/* ---------------------------------------------------------------- entries */
/* An entry's actions as the datapath runs them: the pipe's action template `idx`, the entry's MACs
 * where the template's are changeable, and its shared counter (the pipe's, or the monitor's where
 * the pipe's id is changeable). The per-entry counter of the nr_counters pool is the caller's.
 * `what`: the call, for the error ("add entry to", "update the entry of"). */
static doca_error_t entry_actions(const struct doca_flow_pipe *pipe, const struct doca_flow_actions *actions,
				  const struct doca_flow_monitor *monitor, const char *what, struct emu_action *out)
{
	uint32_t idx = actions ? actions->action_idx : 0;

	if (pipe->nr_actions && idx >= pipe->nr_actions)
		return INVALID("Failed to %s pipe %s: action_idx %u (pipe has %u)", what, pipe->name, idx,
			       pipe->nr_actions);
	*out = pipe->act_tmpl[idx];
	if ((pipe->act_dst_changeable[idx] || pipe->act_src_changeable[idx]) && !actions)
		return INVALID("Failed to %s pipe %s: the pipe's actions are changeable but the entry has none", what,
			       pipe->name);
	if (pipe->act_dst_changeable[idx])
		memcpy(out->dst_mac, actions->outer.eth.dst_mac, 6);
	if (pipe->act_src_changeable[idx])
		memcpy(out->src_mac, actions->outer.eth.src_mac, 6);
	if (pipe->counter_type == DOCA_FLOW_RESOURCE_TYPE_SHARED) {
		uint32_t sid = pipe->shared_id;

		if (sid == CHANGEABLE_ID) {
			if (!monitor)
				return INVALID("Failed to %s pipe %s: the pipe's shared counter is changeable but the "
					       "entry has no monitor", what, pipe->name);
			sid = monitor->shared_counter.shared_counter_id;
		}
		if (sid >= EMU_MAX_SHARED_CNT || !g.shared_cfg[sid] || !g.shared_bound[sid])
			return INVALID("Failed to %s pipe %s: shared counter %u is not configured and bound "
				       "(doca_flow_shared_resource_set_cfg, doca_flow_shared_resources_bind)", what,
				       pipe->name, sid);
		out->flags |= EMU_CNT_SHARED;
		out->shared_id = sid;
	}
	return DOCA_SUCCESS;
}

/* a BASIC pipe entry's key: the pipe's constants, the entry's values for changeable fields, masked;
 * and its slot when the pipe has a direct table */
static void entry_key(const struct doca_flow_pipe *pipe, const struct doca_flow_match *match,
		      struct doca_flow_pipe_entry *e)
{
	e->key = pipe->const_key;
	for (size_t f = 0; f < NFIELDS; f++)
		if (pipe->changeable[f] && match)
			memcpy((unsigned char *)&e->key + FIELDS[f].koff,
			       (const unsigned char *)match + FIELDS[f].moff, FIELDS[f].size);
	for (size_t b = 0; b < sizeof(e->key); b++)
		((unsigned char *)&e->key)[b] &= ((const unsigned char *)&pipe->mask)[b];
	e->key.port = (uint16_t)pipe->port->id;
	if (pipe->miss.direct != EMU_DIRECT_NONE)
		e->direct_idx = direct_index(pipe, &e->key);
}

/* doca_flow_pipe_add_entry (a BASIC pipe's entry, by its match) and doca_flow_pipe_hash_add_entry
 * (a HASH pipe's, by its index: `match` NULL) */
static doca_error_t add_entry(uint16_t pipe_queue, struct doca_flow_pipe *pipe, const struct doca_flow_match *match,
			      uint32_t index, const struct doca_flow_actions *actions,
			      const struct doca_flow_monitor *monitor, const struct doca_flow_fwd *fwd, void *usr_ctx,
			      struct doca_flow_pipe_entry **entry)
{
	struct doca_flow_pipe_entry *e;
	doca_error_t r;
	uint32_t id;

	if (pipe_queue >= (g.cfg.pipe_queues ? g.cfg.pipe_queues : 1))
		return INVALID("Failed to add entry to pipe %s: queue %u (have %u)", pipe->name, pipe_queue,
			       g.cfg.pipe_queues);
	if (fwd)
		return NOT_SUPPORTED("per-entry fwd (pipe %s: give fwd at doca_flow_pipe_create)", pipe->name);
	if ((r = check_match(match, "entry match")))
		return r;
	if (actions && (r = check_actions(actions, "entry actions")))
		return r;
	if (monitor && (r = check_monitor(monitor, "entry monitor")))
		return r;
	/* A pipe queue holds at most queue_depth operations until doca_flow_entries_process pulls
	 * their completions, DOCA_FLOW_NO_WAIT or not (NO_WAIT only pushes the rule at once): DPDK
	 * 22.11 mlx5_flow_hw.c flow_hw_async_flow_create takes one job of the queue's pool (its size
	 * is the queue size) and fails with ENOMEM when none is left; flow_hw_pull gives them back.
	 * The 2.9 samples process before the queue fills (flow_skeleton.c "Queue ... is full",
	 * ipsec_security_gw at QUEUE_DEPTH - 8). doca_flow.h names DOCA_ERROR_DRIVER for a driver
	 * error: the value DOCA returns here is not verified. */
	if (pipe->port->in_queue[pipe_queue] >= g.cfg.queue_depth) {
		DOCA_LOG_ERR("Failed to add entry to pipe %s: pipe queue %u of port %d is full (%u operations not "
			     "yet processed, queue depth %u): call doca_flow_entries_process first", pipe->name,
			     pipe_queue, pipe->port->id, pipe->port->in_queue[pipe_queue], g.cfg.queue_depth);
		return DOCA_ERROR_DRIVER;
	}
	for (id = 0; id < EMU_MAX_ENTRIES && g.entry_ids[id]; id++)
		;
	if (id == EMU_MAX_ENTRIES)
		return DOCA_ERROR_FULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return DOCA_ERROR_NO_MEMORY;
	e->pipe = pipe;
	e->usr_ctx = usr_ctx;
	if (pipe->type == DOCA_FLOW_PIPE_HASH) {
		e->key.port = (uint16_t)pipe->port->id;
		e->direct_idx = (uint32_t)pipe->port->id * EMU_DIRECT_SLOTS + index;
	} else {
		entry_key(pipe, match, e);
	}
	if ((r = entry_actions(pipe, actions, monitor, "add entry to", &e->act))) {
		free(e);
		return r;
	}
	/* a per-entry counter is one of the nr_counters pool (doca_flow_cfg_set_nr_counters); an
	 * empty pool is a driver failure (doca_flow.h: DOCA_ERROR_DRIVER) */
	if (pipe->counter_type == DOCA_FLOW_RESOURCE_TYPE_NON_SHARED) {
		if (g.counters_used >= g.cfg.nr_counters) {
			free(e);
			DOCA_LOG_ERR("Failed to add entry to pipe %s: no counter left (%u of nr_counters %u in use: "
				     "doca_flow_cfg_set_nr_counters)", pipe->name, g.counters_used, g.cfg.nr_counters);
			return DOCA_ERROR_DRIVER;
		}
		g.counters_used++;
		e->act.flags |= EMU_CNT_ENTRY;
	}
	g.entry_ids[id] = true;
	e->act.entry_id = id;
	e->status = DOCA_FLOW_ENTRY_STATUS_IN_PROCESS;
	e->queue = pipe_queue;
	pipe->port->in_queue[pipe_queue]++;
	e->pending = true;
	*g.pending_tail = e;
	g.pending_tail = &e->next_pending;
	pipe->nr_entries++;
	*entry = e;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_pipe_add_entry(uint16_t pipe_queue, struct doca_flow_pipe *pipe,
				      const struct doca_flow_match *match, const struct doca_flow_actions *actions,
				      const struct doca_flow_monitor *monitor, const struct doca_flow_fwd *fwd,
				      uint32_t flags, void *usr_ctx, struct doca_flow_pipe_entry **entry)
{
	(void)flags;
	if (!pipe || !entry)
		return DOCA_ERROR_INVALID_VALUE;
	/* a hash pipe's entries have no match: they are added by index (the 2.9 samples'
	 * flow_skeleton.c adds a DOCA_FLOW_PIPE_HASH pipe's with doca_flow_pipe_hash_add_entry); the
	 * value DOCA returns here is not documented */
	if (pipe->type == DOCA_FLOW_PIPE_HASH)
		return INVALID("Failed to add entry to pipe %s: it is a hash pipe, whose entries are added by index "
			       "(doca_flow_pipe_hash_add_entry)", pipe->name);
	return add_entry(pipe_queue, pipe, match, 0, actions, monitor, fwd, usr_ctx, entry);
}

/* doca_flow.h (2.9 and 3.0 alike): "Add one new entry to an hash pipe. Refer to
 * doca_flow_pipe_add_entry", entry_index the "static index in pipe for this entry",
 * DOCA_ERROR_INVALID_VALUE for invalid input. An index at or beyond the pipe's nr_entries, and a
 * pipe that is not a hash pipe, are invalid input here (the exact value DOCA returns for them is
 * not verified). A second entry at an index that has one fails at doca_flow_entries_process
 * (status ERROR), as a second BASIC entry with the same match does. */
doca_error_t doca_flow_pipe_hash_add_entry(uint16_t pipe_queue, struct doca_flow_pipe *pipe, uint32_t entry_index,
					   const struct doca_flow_actions *actions,
					   const struct doca_flow_monitor *monitor, const struct doca_flow_fwd *fwd,
					   const enum doca_flow_flags_type flags, void *usr_ctx,
					   struct doca_flow_pipe_entry **entry)
{
	(void)flags;
	if (!pipe || !entry)
		return INVALID("Failed to add a hash entry: %s is NULL", pipe ? "the entry pointer" : "the pipe");
	if (pipe->type != DOCA_FLOW_PIPE_HASH)
		return INVALID("Failed to add entry %u to pipe %s: not a hash pipe (doca_flow_pipe_add_entry adds a "
			       "BASIC pipe's entries)", entry_index, pipe->name);
	if (entry_index >= pipe->hash_entries)
		return INVALID("Failed to add entry %u to hash pipe %s: entry_index is beyond its %u entries "
			       "(doca_flow_pipe_cfg_set_nr_entries)", entry_index, pipe->name, pipe->hash_entries);
	return add_entry(pipe_queue, pipe, NULL, entry_index, actions, monitor, fwd, usr_ctx, entry);
}

/* doca_flow.h: "Calculates the hash value for a given pipe assuming the that the match parameter
 * holds the values that the HW will see"; the 2.9 flow_hash_pipe sample: "the hash output is the
 * entry index to be used". So: the entry index a frame with `match`'s header values takes (the
 * hash of emu_hash.h masked to the pipe's size), the value the datapath computes for that frame.
 * The pipe's selectors (l3/l4 type) are the frame's: only its hashed fields are read from match. */
doca_error_t doca_flow_pipe_calc_hash(struct doca_flow_pipe *pipe, const struct doca_flow_match *match, uint32_t *hash)
{
	struct emu_key tag = {0};

	if (!pipe || !match || !hash)
		return INVALID("Failed to calculate a hash: %s is NULL", !pipe ? "the pipe" : !match ? "the match" : "hash");
	if (pipe->type != DOCA_FLOW_PIPE_HASH)
		return INVALID("Failed to calculate the hash of pipe %s: not a hash pipe", pipe->name);
	for (size_t f = 0; f < NFIELDS; f++)
		memcpy((unsigned char *)&tag + FIELDS[f].koff, (const unsigned char *)match + FIELDS[f].moff,
		       FIELDS[f].size);
	for (size_t b = 0; b < sizeof(tag); b++)
		((unsigned char *)&tag)[b] &= ((const unsigned char *)&pipe->mask)[b];
	tag.l3_type = (uint8_t)pipe->miss.sel.l3_type;
	tag.l4_type = (uint8_t)pipe->miss.sel.l4_type;
	*hash = emu_hash_tag(&tag) & pipe->miss.direct_mask;
	return DOCA_SUCCESS;
}

static void complete_removal(struct doca_flow_pipe_entry *entry, uint16_t pipe_queue);
static void complete_update(struct doca_flow_pipe_entry *e, uint16_t pipe_queue);
static void unlink_update(struct doca_flow_pipe_entry *entry);

static doca_error_t load_datapath(void)
{
	int err;

	if (g.skel)
		return DOCA_SUCCESS;
	g.skel = emu_bpf__open_and_load();
	if (!g.skel) {
		err = errno;
		DOCA_LOG_ERR("Failed to load the emulated datapath (emu.bpf.o): %s", strerror(err));
		return DOCA_ERROR_DRIVER;
	}
	return DOCA_SUCCESS;
}

/* VNF mode: a forward to the pair port is a queue action to the ingress port's hairpin queues
 * (doca_flow.h, doca_flow_port_pair). mlx5 only moves frames through a hairpin whose Tx and Rx
 * queues are bound: with manual_bind, rte_eth_hairpin_bind after rte_eth_dev_start does it
 * (mlx5_trigger.c: mlx5_hairpin_auto_bind skips manual_bind queues; DOCA 2.9 dpdk_utils.c binds
 * both directions after starting the ports). Nothing refuses the flow rule, the frames are just
 * not transmitted: the emulation drops them the same way, and says why once per port pair. */
static void resolve_fwd(const struct doca_flow_port *in, uint32_t *fwd, uint32_t *fwd_port)
{
	static bool warned[EMU_MAX_PORTS][EMU_MAX_PORTS];
	char why[256];

	if (*fwd != EMU_FWD_PORT || *fwd_port == (uint32_t)in->id)
		return;
	if (emu_eth_hairpin_ready((uint16_t)in->id, (uint16_t)*fwd_port, why, sizeof(why))) {
		warned[in->id][*fwd_port] = false;
		return;
	}
	if (!warned[in->id][*fwd_port])
		DOCA_LOG_WARN("port %d: frames forwarded to port %u are dropped: %s", in->id, *fwd_port, why);
	warned[in->id][*fwd_port] = true;
	*fwd = EMU_FWD_DROP;
	*fwd_port = 0;
}

static doca_error_t push_port(struct doca_flow_port *p)
{
	uint32_t k, v;
	int err;
	struct doca_flow_pipe *pipe = p->root;

	/* every started port is a forwarding target */
	for (int i = 0; i < EMU_MAX_PORTS; i++) {
		if (!g.ports[i].started)
			continue;
		k = i;
		v = g.ports[i].ifindex;
		if ((err = bpf_map_update_elem(bpf_map__fd(g.skel->maps.tx_ports), &k, &v, BPF_ANY))) {
			DOCA_LOG_ERR("Failed to add %s to the devmap: %s", g.ports[i].ifname, strerror(-err));
			return DOCA_ERROR_DRIVER;
		}
	}
	if (pipe && !pipe->pushed) {
		struct emu_pipe miss = pipe->miss;

		resolve_fwd(p, &miss.miss_fwd, &miss.miss_port);
		k = p->ifindex;
		if ((err = bpf_map_update_elem(bpf_map__fd(g.skel->maps.pipes), &k, &miss, BPF_ANY))) {
			DOCA_LOG_ERR("Failed to write pipe %s: %s", pipe->name, strerror(-err));
			return DOCA_ERROR_DRIVER;
		}
		pipe->pushed = true;
	}
	return DOCA_SUCCESS;
}

static void zero_counter(struct bpf_map *map, uint32_t idx)
{
	int n = libbpf_num_possible_cpus();
	struct emu_counter *z = calloc((size_t)n, sizeof(*z));

	if (z) {
		bpf_map_update_elem(bpf_map__fd(map), &idx, z, BPF_ANY);
		free(z);
	}
}

/* The rest of doca_flow_entries_process's `timeout` (microseconds from t0): sleep until it passed. */
static void wait_out(const struct timespec *t0, uint64_t timeout_us)
{
	struct timespec end = *t0;

	end.tv_sec += (time_t)(timeout_us / 1000000);
	end.tv_nsec += (long)(timeout_us % 1000000) * 1000;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL) == EINTR)
		; /* a signal (XenoFlow's SIGHUP, SIGUSR1) does not end the call early */
}

/* doca_flow.h (2.x): `timeout` is the "max time in micro seconds for this function to process
 * entries" ("process once if timeout is 0"), `max_processed_entries` the "flow entries number to
 * process"; "if it is 0, it will proceed until timeout". So the call returns once it has completed
 * max_processed_entries operations of this port and queue, or when the timeout has passed: with 0
 * it always takes the whole timeout. The emulation completes every queued operation at once, so a
 * call that asked for none (0) or for more than were queued has only the timeout left to wait, and
 * sleeps it out as the hardware call keeps polling (nothing queued meanwhile by another thread is
 * completed by this call: the emulation is not thread safe). An error returns at once. */
doca_error_t doca_flow_entries_process(struct doca_flow_port *port, uint16_t pipe_queue, uint64_t timeout,
				       uint32_t max_processed_entries)
{
	struct doca_flow_pipe_entry **pp, *e;
	struct timespec t0;
	uint32_t done = 0;
	doca_error_t r;
	int err;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!port || !port->started)
		return DOCA_ERROR_INVALID_VALUE;
	if (pipe_queue >= (g.cfg.pipe_queues ? g.cfg.pipe_queues : 1))
		return INVALID("Failed to process entries of port %d: queue %u (have %u)", port->id, pipe_queue,
			       g.cfg.pipe_queues);
	if ((r = load_datapath()) || (r = push_port(port)))
		return r;
	/* completions are pulled per port and queue (rte_flow_pull(port, queue)); a queue's updates
	 * first: an update is only queued on a processed entry whose removal is not queued yet
	 * (doca_flow_pipe_update_entry), so no add or removal of the same entry precedes it */
	for (pp = &g.upd_head; (e = *pp);) {
		if (e->pipe->port != port || e->upd_queue != pipe_queue ||
		    (max_processed_entries && done >= max_processed_entries)) {
			pp = &e->next_update;
			continue;
		}
		*pp = e->next_update;
		e->next_update = NULL;
		e->updating = false;
		port->in_queue[pipe_queue]--;
		complete_update(e, pipe_queue);
		done++;
	}
	for (pp = &g.pending_head; (e = *pp);) {
		if (e->pipe->port != port || (max_processed_entries && done >= max_processed_entries) ||
		    (e->removing ? e->del_queue : e->queue) != pipe_queue) {
			pp = &e->next_pending;
			continue;
		}
		*pp = e->next_pending;
		if (e->removing) {
			port->in_queue[e->del_queue]--;
			complete_removal(e, pipe_queue);
			done++;
			continue;
		}
		e->pending = false;
		e->next_pending = NULL;
		port->in_queue[e->queue]--;
		if (e->act.flags & EMU_CNT_ENTRY)
			zero_counter(g.skel->maps.entry_counters, e->act.entry_id);
		struct emu_action a = e->act;

		resolve_fwd(port, &a.fwd, &a.fwd_port);
		if (e->pipe->miss.direct != EMU_DIRECT_NONE) {
			struct emu_action cur = {0};
			int fd = bpf_map__fd(g.skel->maps.direct);

			a.flags |= EMU_VALID;
			err = bpf_map_lookup_elem(fd, &e->direct_idx, &cur);
			if (!err && (cur.flags & EMU_VALID))
				err = -EEXIST;
			else
				err = bpf_map_update_elem(fd, &e->direct_idx, &a, BPF_ANY);
		} else {
			err = bpf_map_update_elem(bpf_map__fd(g.skel->maps.entries), &e->key, &a, BPF_NOEXIST);
		}
		if (err) {
			if (err == -EEXIST && e->pipe->type == DOCA_FLOW_PIPE_HASH)
				DOCA_LOG_ERR("Failed to add entry %u to hash pipe %s: another entry has that index",
					     e->direct_idx % EMU_DIRECT_SLOTS, e->pipe->name);
			else
				DOCA_LOG_ERR("Failed to add entry to pipe %s: %s", e->pipe->name,
					     err == -EEXIST ? "another entry has the same match" : strerror(-err));
			e->status = DOCA_FLOW_ENTRY_STATUS_ERROR;
		} else {
			e->pushed = true;
			e->status = DOCA_FLOW_ENTRY_STATUS_SUCCESS;
		}
		if (g.cfg.cb)
			g.cfg.cb(e, pipe_queue, e->status, DOCA_FLOW_ENTRY_OP_ADD, e->usr_ctx);
		done++;
	}
	g.pending_tail = &g.pending_head;
	for (e = g.pending_head; e; e = e->next_pending)
		g.pending_tail = &e->next_pending;
	if (port->root && !port->attached && g.pin_path[0]) {
		if (!g.pinned) {
			if (bpf_obj_pin(bpf_program__fd(g.skel->progs.xb_emu), g.pin_path)) {
				err = -errno;
				DOCA_LOG_ERR("Failed to pin the datapath at %s (DOCA_FLOW_EMU_ATTACH): %s", g.pin_path,
					     strerror(-err));
				return DOCA_ERROR_DRIVER;
			}
			g.pinned = true;
		}
		port->link_fd = -1;
		port->attached = true;
		DOCA_LOG_INFO("port %d: datapath pinned at %s, not attached to %s (DOCA_FLOW_EMU_ATTACH)", port->id,
			      g.pin_path, port->ifname);
	}
	if (port->root && !port->attached) {
		LIBBPF_OPTS(bpf_link_create_opts, lo, .flags = g.xdp_flags & XDP_FLAGS_SKB_MODE ? XDP_FLAGS_SKB_MODE
											     : XDP_FLAGS_DRV_MODE);
		int fd = bpf_link_create(bpf_program__fd(g.skel->progs.xb_emu), port->ifindex, BPF_XDP, &lo);

		if (fd < 0) {
			err = -errno;
			DOCA_LOG_ERR("Failed to attach XDP to %s: %s%s", port->ifname, strerror(-err),
				     err == -EBUSY || err == -EEXIST ? " (an XDP program is already attached)" : "");
			return DOCA_ERROR_DRIVER;
		}
		port->link_fd = fd;
		port->attached = true;
		DOCA_LOG_INFO("port %d: datapath attached to %s (%s mode)", port->id, port->ifname,
			      g.xdp_flags & XDP_FLAGS_SKB_MODE ? "generic" : "native");
	}
	if (!max_processed_entries || done < max_processed_entries)
		wait_out(&t0, timeout);
	return DOCA_SUCCESS;
}

enum doca_flow_entry_status doca_flow_pipe_entry_get_status(struct doca_flow_pipe_entry *entry)
{
	return entry ? entry->status : DOCA_FLOW_ENTRY_STATUS_ERROR;
}

static void unlink_pending(struct doca_flow_pipe_entry *entry)
{
	struct doca_flow_pipe_entry **pp;

	for (pp = &g.pending_head; *pp; pp = &(*pp)->next_pending) {
		if (*pp == entry) {
			*pp = entry->next_pending;
			entry->pipe->port->in_queue[entry->removing ? entry->del_queue : entry->queue]--;
			break;
		}
	}
	g.pending_tail = &g.pending_head;
	for (struct doca_flow_pipe_entry *e = g.pending_head; e; e = e->next_pending)
		g.pending_tail = &e->next_pending;
}

/* A removal is an operation of a pipe queue like an add (DOCA 2.9 samples: flow_skeleton.c
 * process_callback counts DOCA_FLOW_ENTRY_OP_DEL completions per queue as it counts adds, and
 * re-queues a failed add's removal on the same queue; simple_fwd.c frees an entry's user context in
 * its OP_DEL callback, i.e. after the removal completed, not at the call): the entry stays in the
 * datapath until doca_flow_entries_process on that port and queue completes it, which calls the
 * entry-process callback (OP_DEL) and frees the entry. So a frame may still take a removed
 * entry until then, as on the hardware until the rule's completion; the emulation applies the
 * removal at processing, which bounds DOCA_FLOW_NO_WAIT (pushed at once, completed later) from
 * above and is what DOCA_FLOW_WAIT_FOR_BATCH does. */
static doca_error_t queue_removal(uint16_t pipe_queue, struct doca_flow_pipe_entry *entry)
{
	if (pipe_queue >= (g.cfg.pipe_queues ? g.cfg.pipe_queues : 1))
		return INVALID("Failed to remove entry of pipe %s: queue %u (have %u)", entry->pipe->name, pipe_queue,
			       g.cfg.pipe_queues);
	if (entry->removing)
		return INVALID("Failed to remove entry of pipe %s: its removal is queued already (queue %u)",
			       entry->pipe->name, entry->del_queue);
	/* a removal takes a job of the queue's pool as an add does (DPDK 22.11 mlx5_flow_hw.c
	 * flow_hw_async_flow_destroy: ENOMEM when no job is left) */
	if (entry->pipe->port->in_queue[pipe_queue] >= g.cfg.queue_depth) {
		DOCA_LOG_ERR("Failed to remove entry of pipe %s: pipe queue %u of port %d is full (%u operations not "
			     "yet processed, queue depth %u): call doca_flow_entries_process first", entry->pipe->name,
			     pipe_queue, entry->pipe->port->id, entry->pipe->port->in_queue[pipe_queue], g.cfg.queue_depth);
		return DOCA_ERROR_DRIVER;
	}
	entry->pipe->port->in_queue[pipe_queue]++;
	entry->removing = true;
	entry->del_queue = pipe_queue;
	entry->next_pending = NULL;
	*g.pending_tail = entry;
	g.pending_tail = &entry->next_pending;
	return DOCA_SUCCESS;
}

/* doca_flow_entries_process's part of a removal: out of the datapath, its id and counter back to
 * the pools, the OP_DEL callback, freed */
static void complete_removal(struct doca_flow_pipe_entry *entry, uint16_t pipe_queue)
{
	unlink_update(entry); /* an update queued on another queue, never processed */
	if (g.skel) {
		if (entry->pipe->miss.direct != EMU_DIRECT_NONE) {
			struct emu_action none = {0};

			bpf_map_update_elem(bpf_map__fd(g.skel->maps.direct), &entry->direct_idx, &none, BPF_ANY);
		} else {
			bpf_map_delete_elem(bpf_map__fd(g.skel->maps.entries), &entry->key);
		}
	}
	g.entry_ids[entry->act.entry_id] = false;
	if (entry->act.flags & EMU_CNT_ENTRY)
		g.counters_used--;
	entry->pipe->nr_entries--;
	if (g.cfg.cb)
		g.cfg.cb(entry, pipe_queue, DOCA_FLOW_ENTRY_STATUS_SUCCESS, DOCA_FLOW_ENTRY_OP_DEL, entry->usr_ctx);
	free(entry);
}

doca_error_t doca_flow_pipe_remove_entry(uint16_t pipe_queue, uint32_t flags, struct doca_flow_pipe_entry *entry)
{
	(void)flags;
	if (!entry)
		return DOCA_ERROR_INVALID_VALUE;
	if (entry->pushed)
		return queue_removal(pipe_queue, entry);
	/* never in the datapath (not processed yet, or its add failed): gone at once */
	if (entry->pending)
		unlink_pending(entry);
	complete_removal(entry, pipe_queue);
	return DOCA_SUCCESS;
}

/* An entry's queued update dropped unapplied (its entry removed or its pipe destroyed first) */
static void unlink_update(struct doca_flow_pipe_entry *entry)
{
	if (!entry->updating)
		return;
	for (struct doca_flow_pipe_entry **pp = &g.upd_head; *pp; pp = &(*pp)->next_update) {
		if (*pp == entry) {
			*pp = entry->next_update;
			entry->pipe->port->in_queue[entry->upd_queue]--;
			break;
		}
	}
	entry->updating = false;
	entry->next_update = NULL;
}

/* doca_flow.h (DOCA 2.x, the setter-based API): "Update the pipe entry with new actions" — the
 * entry's match stays, its actions, monitor and fwd are replaced; DOCA_ERROR_INVALID_VALUE for
 * invalid input, DOCA_ERROR_DRIVER for a driver error. It is a queue operation as an add is: the
 * same pipe_queue and flags, completed by doca_flow_entries_process on that port and queue, which
 * calls the entry-process callback with DOCA_FLOW_ENTRY_OP_UPD and the user context the entry was
 * added with (the later header's doca_flow_pipe_basic_add_entry: usr_ctx "will be used during
 * update and removal operations"). The later header also documents DOCA_ERROR_NOT_SUPPORTED
 * "unsupported pipe type" for it (LPM and ACL pipes have their own update calls). The
 * emulation writes the new actions over the entry's in the datapath at that process, in place: a
 * frame of the entry's class takes the old actions or the new, never the pipe's miss. */
doca_error_t doca_flow_pipe_update_entry(uint16_t pipe_queue, struct doca_flow_pipe *pipe,
					 const struct doca_flow_actions *actions, const struct doca_flow_monitor *monitor,
					 const struct doca_flow_fwd *fwd, const enum doca_flow_flags_type flags,
					 struct doca_flow_pipe_entry *entry)
{
	struct emu_action a;
	doca_error_t r;

	(void)flags;
	if (!pipe || !entry)
		return INVALID("Failed to update an entry: %s is NULL", pipe ? "the entry" : "the pipe");
	if (entry->pipe != pipe)
		return INVALID("Failed to update the entry of pipe %s: it is an entry of pipe %s", pipe->name,
			       entry->pipe->name);
	/* BASIC and HASH: whether DOCA 2.9 updates a hash pipe's entry in place is not documented
	 * (lb/README.md, "Hash pipes"); the emulation does, as it does a BASIC pipe's */
	if (pipe->type != DOCA_FLOW_PIPE_BASIC && pipe->type != DOCA_FLOW_PIPE_HASH) {
		DOCA_LOG_ERR("Failed to update the entry of pipe %s: doca_flow_pipe_update_entry updates BASIC and "
			     "HASH pipes' entries (pipe type %d)", pipe->name, (int)pipe->type);
		return DOCA_ERROR_NOT_SUPPORTED;
	}
	if (pipe_queue >= (g.cfg.pipe_queues ? g.cfg.pipe_queues : 1))
		return INVALID("Failed to update the entry of pipe %s: queue %u (have %u)", pipe->name, pipe_queue,
			       g.cfg.pipe_queues);
	if (fwd)
		return NOT_SUPPORTED("per-entry fwd (pipe %s: give fwd at doca_flow_pipe_create)", pipe->name);
	/* the emulation's choices where DOCA documents nothing: only an entry in the datapath (its add
	 * processed and successful), not being removed, with no update queued yet */
	if (entry->removing)
		return INVALID("Failed to update the entry of pipe %s: its removal is queued (queue %u)", pipe->name,
			       entry->del_queue);
	if (!entry->pushed)
		return INVALID("Failed to update the entry of pipe %s: its add is %s (doca_flow_entries_process "
			       "first)", pipe->name, entry->pending ? "not processed yet" : "failed");
	if (entry->updating)
		return INVALID("Failed to update the entry of pipe %s: its previous update is not processed yet "
			       "(queue %u)", pipe->name, entry->upd_queue);
	if ((actions && (r = check_actions(actions, "entry actions"))) ||
	    (monitor && (r = check_monitor(monitor, "entry monitor"))))
		return r;
	/* one job of the queue, as an add (rule 18; DPDK 22.11 flow_hw_async_flow_create's job pool) */
	if (pipe->port->in_queue[pipe_queue] >= g.cfg.queue_depth) {
		DOCA_LOG_ERR("Failed to update the entry of pipe %s: pipe queue %u of port %d is full (%u operations "
			     "not yet processed, queue depth %u): call doca_flow_entries_process first", pipe->name,
			     pipe_queue, pipe->port->id, pipe->port->in_queue[pipe_queue], g.cfg.queue_depth);
		return DOCA_ERROR_DRIVER;
	}
	if ((r = entry_actions(pipe, actions, monitor, "update the entry of", &a)))
		return r;
	/* the entry keeps its id and its per-entry counter */
	a.entry_id = entry->act.entry_id;
	a.flags |= entry->act.flags & EMU_CNT_ENTRY;
	entry->upd_act = a;
	entry->upd_queue = pipe_queue;
	entry->updating = true;
	entry->next_update = NULL;
	struct doca_flow_pipe_entry **pp = &g.upd_head;

	while (*pp)
		pp = &(*pp)->next_update;
	*pp = entry;
	pipe->port->in_queue[pipe_queue]++;
	return DOCA_SUCCESS;
}

/* doca_flow_entries_process's part of an update: the entry's new actions over its old ones in the
 * datapath (one map write: BPF_EXIST on the hash table, the same slot of the direct table) */
static void complete_update(struct doca_flow_pipe_entry *e, uint16_t pipe_queue)
{
	struct emu_action a = e->upd_act;
	int err;

	resolve_fwd(e->pipe->port, &a.fwd, &a.fwd_port);
	if (e->pipe->miss.direct != EMU_DIRECT_NONE) {
		a.flags |= EMU_VALID;
		err = bpf_map_update_elem(bpf_map__fd(g.skel->maps.direct), &e->direct_idx, &a, BPF_ANY);
	} else {
		err = bpf_map_update_elem(bpf_map__fd(g.skel->maps.entries), &e->key, &a, BPF_EXIST);
	}
	if (err) {
		DOCA_LOG_ERR("Failed to update the entry of pipe %s: %s", e->pipe->name, strerror(-err));
		e->status = DOCA_FLOW_ENTRY_STATUS_ERROR;
	} else {
		e->act = e->upd_act;
		e->status = DOCA_FLOW_ENTRY_STATUS_SUCCESS;
	}
	if (g.cfg.cb)
		g.cfg.cb(e, pipe_queue, e->status, DOCA_FLOW_ENTRY_OP_UPD, e->usr_ctx);
}

void doca_flow_pipe_destroy(struct doca_flow_pipe *pipe)
{
	struct doca_flow_pipe_entry *e, *next;
	uint32_t k;

	if (!pipe)
		return;
	/* queued updates of the pipe's pushed entries go unapplied */
	for (e = g.upd_head; e; e = next) {
		next = e->next_update;
		if (e->pipe == pipe)
			unlink_update(e);
	}
	/* entries: the pending ones are in the list; pushed ones are found in the map by pipe port */
	for (e = g.pending_head; e; e = next) {
		next = e->next_pending;
		if (e->pipe == pipe) {
			unlink_update(e);
			unlink_pending(e);
			g.entry_ids[e->act.entry_id] = false;
			if (e->act.flags & EMU_CNT_ENTRY)
				g.counters_used--;
			pipe->nr_entries--;
			free(e);
		}
	}
	detach(pipe->port);
	if (g.skel) {
		struct emu_key key, nkey;
		int fd = bpf_map__fd(g.skel->maps.entries);
		bool have = bpf_map_get_next_key(fd, NULL, &key) == 0;

		while (have) {
			have = bpf_map_get_next_key(fd, &key, &nkey) == 0;
			if (key.port == pipe->port->id)
				bpf_map_delete_elem(fd, &key);
			key = nkey;
		}
		struct emu_pipe off = {0};

		if (pipe->miss.direct != EMU_DIRECT_NONE) {
			struct emu_action none = {0};
			int dfd = bpf_map__fd(g.skel->maps.direct);

			for (uint32_t i = 0; i < EMU_DIRECT_SLOTS; i++) {
				uint32_t idx = (uint32_t)pipe->port->id * EMU_DIRECT_SLOTS + i;

				bpf_map_update_elem(dfd, &idx, &none, BPF_ANY);
			}
		}

		k = pipe->port->ifindex;
		bpf_map_update_elem(bpf_map__fd(g.skel->maps.pipes), &k, &off, BPF_ANY);
	}
	/* pushed entries' handles stay owned by the application until doca_flow_destroy in DOCA;
	 * the emulation releases their ids here (their memory leaks only if never removed) */
	/* the counters of the pipe's processed entries and its miss counter go back to the pool */
	if (pipe->counter_type == DOCA_FLOW_RESOURCE_TYPE_NON_SHARED)
		g.counters_used -= pipe->nr_entries;
	if (pipe->miss_counter)
		g.counters_used--;
	pipe->port->root = NULL;
	free(pipe);
}

/* ---------------------------------------------------------------- shared resources */
doca_error_t doca_flow_shared_resource_set_cfg(enum doca_flow_shared_resource_type type, uint32_t id,
					       struct doca_flow_shared_resource_cfg *cfg)
{
	if (type != DOCA_FLOW_SHARED_RESOURCE_COUNTER)
		return NOT_SUPPORTED("shared resource type %d (only DOCA_FLOW_SHARED_RESOURCE_COUNTER)", type);
	if (!cfg)
		return DOCA_ERROR_INVALID_VALUE;
	if (cfg->domain != DOCA_FLOW_PIPE_DOMAIN_DEFAULT)
		return NOT_SUPPORTED("shared counter domain %d", cfg->domain);
	if (id >= g.cfg.nr_shared_counters)
		return INVALID("Failed to configure shared counter %u: only %u configured "
			       "(doca_flow_cfg_set_nr_shared_resource)", id, g.cfg.nr_shared_counters);
	g.shared_cfg[id] = true;
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_shared_resources_bind(enum doca_flow_shared_resource_type type, uint32_t *res_array,
					     uint32_t res_array_len, void *bindable_obj)
{
	if (type != DOCA_FLOW_SHARED_RESOURCE_COUNTER)
		return NOT_SUPPORTED("binding shared resource type %d", type);
	if (!res_array || !bindable_obj)
		return DOCA_ERROR_INVALID_VALUE;
	for (uint32_t i = 0; i < res_array_len; i++) {
		if (res_array[i] >= EMU_MAX_SHARED_CNT || !g.shared_cfg[res_array[i]])
			return INVALID("Failed to bind shared counter %u: not configured "
				       "(doca_flow_shared_resource_set_cfg)", res_array[i]);
	}
	for (uint32_t i = 0; i < res_array_len; i++)
		g.shared_bound[res_array[i]] = true;
	return DOCA_SUCCESS;
}

static doca_error_t read_counter(struct bpf_map *map, uint32_t idx, struct doca_flow_resource_query *q)
{
	int n = libbpf_num_possible_cpus();
	struct emu_counter *v;

	memset(q, 0, sizeof(*q));
	if (!g.skel)
		return DOCA_SUCCESS; /* nothing processed yet: nothing counted */
	v = calloc((size_t)n, sizeof(*v));
	if (!v)
		return DOCA_ERROR_NO_MEMORY;
	if (bpf_map_lookup_elem(bpf_map__fd(map), &idx, v)) {
		free(v);
		return DOCA_ERROR_DRIVER;
	}
	for (int c = 0; c < n; c++) {
		q->counter.total_pkts += v[c].packets;
		q->counter.total_bytes += v[c].bytes;
	}
	free(v);
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_shared_resources_query(enum doca_flow_shared_resource_type type, uint32_t *res_array,
					      struct doca_flow_resource_query *query_results_array, uint32_t array_len)
{
	doca_error_t r;

	if (type != DOCA_FLOW_SHARED_RESOURCE_COUNTER)
		return NOT_SUPPORTED("querying shared resource type %d", type);
	if (!res_array || !query_results_array)
		return DOCA_ERROR_INVALID_VALUE;
	for (uint32_t i = 0; i < array_len; i++) {
		if (res_array[i] >= EMU_MAX_SHARED_CNT || !g.shared_bound[res_array[i]])
			return INVALID("Failed to query shared counter %u: not bound", res_array[i]);
		if ((r = read_counter(g.skel ? g.skel->maps.shared_counters : NULL, res_array[i],
				      &query_results_array[i])))
			return r;
	}
	return DOCA_SUCCESS;
}

doca_error_t doca_flow_resource_query_entry(struct doca_flow_pipe_entry *entry,
					    struct doca_flow_resource_query *query_stats)
{
	if (!entry || !query_stats)
		return DOCA_ERROR_INVALID_VALUE;
	if (!(entry->act.flags & EMU_CNT_ENTRY))
		return INVALID("Failed to query entry of pipe %s: it has no non-shared counter", entry->pipe->name);
	return read_counter(g.skel ? g.skel->maps.entry_counters : NULL, entry->act.entry_id, query_stats);
}

doca_error_t doca_flow_resource_query_pipe_miss(struct doca_flow_pipe *pipe,
						struct doca_flow_resource_query *query_stats)
{
	if (!pipe || !query_stats)
		return DOCA_ERROR_INVALID_VALUE;
	/* doca_flow.h (2.9) doca_flow_pipe_cfg_set_miss_counter: the miss counter exists, and can be
	 * queried, only when enabled */
	if (!pipe->miss_counter)
		return INVALID("Failed to query the miss counter of pipe %s: none (doca_flow_pipe_cfg_set_miss_counter)",
			       pipe->name);
	return read_counter(g.skel ? g.skel->maps.miss_counters : NULL, (uint32_t)pipe->port->id, query_stats);
}

/* ---------------------------------------------------------------- emulation extras */
int doca_flow_emu_prog_fd(void)
{
	return g.skel ? bpf_program__fd(g.skel->progs.xb_emu) : -1;
}

doca_error_t doca_flow_emu_test_run(uint16_t port_id, const void *frame, uint32_t len, int *verdict, void *out,
				    uint32_t *out_len)
{
	struct xdp_md ctx = {0};
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame, .data_size_in = len, .data_out = out,
		    .data_size_out = out_len ? *out_len : 0, .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = 1);
	int err;

	if (!g.skel || port_id >= EMU_MAX_PORTS || !g.ports[port_id].started)
		return DOCA_ERROR_BAD_STATE;
	ctx.data_end = len;
	ctx.ingress_ifindex = (uint32_t)g.ports[port_id].ifindex;
	err = bpf_prog_test_run_opts(bpf_program__fd(g.skel->progs.xb_emu), &opts);
	if (err) {
		DOCA_LOG_ERR("Failed to test-run the datapath: %s", strerror(-err));
		return DOCA_ERROR_DRIVER;
	}
	*verdict = (int)opts.retval;
	if (out_len)
		*out_len = opts.data_size_out;
	return DOCA_SUCCESS;
}
