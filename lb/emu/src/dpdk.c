/* The DPDK surface XenoFlow's main() uses, for the emulation: rte_eal_init binds DPDK port N to
 * the N-th "-a IFNAME[,devargs]" (allow-list) argument; the port registry (port → interface) lives
 * here, and the DOCA Flow emulation (doca_flow.c) builds on it, as DOCA Flow on DPDK ports. This
 * file calls nothing of doca_flow.c. The ethdev calls keep the port's state
 * (configured queues, hairpin queues and their binding, started) and refuse what DPDK 22.11's
 * ethdev layer (lib/ethdev/rte_ethdev.c) and its mlx5 driver (drivers/net/mlx5/mlx5_rxq.c,
 * mlx5_txq.c, mlx5_trigger.c) refuse, with the same return value: ethdev checks return -errno,
 * mlx5 checks also set rte_errno. Each check names its source. */
#include <errno.h>
#include <stdarg.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include <doca_flow_emu.h>
#include <doca_log.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>

#include "emu_dpdk.h"

DOCA_LOG_REGISTER(DOCA_EMU_DPDK);

#define MAX_QUEUES 128 /* Rx (and Tx) queues per port, regular and hairpin */

enum { Q_NONE = 0, Q_REGULAR = 1, Q_HAIRPIN = 2 };

struct emu_queue {
	int kind;
	struct rte_eth_hairpin_conf hp; /* hairpin queues: their configuration */
	bool bound;                     /* hairpin queues: bound to the peer (rte_eth_hairpin_bind) */
};

struct emu_eth {
	bool configured, started;
	uint16_t nb_rxq, nb_txq;
	struct emu_queue rxq[MAX_QUEUES], txq[MAX_QUEUES];
};

struct rte_mempool {
	int dummy;
};

static struct emu_eth eth[RTE_MAX_ETHPORTS];
static char ifnames[RTE_MAX_ETHPORTS][IF_NAMESIZE]; /* port → interface, "" if not bound */

/* ---------------------------------------------------------------- port registry */
doca_error_t doca_flow_emu_bind_port(uint16_t port_id, const char *ifname)
{
	if (port_id >= RTE_MAX_ETHPORTS || !ifname || strlen(ifname) >= IF_NAMESIZE)
		return DOCA_ERROR_INVALID_VALUE;
	snprintf(ifnames[port_id], IF_NAMESIZE, "%s", ifname);
	return DOCA_SUCCESS;
}

const char *doca_flow_emu_port_ifname(uint16_t port_id)
{
	return port_id < RTE_MAX_ETHPORTS ? ifnames[port_id] : "";
}

bool emu_eswitch_switchdev(void)
{
	const char *m = getenv("DOCA_FLOW_EMU_ESWITCH_MODE");

	return m && !strcmp(m, "switchdev");
}

/* DPDK-style failure: an mlx5 check sets rte_errno and returns its negation */
static int mlx5_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int mlx5_fail(int err, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	DOCA_LOG_ERR("%s", msg);
	rte_errno = err;
	return -err;
}

int rte_eal_init(int argc, char **argv)
{
	uint16_t nports = 0;

	for (int i = 1; i < argc; i++) {
		const char *dev = NULL;

		if ((!strcmp(argv[i], "-a") || !strcmp(argv[i], "--allow")) && i + 1 < argc)
			dev = argv[++i];
		else if (!strncmp(argv[i], "--allow=", 8))
			dev = argv[i] + 8;
		if (!dev)
			continue;
		char name[IF_NAMESIZE + 1];
		size_t l = strcspn(dev, ",");

		if (l == 0 || l >= sizeof(name) - 1) {
			DOCA_LOG_ERR("Failed to init EAL: '%s' is not an interface name", dev);
			errno = EINVAL;
			return -1;
		}
		memcpy(name, dev, l);
		name[l] = 0;
		if (!if_nametoindex(name)) {
			DOCA_LOG_ERR("Failed to init EAL: interface %s: %s", name, strerror(errno));
			errno = ENODEV;
			return -1;
		}
		if (doca_flow_emu_bind_port(nports, name) != DOCA_SUCCESS) {
			errno = E2BIG;
			return -1;
		}
		DOCA_LOG_INFO("EAL: port %u is %s", nports, name);
		nports++;
	}
	return argc - 1;
}

int rte_eal_cleanup(void) { return 0; }
unsigned int rte_socket_id(void) { return 0; }
const char *rte_strerror(int errnum) { return strerror(errnum); }

/* a port exists once it is bound to an interface (EAL -a IFNAME, or doca_flow_emu_bind_port) */
static bool valid(uint16_t port_id)
{
	return port_id < RTE_MAX_ETHPORTS && doca_flow_emu_port_ifname(port_id)[0];
}

