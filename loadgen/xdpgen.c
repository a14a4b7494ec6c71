// SPDX-License-Identifier: GPL-2.0
/* xdpgen: send one compiled stream cycle (a pcap written by `xenobench traffic compile`) out of a
 * device from XDP, at the maximum rate or paced, and print a JSON result on stdout.
 *
 * Two drivers, one program logic and one result (README.md, "Drivers"): live frames where the
 * kernel allows them, else the loop (xg_loop.c): frames circulating in a private veth pair, each
 * lap sending a copy. --driver auto (the default) asks the kernel first (xdpgen_probe).
 *
 * Live: BPF_PROG_RUN of xdpgen.bpf.c with BPF_F_TEST_XDP_LIVE_FRAMES (kernel >= 5.18,
 * Documentation/bpf/bpf_prog_run.rst): the run repeats the program, each repetition turns a
 * page-pool frame into the next frame of the cycle and redirects it to the device. A trial is one
 * long test run: every call costs two RCU grace periods (measured ~30 ms here), so batches of
 * calls paced from user space would leave gaps. Pacing is therefore a token bucket inside the
 * program (on the kernel clock); count limits are enforced there too, and a watcher thread ends
 * the run (count reached, duration over, SIGINT/SIGTERM) by interrupting the call.
 *
 * Counters: frames = the program's own redirect count (what was handed to the device); xdp_xmit
 * and xdp_xmit_errors = the device's `ethtool -S` tx_queue_N_xdp_xmit[_errors] (veth: frames the
 * peer's ring took or refused), summed over queues, null where the driver has no such counters.
 *
 * Exit codes: 0 done (count, duration or SIGINT/SIGTERM), 1 bad option, 2 bad pcap, 3 no such
 * device, 4 CPU pinning failed, 5 BPF load failed, 6 a test run failed (e.g. live frames forced on
 * a kernel that refuses them), 7 the loop could not be set up. Errors on stderr as
 * "Failed to <call>: <reason>". See README.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "xdpgen_common.h"
#include "xdpgen.skel.h"
#include "xg_dev.h"
#include "xg_loop.h"

#define XG_VERSION "1.0"

enum xg_exit {
	XG_EXIT_OK = 0,
	XG_EXIT_USAGE = 1,
	XG_EXIT_INPUT = 2,
	XG_EXIT_DEV = 3,
	XG_EXIT_CPU = 4,
	XG_EXIT_BPF = 5,
	XG_EXIT_RUN = 6,
	XG_EXIT_LOOP = 7,
};

/* how frames are made: --driver */
enum xg_driver { XG_AUTO, XG_LIVE, XG_LOOP };
static const char *const driver_names[] = {"auto", "live", "loop"};

#define POLL_S 0.001          /* watcher: counters polled (count limit, duration, samples) */
#define DEFAULT_BUCKET_S 0.010 /* paced: frames that may leave back to back when behind (10 ms) */
#define DEFAULT_REPEAT INT_MAX /* repetitions per call: the kernel takes a u32, libbpf an int */
/* Frames per XDP flush inside a call, unless --xdp-batch says: 256 at the maximum rate (the kernel's
 * most, TEST_XDP_MAX_BATCH), its default of 64 (NAPI_POLL_WEIGHT) when paced.
 * - Unpaced: the test run's page pool takes its recycling ring's size from the batch size
 *   (net/bpf/test_run.c, xdp_test_run_setup: .pool_size = batch_size). At full load frames come
 *   back to it from the CPUs that forwarded and dropped them, and a ring of 64 overflows: the pages
 *   go back to the page allocator, to be allocated and filled afresh. On the namespace testbed that
 *   was 0.26-0.30 page allocations per frame the backends received (~850 k/s), against 0.003 at 256
 *   (~10 k/s, the machine's own), and the DUT forwarded 4-6 % more per CPU-second at 256.
 * - Paced: the peer is woken only at a flush, so a batch of 256 frames that fell due back to back
 *   (a generator catching up within its bucket) lands at once in a 256-slot veth ring: at 1 Mpps
 *   into an XDP sink 11 of 500000 were refused, none at 64 (tests/test_xdpgen.py). */
#define UNPACED_XDP_BATCH 256
#define PACED_XDP_BATCH 64

/* ---- options: one table drives getopt_long and the help text --------------------------------- */
struct xg_option {
	const char *name;
	int key;
	const char *metavar; /* NULL: takes no value */
	const char *help;
};

