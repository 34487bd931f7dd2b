/* SPDX-License-Identifier: BSD-3-Clause
 * weir: LibreQoS's two files read as they are — ShapedDevices.csv (a row
 * per device; rows with one Circuit ID are one subscriber) and network.json
 * (the node tree) — into a subscriber set (lib/classify/subscriber.h).
 *
 * Every bad row is reported as FILE:LINE: why; the caller applies nothing
 * of a set with problems.
 */
#ifndef WEIR_LQOS_H
#define WEIR_LQOS_H

#include "subscriber.h"

/* network.json's nodes into s (a file holding {} has none). Returns problems. */
uint32_t weir_subs_read_network_json(struct weir_subs *s, const char *path,
				     struct weir_sub_errs *e);

/* ShapedDevices.csv's rows into s. Returns problems. box != 0: only the rows
 * of that fleet partition (Box column) and those with no Box are taken; every
 * row is still checked. */
uint32_t weir_subs_read_shaped_devices(struct weir_subs *s, const char *path, uint16_t box,
				       struct weir_sub_errs *e);

/* Both files (network may be NULL: a flat network), then the check: a
 * checked set, or NULL with every problem in e. */
struct weir_subs *weir_subs_load_lqos(const char *shaped_devices, const char *network,
				      uint16_t box, struct weir_sub_errs *e);

#endif /* WEIR_LQOS_H */