uint16_t rte_eth_dev_count_avail(void)
{
	uint16_t n = 0;

	for (uint16_t p = 0; p < RTE_MAX_ETHPORTS; p++)
		n += valid(p);
	return n;
}

int rte_eth_dev_configure(uint16_t port_id, uint16_t nb_rx_queue, uint16_t nb_tx_queue, const struct rte_eth_conf *c)
{
	(void)c;
	if (!valid(port_id))
		return -ENODEV;
	/* rte_ethdev.c: "Port %u must be stopped to allow configuration" */
	if (eth[port_id].started)
		return -EBUSY;
	if (nb_rx_queue > MAX_QUEUES || nb_tx_queue > MAX_QUEUES)
		return -EINVAL;
	memset(&eth[port_id], 0, sizeof(eth[port_id]));
	eth[port_id].configured = true;
	eth[port_id].nb_rxq = nb_rx_queue;
	eth[port_id].nb_txq = nb_tx_queue;
	return 0;
}

/* rte_ethdev.c: a queue id beyond what rte_eth_dev_configure asked for → -EINVAL; a started
 * port's queues cannot be set up → -EBUSY */
static int queue_check(uint16_t port_id, uint16_t q, bool rx)
{
	if (!valid(port_id))
		return -ENODEV;
	if (q >= (rx ? eth[port_id].nb_rxq : eth[port_id].nb_txq)) {
		DOCA_LOG_ERR("Invalid %s queue_id=%u of port %u (configured: %u)", rx ? "Rx" : "Tx", q, port_id,
			     rx ? eth[port_id].nb_rxq : eth[port_id].nb_txq);
		return -EINVAL;
	}
	if (eth[port_id].started)
		return -EBUSY;
	return 0;
}

int rte_eth_rx_queue_setup(uint16_t port_id, uint16_t q, uint16_t nb_desc, unsigned int socket_id,
			   const struct rte_eth_rxconf *conf, struct rte_mempool *mp)
{
	int r = queue_check(port_id, q, true);

	(void)nb_desc, (void)socket_id, (void)conf;
	if (r)
		return r;
	if (!mp) /* rte_ethdev.c: "Invalid null mempool pointer" */
		return -EINVAL;
	eth[port_id].rxq[q].kind = Q_REGULAR;
	return 0;
}

int rte_eth_tx_queue_setup(uint16_t port_id, uint16_t q, uint16_t nb_desc, unsigned int socket_id,
			   const struct rte_eth_txconf *conf)
{
	int r = queue_check(port_id, q, false);

	(void)nb_desc, (void)socket_id, (void)conf;
	if (r)
		return r;
	eth[port_id].txq[q].kind = Q_REGULAR;
	return 0;
}

static int hairpin_setup(uint16_t port_id, uint16_t q, const struct rte_eth_hairpin_conf *c, bool rx)
{
	const char *dir = rx ? "Rx" : "Tx";
	int r = queue_check(port_id, q, rx);

	if (r)
		return r;
	/* rte_ethdev.c rte_eth_{rx,tx}_hairpin_queue_setup: NULL config, no peer → -EINVAL */
	if (!c)
		return -EINVAL;
	/* The PF's eSwitch mode (what `devlink dev eswitch show` reports; DOCA_FLOW_EMU_ESWITCH_MODE
	 * for the emulated NIC, default legacy). DPDK 22.11 doc/guides/nics/mlx5.rst, Limitations:
	 * "Hairpin in switchdev SR-IOV mode is not supported till now." A BlueField in DPU mode has
	 * its Arm PFs in switchdev ("DOCA Switching", DOCA 2.9: "switchdev mode is configured by
	 * default for all PFs on the Arm. That configuration must not be changed"). v22.11's mlx5
	 * code has no check of its own for it: where and how the real stack fails is not known;
	 * the emulation refuses here, -ENOTSUP with rte_errno ENOTSUP. */
	if (emu_eswitch_switchdev())
		return mlx5_fail(ENOTSUP, "port %u unable to setup %s hairpin queue index %u: hairpin is not supported "
				 "with the PF in switchdev mode (DOCA_FLOW_EMU_ESWITCH_MODE=switchdev; DPDK mlx5 guide, "
				 "Limitations)", port_id, dir, q);
	if (c->peer_count == 0) {
		DOCA_LOG_ERR("Invalid value for number of peers for %s queue(=0), should be: > 0", dir);
		return -EINVAL;
	}
	/* mlx5_rxq.c mlx5_rx_hairpin_queue_setup / mlx5_txq.c mlx5_tx_hairpin_queue_setup: exactly one
	 * peer → else rte_errno EINVAL */
	if (c->peer_count != 1)
		return mlx5_fail(EINVAL, "port %u unable to setup %s hairpin queue index %u peer count is %u", port_id,
				 dir, q, c->peer_count);
	if (c->peers[0].port == port_id) {
		/* mlx5: a hairpin to the same port needs its peer queue to exist */
		uint16_t n = rx ? eth[port_id].nb_txq : eth[port_id].nb_rxq;

		if (c->peers[0].queue >= n)
			return mlx5_fail(EINVAL, "port %u unable to setup %s hairpin queue index %u, %s %u is larger than %u",
					 port_id, dir, q, rx ? "Tx" : "Rx", c->peers[0].queue, n);
	} else if (!c->manual_bind || !c->tx_explicit) {
		/* mlx5: a hairpin to another port ("two ports hairpin mode") needs manual binding and
		 * explicit Tx flow rules: the queue attributes DOCA 2.9's dpdk_utils.c sets to 1 */
		return mlx5_fail(EINVAL, "port %u unable to setup %s hairpin queue index %u peer port %u with attributes %u %u",
				 port_id, dir, q, c->peers[0].port, c->manual_bind, c->tx_explicit);
	}
	struct emu_queue *eq = rx ? &eth[port_id].rxq[q] : &eth[port_id].txq[q];

	eq->kind = Q_HAIRPIN;
	eq->hp = *c;
	/* mlx5_trigger.c mlx5_hairpin_auto_bind: queues of a same-port hairpin without manual_bind
	 * are bound at rte_eth_dev_start; the others only by rte_eth_hairpin_bind */
	eq->bound = false;
	return 0;
}

