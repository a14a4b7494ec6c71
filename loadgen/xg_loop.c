// SPDX-License-Identifier: GPL-2.0
/* The loop driver's plumbing: where BPF_PROG_RUN refuses XDP live frames (EPERM on some kernels,
 * even for root), xdpgen makes frames circulate in a veth pair instead. The pair lives in a private
 * network namespace of the process: the process's sockets and the namespace's file descriptor are
 * all that hold it, so when xdpgen ends, however it ends (SIGKILL included), the kernel deletes the
 * namespace, the pair, and with them the program's link. Nothing of it is visible to any other
 * namespace, so concurrent generators never see each other's loops.
 *
 *   seeding end (xgseed) --veth--> running end (xgloop, XDP: xdpgen_loop)
 *        ^                                   |  broadcast: copy to the target, frame to xgseed
 *        +-----------------------------------+  not due: only to xgseed
 *
 * A frame redirected to xgseed lands in xgloop's ring (a veth's ndo_xdp_xmit feeds its peer), so
 * the loop's NAPI polls on one CPU: the one the frames were seeded from. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <bpf/bpf.h>
#include "xg_loop.h"
#include "xg_dev.h"

static int say(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- rtnetlink: one RTM_NEWLINK that makes the pair ------------------------------------------ */
struct nl_req {
	struct nlmsghdr nh;
	struct ifinfomsg ifi;
	char attrs[512];
};

static struct rtattr *nl_put(struct nlmsghdr *nh, int type, const void *data, size_t len)
{
	struct rtattr *rta = (struct rtattr *)((char *)nh + NLMSG_ALIGN(nh->nlmsg_len));
	rta->rta_type = (unsigned short)type;
	rta->rta_len = (unsigned short)RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(rta), data, len);
	nh->nlmsg_len = NLMSG_ALIGN(nh->nlmsg_len) + RTA_ALIGN(rta->rta_len);
	return rta;
}

static void nl_end(struct nlmsghdr *nh, struct rtattr *nest)
{
	nest->rta_len = (unsigned short)((char *)nh + nh->nlmsg_len - (char *)nest);
}

static int make_pair(uint32_t mtu, char *err, size_t errlen)
{
	struct nl_req req = {};
	struct nlmsghdr *nh = &req.nh;
	struct ifinfomsg peer = {.ifi_family = AF_UNSPEC};
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	char buf[4096];
	int fd, ret = -1;

	nh->nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
	nh->nlmsg_type = RTM_NEWLINK;
	nh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
	nh->nlmsg_seq = 1;
	req.ifi.ifi_family = AF_UNSPEC;
	nl_put(nh, IFLA_IFNAME, XG_LOOP_SEED_DEV, sizeof(XG_LOOP_SEED_DEV));
	nl_put(nh, IFLA_MTU, &mtu, sizeof(mtu));
	struct rtattr *info = nl_put(nh, IFLA_LINKINFO, NULL, 0);
	nl_put(nh, IFLA_INFO_KIND, "veth", 4);
	struct rtattr *data = nl_put(nh, IFLA_INFO_DATA, NULL, 0);
	struct rtattr *p = nl_put(nh, VETH_INFO_PEER, &peer, sizeof(peer));
	nl_put(nh, IFLA_IFNAME, XG_LOOP_RUN_DEV, sizeof(XG_LOOP_RUN_DEV));
	nl_put(nh, IFLA_MTU, &mtu, sizeof(mtu));
	nl_end(nh, p);
	nl_end(nh, data);
	nl_end(nh, info);

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return say(err, errlen, "socket(NETLINK_ROUTE): %s", strerror(errno));
	if (sendto(fd, nh, nh->nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		say(err, errlen, "send RTM_NEWLINK veth: %s", strerror(errno));
		goto out;
	}
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
		say(err, errlen, "receive the RTM_NEWLINK answer: %s", n < 0 ? strerror(errno) : "short");
		goto out;
	}
	struct nlmsghdr *ah = (struct nlmsghdr *)buf;
	if (ah->nlmsg_type == NLMSG_ERROR) {
		int e = ((struct nlmsgerr *)NLMSG_DATA(ah))->error;
		if (e) {
			say(err, errlen, "create veth pair %s/%s (MTU %u): %s", XG_LOOP_SEED_DEV, XG_LOOP_RUN_DEV,
			    mtu, strerror(-e));
			goto out;
		}
	}
	ret = 0;
out:
	close(fd);
	return ret;
}

static int set_up(int fd, const char *dev, char *err, size_t errlen)
{
	struct ifreq ifr = {};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr))
		return say(err, errlen, "read the flags of %s: %s", dev, strerror(errno));
	ifr.ifr_flags |= IFF_UP | IFF_NOARP;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr))
		return say(err, errlen, "set %s up: %s", dev, strerror(errno));
	return 0;
}

