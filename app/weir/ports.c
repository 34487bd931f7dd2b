/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_log.h>

#include "ports.h"
#include "rss_check.h"

/* Sample flows the start-up self-test hashes both ways (software Toeplitz). */
#define SELFTEST_FLOWS 1024

static const char *const role_name[WEIR_PORT__COUNT] = { "lan", "wan" };

/*
 * A key made of one repeated 16-bit pattern makes the Toeplitz hash
 * symmetric: swapping source and destination (address and port) gives the
 * same hash, so both directions of a flow land on the same queue and worker.
 */
static uint8_t sym_rss_key[52];

static void
fill_sym_key(void)
{
	for (size_t i = 0; i < sizeof(sym_rss_key); i += 2) {
		sym_rss_key[i] = 0x6d;
		sym_rss_key[i + 1] = 0x5a;
	}
}

/* Find the device named by the config (already probed via --vdev/-a, or
 * probe it now with hot-plug) and return its port id. */
static int
find_or_probe(const char *device, uint16_t *port_id)
{
	char name[RTE_ETH_NAME_MAX_LEN];
	size_t n = strcspn(device, ",");

	if (n >= sizeof(name))
		return -ENAMETOOLONG;
	memcpy(name, device, n);
	name[n] = '\0';
	if (rte_eth_dev_get_port_by_name(name, port_id) == 0)
		return 0;
	int rc = rte_dev_probe(device);
	if (rc < 0)
		return rc;
	return rte_eth_dev_get_port_by_name(name, port_id);
}

/* The RSS hash fields both ports can hash on: with two NIC models one
 * may hash L4 ports where the other hashes addresses only, and the two
 * directions of a flow would then land on different workers. Both ports
 * use what both offer. */
static uint64_t
common_rss_hf(const struct weir_ports *ports)
{
	uint64_t hf = RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP;

	for (int r = 0; r < WEIR_PORT__COUNT; r++) {
		struct rte_eth_dev_info info;

		if (rte_eth_dev_info_get(ports->id[r], &info) != 0)
			return 0;
		hf &= info.flow_type_rss_offloads;
	}
	/* Addresses alone if either cannot hash L4 ports: coarser, but the
	 * same on both sides. */
	if ((hf & (RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP)) != (RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP))
		hf &= RTE_ETH_RSS_IP;
	return hf;
}

/* Program the redirection table explicitly, entry i to queue i mod n, on
 * both ports alike: drivers' defaults differ, and with a worker count that
 * is not a power of two the same hash could pick different queues. A PMD
 * without a table (RSS by other means) is left as it is. */
static int
program_reta(uint16_t pid, uint16_t reta_size, uint16_t n_queues)
{
	struct rte_eth_rss_reta_entry64 reta[RTE_ETH_RSS_RETA_SIZE_512 / RTE_ETH_RETA_GROUP_SIZE];

	if (reta_size == 0)
		return 0;
	if (reta_size > RTE_ETH_RSS_RETA_SIZE_512)
		return -ENOTSUP;
	memset(reta, 0, sizeof(reta));
	for (uint16_t i = 0; i < reta_size; i++) {
		reta[i / RTE_ETH_RETA_GROUP_SIZE].mask |= 1ull << (i % RTE_ETH_RETA_GROUP_SIZE);
		reta[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE] = i % n_queues;
	}
	return rte_eth_dev_rss_reta_update(pid, reta, reta_size);
}

/*
 * Where the PMD offers it, the symmetric Toeplitz function through rte_flow
 * (source and destination XORed before hashing: symmetric whatever the key),
 * over all of the port's queues. Without it, the symmetric key set at
 * configure time does the same. 0: the rule is in place.
 */