int rte_eth_rx_hairpin_queue_setup(uint16_t port_id, uint16_t q, uint16_t nb_desc, const struct rte_eth_hairpin_conf *c)
{
	(void)nb_desc;
	return hairpin_setup(port_id, q, c, true);
}

int rte_eth_tx_hairpin_queue_setup(uint16_t port_id, uint16_t q, uint16_t nb_desc, const struct rte_eth_hairpin_conf *c)
{
	(void)nb_desc;
	return hairpin_setup(port_id, q, c, false);
}

/* rte_ethdev.c rte_eth_hairpin_bind and mlx5_trigger.c mlx5_hairpin_bind_single_port: bind every
 * hairpin Tx queue of tx_port whose peer is rx_port (RTE_MAX_ETHPORTS: every port) to its peer
 * Rx queue. Tx port not started → -EBUSY; peer port not started → rte_errno EBUSY; the peer queue
 * not a hairpin Rx queue pointing back → rte_errno EINVAL; already bound → success; no queue to
 * bind → success. */
static int bind_one(uint16_t tx_port, uint16_t rx_port, bool bind)
{
	struct emu_eth *t = &eth[tx_port];

	if (!valid(rx_port))
		return mlx5_fail(ENODEV, "Rx port %u does not belong to mlx5", rx_port);
	for (uint16_t i = 0; i < t->nb_txq; i++) {
		struct emu_queue *tq = &t->txq[i];

		if (tq->kind != Q_HAIRPIN || tq->hp.peers[0].port != rx_port)
			continue;
		uint16_t pq = tq->hp.peers[0].queue;
		struct emu_queue *rq = pq < eth[rx_port].nb_rxq ? &eth[rx_port].rxq[pq] : NULL;

		if (!bind) {
			tq->bound = false;
			if (rq)
				rq->bound = false;
			continue;
		}
		if (!eth[rx_port].started)
			return mlx5_fail(EBUSY, "peer port %u is not started", rx_port);
		if (!rq || rq->kind != Q_HAIRPIN)
			return mlx5_fail(EINVAL, "port %u queue %u is not a hairpin Rxq", rx_port, pq);
		if (rq->hp.peers[0].port != tx_port || rq->hp.peers[0].queue != i ||
		    rq->hp.manual_bind != tq->hp.manual_bind || rq->hp.tx_explicit != tq->hp.tx_explicit)
			return mlx5_fail(EINVAL, "port %u Rx queue %u and port %u Tx queue %u are not each other's peers "
					 "with the same attributes", rx_port, pq, tx_port, i);
		tq->bound = rq->bound = true;
	}
	return 0;
}

static int hairpin_bind(uint16_t tx_port, uint16_t rx_port, bool bind)
{
	if (!valid(tx_port))
		return -ENODEV;
	if (!eth[tx_port].started) {
		DOCA_LOG_ERR("Tx port %u is not started", tx_port);
		return -EBUSY;
	}
	if (rx_port != RTE_MAX_ETHPORTS)
		return bind_one(tx_port, rx_port, bind);
	for (uint16_t p = 0; p < RTE_MAX_ETHPORTS; p++) {
		int r = valid(p) ? bind_one(tx_port, p, bind) : 0;

		if (r)
			return r;
	}
	return 0;
}

