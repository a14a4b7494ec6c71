// SPDX-License-Identifier: GPL-2.0
/* cpu_rtt: the round-trip time of one cache line between two CPUs, as a kept agent.
 *
 *   cpu_rtt CPU_A CPU_B [TIMEOUT_S]
 *
 * Each line on stdin, "BURSTS PER_BURST" (empty: 20 100), is one measurement: a thread pinned to
 * CPU_A and one pinned to CPU_B hand a flag back and forth (acquire/release atomics on one 64-byte
 * line), 200 round trips to warm up, then BURSTS bursts of PER_BURST round trips; the reply is the
 * fastest burst's nanoseconds per round trip and the median burst's, as JSON, framed as the
 * harness's Session protocol wants it (a line with the reply's length in bytes, then the bytes).
 * Every other outcome of a request is one line `E <reason>`, and the program reads on:
 *   - a line that is not two whole numbers, numbers out of range (BURSTS 1..10000, PER_BURST at
 *     least 1, BURSTS x PER_BURST at most 10,000,000 round trips), a line longer than 64 bytes (the
 *     rest of it is read and dropped) or one holding a NUL byte: `E expected "BURSTS PER_BURST" ...`;
 *   - CPU_B cannot be pinned (offline, not in the cpuset): `E Failed to pin a thread to CPU ...`;
 *   - the measurement is not done within TIMEOUT_S (default 10 s: the harness's Session waits as
 *     long; e.g. the thread on CPU_B is not run): `E Failed to measure ...`.
 * EOF on stdin ends the program (also an SSH session closed between requests; a request under way
 * ends first, within TIMEOUT_S). Nothing spins between requests.
 *
 * Why: on the 2-core VM the namespace testbed runs on, the generator's CPU hands every frame to the
 * DUT's CPU. For a minute or more at a time the host runs the two vCPUs on cores that share no
 * cache: a round trip then takes several times as long and every frame costs the DUT more CPU time
 * (xenobench.rank leaves such rounds out). A single-CPU probe does not see it; this does. Bursts on
 * a loaded CPU are now and then held off by the scheduler: the fastest burst is the cache's figure.
 *
 * Exit codes: 0 EOF on stdin; 2 bad arguments; 3 CPU_A cannot be pinned; 4 stdin cannot be read;
 * 5 stdout cannot be written (the reader is gone); 6 the thread on CPU_B did not stop. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { EXIT_EOF = 0, EXIT_USAGE = 2, EXIT_PIN = 3, EXIT_STDIN = 4, EXIT_STDOUT = 5, EXIT_THREAD = 6 };

#define WARMUP 200
#define DEFAULT_BURSTS 20
#define DEFAULT_PER 100
#define MAX_BURSTS 10000
#define MAX_ROUNDS 10000000L
#define LINE_MAX_BYTES 64        /* a request line's bytes before its newline */
#define SHOW_BYTES 40            /* bytes of a bad line a refusal shows */
#define REQUEST_TIMEOUT_S 10     /* default TIMEOUT_S: a measurement ends within it, answered or refused */
#define MAX_TIMEOUT_S 3600
#define THREAD_TIMEOUT_S 1       /* the CPU_B thread pins itself / stops within this long */
#define SPINS_PER_CHECK 4096     /* spins between clock reads while a round trip is awaited */
#define STR_(x) #x
#define STR(x) STR_(x)

/* the flag the two threads hand back and forth: BALL_A (CPU_A's turn), BALL_B, or STOP */
enum { BALL_A = 0, BALL_B = 1, STOP = 2 };
static _Alignas(64) atomic_int flag;
/* the CPU_B thread's state: 0 starting, 1 pinned and running, or minus the error of its pin */
static _Alignas(64) atomic_int partner;
static int cpu_b;
static long timeout_s = REQUEST_TIMEOUT_S;
static double ns[MAX_BURSTS];

static int pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return pthread_setaffinity_np(pthread_self(), sizeof(s), &s); /* an error number; errno untouched */
}

