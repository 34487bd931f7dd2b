/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the IPsec SAs the workers track, for REST, the stats file and
 * /metrics (docs/ipsec.md). Each SA is a flow of one direction keyed by
 * (source, destination, SPI); a tunnel is the SAs between one address pair.
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
 * address). Objects keyed by name, so counters diff by key (counters reset).
 */
json_t *weir_ipsec_json(const struct weir_app *app);

#endif /* WEIR_APP_IPSEC_H */