static const struct xg_option options[] = {
	{"dev", 'd', "IFNAME", "device the frames leave on (required)"},
	{"pcap", 'p', "FILE", "one stream cycle, frames of equal length (`xenobench traffic compile` .pcap) (required)"},
	{"rate", 'r', "PPS", "frames per second; 0 sends as fast as possible (default 0)"},
	{"duration", 't', "SECONDS", "stop after this long"},
	{"count", 'n', "N", "stop after N frames (without --duration/--count: until SIGINT/SIGTERM)"},
	{"cpu", 'c', "N", "pin to CPU N (sched_setaffinity); recorded in the result either way"},
	{"bucket-ms", 'B', "MS", "paced: most frames sent back to back to catch up, in ms of --rate (default 10)"},
	{"repeat", 'R', "N", "live: test-run repetitions per call (default: the most; a trial is one call)"},
	{"xdp-batch", 'x', "N", "live: frames per XDP flush inside a call, 1..256 (default: 256 unpaced, the page pool's recycling ring is as large; 64 paced)"},
	{"sample-ms", 's', "MS", "period of the [seconds, frames] samples in the result (default 10; 0: none)"},
	{"driver", 'D', "NAME", "auto (default): live frames where the kernel allows them, else loop; live: XDP live frames (BPF_PROG_RUN); loop: frames circulating in a private veth pair"},
	{"loop-frames", 'L', "N", "loop: frames circulating, 1..192 (default 64)"},
	{"probe", 'P', NULL, "send nothing: tell whether this kernel allows XDP live frames and which driver --driver picks (JSON); --dev and --pcap not needed"},
	{"help", 'h', NULL, "print this help"},
};
#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

struct xg_config {
	const char *dev;
	const char *pcap;
	double rate;      /* frames/s, 0: maximum */
	double duration;  /* s, 0: none */
	uint64_t count;   /* 0: none */
	int cpu;          /* -1: not pinned */
	double bucket_s;  /* paced: catch-up burst, seconds of traffic */
	int repeat;       /* repetitions per test-run call */
	uint32_t xdp_batch;
	double sample_s;
	enum xg_driver driver;
	uint32_t loop_frames;
	bool probe;
};

static const struct xg_config defaults = {
	.rate = 0, .duration = 0, .count = 0, .cpu = -1, .bucket_s = DEFAULT_BUCKET_S,
	.repeat = DEFAULT_REPEAT, .xdp_batch = 0, .sample_s = 0.010, .driver = XG_AUTO,
	.loop_frames = XG_LOOP_DEFAULT_FRAMES, .probe = false,
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: xdpgen --dev IFNAME --pcap FILE [options]\n"
		   "Send a compiled stream cycle from XDP (live frames, or a loop where the kernel refuses\n"
		   "them); JSON result on stdout.\n\n");
	for (size_t i = 0; i < N_OPTIONS; i++) {
		char left[40];
		snprintf(left, sizeof(left), "-%c, --%s%s%s", options[i].key, options[i].name,
			 options[i].metavar ? " " : "", options[i].metavar ? options[i].metavar : "");
		fprintf(f, "  %-26s %s\n", left, options[i].help);
	}
}

