/* Benchmark: time from doca_flow_pipe_add_entry to the entry forwarding traffic, on the DOCA Flow
 * emulation (the thesis's related work reports 305 µs for rule insertion on a BlueField).
 *
 * In a private network namespace: port 0 = veth xe0 (frames injected on its peer xe0p by a sender
 * thread, back to back), port 1 = veth xe1 (forwarded frames read on its peer xe1p). The ports,
 * DOCA Flow, the class counters and XenoFlow's root pipe (2 classes) come from the shipped
 * lb/src/ports.c and flow_lb.c, as in xenoflow's main(); the pipe is processed with no entries, so
 * every frame misses (drop). Then, per round: t0 = xf_add_class_entry (class 0);
 * entries_process; t1 = the first frame with the entry's destination MAC read on xe1p
 * (SO_TIMESTAMPNS, kernel receive time). Prints the add+process call time and t1 - t0 (median,
 * p90, max over ROUNDS), and the sender's frame gap (the resolution).
 * Usage (root): bench_entry_latency [ROUNDS] */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <doca_flow.h>
#include <doca_flow_emu.h>
#include <doca_log.h>

#include "flow_lb.h"
#include "ports.h"
#include "emu_ports.h"

static const uint8_t BMAC[6] = {0x02, 0, 0, 0, 0x0a, 0x07}, LB_OUT[6] = {0x02, 0, 0, 0, 0x05, 0x01};
static atomic_int stop_sender;
static atomic_ulong sent;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int raw_socket(const char *ifname)
{
	int s = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	struct sockaddr_ll a = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
				.sll_ifindex = (int)if_nametoindex(ifname)};

	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a))) {
		perror("Failed to open AF_PACKET socket");
		exit(1);
	}
	return s;
}

static void *sender(void *arg)
{
	int s = raw_socket("xe0p");
	uint8_t f[64] = {0x02, 0, 0, 0, 0x05, 0x00, 0x02, 0, 0, 0, 0x04, 0x00, 0x08, 0x00, 0x45, 0, 0, 50, 0, 0, 0, 0,
			 64, 17, 0, 0, 198, 18, 0, 16, 198, 18, 0, 100, 0x04, 0x00, 0, 53, 0, 30};
	(void)arg;
	while (!atomic_load(&stop_sender)) {
		if (send(s, f, sizeof(f), 0) > 0)
			atomic_fetch_add(&sent, 1);
	}
	close(s);
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 30;
	const struct xf_dpdk_config dpdk = {.nb_ports = 2, .nb_queues = 1, .nb_hairpin_q = 2};
	struct doca_flow_port *ports[2] = {0};
	struct doca_flow_pipe *pipe;
	uint32_t ids[2];
	double *lat = calloc((size_t)rounds, sizeof(double)), *call = calloc((size_t)rounds, sizeof(double));
	pthread_t th;
	int rx, on = 1;

	if (emu_ports_in_private_netns("ethtool -K xe1p gro on >/dev/null && ethtool -K xe0 gro on >/dev/null"))
		return 1;
	doca_log_level_set_global_lower_limit(DOCA_LOG_LEVEL_ERROR);
	if (xf_dpdk_ports_init(&dpdk) || xf_init_doca_flow(1, "vnf,hws", XF_NR_COUNTERS, 2, xf_check_for_valid_entry) ||
	    xf_init_doca_flow_ports(2, ports) || xf_setup_class_counters(ports[0], 2, ids) ||
	    xf_create_root_pipe(ports[0], 1, 1, &pipe) ||
	    doca_flow_entries_process(ports[0], 0, 10000, 0)) /* attach with no entries: all miss */
		return 1;
	rx = raw_socket("xe1p");
	setsockopt(rx, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
	pthread_create(&th, NULL, sender, NULL);
	usleep(100000);
	double gap0 = now();
	unsigned long s0 = atomic_load(&sent);

	usleep(200000);
	double frame_gap_us = (now() - gap0) / (double)(atomic_load(&sent) - s0) * 1e6;

	for (int r = 0; r < rounds; r++) {
		struct doca_flow_pipe_entry *e;
		struct xf_entries_status st = {0};
		uint8_t buf[2048], cbuf[256];
		struct iovec iov = {buf, sizeof(buf)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
		double t0, t_call, t1 = 0;

		/* drain what is queued on the egress side */
		while (recv(rx, buf, sizeof(buf), MSG_DONTWAIT) > 0)
			;
		t0 = now();
		/* 198.18.0.16 → class 0 */
		/* max_processed_entries 1, the one add: 0 would wait out the timeout (doca_flow.h) */
		if (xf_add_class_entry(pipe, 0, BMAC, LB_OUT, ids[0], &st, &e) ||
		    doca_flow_entries_process(ports[0], 0, 10000, 1) || st.nb_processed != 1 || st.failure)
			return 1;
		t_call = now();
		while (!t1) {
			mh.msg_controllen = sizeof(cbuf);
			ssize_t n = recvmsg(rx, &mh, 0);

			if (n >= 14 && !memcmp(buf, BMAC, 6)) {
				for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
					if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
						struct timespec ts;

						memcpy(&ts, CMSG_DATA(c), sizeof(ts));
						t1 = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
					}
				if (!t1)
					t1 = now();
			}
		}
		lat[r] = (t1 - t0) * 1e6;
		call[r] = (t_call - t0) * 1e6;
		/* a removal completes at processing (lb/emu: the same queue rule as an add) */
		if (doca_flow_pipe_remove_entry(0, 0, e) || doca_flow_entries_process(ports[0], 0, 10000, 1))
			return 1;
		usleep(20000);
	}
	atomic_store(&stop_sender, 1);
	pthread_join(th, NULL);
	qsort(lat, (size_t)rounds, sizeof(double), cmp);
	qsort(call, (size_t)rounds, sizeof(double), cmp);
	printf("entry add → forwarding (emulation, %d rounds): median %.1f us, p90 %.1f us, max %.1f us; "
	       "add_entry+entries_process call: median %.1f us; sender frame gap %.2f us "
	       "(thesis related work, BlueField: 305 us)\n",
	       rounds, lat[rounds / 2], lat[(rounds * 9) / 10], lat[rounds - 1], call[rounds / 2], frame_gap_us);
	doca_flow_pipe_destroy(pipe);
	xf_stop_doca_flow_ports(2, ports);
	doca_flow_destroy();
	xf_dpdk_ports_fini(&dpdk);
	return 0;
}
