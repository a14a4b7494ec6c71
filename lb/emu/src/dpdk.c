/* The DPDK surface XenoFlow's main() uses, for the emulation: rte_eal_init binds DPDK port N to
 * the N-th "-a IFNAME[,devargs]" (allow-list) argument; ethdev calls succeed for bound ports. */
#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>

#include <doca_flow_emu.h>
#include <doca_log.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>

DOCA_LOG_REGISTER(DOCA_EMU_DPDK);

struct rte_mempool {
	int dummy;
};

static uint16_t nports;

int rte_eal_init(int argc, char **argv)
{
	nports = 0;
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
uint16_t rte_eth_dev_count_avail(void) { return nports; }

static int check(uint16_t port_id)
{
	return port_id < nports ? 0 : -ENODEV;
}

int rte_eth_dev_configure(uint16_t port_id, uint16_t nb_rx_queue, uint16_t nb_tx_queue, const struct rte_eth_conf *c)
{
	(void)nb_rx_queue;
	(void)nb_tx_queue;
	(void)c;
	return check(port_id);
}

int rte_eth_rx_queue_setup(uint16_t port_id, uint16_t q, uint16_t nb_desc, unsigned int socket_id,
			   const struct rte_eth_rxconf *conf, struct rte_mempool *mp)
{
	(void)q, (void)nb_desc, (void)socket_id, (void)conf, (void)mp;
	return check(port_id);
}

int rte_eth_tx_queue_setup(uint16_t port_id, uint16_t q, uint16_t nb_desc, unsigned int socket_id,
			   const struct rte_eth_txconf *conf)
{
	(void)q, (void)nb_desc, (void)socket_id, (void)conf;
	return check(port_id);
}

int rte_eth_rx_hairpin_queue_setup(uint16_t port_id, uint16_t q, uint16_t nb_desc, const struct rte_eth_hairpin_conf *c)
{
	(void)q, (void)nb_desc, (void)c;
	return check(port_id);
}

int rte_eth_tx_hairpin_queue_setup(uint16_t port_id, uint16_t q, uint16_t nb_desc, const struct rte_eth_hairpin_conf *c)
{
	(void)q, (void)nb_desc, (void)c;
	return check(port_id);
}

int rte_eth_promiscuous_enable(uint16_t port_id) { return check(port_id); }
int rte_eth_dev_start(uint16_t port_id) { return check(port_id); }
int rte_eth_dev_stop(uint16_t port_id) { return check(port_id); }
int rte_eth_dev_close(uint16_t port_id) { return check(port_id); }

struct rte_mempool *rte_pktmbuf_pool_create(const char *name, unsigned int n, unsigned int cache_size,
					    uint16_t priv_size, uint16_t data_room_size, int socket_id)
{
	(void)name, (void)n, (void)cache_size, (void)priv_size, (void)data_room_size, (void)socket_id;
	return calloc(1, sizeof(struct rte_mempool));
}

void rte_mempool_free(struct rte_mempool *mp) { free(mp); }
