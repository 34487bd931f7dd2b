/* SPDX-License-Identifier: BSD-3-Clause
 * weir: bringing the LAN/WAN port pair up and down.
 */
#ifndef WEIR_APP_PORTS_H
#define WEIR_APP_PORTS_H

#include <stdint.h>
#include <rte_flow.h>
#include <rte_mempool.h>

#include "config.h"

/* How a port spreads flows over its queues, and what the start-up
 * self-test found (stats: "distribution"). */
struct weir_port_rss {
	const char *hash;       /* "none" (one queue), "kernel-fanout", "symmetric-toeplitz"
				 * (rte_flow: the PMD's symmetric function), "symmetric-key" */
	const char *check;      /* "capability", "software", "unverified" (key or RETA not readable) */
	uint32_t selftest_flows;        /* sample flows hashed both ways in software */
	uint32_t selftest_split;        /* of those, flows whose directions differ in queue */
};

struct weir_ports {
	uint16_t id[WEIR_PORT__COUNT];
	uint16_t n_queues;              /* one RX/TX queue pair per worker */
	int started[WEIR_PORT__COUNT];
	struct weir_port_rss rss[WEIR_PORT__COUNT];
	struct rte_flow *flow[WEIR_PORT__COUNT];        /* the symmetric RSS rule, if any */
};

/* Probe the configured devices, configure one queue pair per worker on each
 * (symmetric RSS when there is more than one), enable promiscuous mode and
 * start them. Errors name the config line of the device. */
int weir_ports_init(const struct weir_config *cfg, struct rte_mempool *mp, struct weir_ports *ports,
		    char *err, size_t errlen);

/* ports.on_failure = "closed", at a clean stop: ask each started port's PMD
 * to take its link down (a NIC's PHY off, an af_packet interface down), so
 * the routers on both sides see the box gone at once. A PMD that cannot is
 * logged; the unit's hook (dist/weir-failopen) covers kernel interfaces after
 * any stop, and a crash with PCI ports needs a bypass card or the switch. */
void weir_ports_links_down(struct weir_ports *ports, const struct weir_config *cfg);

/* Stop and close the ports, returning every mbuf they hold to the pool. */
void weir_ports_close(struct weir_ports *ports);

#endif /* WEIR_APP_PORTS_H */
