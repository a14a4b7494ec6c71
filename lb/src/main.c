/* XenoFlow: an L3 DNS load balancer in the BlueField-3 eSwitch via DOCA Flow (DOCA 2.9), after
 * the thesis's §6.2, generalised to 2^k classes and weighted backends.
 *
 *   xenoflow [EAL args] -- -b BACKENDS -s SRC_MAC [-i INTERVAL_MS] [-q QUEUES] [-m PORT_MODEL] [-H FIELDS]
 *   BlueField: xenoflow -a 03:00.0,dv_flow_en=2 -a 03:00.1,dv_flow_en=2 -- -b backends.json -s c4:70:bd:a0:56:bd
 *   emulation: xenoflow -a p0 -a p1 -- -b backends.json -s 02:00:00:00:05:01
 *
 * -H FIELDS (hash mode, hash.h): a DOCA_FLOW_PIPE_HASH pipe over the header fields named, one entry
 * per slot of the backends file, instead of the class pipe (the source address's low bits).
 *
 * Port 0 ingress, port 1 egress: paired (doca_flow_port_pair), so forwarded frames cross through
 * the hairpin queues ports.c sets up and binds. Prints JSON lines on stdout: {"event": "started", ...}, then a
 * stats line every interval and on SIGUSR1, {"event": "updated"|"update_refused", ...} on SIGHUP (the
 * backends file read again and applied as entry removes and adds: update.c), and {"event": "stopped", ...}
 * after a clean teardown on SIGINT/SIGTERM. Exit codes: 1 arguments, 2 backends file, 3 DPDK, 4 DOCA Flow init/ports/
 * counters, 5 pipe/entries. */
#define _GNU_SOURCE
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <doca_argp.h>
#include <doca_flow.h>
#include <doca_log.h>

#include "backends.h"
#include "flow_lb.h"
#include "hash.h"
#include "ports.h"
#include "update.h"

DOCA_LOG_REGISTER(XENOFLOW);

#ifdef XENOFLOW_EMULATION
#define XF_MODE "emulation"
#else
#define XF_MODE "doca"
#endif

#define NB_PORTS 2
#define INGRESS_PORT 0
#define EGRESS_PORT 1

enum { EXIT_ARGS = 1, EXIT_BACKENDS = 2, EXIT_DPDK = 3, EXIT_FLOW = 4, EXIT_PIPE = 5 };

struct xf_config {
	char backends[4096];
	char src_mac_str[64];
	uint8_t src_mac[6];
	int interval_ms;
	int nb_queues;
	bool dpdk_failed;
	struct xf_hash hash; /* -H: hash mode; fields 0: class mode */
};

/* Port models (xenoflow.port_model): "vnf-hairpin" is the thesis's (PFs opened in "vnf,hws" mode,
 * paired, forwarding through a hairpin between them), the one the published numbers came from;
 * "switch" is the authors' later code (gespel/XenoFlow core.c: DOCA Flow in switch mode on a
 * doca_dev, no hairpin), which a BlueField in DPU mode needs if the mlx5 guide's "Hairpin in
 * switchdev SR-IOV mode is not supported" holds for its Arm PFs (switchdev there). Only
 * vnf-hairpin is implemented: switch needs doca_dev ports (doca_dpdk_port_probe with representor
 * devargs, doca_flow_port_cfg_set_dev), "switch,hws" mode and the pipe on
 * doca_flow_port_switch_get(), none of which lb/src (nor lb/emu) has yet. */
static const char *const PORT_MODELS[] = {"vnf-hairpin", "switch"};

static volatile sig_atomic_t stop_requested, stats_requested, reload_requested;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		stats_requested = 1;
	else if (sig == SIGHUP)
		reload_requested = 1;
	else
		stop_requested = 1;
}

static doca_error_t backends_cb(void *param, void *config)
{
	struct xf_config *c = config;

	snprintf(c->backends, sizeof(c->backends), "%s", (const char *)param);
	return DOCA_SUCCESS;
}