static int
symmetric_flow(uint16_t pid, uint16_t n_queues, uint64_t hf, struct rte_flow **flow)
{
	uint16_t queues[RTE_MAX_QUEUES_PER_PORT];
	const struct rte_flow_attr attr = { .ingress = 1 };
	const struct rte_flow_item pattern[] = {
		{ .type = RTE_FLOW_ITEM_TYPE_ETH },
		{ .type = RTE_FLOW_ITEM_TYPE_END },
	};
	const struct rte_flow_action_rss rss = {
		.func = RTE_ETH_HASH_FUNCTION_SYMMETRIC_TOEPLITZ,
		.level = 0,
		.types = hf,
		.queue_num = n_queues,
		.queue = queues,
	};
	const struct rte_flow_action actions[] = {
		{ .type = RTE_FLOW_ACTION_TYPE_RSS, .conf = &rss },
		{ .type = RTE_FLOW_ACTION_TYPE_END },
	};
	struct rte_flow_error fe;

	for (uint16_t q = 0; q < n_queues; q++)
		queues[q] = q;
	if (rte_flow_validate(pid, &attr, pattern, actions, &fe) != 0)
		return -1;
	*flow = rte_flow_create(pid, &attr, pattern, actions, &fe);
	return *flow != NULL ? 0 : -1;
}

/*
 * The self-test: read the key and redirection table back from the device
 * (a PMD may have kept its own key) and hash sample flows both ways in
 * software as the NIC does. A split flow would be served by two workers;
 * it is logged and counted, and flow_split counts its frames at run time.
 */
static void
selftest(uint16_t pid, const struct rte_eth_dev_info *info, uint64_t hf, struct weir_port_rss *r)
{
	uint8_t key[64];
	struct rte_eth_rss_conf rc = { .rss_key = key, .rss_key_len = sizeof(key) };
	struct rte_eth_rss_reta_entry64 rq[RTE_ETH_RSS_RETA_SIZE_512 / RTE_ETH_RETA_GROUP_SIZE];
	uint16_t reta[RTE_ETH_RSS_RETA_SIZE_512];
	uint16_t n = info->reta_size;

	r->check = "unverified";
	memset(key, 0, sizeof(key));
	if (rte_eth_dev_rss_hash_conf_get(pid, &rc) != 0 || rc.rss_key_len < 40 ||
	    n == 0 || n > RTE_ETH_RSS_RETA_SIZE_512)
		return;
	memset(rq, 0, sizeof(rq));
	for (uint16_t i = 0; i < n; i++)
		rq[i / RTE_ETH_RETA_GROUP_SIZE].mask |= 1ull << (i % RTE_ETH_RETA_GROUP_SIZE);
	if (rte_eth_dev_rss_reta_query(pid, rq, n) != 0)
		return;
	for (uint16_t i = 0; i < n; i++)
		reta[i] = rq[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE];
	r->check = "software";
	r->selftest_flows = SELFTEST_FLOWS;
	r->selftest_split = weir_rss_asymmetric(key, reta, n, (hf & RTE_ETH_RSS_TCP) != 0,
						SELFTEST_FLOWS, 1);
}