int rte_eth_hairpin_bind(uint16_t tx_port, uint16_t rx_port) { return hairpin_bind(tx_port, rx_port, true); }
int rte_eth_hairpin_unbind(uint16_t tx_port, uint16_t rx_port) { return hairpin_bind(tx_port, rx_port, false); }

int rte_eth_promiscuous_enable(uint16_t port_id) { return valid(port_id) ? 0 : -ENODEV; }

int rte_eth_dev_start(uint16_t port_id)
{
	struct emu_eth *e = &eth[port_id];

	if (!valid(port_id))
		return -ENODEV;
	/* rte_ethdev.c: "Device with port_id=%u is not configured" */
	if (!e->configured) {
		DOCA_LOG_ERR("Device with port_id=%u is not configured", port_id);
		return -EINVAL;
	}
	if (e->started)
		return 0;
	/* mlx5_hairpin_auto_bind: same-port hairpin queues without manual_bind are bound now */
	for (uint16_t q = 0; q < e->nb_txq; q++) {
		struct emu_queue *tq = &e->txq[q];

		if (tq->kind == Q_HAIRPIN && tq->hp.peers[0].port == port_id && !tq->hp.manual_bind) {
			tq->bound = true;
			if (tq->hp.peers[0].queue < e->nb_rxq)
				e->rxq[tq->hp.peers[0].queue].bound = true;
		}
	}
	e->started = true;
	return 0;
}

int rte_eth_dev_stop(uint16_t port_id)
{
	if (!valid(port_id))
		return -ENODEV;
	/* mlx5_trigger.c mlx5_dev_stop → mlx5_txq_stop, mlx5_rxq_stop: the queues' hardware objects
	 * are released, so a hairpin through this port must be bound again after the next start */
	for (uint16_t p = 0; p < RTE_MAX_ETHPORTS; p++) {
		for (uint16_t q = 0; q < MAX_QUEUES; q++) {
			if ((p == port_id || eth[p].txq[q].hp.peers[0].port == port_id))
				eth[p].txq[q].bound = false;
			if ((p == port_id || eth[p].rxq[q].hp.peers[0].port == port_id))
				eth[p].rxq[q].bound = false;
		}
	}
	eth[port_id].started = false;
	return 0;
}

int rte_eth_dev_close(uint16_t port_id)
{
	if (!valid(port_id))
		return -ENODEV;
	/* rte_ethdev.c: "Cannot close started device" */
	if (eth[port_id].started)
		return -EINVAL;
	memset(&eth[port_id], 0, sizeof(eth[port_id]));
	return 0;
}

struct rte_mempool *rte_pktmbuf_pool_create(const char *name, unsigned int n, unsigned int cache_size,
					    uint16_t priv_size, uint16_t data_room_size, int socket_id)
{
	(void)name, (void)n, (void)cache_size, (void)priv_size, (void)data_room_size, (void)socket_id;
	return calloc(1, sizeof(struct rte_mempool));
}

void rte_mempool_free(struct rte_mempool *mp) { free(mp); }

/* ---------------------------------------------------------------- for doca_flow.c */
bool emu_eth_started(uint16_t port_id)
{
	return valid(port_id) && eth[port_id].started;
}

uint16_t emu_eth_nb_rxq(uint16_t port_id)
{
	return valid(port_id) ? eth[port_id].nb_rxq : 0;
}

int emu_eth_rxq_kind(uint16_t port_id, uint16_t queue)
{
	if (!valid(port_id) || queue >= eth[port_id].nb_rxq)
		return Q_NONE;
	return eth[port_id].rxq[queue].kind;
}

bool emu_eth_hairpin_ready(uint16_t in_port, uint16_t out_port, char *why, size_t why_len)
{
	bool any = false;

	if (!valid(in_port) || !valid(out_port)) {
		snprintf(why, why_len, "port %u or %u does not exist", in_port, out_port);
		return false;
	}
	for (uint16_t q = 0; q < eth[in_port].nb_rxq; q++) {
		const struct emu_queue *rq = &eth[in_port].rxq[q];

		if (rq->kind != Q_HAIRPIN || rq->hp.peers[0].port != out_port)
			continue;
		any = true;
		if (rq->bound)
			return true;
	}
	if (any)
		snprintf(why, why_len, "the hairpin queues from port %u to port %u are not bound "
			 "(rte_eth_hairpin_bind(%u, %u) after rte_eth_dev_start)", in_port, out_port, out_port, in_port);
	else
		snprintf(why, why_len, "port %u has no hairpin Rx queue whose peer is port %u "
			 "(rte_eth_rx_hairpin_queue_setup)", in_port, out_port);
	return false;
}

int doca_flow_emu_hairpin_ready(uint16_t in_port, uint16_t out_port)
{
	char why[256];

	return emu_eth_hairpin_ready(in_port, out_port, why, sizeof(why));
}