static doca_error_t src_mac_cb(void *param, void *config)
{
	struct xf_config *c = config;
	const char *s = param;
	unsigned v[6];
	int n = 0;

	snprintf(c->src_mac_str, sizeof(c->src_mac_str), "%s", s);
	if (strlen(s) != 17 || sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%n", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &n) != 6 ||
	    n != 17) {
		fprintf(stderr, "Failed to parse --src-mac: '%s' is not a MAC address\n", s);
		return DOCA_ERROR_INVALID_VALUE;
	}
	for (int i = 0; i < 6; i++)
		c->src_mac[i] = (uint8_t)v[i];
	for (char *p = c->src_mac_str; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return DOCA_SUCCESS;
}

static doca_error_t interval_cb(void *param, void *config)
{
	int v = *(int *)param;

	if (v < 0) {
		fprintf(stderr, "Failed to parse --interval-ms: %d is negative\n", v);
		return DOCA_ERROR_INVALID_VALUE;
	}
	((struct xf_config *)config)->interval_ms = v;
	return DOCA_SUCCESS;
}

static doca_error_t queues_cb(void *param, void *config)
{
	int v = *(int *)param;

	if (v < 1 || v > 64) {
		fprintf(stderr, "Failed to parse --queues: %d is not in 1..64\n", v);
		return DOCA_ERROR_INVALID_VALUE;
	}
	((struct xf_config *)config)->nb_queues = v;
	return DOCA_SUCCESS;
}

static doca_error_t port_model_cb(void *param, void *config)
{
	const char *s = param;
	(void)config;

	if (!strcmp(s, PORT_MODELS[0]))
		return DOCA_SUCCESS;
	if (!strcmp(s, PORT_MODELS[1])) {
		fprintf(stderr, "Failed to parse --port-model: 'switch' (DOCA Flow switch mode on a doca_dev, as the "
				"authors' later code) is not implemented in XenoFlow yet; use vnf-hairpin\n");
		return DOCA_ERROR_NOT_SUPPORTED;
	}
	fprintf(stderr, "Failed to parse --port-model: '%s' is not one of vnf-hairpin, switch\n", s);
	return DOCA_ERROR_INVALID_VALUE;
}

static doca_error_t hash_cb(void *param, void *config)
{
	char err[512];

	if (xf_hash_parse(param, &((struct xf_config *)config)->hash, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return DOCA_ERROR_INVALID_VALUE;
	}
	return DOCA_SUCCESS;
}

static struct xf_config *g_cfg;

static doca_error_t dpdk_cb(int argc, char **argv)
{
	doca_error_t r = xf_dpdk_init(argc, argv);

	if (r != DOCA_SUCCESS)
		g_cfg->dpdk_failed = true;
	return r;
}

static doca_error_t register_params(void)
{
	struct {
		const char *s, *l, *arg, *desc;
		enum doca_argp_type t;
		doca_argp_param_cb_t cb;
		bool mandatory;
	} rows[] = {
		{"b", "backends", "FILE", "backends file (thesis backends.json format)", DOCA_ARGP_TYPE_STRING,
		 backends_cb, true},
		{"s", "src-mac", "MAC", "source MAC written into forwarded frames (the egress port's)",
		 DOCA_ARGP_TYPE_STRING, src_mac_cb, true},
		{"i", "interval-ms", "MS", "milliseconds between stats lines (0: only on SIGUSR1; default 1000)",
		 DOCA_ARGP_TYPE_INT, interval_cb, false},
		{"q", "queues", "N", "pipe queues / DPDK queues per port (default 4)", DOCA_ARGP_TYPE_INT, queues_cb,
		 false},
		{"m", "port-model", "MODEL", "vnf-hairpin (default: the thesis's PFs in vnf,hws mode with a hairpin) "
		 "or switch (not implemented yet)", DOCA_ARGP_TYPE_STRING, port_model_cb, false},
		{"H", "hash", "FIELDS", "hash mode: a hash pipe over these fields (comma-separated: src_ip, dst_ip, "
		 "proto, src_port, dst_port; or 5-tuple), one entry per slot of the backends file (default: class "
		 "mode, the source address's low bits)", DOCA_ARGP_TYPE_STRING, hash_cb, false},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct doca_argp_param *p;
		doca_error_t r = doca_argp_param_create(&p);

		if (r != DOCA_SUCCESS)
			return r;
		doca_argp_param_set_short_name(p, rows[i].s);
		doca_argp_param_set_long_name(p, rows[i].l);
		doca_argp_param_set_arguments(p, rows[i].arg);
		doca_argp_param_set_description(p, rows[i].desc);
		doca_argp_param_set_callback(p, rows[i].cb);
		doca_argp_param_set_type(p, rows[i].t);
		if (rows[i].mandatory)
			doca_argp_param_set_mandatory(p);
		if ((r = doca_argp_register_param(p)) != DOCA_SUCCESS)
			return r;
	}
	return DOCA_SUCCESS;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct xf_stats_state {
	uint64_t prev_pkts[XF_MAX_BACKENDS];
	double prev_t;
	unsigned long seq;
};

/* query the class counters (one shared counter per class) and the pipe miss counter; print one
 * JSON line with per-backend totals and packet rate since the previous line */
static doca_error_t print_stats(const char *event, const struct xf_backends *bs, struct doca_flow_pipe *pipe,
				uint32_t *ids, struct xf_stats_state *st)
{
	struct doca_flow_resource_query q[XF_MAX_SLOTS], miss;
	uint64_t pkts[XF_MAX_BACKENDS] = {0}, bytes[XF_MAX_BACKENDS] = {0};
	doca_error_t r;
	double t = mono_s(), dt = st->prev_t ? t - st->prev_t : 0;

	memset(q, 0, sizeof(q));
	memset(&miss, 0, sizeof(miss));
	r = doca_flow_shared_resources_query(DOCA_FLOW_SHARED_RESOURCE_COUNTER, ids, q, (uint32_t)bs->nslots);
	if (r != DOCA_SUCCESS) {
		DOCA_LOG_ERR("Failed to query shared counters: %s", doca_error_get_descr(r));
		return r;
	}
	r = doca_flow_resource_query_pipe_miss(pipe, &miss);
	if (r != DOCA_SUCCESS)
		DOCA_LOG_WARN("Failed to query the pipe's miss counter: %s", doca_error_get_descr(r));
	for (int c = 0; c < bs->nslots; c++) {
		pkts[bs->slots[c]] += q[c].counter.total_pkts;
		bytes[bs->slots[c]] += q[c].counter.total_bytes;
	}
	printf("{\"event\": \"%s\", \"seq\": %lu, \"time\": %.6f, \"mode\": \"%s\", \"backends\": [", event, ++st->seq,
	       now_s(), XF_MODE);
	for (int i = 0; i < bs->n; i++) {
		double pps = dt > 0 ? (double)(pkts[i] - st->prev_pkts[i]) / dt : 0;

		printf("%s{\"name\": %s, \"mac\": \"%s\", \"packets\": %lu, \"bytes\": %lu, \"pps\": %.1f}",
		       i ? ", " : "", bs->b[i].name_json, bs->b[i].mac_str, (unsigned long)pkts[i], (unsigned long)bytes[i],
		       pps);
		st->prev_pkts[i] = pkts[i];
	}
	printf("], \"classes\": [");
	for (int c = 0; c < bs->nslots; c++)
		printf("%s%lu", c ? ", " : "", (unsigned long)q[c].counter.total_pkts);
	printf("], \"miss\": %lu, \"miss_bytes\": %lu}\n", (unsigned long)miss.counter.total_pkts,
	       (unsigned long)miss.counter.total_bytes);
	fflush(stdout);
	st->prev_t = t;
	return DOCA_SUCCESS;
}

int main(int argc, char **argv)
{
	static struct xf_backends bs;
	static struct xf_stats_state st;
	static struct xf_running rt;
	struct xf_config cfg = {.interval_ms = 1000, .nb_queues = 4};
	struct xf_dpdk_config dpdk = {.nb_ports = NB_PORTS, .nb_queues = 4, .nb_hairpin_q = 2};
	struct doca_flow_port *ports[NB_PORTS] = {0};
	struct doca_flow_pipe *pipe = NULL;
	struct doca_log_backend *sdk_log;
	uint32_t ids[XF_MAX_SLOTS];
	uint8_t macs[XF_MAX_SLOTS][6];
	bool dpdk_up = false, flow_up = false, ports_up = false;
	char err[1024];
	int rc = EXIT_ARGS;
	doca_error_t r;
	struct sigaction sa;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (doca_log_backend_create_standard() || doca_log_backend_create_with_file_sdk(stderr, &sdk_log) ||
	    doca_log_backend_set_sdk_level(sdk_log, DOCA_LOG_LEVEL_WARNING))
		return EXIT_ARGS;
	g_cfg = &cfg;
	if (doca_argp_init("xenoflow", &cfg) || register_params())
		return EXIT_ARGS;
	doca_argp_set_dpdk_program(dpdk_cb);
	r = doca_argp_start(argc, argv);
	if (r != DOCA_SUCCESS) {
		rc = cfg.dpdk_failed ? EXIT_DPDK : EXIT_ARGS;
		goto out_argp;
	}
	if (xf_backends_load(cfg.backends, &bs, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		rc = EXIT_BACKENDS;
		goto out_argp;
	}
	DOCA_LOG_INFO("Number of backends: %d, classes: %d (class bits %d)", bs.n, bs.nslots, bs.class_bits);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	dpdk.nb_queues = cfg.nb_queues;
	rc = EXIT_DPDK;
	if (xf_dpdk_ports_init(&dpdk) != DOCA_SUCCESS)
		goto out;
	dpdk_up = true;
	rc = EXIT_FLOW;
	if (xf_init_doca_flow(cfg.nb_queues, "vnf,hws", XF_NR_COUNTERS, (uint32_t)bs.nslots, xf_check_for_valid_entry) !=
	    DOCA_SUCCESS)
		goto out;
	flow_up = true;
	if (xf_init_doca_flow_ports(NB_PORTS, ports) != DOCA_SUCCESS)
		goto out;
	ports_up = true;
	if (xf_setup_class_counters(ports[INGRESS_PORT], bs.nslots, ids) != DOCA_SUCCESS)
		goto out;
	rc = EXIT_PIPE;
	for (int c = 0; c < bs.nslots; c++)
		memcpy(macs[c], bs.b[bs.slots[c]].mac, 6);
	if (xf_install_slots(ports[INGRESS_PORT], EGRESS_PORT, bs.nslots, cfg.hash.fields ? &cfg.hash : NULL,
			     (const uint8_t(*)[6])macs, cfg.src_mac, ids, &rt.status, rt.entries, &pipe) != DOCA_SUCCESS)
		goto out;
	printf("{\"event\": \"started\", \"mode\": \"%s\", \"pid\": %d, \"split\": \"%s\", \"hash_fields\": [%s], "
	       "\"class_bits\": %d, \"slots\": [", XF_MODE, (int)getpid(), cfg.hash.fields ? "hash" : "class",
	       cfg.hash.names, bs.class_bits);
	for (int c = 0; c < bs.nslots; c++)
		printf("%s%d", c ? ", " : "", bs.slots[c]);
	printf("], \"backends\": [");
	for (int i = 0; i < bs.n; i++)
		printf("%s%s", i ? ", " : "", bs.b[i].name_json);
	printf("], \"src_mac\": \"%s\"}\n", cfg.src_mac_str);
	fflush(stdout);

	rc = 0;
	{
		double next = mono_s() + cfg.interval_ms / 1000.0;

		rt.ingress = ports[INGRESS_PORT];
		rt.hash = cfg.hash.fields != 0;
		rt.pipe = pipe;
		rt.ids = ids;
		memcpy(rt.src_mac, cfg.src_mac, 6);
		while (!stop_requested) {
			usleep(reload_requested ? 0 : 20000);
			if (reload_requested) {
				reload_requested = 0;
				xf_reload(&rt, cfg.backends, &bs);
			}
			if (stats_requested || (cfg.interval_ms > 0 && mono_s() >= next)) {
				if (!stats_requested)
					next += cfg.interval_ms / 1000.0;
				stats_requested = 0;
				print_stats("stats", &bs, pipe, ids, &st);
			}
		}
	}
	print_stats("final", &bs, pipe, ids, &st);
out:
	if (pipe)
		doca_flow_pipe_destroy(pipe);
	if (ports_up)
		xf_stop_doca_flow_ports(NB_PORTS, ports);
	if (flow_up)
		doca_flow_destroy();
	if (dpdk_up)
		xf_dpdk_ports_fini(&dpdk);
	xf_backends_free(&bs);
	if (rc == 0) {
		printf("{\"event\": \"stopped\", \"mode\": \"%s\"}\n", XF_MODE);
		fflush(stdout);
	}
out_argp:
	doca_argp_destroy();
	return rc;
}