static int
setup_port(const struct weir_config *cfg, int role, struct rte_mempool *mp, struct weir_ports *ports,
	   char *err, size_t errlen)
{
	uint16_t pid = ports->id[role];
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	uint16_t nrx = cfg->rx_desc, ntx = cfg->tx_desc;
	int rc;

	memset(&conf, 0, sizeof(conf));
	rc = rte_eth_dev_info_get(pid, &info);
	if (rc != 0)
		goto fail;
	if (ports->n_queues > info.max_rx_queues || ports->n_queues > info.max_tx_queues) {
		snprintf(err, errlen, "%s:%d: ports.%s.device %s has %u rx/%u tx queues; %u workers "
			 "need one each", cfg->path, cfg->port[role].line, role_name[role],
			 cfg->port[role].device, info.max_rx_queues, info.max_tx_queues, ports->n_queues);
		return -1;
	}
	if (ports->n_queues > 1 && cfg->distribution == WEIR_DIST_KERNEL_FANOUT) {
		/*
		 * net_af_packet joins its qpairs sockets in one PACKET_FANOUT
		 * group per interface, mode HASH with FLAG_DEFRAG and
		 * FLAG_ROLLOVER. The kernel's fanout hash is the symmetric flow
		 * hash (addresses and ports sorted before hashing, one boot-wide
		 * seed), and queue q is the q-th socket joined on both ports, so
		 * both directions of a flow meet on the same queue index. No
		 * RSS to configure; frames that rollover moves are counted as
		 * flow_split by the workers. Only this PMD is known to do that.
		 */
		if (strcmp(info.driver_name, "net_af_packet") != 0) {
			snprintf(err, errlen, "%s:%d: ports.distribution = \"kernel-fanout\" needs "
				 "net_af_packet ports; ports.%s.device %s is %s", cfg->path,
				 cfg->dist_line, role_name[role], cfg->port[role].device,
				 info.driver_name);
			return -1;
		}
	} else if (ports->n_queues > 1) {
		/* Several workers: flows must be spread so that both
		 * directions of a flow reach the same worker. */
		uint64_t hf = common_rss_hf(ports);

		if (hf == 0) {
			snprintf(err, errlen, "%s:%d: ports.%s.device %s has no RSS, so flows cannot be "
				 "spread symmetrically over %u workers; configure one worker (or, "
				 "for net_af_packet qpairs=N, ports.distribution = \"kernel-fanout\")",
				 cfg->path, cfg->lcores_line, role_name[role], cfg->port[role].device,
				 ports->n_queues);
			return -1;
		}
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_key = sym_rss_key;
		conf.rx_adv_conf.rss_conf.rss_key_len =
			info.hash_key_size ? RTE_MIN(info.hash_key_size, (uint8_t)sizeof(sym_rss_key))
					   : 40;
		conf.rx_adv_conf.rss_conf.rss_hf = hf;
	}
	rc = rte_eth_dev_configure(pid, ports->n_queues, ports->n_queues, &conf);
	if (rc != 0)
		goto fail;
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nrx, &ntx);
	if (rc != 0)
		goto fail;
	for (uint16_t q = 0; q < ports->n_queues; q++) {
		rc = rte_eth_rx_queue_setup(pid, q, nrx, rte_eth_dev_socket_id(pid), NULL, mp);
		if (rc != 0)
			goto fail;
		rc = rte_eth_tx_queue_setup(pid, q, ntx, rte_eth_dev_socket_id(pid), NULL);
		if (rc != 0)
			goto fail;
	}
	/* A transparent bridge must see frames addressed to anyone. Some
	 * virtual PMDs (pcap, ring) cannot change it: that is fine. */
	rc = rte_eth_promiscuous_enable(pid);
	if (rc != 0 && rc != -ENOTSUP)
		goto fail;
	rc = rte_eth_dev_start(pid);
	if (rc != 0)
		goto fail;
	ports->started[role] = 1;
	ports->rss[role].hash = ports->n_queues == 1 ? "none" : "kernel-fanout";
	ports->rss[role].check = ports->n_queues == 1 ? "none" : "capability";
	if (ports->n_queues > 1 && cfg->distribution != WEIR_DIST_KERNEL_FANOUT) {
		uint64_t hf = conf.rx_adv_conf.rss_conf.rss_hf;

		rc = program_reta(pid, info.reta_size, ports->n_queues);
		if (rc != 0 && rc != -ENOTSUP) {
			snprintf(err, errlen, "%s:%d: ports.%s.device %s: cannot program the RSS "
				 "redirection table (%u entries): %s", cfg->path, cfg->port[role].line,
				 role_name[role], cfg->port[role].device, info.reta_size,
				 rte_strerror(-rc));
			return -1;
		}
		if (symmetric_flow(pid, ports->n_queues, hf, &ports->flow[role]) == 0) {
			ports->rss[role].hash = "symmetric-toeplitz";
			ports->rss[role].check = "capability";
		} else {
			ports->rss[role].hash = "symmetric-key";
			selftest(pid, &info, hf, &ports->rss[role]);
		}
		rte_log(ports->rss[role].selftest_split ? RTE_LOG_WARNING : RTE_LOG_NOTICE,
			RTE_LOGTYPE_USER1, "USER1: ports.%s (%s): RSS over %u queues by %s, checked by %s: %u of %u sample "
			"flows split%s\n", role_name[role], info.driver_name, ports->n_queues,
			ports->rss[role].hash, ports->rss[role].check, ports->rss[role].selftest_split,
			ports->rss[role].selftest_flows,
			ports->rss[role].selftest_split ? " (their frames count as flow_split)" : "");
	}
	return 0;