static void *pong(void *arg)
{
	(void)arg;
	int err = pin(cpu_b);
	if (err) {
		atomic_store(&partner, -err);
		return NULL;
	}
	atomic_store(&partner, 1);
	for (;;) {
		int v;
		while ((v = atomic_load_explicit(&flag, memory_order_acquire)) == BALL_A)
			;
		if (v == STOP)
			return NULL;
		/* a STOP stored between the load and this store is stored again by stop_partner() */
		atomic_store_explicit(&flag, BALL_A, memory_order_release);
	}
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* One round trip; -1 when CPU_B has not answered by the deadline. */
static inline int ping(double deadline)
{
	unsigned spins = 0;
	atomic_store_explicit(&flag, BALL_B, memory_order_release);
	while (atomic_load_explicit(&flag, memory_order_acquire) != BALL_A) {
		if (++spins == SPINS_PER_CHECK) {
			spins = 0;
			if (now_ns() > deadline)
				return -1;
		}
	}
	return 0;
}

static void nap_us(long us)
{
	struct timespec t = { .tv_sec = 0, .tv_nsec = us * 1000L };
	nanosleep(&t, NULL);
}

/* Stops and joins the CPU_B thread; exits EXIT_THREAD when it does not stop in time. */
static void stop_partner(pthread_t t)
{
	double deadline = now_ns() + THREAD_TIMEOUT_S * 1e9;
	for (;;) {
		atomic_store(&flag, STOP);
		if (pthread_tryjoin_np(t, NULL) == 0)
			return;
		if (now_ns() > deadline) {
			fprintf(stderr, "Failed to stop the thread on CPU %d: still running after %d s\n", cpu_b,
				THREAD_TIMEOUT_S);
			exit(EXIT_THREAD);
		}
		nap_us(1000);
	}
}

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (fflush(stdout) == EOF || ferror(stdout)) {
		fprintf(stderr, "Failed to write a reply to stdout: %s\n", strerror(errno));
		exit(EXIT_STDOUT);
	}
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

enum { LINE_OK, LINE_EOF, LINE_LONG, LINE_NUL };

/* Reads one line (its newline dropped) into buf, at most LINE_MAX_BYTES bytes; the rest of a longer
 * line is read and dropped (LINE_LONG). A last line without a newline counts as a line. */
static int read_line(char *buf, size_t *len)
{
	size_t n = 0, seen = 0;
	int nul = 0, c;
	while ((c = getchar()) != EOF && c != '\n') {
		seen++;
		if (c == '\0')
			nul = 1;
		if (n < LINE_MAX_BYTES)
			buf[n++] = (char)c;
	}
	if (ferror(stdin)) {
		fprintf(stderr, "Failed to read a request from stdin: %s\n", strerror(errno));
		exit(EXIT_STDIN);
	}
	buf[n] = '\0';
	*len = n;
	if (c == EOF && seen == 0)
		return LINE_EOF;
	if (seen > LINE_MAX_BYTES)
		return LINE_LONG;
	return nul ? LINE_NUL : LINE_OK;
}

/* A line as a refusal shows it: printable ASCII as is, other bytes as \xNN, cut to SHOW_BYTES. */
static void shown(const char *buf, size_t len, char *to, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < len && i < SHOW_BYTES && o + 5 < cap; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
			to[o++] = (char)c;
		else
			o += (size_t)snprintf(to + o, cap - o, "\\x%02x", c);
	}
	if (len > SHOW_BYTES && o + 4 < cap)
		o += (size_t)snprintf(to + o, cap - o, "...");
	to[o] = '\0';
}

static int blank(int c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* A whole number of decimal digits at *p, capped: *v = min(value, cap + 1). -1 if no digit. */
static int number(const char **p, long cap, long *v)
{
	const char *s = *p;
	long x = 0;
	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++)
		if (x <= cap)
			x = x * 10 + (*s - '0');
	*v = x > cap ? cap + 1 : x;
	*p = s;
	return 0;
}

/* "BURSTS PER_BURST", or blanks only (the defaults); NULL, or why the line is refused. */
static const char *parse_request(const char *line, long *bursts, long *per)
{
	const char *p = line;
	while (blank(*p))
		p++;
	if (!*p) {
		*bursts = DEFAULT_BURSTS;
		*per = DEFAULT_PER;
		return NULL;
	}
	if (number(&p, MAX_ROUNDS, bursts) || !blank(*p))
		return "not two whole numbers";
	while (blank(*p))
		p++;
	if (number(&p, MAX_ROUNDS, per))
		return "not two whole numbers";
	while (blank(*p))
		p++;
	if (*p)
		return "not two whole numbers";
	if (*bursts < 1 || *bursts > MAX_BURSTS)
		return "BURSTS out of range";
	if (*per < 1)
		return "PER_BURST out of range";
	if (*per > MAX_ROUNDS / *bursts) /* no product is formed, so none overflows */
		return "too many round trips";
	return NULL;
}

