/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the classifier's compiled rules, and their DPDK ACL form
 * (classify_acl.c). Private to classify.c, classify_acl.c and their tests.
 */
#ifndef WEIR_CLASSIFY_INT_H
#define WEIR_CLASSIFY_INT_H

#include <stddef.h>
#include <stdint.h>

#include "classify.h"

/* Rules with at least this many entries are matched by rte_acl once EAL
 * is up (weir_classifier_accelerate); below, the scan is as fast. */
#define WEIR_CLS_ACL_MIN 32u

/* A rule as the scan tests it. The fields every rule test reads come first
 * (one cache line with the ports). */
struct weir_cls_acl_rule {
	uint64_t dscp_mask;
	uint16_t vlan;          /* 0 any, else the tuple's vlan value it needs */
	uint16_t class_id;
	uint8_t proto;
	uint8_t family;         /* 0 any */
	uint8_t init_dir;       /* 0 any, else enum weir_dir + 1 */
	uint8_t pfx_used;       /* bit per enum weir_cls_side */
	uint8_t port_used;
	uint16_t plo[WEIR_CLS__SIDES];
	uint16_t phi[WEIR_CLS__SIDES];
	uint64_t mask[WEIR_CLS__SIDES][2];
	uint64_t val[WEIR_CLS__SIDES][2];
	uint32_t spi_lo, spi_hi;        /* spi_hi 0: any (the ACL tries have no SPI field) */
};

struct weir_cls_acl;

/* Tries for rules[0..n) (needs EAL: rte_acl allocates from its heap). NULL
 * with err on failure (too many rules, out of memory). */
struct weir_cls_acl *weir_cls_acl_build(const struct weir_cls_acl_rule *rules, unsigned int n,
					int socket_id, char *err, size_t errlen);
void weir_cls_acl_free(struct weir_cls_acl *a);
/* Index of the first rule matching t, or -1. */
int weir_cls_acl_lookup(const struct weir_cls_acl *a, const struct weir_cls_tuple *t);

#endif /* WEIR_CLASSIFY_INT_H */
