// SPDX-License-Identifier: GPL-2.0
/* cpu_rtt: the round-trip time of one cache line between two CPUs, as a kept agent.
 *
 *   cpu_rtt CPU_A CPU_B
 *
 * Each line on stdin, "BURSTS PER_BURST" (empty: 20 100), is one measurement: a thread pinned to
 * CPU_A and one pinned to CPU_B hand a flag back and forth (acquire/release atomics on one 64-byte
 * line), 200 round trips to warm up, then BURSTS bursts of PER_BURST round trips; the reply is the
 * fastest burst's nanoseconds per round trip and the median burst's, as JSON, framed as the
 * harness's Session protocol wants it (a line with the reply's length in bytes, then the bytes;
 * `E <reason>` for a refusal). EOF on stdin ends the program. Nothing spins between requests.
 *
 * Why: on the 2-core VM the namespace testbed runs on, the generator's CPU hands every frame to the
 * DUT's CPU. For a minute or more at a time the host runs the two vCPUs on cores that share no
 * cache: a round trip takes ~350 ns instead of ~75 and every frame costs the DUT 1.35-1.55x its CPU
 * time (xenobench.rank leaves such rounds out). A single-CPU probe does not see it; this does.
 * Bursts on a loaded CPU are now and then held off by the scheduler: the fastest burst is the
 * cache's figure. Exit codes: 0 at EOF, 2 bad arguments, 3 a thread could not be pinned. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WARMUP 200
#define MAX_ROUNDS 10000000L

static _Alignas(64) atomic_int flag;
static _Alignas(64) long trips;
static int cpu_b;

static int pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static void *pong(void *arg)
{
	(void)arg;
	if (pin(cpu_b))
		return (void *)1;
	for (long i = 0; i < trips; i++) {
		while (atomic_load_explicit(&flag, memory_order_acquire) != 1)
			;
		atomic_store_explicit(&flag, 0, memory_order_release);
	}
	return NULL;
}

static inline void ping(void)
{
	atomic_store_explicit(&flag, 1, memory_order_release);
	while (atomic_load_explicit(&flag, memory_order_acquire) != 0)
		;
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void reply(const char *s)
{
	printf("%zu\n%s", strlen(s), s);
	fflush(stdout);
}

static int parse_cpu(const char *s, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < 0 || v >= CPU_SETSIZE)
		return -1;
	*out = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	int cpu_a;
	if (argc != 3 || parse_cpu(argv[1], &cpu_a) || parse_cpu(argv[2], &cpu_b) || cpu_a == cpu_b) {
		fprintf(stderr, "usage: cpu_rtt CPU_A CPU_B (two different CPU numbers)\n");
		return 2;
	}
	if (pin(cpu_a)) {
		fprintf(stderr, "Failed to pin to CPU %d: %s\n", cpu_a, strerror(errno));
		return 3;
	}
	char line[128];
	while (fgets(line, sizeof(line), stdin)) {
		long bursts = 20, per = 100;
		char extra;
		int n = sscanf(line, "%ld %ld %c", &bursts, &per, &extra);
		if (!(n == EOF || n == 2) || bursts < 1 || per < 1 || bursts > 10000 || bursts * per > MAX_ROUNDS) {
			printf("E expected \"BURSTS PER_BURST\" (1..10000 bursts, at most %ld round trips), got %.40s\n",
			       MAX_ROUNDS, strtok(line, "\n") ? line : "");
			fflush(stdout);
			continue;
		}
		double *ns = malloc(sizeof(double) * bursts);
		if (!ns) {
			printf("E out of memory\n");
			fflush(stdout);
			continue;
		}
		atomic_store(&flag, 0);
		trips = WARMUP + bursts * per;
		pthread_t t;
		if (pthread_create(&t, NULL, pong, NULL)) {
			printf("E Failed to start the thread on CPU %d\n", cpu_b);
			fflush(stdout);
			free(ns);
			continue;
		}
		for (int i = 0; i < WARMUP; i++)
			ping();
		for (long b = 0; b < bursts; b++) {
			double t0 = now_ns();
			for (long i = 0; i < per; i++)
				ping();
			ns[b] = (now_ns() - t0) / per;
		}
		void *err;
		pthread_join(t, &err);
		if (err) {
			printf("E Failed to pin a thread to CPU %d\n", cpu_b);
			fflush(stdout);
			free(ns);
			continue;
		}
		qsort(ns, bursts, sizeof(double), cmp);
		char out[160];
		snprintf(out, sizeof(out), "{\"cpus\": [%d, %d], \"min_ns\": %.1f, \"median_ns\": %.1f, \"bursts\": %ld, \"per_burst\": %ld}",
			 cpu_a, cpu_b, ns[0], ns[bursts / 2], bursts, per);
		reply(out);
		free(ns);
	}
	return 0;
}