static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("xdpgen: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int parse_double(const char *opt, const char *s, double min, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < min) {
		fail("Failed to parse --%s '%s': not a finite number >= %g", opt, s, min);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	if (*s == '-' || *s == '+') {
		fail("Failed to parse --%s '%s': not an integer in %llu..%llu", opt, s,
		     (unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		fail("Failed to parse --%s '%s': not an integer in %llu..%llu", opt, s,
		     (unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
}

/* 0: parsed, 1: --help, -1: bad */
static int parse_args(int argc, char **argv, struct xg_config *cfg)
{
	struct option longopts[N_OPTIONS + 1];
	char shortopts[2 * N_OPTIONS + 1], *sp = shortopts;
	uint64_t u;

	for (size_t i = 0; i < N_OPTIONS; i++) {
		longopts[i] = (struct option){options[i].name, options[i].metavar ? required_argument : no_argument,
					      NULL, options[i].key};
		*sp++ = (char)options[i].key;
		if (options[i].metavar)
			*sp++ = ':';
	}
	memset(&longopts[N_OPTIONS], 0, sizeof(longopts[0]));
	*sp = '\0';
	*cfg = defaults;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		switch (c) {
		case 'd': cfg->dev = optarg; break;
		case 'p': cfg->pcap = optarg; break;
		case 'r': if (parse_double("rate", optarg, 0, &cfg->rate)) return -1; break;
		case 't':
			if (parse_double("duration", optarg, 0, &cfg->duration)) return -1;
			if (cfg->duration == 0) {
				fail("Failed to parse --duration '%s': must be > 0", optarg);
				return -1;
			}
			break;
		case 'n': if (parse_u64("count", optarg, 1, UINT64_MAX / 2, &cfg->count)) return -1; break;
		case 'c':
			if (parse_u64("cpu", optarg, 0, CPU_SETSIZE - 1, &u)) return -1;
			cfg->cpu = (int)u;
			break;
		case 'B': {
			double ms;
			if (parse_double("bucket-ms", optarg, 0, &ms)) return -1;
			cfg->bucket_s = ms / 1000.0;
			break;
		}
		case 'R':
			if (parse_u64("repeat", optarg, 1, INT_MAX, &u)) return -1;
			cfg->repeat = (int)u;
			break;
		case 'x':
			if (parse_u64("xdp-batch", optarg, 1, 256, &u)) return -1;
			cfg->xdp_batch = (uint32_t)u;
			break;
		case 's': {
			double ms;
			if (parse_double("sample-ms", optarg, 0, &ms)) return -1;
			cfg->sample_s = ms / 1000.0;
			break;
		}
		case 'D': {
			int k;
			for (k = 0; k < 3 && strcmp(optarg, driver_names[k]); k++)
				;
			if (k == 3) {
				fail("Failed to parse --driver '%s': not one of auto, live, loop", optarg);
				return -1;
			}
			cfg->driver = (enum xg_driver)k;
			break;
		}
		case 'L':
			if (parse_u64("loop-frames", optarg, 1, XG_LOOP_MAX_FRAMES, &u)) return -1;
			cfg->loop_frames = (uint32_t)u;
			break;
		case 'P': cfg->probe = true; break;
		case 'h': return 1;
		default:
			fail("Failed to parse arguments: unknown option or missing value in '%s' (see --help)",
			     argv[optind - 1]);
			return -1;
		}
	}
	if (optind < argc) {
		fail("Failed to parse arguments: unexpected '%s' (see --help)", argv[optind]);
		return -1;
	}
	if (!cfg->probe && (!cfg->dev || !cfg->pcap)) {
		fail("Failed to parse arguments: --dev and --pcap are required (see --help)");
		return -1;
	}
	if (cfg->duration > 0 && cfg->count) {
		fail("Failed to parse arguments: give --duration or --count, not both");
		return -1;
	}
	if (!cfg->xdp_batch)
		cfg->xdp_batch = cfg->rate > 0 ? PACED_XDP_BATCH : UNPACED_XDP_BATCH;
	return 0;
}

/* ---- the stream cycle ------------------------------------------------------------------------ */
struct xg_cycle {
	uint8_t *frames; /* n frames of len bytes, back to back */
	uint32_t n;
	uint32_t len;
	uint32_t span;   /* bytes [0, span) come from each frame's template */
};

static uint32_t rd32(const uint8_t *p, bool swap)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return swap ? __builtin_bswap32(v) : v;
}

/* a classic pcap (either byte order, us or ns stamps, LINKTYPE_ETHERNET) */
static int read_cycle(const char *path, struct xg_cycle *c)
{
	uint8_t *data = NULL;
	size_t size = 0, off;
	FILE *f = fopen(path, "rb");
	int ret = -1;

	if (!f) {
		fail("Failed to open pcap %s: %s", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) || (long)(size = (size_t)ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		fail("Failed to read pcap %s: %s", path, strerror(errno));
		goto out;
	}
	data = malloc(size ? size : 1);
	if (!data || fread(data, 1, size, f) != size) {
		fail("Failed to read pcap %s: %s", path, data ? "short read" : strerror(ENOMEM));
		goto out;
	}
	if (size < 24) {
		fail("Failed to read pcap %s: %zu bytes, shorter than a pcap header", path, size);
		goto out;
	}
	uint32_t magic = rd32(data, false);
	bool swap;
	if (magic == 0xa1b2c3d4 || magic == 0xa1b23c4d)
		swap = false;
	else if (magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1)
		swap = true;
	else {
		fail("Failed to read pcap %s: magic %08x is not a classic pcap file", path, magic);
		goto out;
	}
	uint32_t linktype = rd32(data + 20, swap) & 0x0fffffff;
	if (linktype != 1) {
		fail("Failed to read pcap %s: link type %u is not Ethernet (1)", path, linktype);
		goto out;
	}
	/* first pass: count and check lengths */
	c->n = 0;
	c->len = 0;
	for (off = 24; off < size;) {
		if (off + 16 > size) {
			fail("Failed to read pcap %s: truncated record header at byte %zu", path, off);
			goto out;
		}
		uint32_t incl = rd32(data + off + 8, swap), orig = rd32(data + off + 12, swap);
		if (incl != orig || off + 16 + incl > size) {
			fail("Failed to read pcap %s: frame %u is truncated (%u of %u bytes)", path, c->n, incl, orig);
			goto out;
		}
		if (incl < XG_MIN_FRAME_LEN || incl > XG_MAX_FRAME_LEN) {
			fail("Failed to read pcap %s: frame %u has %u bytes, outside %d..%d", path, c->n, incl,
			     XG_MIN_FRAME_LEN, XG_MAX_FRAME_LEN);
			goto out;
		}
		if (c->n == 0)
			c->len = incl;
		else if (incl != c->len) {
			fail("Failed to read pcap %s: frame %u has %u bytes, frame 0 has %u (a cycle's frames "
			     "must be of equal length)", path, c->n, incl, c->len);
			goto out;
		}
		if (++c->n > XG_MAX_FRAMES) {
			fail("Failed to read pcap %s: more than %d frames in one cycle", path, XG_MAX_FRAMES);
			goto out;
		}
		off += 16 + incl;
	}
	if (c->n == 0) {
		fail("Failed to read pcap %s: no frames", path);
		goto out;
	}
	c->frames = malloc((size_t)c->n * c->len);
	if (!c->frames) {
		fail("Failed to read pcap %s: %s", path, strerror(ENOMEM));
		goto out;
	}
	uint32_t i = 0;
	for (off = 24; off < size; i++) {
		memcpy(c->frames + (size_t)i * c->len, data + off + 16, c->len);
		off += 16 + c->len;
	}
	/* the span: up to the last byte in which any frame differs from frame 0, at least the headers */
	uint32_t span = c->len < XG_HDR_LEN ? c->len : XG_HDR_LEN;
	for (i = 1; i < c->n; i++) {
		const uint8_t *a = c->frames, *b = c->frames + (size_t)i * c->len;
		for (uint32_t j = c->len; j > span; j--)
			if (a[j - 1] != b[j - 1]) {
				span = j;
				break;
			}
	}
	c->span = span;
	ret = 0;
out:
	free(data);
	fclose(f);
	return ret;
}

/* ---- run ------------------------------------------------------------------------------------- */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct xg_samples {
	double *t;
	uint64_t *v;
	size_t n, cap;
};

static void sample(struct xg_samples *s, double t, uint64_t v)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 1024;
		double *nt = realloc(s->t, cap * sizeof(*nt));
		if (nt)
			s->t = nt;
		uint64_t *nv = realloc(s->v, cap * sizeof(*nv));
		if (nv)
			s->v = nv;
		if (!nt || !nv)
			return; /* out of memory: fewer samples, the run goes on */
		s->cap = cap;
	}
	s->t[s->n] = t;
	s->v[s->n++] = v;
}

/* Two threads: the sender (main) sits in one long test run; the watcher polls the program's
 * counters every POLL_S, takes the samples, and ends the run (count reached, duration over,
 * SIGINT/SIGTERM) by interrupting the sender's syscall with SIGUSR1 (the kernel checks for a
 * pending signal between XDP batches and returns EINTR; frames already sent stay counted). */
struct xg_run {
	const struct xg_config *cfg;
	volatile struct xg_state *st;
	pthread_t sender;
	sigset_t stop_sigs;
	atomic_int stop;          /* 0 running, else why it stopped */
	atomic_int sender_done;
	struct xg_samples smp;
	volatile __u32 *halt;     /* loop: the program's halt flag, set by the watcher (the sender's
	                           * CPU is busy with the loop's softirq and may not run it soon) */
	double t_halt;            /* loop: when the watcher halted it */
};

enum { XG_RUNNING = 0, XG_BY_COUNT, XG_BY_DURATION, XG_BY_SIGNAL, XG_BY_ERROR };
static const char *const stop_names[] = {"running", "count", "duration", "signal", "error"};

static void on_sigusr1(int sig)
{
	(void)sig; /* only there to make the test-run syscall return */
}

static void *watcher(void *arg)
{
	struct xg_run *r = arg;
	const struct xg_config *cfg = r->cfg;
	struct timespec poll = {0, (long)(POLL_S * 1e9)};
	double t_first = 0, last_sample = 0;

	for (;;) {
		int sig = sigtimedwait(&r->stop_sigs, NULL, &poll);
		double t = now_s();
		uint64_t frames = r->st->frames;
		if (!t_first && r->st->t_first_ns) {
			t_first = (double)r->st->t_first_ns * 1e-9;
			/* "sending" is printed before the test run's call, whose RCU grace periods keep the
			 * first frame back for tens of ms on a busy machine: this line says it has left */
			fprintf(stderr, "xdpgen: first frame sent\n");
			fflush(stderr);
			if (cfg->sample_s > 0) /* the first frame left at t_first */
				sample(&r->smp, 0, 1);
			last_sample = t_first;
		}
		int why = atomic_load(&r->stop);
		if (!why && sig > 0)
			why = XG_BY_SIGNAL;
		if (!why && cfg->count && frames >= cfg->count)
			why = XG_BY_COUNT;
		if (!why && cfg->duration > 0 && t_first && t - t_first >= cfg->duration)
			why = XG_BY_DURATION;
		if (t_first && cfg->sample_s > 0 && t - last_sample >= cfg->sample_s && !why) {
			sample(&r->smp, t - t_first, frames);
			last_sample = t;
		}
		if (why || atomic_load(&r->sender_done)) {
			int expected = XG_RUNNING;
			if (r->halt) {
				*r->halt = 1;
				r->t_halt = now_s();
			}
			atomic_compare_exchange_strong(&r->stop, &expected, why ? why : XG_BY_ERROR);
			break;
		}
	}
	/* the sender may be between two calls when the first signal lands: repeat until it is out */
	struct timespec again = {0, 200000};
	while (!atomic_load(&r->sender_done)) {
		pthread_kill(r->sender, SIGUSR1);
		nanosleep(&again, NULL);
	}
	return NULL;
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}


/* ---- the drivers ----------------------------------------------------------------------------- */
/* 0 if the kernel runs a live-frames test run (of xdpgen_probe, which sends nothing), else errno */
static int probe_live(struct xdpgen_bpf *skel, const struct xg_cycle *c)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts,
		.data_in = c->frames,
		.data_size_in = c->len,
		.repeat = 1,
		.flags = BPF_F_TEST_XDP_LIVE_FRAMES,
	);
	return bpf_prog_test_run_opts(bpf_program__fd(skel->progs.xdpgen_probe), &opts) ? errno : 0;
}

