/* SPDX-License-Identifier: BSD-3-Clause */
/* The emulated ports of lb/'s tests and benchmarks: a private network namespace holding two veth
 * pairs, xe0-xe0p (port 0) and xe1-xe1p (port 1), bound as rte_eal_init's "-a xe0 -a xe1" would
 * bind them. No IPv6 and no multicast: the kernel's own router solicitations and DAD probes would
 * reach the ports' datapath and count as misses in the middle of a test (seen: a miss count of 4
 * where 3 frames were run). */
#ifndef XF_TESTS_EMU_PORTS_H
#define XF_TESTS_EMU_PORTS_H

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <doca_flow_emu.h>
#include <doca_log.h>

/* `extra`: shell commands run after the links are up (e.g. GRO for a reader), or NULL.
 * Returns 0, or 1 after saying why on stderr. */
static inline int emu_ports_in_private_netns(const char *extra)
{
	char cmd[1024];

	if (unshare(CLONE_NEWNET)) {
		perror("Failed to unshare the network namespace (root needed)");
		return 1;
	}
	snprintf(cmd, sizeof(cmd),
		 "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 && "
		 "ip link set lo up && ip link add xe0 type veth peer name xe0p && "
		 "ip link add xe1 type veth peer name xe1p && "
		 "for d in xe0 xe0p xe1 xe1p; do ip link set $d multicast off up; done%s%s",
		 extra ? " && " : "", extra ? extra : "");
	if (system(cmd)) {
		fprintf(stderr, "Failed to create the veth pairs: %s\n", cmd);
		return 1;
	}
	doca_flow_emu_bind_port(0, "xe0");
	doca_flow_emu_bind_port(1, "xe1");
	return 0;
}

/* What a test program of the emulated ports does first: root (else 77, meson's "skipped"), the ports
 * in a private network namespace, DOCA's log quiet unless EMU_TEST_VERBOSE is set. Returns 0 to go on,
 * else the program's exit status. */
static inline int emu_test_start(const char *name)
{
	if (geteuid() != 0) {
		fprintf(stderr, "%s needs root (network namespace, XDP)\n", name);
		return 77;
	}
	if (emu_ports_in_private_netns(NULL))
		return 1;
	doca_log_level_set_global_lower_limit(getenv("EMU_TEST_VERBOSE") ? DOCA_LOG_LEVEL_DEBUG : DOCA_LOG_LEVEL_CRIT);
	return 0;
}

#endif
