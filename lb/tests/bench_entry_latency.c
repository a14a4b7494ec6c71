/* Benchmark: time from doca_flow_pipe_add_entry to the entry forwarding traffic, on the DOCA Flow
 * emulation (the thesis's related work reports 305 µs for rule insertion on a BlueField).
 *
 * In a private network namespace: port 0 = veth xe0 (frames injected on its peer xe0p by a sender
 * thread, back to back), port 1 = veth xe1 (forwarded frames read on its peer xe1p). The root pipe
 * is created and processed with no entries, so every frame misses (drop). Then, per round:
 * t0 = add_entry; entries_process; t1 = the first frame with the entry's destination MAC read on
 * xe1p (SO_TIMESTAMPNS, kernel receive time). Prints the add+process call time and t1 - t0
 * (median, p90, max over ROUNDS), and the sender's frame gap (the resolution).
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
	struct doca_flow_cfg *cfg;
	struct doca_flow_port *ports[2];
	struct doca_flow_pipe *pipe;
	double *lat = calloc((size_t)rounds, sizeof(double)), *call = calloc((size_t)rounds, sizeof(double));
	pthread_t th;
	int rx, on = 1;

	if (unshare(CLONE_NEWNET) ||
	    system("ip link set lo up && ip link add xe0 type veth peer name xe0p && ip link add xe1 type veth peer name "
		   "xe1p && ethtool -K xe1p gro on >/dev/null && ethtool -K xe0 gro on >/dev/null && "
		   "for d in xe0 xe0p xe1 xe1p; do ip link set $d up; done")) {
		fprintf(stderr, "Failed to set up the namespace (root needed)\n");
		return 1;
	}
	doca_log_level_set_global_lower_limit(DOCA_LOG_LEVEL_ERROR);
	doca_flow_emu_bind_port(0, "xe0");
	doca_flow_emu_bind_port(1, "xe1");
	doca_flow_cfg_create(&cfg);
	doca_flow_cfg_set_pipe_queues(cfg, 1);
	doca_flow_cfg_set_mode_args(cfg, "vnf,hws");
	doca_flow_cfg_set_nr_shared_resource(cfg, 1, DOCA_FLOW_SHARED_RESOURCE_COUNTER);
	if (doca_flow_init(cfg))
		return 1;
	for (int p = 0; p < 2; p++) {
		struct doca_flow_port_cfg *pc;

		doca_flow_port_cfg_create(&pc);
		doca_flow_port_cfg_set_port_id(pc, (uint16_t)p);
		if (doca_flow_port_start(pc, &ports[p]))
			return 1;
		doca_flow_port_cfg_destroy(pc);
	}
	{
		struct doca_flow_match m, mm;
		struct doca_flow_actions a, *aa[1] = {&a};
		struct doca_flow_fwd fwd = {.type = DOCA_FLOW_FWD_PORT, .port_id = 1}, miss = {.type = DOCA_FLOW_FWD_DROP};
		struct doca_flow_pipe_cfg *pc;

		memset(&m, 0, sizeof(m));
		memset(&mm, 0, sizeof(mm));
		memset(&a, 0, sizeof(a));
		m.outer.l3_type = DOCA_FLOW_L3_TYPE_IP4;
		m.outer.ip4.src_ip = 0xffffffff;
		mm.outer.ip4.src_ip = htonl(1);
		memset(a.outer.eth.dst_mac, 0xff, 6);
		memset(a.outer.eth.src_mac, 0xff, 6);
		doca_flow_pipe_cfg_create(&pc, ports[0]);
		doca_flow_pipe_cfg_set_is_root(pc, true);
		doca_flow_pipe_cfg_set_match(pc, &m, &mm);
		doca_flow_pipe_cfg_set_actions(pc, aa, NULL, NULL, 1);
		if (doca_flow_pipe_create(pc, &fwd, &miss, &pipe))
			return 1;
		doca_flow_pipe_cfg_destroy(pc);
		if (doca_flow_entries_process(ports[0], 0, 10000, 0)) /* attach with no entries: all miss */
			return 1;
	}
	rx = raw_socket("xe1p");
	setsockopt(rx, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
	pthread_create(&th, NULL, sender, NULL);
	usleep(100000);
	double gap0 = now();
	unsigned long s0 = atomic_load(&sent);

	usleep(200000);
	double frame_gap_us = (now() - gap0) / (double)(atomic_load(&sent) - s0) * 1e6;

	for (int r = 0; r < rounds; r++) {
		struct doca_flow_match m;
		struct doca_flow_actions a;
		struct doca_flow_pipe_entry *e;
		uint8_t buf[2048], cbuf[256];
		struct iovec iov = {buf, sizeof(buf)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
		double t0, t_call, t1 = 0;

		/* drain what is queued on the egress side */
		while (recv(rx, buf, sizeof(buf), MSG_DONTWAIT) > 0)
			;
		memset(&m, 0, sizeof(m));
		memset(&a, 0, sizeof(a));
		m.outer.ip4.src_ip = htonl(0); /* .16 → class 0 */
		memcpy(a.outer.eth.dst_mac, BMAC, 6);
		memcpy(a.outer.eth.src_mac, LB_OUT, 6);
		t0 = now();
		if (doca_flow_pipe_add_entry(0, pipe, &m, &a, NULL, NULL, DOCA_FLOW_NO_WAIT, NULL, &e) ||
		    doca_flow_entries_process(ports[0], 0, 10000, 0))
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
		doca_flow_pipe_remove_entry(0, 0, e);
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
	doca_flow_destroy();
	return 0;
}