static void live_answer(int live_errno, char *buf, size_t len)
{
	if (live_errno < 0)
		snprintf(buf, len, "not asked (--driver loop)");
	else if (!live_errno)
		snprintf(buf, len, "allowed");
	else
		snprintf(buf, len, "refused: %s (%s)", strerror(live_errno),
			 strerrorname_np(live_errno) ? strerrorname_np(live_errno) : "?");
}

/* Live frames: test runs until the watcher stops the run; the number of calls. */
static uint64_t run_live(struct xg_run *run, const struct xg_config *cfg, const struct xg_cycle *c,
			 int prog_fd, int *run_errno)
{
	uint64_t calls = 0;
	while (!atomic_load(&run->stop)) {
		/* one call per trial where possible: each call costs two RCU grace periods (the XDP
		 * dispatcher is switched to the program and back, net/bpf/test_run.c), tens of ms on a
		 * busy machine, during which nothing is sent */
		LIBBPF_OPTS(bpf_test_run_opts, opts,
			.data_in = c->frames,
			.data_size_in = c->len,
			.repeat = cfg->repeat,
			.flags = BPF_F_TEST_XDP_LIVE_FRAMES,
			.batch_size = cfg->xdp_batch,
		);
		int err = bpf_prog_test_run_opts(prog_fd, &opts);
		calls++;
		if (err && errno != EINTR) {
			*run_errno = errno;
			break;
		}
	}
	return calls;
}

