/* SPDX-License-Identifier: BSD-3-Clause
 * weir: bringing the LAN/WAN port pair up and down.
 */
#ifndef WEIR_APP_PORTS_H
#define WEIR_APP_PORTS_H

#include <stdint.h>
#include <rte_mempool.h>

#include "config.h"

struct weir_ports {
	uint16_t id[WEIR_PORT__COUNT];
	uint16_t n_queues;              /* one RX/TX queue pair per worker */
	int started[WEIR_PORT__COUNT];
};

/* Probe the configured devices, configure one queue pair per worker on each
 * (symmetric RSS when there is more than one), enable promiscuous mode and
 * start them. Errors name the config line of the device. */
int weir_ports_init(const struct weir_config *cfg, struct rte_mempool *mp, struct weir_ports *ports,
		    char *err, size_t errlen);

/* Stop and close the ports, returning every mbuf they hold to the pool. */
void weir_ports_close(struct weir_ports *ports);

#endif /* WEIR_APP_PORTS_H */
