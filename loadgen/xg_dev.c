// SPDX-License-Identifier: GPL-2.0
/* ethtool -S counters of a device, through SIOCETHTOOL (no ethtool binary needed on the node). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <net/if.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include "xg_dev.h"

/* Sum of tx_queue_N_xdp_xmit and tx_queue_N_xdp_xmit_errors (veth's names, drivers/net/veth.c). */
int xg_read_xmit(int fd, const char *dev, struct xg_xmit *x)
{
	struct ethtool_sset_info *info = NULL;
	struct ethtool_gstrings *names = NULL;
	struct ethtool_stats *stats = NULL;
	struct ifreq ifr = {};
	int ret = -1;
	uint32_t n;

	memset(x, 0, sizeof(*x));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	info = calloc(1, sizeof(*info) + sizeof(uint32_t));
	if (!info)
		goto out;
	info->cmd = ETHTOOL_GSSET_INFO;
	info->sset_mask = 1ULL << ETH_SS_STATS;
	ifr.ifr_data = (void *)info;
	if (ioctl(fd, SIOCETHTOOL, &ifr) || !(info->sset_mask & (1ULL << ETH_SS_STATS))) {
		ret = 0; /* no statistics: x->have stays false */
		goto out;
	}
	n = info->data[0];
	names = calloc(1, sizeof(*names) + (size_t)n * ETH_GSTRING_LEN);
	stats = calloc(1, sizeof(*stats) + (size_t)n * sizeof(uint64_t));
	if (!names || !stats)
		goto out;
	names->cmd = ETHTOOL_GSTRINGS;
	names->string_set = ETH_SS_STATS;
	names->len = n;
	ifr.ifr_data = (void *)names;
	if (ioctl(fd, SIOCETHTOOL, &ifr))
		goto out;
	stats->cmd = ETHTOOL_GSTATS;
	stats->n_stats = n;
	ifr.ifr_data = (void *)stats;
	if (ioctl(fd, SIOCETHTOOL, &ifr))
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		char name[ETH_GSTRING_LEN + 1];
		unsigned q;
		int end = 0;
		memcpy(name, names->data + (size_t)i * ETH_GSTRING_LEN, ETH_GSTRING_LEN);
		name[ETH_GSTRING_LEN] = '\0';
		if (sscanf(name, "tx_queue_%u_xdp_xmit%n", &q, &end) != 1 || !end)
			continue;
		if (name[end] == '\0') {
			x->xmit += stats->data[i];
			x->have = true;
		} else if (!strcmp(name + end, "_errors")) {
			x->errors += stats->data[i];
			x->have = true;
		}
	}
	ret = 0;
out:
	free(info);
	free(names);
	free(stats);
	return ret;
}