fail:
	snprintf(err, errlen, "%s:%d: ports.%s.device %s: cannot set up port: %s", cfg->path,
		 cfg->port[role].line, role_name[role], cfg->port[role].device, rte_strerror(-rc));
	return -1;
}

int
weir_ports_init(const struct weir_config *cfg, struct rte_mempool *mp, struct weir_ports *ports,
		char *err, size_t errlen)
{
	memset(ports, 0, sizeof(*ports));
	ports->n_queues = (uint16_t)cfg->n_workers;
	fill_sym_key();
	for (int r = 0; r < WEIR_PORT__COUNT; r++) {
		int rc = find_or_probe(cfg->port[r].device, &ports->id[r]);
		if (rc < 0) {
			snprintf(err, errlen, "%s:%d: ports.%s.device %s: no such device (%s)", cfg->path,
				 cfg->port[r].line, role_name[r], cfg->port[r].device, rte_strerror(-rc));
			return -1;
		}
	}
	if (ports->id[0] == ports->id[1]) {
		snprintf(err, errlen, "%s:%d: the LAN and WAN ports are the same device", cfg->path,
			 cfg->port[1].line);
		return -1;
	}
	for (int r = 0; r < WEIR_PORT__COUNT; r++)
		if (setup_port(cfg, r, mp, ports, err, errlen) < 0)
			return -1;
	return 0;
}

/* A vdev bound to a kernel interface (net_af_packet, net_af_xdp: "iface=NAME"):
 * that interface set down, as `ip link set NAME down` does. 0, or -errno. */
static int
iface_down(const char *device)
{
	const char *p = strstr(device, "iface=");
	struct ifreq ifr;
	size_t n;
	int fd, rc = 0;

	if (p == NULL)
		return -ENOTSUP;
	p += strlen("iface=");
	n = strcspn(p, ",");
	if (n == 0 || n >= sizeof(ifr.ifr_name))
		return -EINVAL;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, p, n);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
		rc = -errno;
	} else {
		ifr.ifr_flags &= ~IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
			rc = -errno;
	}
	close(fd);
	return rc;
}

void
weir_ports_links_down(struct weir_ports *ports, const struct weir_config *cfg)
{
	static const char *const names[WEIR_PORT__COUNT] = { "lan", "wan" };

	for (int r = 0; r < WEIR_PORT__COUNT; r++) {
		int rc;

		if (!ports->started[r])
			continue;
		/* The PMD's own (a NIC's PHY off); a kernel interface's flag
		 * where the PMD has none (af_packet). */
		rc = rte_eth_dev_set_link_down(ports->id[r]);
		if (rc == -ENOTSUP)
			rc = iface_down(cfg->port[r].device);
		if (rc == 0)
			RTE_LOG(NOTICE, USER1, "fail-closed: %s port's link set down\n", names[r]);
		else
			RTE_LOG(WARNING, USER1, "fail-closed: cannot set the %s port's link down "
				"(%s); the stop hook or a bypass card must\n", names[r],
				rte_strerror(-rc));
	}
}

void
weir_ports_close(struct weir_ports *ports)
{
	for (int r = 0; r < WEIR_PORT__COUNT; r++) {
		if (!ports->started[r])
			continue;
		if (ports->flow[r] != NULL)
			rte_flow_destroy(ports->id[r], ports->flow[r], NULL);
		rte_eth_dev_stop(ports->id[r]);
		rte_eth_dev_close(ports->id[r]);
		ports->started[r] = 0;
	}
}
