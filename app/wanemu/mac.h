/* SPDX-License-Identifier: BSD-3-Clause
 * weir-wanemu: which path each WAN host's MAC address was seen on, so frames
 * from weir go down the right path and only unknown or group destinations
 * are flooded (as a learning bridge does).
 */
#ifndef WANEMU_MAC_H
#define WANEMU_MAC_H

#include <stdint.h>

#define MAC_TABLE 1024          /* power of two; far more than the testbed's hosts */

struct mac_table {
	struct { uint8_t mac[6]; int8_t path; } e[MAC_TABLE];  /* path+1; 0 = free */
	uint32_t used;
};

/* Record that `mac` was a source on `path`; returns 1 if that is news (new
 * host or a host that moved), 0 otherwise. Group addresses are ignored. */
int mac_learn(struct mac_table *t, const uint8_t *mac, int path);

/* The path `mac` was learned on, or -1 (unknown or group: flood). */
int mac_lookup(const struct mac_table *t, const uint8_t *mac);

#endif /* WANEMU_MAC_H */
