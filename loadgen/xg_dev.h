/* Device counters of xdpgen's target and of the loop driver's pair (xg_dev.c). */
#ifndef XG_DEV_H
#define XG_DEV_H

#include <stdbool.h>
#include <stdint.h>

struct xg_xmit {
	bool have;             /* the driver has the counters (veth does) */
	uint64_t xmit, errors; /* frames a device's XDP transmit took / refused, over its queues */
};

/* ethtool -S of dev through fd, an AF_INET socket of dev's namespace; 0 also when the driver has
 * no such counters (x->have false) */
int xg_read_xmit(int fd, const char *dev, struct xg_xmit *x);

#endif
