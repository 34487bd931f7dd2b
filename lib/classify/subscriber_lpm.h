/* SPDX-License-Identifier: BSD-3-Clause
 * weir: which subscriber an address belongs to — longest-prefix match over
 * a checked set's prefixes: DIR-24-8 tables as rte_lpm lays them out (IPv4)
 * and rte_lpm6 (IPv6).
 *
 * Built once per set on the management lcore (needs EAL), read by every
 * worker once per new flow (never per packet): a lookup only reads the
 * tables. Overlapping prefixes of different circuits resolve by length, as
 * LPM does. The tables are sized from the set itself (rules, and the tbl8
 * groups the prefixes longer than /24 need), so a set that checked always
 * fits, and the result is the subscriber's index in its set.
 */
#ifndef WEIR_SUBSCRIBER_LPM_H
#define WEIR_SUBSCRIBER_LPM_H

#include <stddef.h>
#include <stdint.h>

#include "classify.h"
#include "subscriber.h"

struct weir_sub_lpm;

/* NULL with err on failure (EAL memory). A set without prefixes gives a
 * table that matches nothing. */
struct weir_sub_lpm *weir_sub_lpm_build(const struct weir_subs *s, int socket_id, char *err,
					size_t errlen);
void weir_sub_lpm_free(struct weir_sub_lpm *l);

/* The subscriber of address addr (family 4: 4 bytes, 6: 16, network
 * order), or WEIR_SUB_NONE. */
uint32_t weir_sub_lpm_lookup(const struct weir_sub_lpm *l, uint8_t family, const uint8_t *addr);

/* The subscriber of a flow: its LAN-side address (tuple index 0). */
uint32_t weir_sub_lpm_lookup_tuple(const struct weir_sub_lpm *l, const struct weir_cls_tuple *t);

/* Bytes of EAL memory the tables hold. */
size_t weir_sub_lpm_memory(const struct weir_sub_lpm *l);

#endif /* WEIR_SUBSCRIBER_LPM_H */