static void refuse(const char *why, const char *line, size_t len)
{
	char s[SHOW_BYTES * 4 + 8];
	shown(line, len, s, sizeof(s));
	out("E expected \"BURSTS PER_BURST\" (BURSTS 1..%d, at most %ld round trips in all): %s, got \"%s\"\n",
	    MAX_BURSTS, MAX_ROUNDS, why, s);
}

static void measure(int cpu_a, long bursts, long per)
{
	pthread_t t;
	atomic_store(&flag, BALL_A);
	atomic_store(&partner, 0);
	int err = pthread_create(&t, NULL, pong, NULL);
	if (err) {
		out("E Failed to start a thread for CPU %d: %s\n", cpu_b, strerror(err));
		return;
	}
	double ready_by = now_ns() + THREAD_TIMEOUT_S * 1e9;
	int state;
	while ((state = atomic_load(&partner)) == 0 && now_ns() < ready_by)
		nap_us(50);
	if (state != 1) {
		stop_partner(t);
		if (state < 0)
			out("E Failed to pin a thread to CPU %d: %s\n", cpu_b, strerror(-state));
		else
			out("E Failed to start a thread on CPU %d: not running after %d s\n", cpu_b, THREAD_TIMEOUT_S);
		return;
	}
	double deadline = now_ns() + timeout_s * 1e9;
	int late = 0;
	for (int i = 0; i < WARMUP && !late; i++)
		late = ping(deadline);
	for (long b = 0; b < bursts && !late; b++) {
		double t0 = now_ns();
		for (long i = 0; i < per && !late; i++)
			late = ping(deadline);
		ns[b] = (now_ns() - t0) / per;
	}
	stop_partner(t);
	if (late) {
		out("E Failed to measure CPU %d to CPU %d: %ld bursts of %ld round trips not done within %ld s\n",
		    cpu_a, cpu_b, bursts, per, timeout_s);
		return;
	}
	qsort(ns, (size_t)bursts, sizeof(double), cmp);
	char reply[200];
	int n = snprintf(reply, sizeof(reply),
			 "{\"cpus\": [%d, %d], \"min_ns\": %.1f, \"median_ns\": %.1f, \"bursts\": %ld, \"per_burst\": %ld}",
			 cpu_a, cpu_b, ns[0], ns[bursts / 2], bursts, per);
	out("%d\n%s", n, reply);
}

static int parse_long(const char *s, long lo, long hi, long *v)
{
	char *end;
	errno = 0;
	*v = strtol(s, &end, 10);
	return errno || *end || end == s || *v < lo || *v > hi ? -1 : 0;
}

int main(int argc, char **argv)
{
	long a, b;
	if (argc < 3 || argc > 4 || parse_long(argv[1], 0, CPU_SETSIZE - 1, &a) ||
	    parse_long(argv[2], 0, CPU_SETSIZE - 1, &b) || a == b ||
	    (argc == 4 && parse_long(argv[3], 1, MAX_TIMEOUT_S, &timeout_s))) {
		fprintf(stderr, "usage: cpu_rtt CPU_A CPU_B [TIMEOUT_S] (two different CPU numbers 0..%d; "
			"seconds 1..%d, default %d)\n", CPU_SETSIZE - 1, MAX_TIMEOUT_S, REQUEST_TIMEOUT_S);
		return EXIT_USAGE;
	}
	int cpu_a = (int)a;
	cpu_b = (int)b;
	int err = pin(cpu_a);
	if (err) {
		fprintf(stderr, "Failed to pin to CPU %d: %s\n", cpu_a, strerror(err));
		return EXIT_PIN;
	}
	/* a reader that is gone shows as a failed write (EXIT_STDOUT), not as a signal */
	signal(SIGPIPE, SIG_IGN);
	char line[LINE_MAX_BYTES + 1];
	size_t len;
	for (;;) {
		long bursts, per;
		const char *why;
		switch (read_line(line, &len)) {
		case LINE_EOF:
			return EXIT_EOF;
		case LINE_LONG:
			refuse("longer than " STR(LINE_MAX_BYTES) " bytes", line, len);
			continue;
		case LINE_NUL:
			refuse("a NUL byte", line, len);
			continue;
		}
		why = parse_request(line, &bursts, &per);
		if (why)
			refuse(why, line, len);
		else
			measure(cpu_a, bursts, per);
	}
}
