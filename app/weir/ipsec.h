/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the IPsec SAs the workers track, for REST, the stats file and
 * /metrics (docs/ipsec.md). Each SA is a flow of one direction keyed by
 * (source, destination, SPI, VLAN, and the UDP ports of ESP in UDP); a
 * tunnel is the SAs between one pair of ends on one VLAN.
 */
#ifndef WEIR_APP_IPSEC_H
#define WEIR_APP_IPSEC_H

#include <jansson.h>

#include "app.h"

/* At most this many SAs are listed (the busiest are not picked: the first
 * found); "sas_active" always counts all of them. */
#define WEIR_IPSEC_LIST_MAX 256

/*
 * {"sas_active": n, "sas_listed": k, "sa": {NAME: {...}}, "tunnels": {NAME: {...}}}
 * SA NAME "SRC>DST SPI" (SPI as 0x%08x), tunnel NAME "A<>B" (A the lower
 * end). An end is an address, or for ESP in UDP "ADDR:PORT" ("[ADDR]:PORT"
 * for IPv6); a tagged SA's names end in " vlan N". A name holds all an SA's
 * key holds, so two SAs never share one. Objects keyed by name, so counters
 * diff by key (counters reset).
 */
json_t *weir_ipsec_json(const struct weir_app *app);

#endif /* WEIR_APP_IPSEC_H */