/* no IPv6 in the private namespace: a router solicitation or DAD frame sent on the pair would
 * reach the loop (the program drops frames of a foreign length; this keeps them from being sent) */
static void no_ipv6(void)
{
	int fd = open("/proc/sys/net/ipv6/conf/default/disable_ipv6", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "1", 1) != 1) { /* no IPv6 in this kernel: nothing to disable */ }
		close(fd);
	}
}

int xg_loop_open(struct xg_loop *lp, uint32_t frame_len, struct bpf_program *prog, int map_fd,
		 uint32_t loop_key, char *err, size_t errlen)
{
	*lp = (struct xg_loop){.orig_ns = -1, .priv_ns = -1, .pkt_fd = -1, .ctl_fd = -1};
	uint32_t mtu = frame_len > ETH_HLEN + 1500 ? frame_len - ETH_HLEN : 1500;

	lp->orig_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (lp->orig_ns < 0)
		return say(err, errlen, "open /proc/thread-self/ns/net: %s", strerror(errno));
	if (unshare(CLONE_NEWNET)) {
		say(err, errlen, "unshare(CLONE_NEWNET): %s", strerror(errno));
		goto fail;
	}
	lp->priv_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (lp->priv_ns < 0) {
		say(err, errlen, "open the private namespace: %s", strerror(errno));
		goto fail;
	}
	no_ipv6();
	if (make_pair(mtu, err, errlen))
		goto fail;
	lp->ctl_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (lp->ctl_fd < 0) {
		say(err, errlen, "socket(AF_INET): %s", strerror(errno));
		goto fail;
	}
	if (set_up(lp->ctl_fd, XG_LOOP_RUN_DEV, err, errlen) || set_up(lp->ctl_fd, XG_LOOP_SEED_DEV, err, errlen))
		goto fail;
	lp->seed_ifindex = if_nametoindex(XG_LOOP_SEED_DEV);
	lp->run_ifindex = if_nametoindex(XG_LOOP_RUN_DEV);
	if (!lp->seed_ifindex || !lp->run_ifindex) {
		say(err, errlen, "find the pair %s/%s: %s", XG_LOOP_SEED_DEV, XG_LOOP_RUN_DEV, strerror(errno));
		goto fail;
	}
	/* the devmap resolves an ifindex in the namespace of the thread that updates it */
	if (bpf_map_update_elem(map_fd, &loop_key, &lp->seed_ifindex, BPF_ANY)) {
		say(err, errlen, "update map tx_port[%u] = %s: %s", loop_key, XG_LOOP_SEED_DEV, strerror(errno));
		goto fail;
	}
	lp->link = bpf_program__attach_xdp(prog, (int)lp->run_ifindex);
	if (!lp->link) {
		say(err, errlen, "attach xdpgen_loop to %s: %s", XG_LOOP_RUN_DEV, strerror(errno));
		goto fail;
	}
	lp->pkt_fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0); /* protocol 0: sends only */
	if (lp->pkt_fd < 0) {
		say(err, errlen, "socket(AF_PACKET): %s", strerror(errno));
		goto fail;
	}
	struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_ifindex = (int)lp->seed_ifindex};
	if (bind(lp->pkt_fd, (struct sockaddr *)&ll, sizeof(ll))) {
		say(err, errlen, "bind AF_PACKET to %s: %s", XG_LOOP_SEED_DEV, strerror(errno));
		goto fail;
	}
	if (setns(lp->orig_ns, CLONE_NEWNET)) {
		say(err, errlen, "return to the caller's namespace: %s", strerror(errno));
		goto fail;
	}
	return 0;
fail:
	if (lp->orig_ns >= 0 && setns(lp->orig_ns, CLONE_NEWNET)) { /* keeps the error above */ }
	xg_loop_close(lp);
	return -1;
}

int xg_loop_seed(struct xg_loop *lp, const void *frame, uint32_t len, int n)
{
	int sent = 0;
	for (int i = 0; i < n; i++)
		if (send(lp->pkt_fd, frame, len, 0) == (ssize_t)len)
			sent++;
	lp->seeded += (uint64_t)sent;
	return sent;
}

uint64_t xg_loop_newly_lost(struct xg_loop *lp)
{
	struct xg_xmit x;
	if (xg_read_xmit(lp->ctl_fd, XG_LOOP_SEED_DEV, &x) || !x.have || x.errors < lp->lost_seen)
		return 0;
	uint64_t n = x.errors - lp->lost_seen;
	lp->lost_seen = x.errors;
	return n;
}

void xg_loop_close(struct xg_loop *lp)
{
	bpf_link__destroy(lp->link);
	lp->link = NULL;
	int *fds[] = {&lp->pkt_fd, &lp->ctl_fd, &lp->priv_ns, &lp->orig_ns};
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}