/* The loop: seed it from this (pinned) thread, so its NAPI polls on this CPU; every ms put back the
 * frames the loop lost; when the watcher stops the run, halt it (every frame drops on its next
 * lap). false if not one frame could be seeded. */
static bool run_loop(struct xg_run *run, struct xg_loop *lp, const struct xg_config *cfg,
		     const struct xg_cycle *c, struct xdpgen_bpf *skel)
{
	struct timespec tick = {0, 1000000};
	if (xg_loop_seed(lp, c->frames, c->len, (int)cfg->loop_frames) <= 0) {
		atomic_store(&run->stop, XG_BY_ERROR);
		return false;
	}
	while (!atomic_load(&run->stop)) {
		nanosleep(&tick, NULL);
		uint64_t lost = xg_loop_newly_lost(lp);
		if (lost && !atomic_load(&run->stop))
			xg_loop_seed(lp, c->frames, c->len, (int)(lost < XG_LOOP_MAX_FRAMES ? lost : XG_LOOP_MAX_FRAMES));
	}
	skel->bss->halt = 1; /* the watcher did, unless it stopped on an error */
	return true;
}

int main(int argc, char **argv)
{
	struct xg_config cfg;
	struct xg_cycle cyc = {};
	struct xg_run run = {};
	struct xdpgen_bpf *skel = NULL;
	struct xg_xmit x0 = {}, x1 = {};
	struct xg_loop loop = {};
	pthread_t watch;
	bool watching = false, looping = false;
	int ctl_fd = -1;
	sigset_t block;
	int ret, err;

	ret = parse_args(argc, argv, &cfg);
	if (ret) {
		if (ret > 0) {
			usage(stdout);
			return XG_EXIT_OK;
		}
		return XG_EXIT_USAGE;
	}
	/* the stop signals are blocked in every thread (the watcher takes them with sigtimedwait);
	 * SIGUSR1 is blocked everywhere but in the sender, where it interrupts the test run */
	sigemptyset(&run.stop_sigs);
	sigaddset(&run.stop_sigs, SIGINT);
	sigaddset(&run.stop_sigs, SIGTERM);
	block = run.stop_sigs;
	sigaddset(&block, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &block, NULL);
	struct sigaction sa = {.sa_handler = on_sigusr1}; /* no SA_RESTART: the syscall must return */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);

	if (cfg.probe) {
		/* a zero frame stands for the cycle: the probe's program drops it */
		cyc = (struct xg_cycle){.frames = calloc(1, 64), .n = 1, .len = 64, .span = XG_HDR_LEN};
		if (!cyc.frames) {
			fail("Failed to allocate the probe frame: %s", strerror(ENOMEM));
			return XG_EXIT_INPUT;
		}
	} else if (read_cycle(cfg.pcap, &cyc)) {
		return XG_EXIT_INPUT;
	}
	unsigned ifindex = 0;
	if (!cfg.probe && !(ifindex = if_nametoindex(cfg.dev))) {
		fail("Failed to find interface %s: %s", cfg.dev, strerror(errno));
		ret = XG_EXIT_DEV;
		goto out;
	}
	ctl_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0); /* this namespace's device counters */
	skel = xdpgen_bpf__open();
	if (!skel) {
		fail("Failed to open BPF skeleton: %s", strerror(errno));
		ret = XG_EXIT_BPF;
		goto out;
	}
	skel->rodata->ifindex = ifindex;
	skel->rodata->cycle = cyc.n;
	skel->rodata->span_len = cyc.span;
	skel->rodata->limit = cfg.count;
	skel->rodata->frame_len = cyc.len;
	if (cfg.rate > 0) {
		double period = 1e9 / cfg.rate * (double)(1u << XG_FP_SHIFT);
		double bucket = floor(cfg.rate * cfg.bucket_s);
		skel->rodata->period_fp = period < 1 ? 1 : (uint64_t)llround(period);
		skel->rodata->bucket = bucket < 1 ? 1 : (uint64_t)bucket;
	}
	if ((err = bpf_map__set_max_entries(skel->maps.templates, cyc.n)) ||
	    (err = bpf_map__set_value_size(skel->maps.templates, cyc.span))) {
		fail("Failed to size map templates: %s", strerror(-err));
		ret = XG_EXIT_BPF;
		goto out;
	}
	err = xdpgen_bpf__load(skel);
	if (err) {
		fail("Failed to load BPF program: %s", strerror(-err));
		ret = XG_EXIT_BPF;
		goto out;
	}
	int tmpl_fd = bpf_map__fd(skel->maps.templates);
	for (uint32_t i = 0; i < cyc.n; i++) {
		if (bpf_map_update_elem(tmpl_fd, &i, cyc.frames + (size_t)i * cyc.len, BPF_ANY)) {
			fail("Failed to update map templates[%u]: %s", i, strerror(errno));
			ret = XG_EXIT_BPF;
			goto out;
		}
	}

	/* the driver: the kernel's answer to one live-frames test run of a program that sends nothing */
	enum xg_driver driver = cfg.driver;
	int live_errno = -1; /* -1: not asked */
	if (driver != XG_LOOP) {
		live_errno = probe_live(skel, &cyc);
		if (driver == XG_AUTO)
			driver = live_errno ? XG_LOOP : XG_LIVE;
	}
	char answer[160], why[200];
	live_answer(live_errno, answer, sizeof(answer));
	if (cfg.driver != XG_AUTO)
		snprintf(why, sizeof(why), "forced (--driver %s)", driver_names[cfg.driver]);
	else if (driver == XG_LIVE)
		snprintf(why, sizeof(why), "this kernel allows XDP live frames");
	else
		snprintf(why, sizeof(why), "this kernel refuses XDP live frames (%s): using the XDP loop",
			 strerrorname_np(live_errno) ? strerrorname_np(live_errno) : strerror(live_errno));
	bool refused = driver == XG_LIVE && live_errno;
	if (refused)
		fail("Failed to run XDP live frames%s%s: %s (this kernel refuses BPF_F_TEST_XDP_LIVE_FRAMES; "
		     "--driver auto or loop sends through an XDP loop instead)", cfg.dev ? " on " : "",
		     cfg.dev ? cfg.dev : "", strerror(live_errno));
	if (cfg.probe) {
		printf("{\"tool\": \"xdpgen\", \"version\": \"%s\", \"probe\": true, \"live_frames\": ", XG_VERSION);
		json_str(answer);
		printf(", \"driver\": \"%s\", \"driver_reason\": ", driver_names[driver]);
		json_str(why);
		printf(", \"usable\": %s}\n", refused ? "false" : "true");
		fflush(stdout);
		ret = refused ? XG_EXIT_RUN : XG_EXIT_OK;
		goto out;
	}
	if (refused) {
		ret = XG_EXIT_RUN;
		goto out;
	}
	uint32_t key = XG_TX_TARGET;
	if (bpf_map_update_elem(bpf_map__fd(skel->maps.tx_port), &key, &ifindex, BPF_ANY)) {
		fail("Failed to update map tx_port[%u] = %s (ifindex %u): %s", key, cfg.dev, ifindex, strerror(errno));
		ret = XG_EXIT_BPF;
		goto out;
	}
	if (driver == XG_LOOP) {
		char msg[256];
		if (xg_loop_open(&loop, cyc.len, skel->progs.xdpgen_loop, bpf_map__fd(skel->maps.tx_port),
				 XG_TX_LOOP, msg, sizeof(msg))) {
			fail("Failed to set up the XDP loop: %s", msg);
			ret = XG_EXIT_LOOP;
			goto out;
		}
		looping = true;
	}
	if (ctl_fd < 0 || xg_read_xmit(ctl_fd, cfg.dev, &x0))
		fprintf(stderr, "xdpgen: no ethtool counters for %s: %s\n", cfg.dev, strerror(errno));

	run.cfg = &cfg;
	run.st = &skel->bss->st;
	run.sender = pthread_self();
	run.halt = driver == XG_LOOP ? &skel->bss->halt : NULL;
	err = pthread_create(&watch, NULL, watcher, &run);
	if (err) {
		fail("Failed to start the watcher thread: %s", strerror(err));
		ret = XG_EXIT_RUN;
		goto out;
	}
	watching = true;
	/* pinned after the watcher started: the watcher keeps the process's affinity, so the
	 * scheduler can run it off the sender's CPU. The loop's NAPI polls where its frames were
	 * seeded from: this thread, so the pin places the loop too. */
	if (cfg.cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cfg.cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			fail("Failed to pin to CPU %d: %s", cfg.cpu, strerror(errno));
			ret = XG_EXIT_CPU;
			goto out;
		}
	}

	fprintf(stderr, "xdpgen: driver %s: %s\n", driver_names[driver], why);
	fprintf(stderr, "xdpgen: sending %u-frame cycle of %u B (template %u B) from %s on %s (ifindex %u)%s\n",
		cyc.n, cyc.len, cyc.span, cfg.pcap, cfg.dev, ifindex, cfg.cpu >= 0 ? ", pinned" : "");
	fflush(stderr);

	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
	uint64_t calls = 0;
	int run_errno = 0;
	struct timespec cpu0, cpu1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
	if (driver == XG_LIVE) {
		calls = run_live(&run, &cfg, &cyc, bpf_program__fd(skel->progs.xdpgen), &run_errno);
	} else if (!run_loop(&run, &loop, &cfg, &cyc, skel)) {
		run_errno = EIO;
	}
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	double t_stopped = now_s(); /* every counted frame left before this */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
	atomic_store(&run.sender_done, 1);
	pthread_join(watch, NULL);
	watching = false;
	if (run_errno) {
		if (driver == XG_LIVE)
			fail("Failed to run XDP live frames on %s: %s", cfg.dev, strerror(run_errno));
		else
			fail("Failed to seed the XDP loop: the seeding end took no frame (%s)", strerror(errno));
		ret = driver == XG_LIVE ? XG_EXIT_RUN : XG_EXIT_LOOP;
		goto out;
	}
	if (driver == XG_LOOP) {
		if (run.t_halt > 0)
			t_stopped = run.t_halt;
		/* frames the loop redirected last are flushed at the end of its NAPI poll */
		struct timespec drain = {0, 2000000};
		nanosleep(&drain, NULL);
	}
	if (ctl_fd < 0 || xg_read_xmit(ctl_fd, cfg.dev, &x1))
		x1.have = false;

	volatile struct xg_state *st = run.st;
	uint64_t frames = st->frames;
	double t_first = st->t_first_ns ? (double)st->t_first_ns * 1e-9 : t_stopped;
	/* the last frame left at t_limit when the count was reached, else before the run returned */
	double t_last = st->t_limit_ns ? (double)st->t_limit_ns * 1e-9 : t_stopped;
	double elapsed = t_last - t_first;
	/* paced with a count: frames - 1 periods lie between the first and the last frame */
	double achieved = elapsed <= 0 ? 0 : (st->t_limit_ns ? (double)(frames - 1) : (double)frames) / elapsed;
	if (cfg.sample_s > 0 && frames && (!run.smp.n || run.smp.v[run.smp.n - 1] != frames))
		sample(&run.smp, elapsed, frames);

	printf("{\"tool\": \"xdpgen\", \"version\": \"%s\", \"dev\": ", XG_VERSION);
	json_str(cfg.dev);
	printf(", \"ifindex\": %u, \"pcap\": ", ifindex);
	json_str(cfg.pcap);
	printf(", \"driver\": \"%s\", \"driver_reason\": ", driver_names[driver]);
	json_str(why);
	printf(", \"live_frames\": ");
	json_str(answer);
	printf(", \"cycle\": %u, \"frame_len\": %u, \"span_bytes\": %u", cyc.n, cyc.len, cyc.span);
	printf(", \"requested_pps\": %.17g, \"frames\": %llu", cfg.rate, (unsigned long long)frames);
	printf(", \"idle_runs\": %llu, \"tokens_lost\": %llu, \"no_template\": %llu, \"store_failed\": %llu",
	       (unsigned long long)st->idle, (unsigned long long)st->tokens_lost,
	       (unsigned long long)st->no_template, (unsigned long long)st->store_failed);
	printf(", \"elapsed_s\": %.9f, \"achieved_pps\": %.3f", elapsed, achieved);
	if (x0.have && x1.have)
		printf(", \"xdp_xmit\": %llu, \"xdp_xmit_errors\": %llu", (unsigned long long)(x1.xmit - x0.xmit),
		       (unsigned long long)(x1.errors - x0.errors));
	else
		printf(", \"xdp_xmit\": null, \"xdp_xmit_errors\": null");
	printf(", \"cpu\": %d, \"pinned\": %s", cfg.cpu >= 0 ? cfg.cpu : sched_getcpu(),
	       cfg.cpu >= 0 ? "true" : "false");
	/* CPU time the sender got while sending (softirq work done on its behalf may be accounted
	 * elsewhere): well below elapsed_s means the generator shared its CPU. The loop sends from its
	 * NAPI poll, in softirq: its thread only seeds and watches, so there is no such figure */
	if (driver == XG_LIVE)
		printf(", \"sender_cpu_s\": %.6f",
		       (double)(cpu1.tv_sec - cpu0.tv_sec) + (double)(cpu1.tv_nsec - cpu0.tv_nsec) * 1e-9);
	else
		printf(", \"sender_cpu_s\": null");
	printf(", \"calls\": %llu, \"bucket\": %llu", (unsigned long long)calls,
	       (unsigned long long)skel->rodata->bucket);
	if (driver == XG_LIVE) /* the loop's batches are its NAPI polls' */
		printf(", \"xdp_batch\": %u", cfg.xdp_batch);
	else
		printf(", \"xdp_batch\": null");
	if (driver == XG_LOOP)
		printf(", \"loop_frames\": %u, \"loop_seeded\": %llu, \"loop_foreign\": %llu", cfg.loop_frames,
		       (unsigned long long)loop.seeded, (unsigned long long)st->loop_foreign);
	else
		printf(", \"loop_frames\": null, \"loop_seeded\": null, \"loop_foreign\": null");
	if (cfg.count)
		printf(", \"count\": %llu", (unsigned long long)cfg.count);
	else
		printf(", \"count\": null");
	if (cfg.duration > 0)
		printf(", \"duration_s\": %.17g", cfg.duration);
	else
		printf(", \"duration_s\": null");
	printf(", \"stopped_by\": \"%s\", \"samples\": [", stop_names[atomic_load(&run.stop)]);
	for (size_t i = 0; i < run.smp.n; i++)
		printf("%s[%.6f, %llu]", i ? ", " : "", run.smp.t[i], (unsigned long long)run.smp.v[i]);
	printf("]}\n");
	fflush(stdout);
	ret = XG_EXIT_OK;
out:
	if (watching) {
		atomic_store(&run.sender_done, 1);
		pthread_join(watch, NULL);
	}
	if (looping)
		xg_loop_close(&loop);
	xdpgen_bpf__destroy(skel);
	if (ctl_fd >= 0)
		close(ctl_fd);
	free(cyc.frames);
	free(run.smp.t);
	free(run.smp.v);
	return ret;
}
