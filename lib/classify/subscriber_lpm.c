/* SPDX-License-Identifier: BSD-3-Clause
 * weir: subscriber lookup by longest-prefix match (lib/classify/subscriber_lpm.h).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_lpm6.h>
#include <rte_byteorder.h>
#include <rte_errno.h>

#include "subscriber_lpm.h"

/*
 * IPv4: DPDK's DIR-24-8 layout (rte_lpm's tables: a 2^24-entry first
 * level, 256-entry groups for prefixes longer than /24), filled in one pass
 * with the prefixes sorted by length, shortest first, so a longer prefix
 * simply overwrites the shorter ones it lies in. rte_lpm itself keeps its
 * rules in one array searched linearly per length: 100,000 /32s cost 5e9
 * comparisons to add, so it is not used for building (docs/subscribers.md).
 * IPv6: rte_lpm6, whose rules live in a hash.
 * An entry is 0 (no subscriber), sub + 1, or V4_GROUP | group.
 */
#define V4_GROUP 0x80000000u

struct weir_sub_lpm {
	uint32_t *tbl24;                        /* NULL: no IPv4 prefix */
	uint32_t (*tbl8)[256];
	uint32_t n_tbl8;
	struct rte_lpm6 *v6;
	size_t bytes;
};

/* Tables live in one process-wide namespace: each build takes a new name. */
static uint32_t lpm_seq;

static int
cmp_bytes16(const void *x, const void *y)
{
	return memcmp(x, y, 16);
}

/*
 * tbl8 groups the prefixes need. IPv4: one group per /24 holding a
 * prefix longer than /24. rte_lpm6: one group per distinct leading k bytes
 * (k = 3 .. ceil(len / 8) - 1) of a prefix. Both counted over the prefixes
 * sorted by address, so equal leading bytes are neighbours; the count is
 * exact or above, never below.
 */
static uint32_t
tbl8_groups(const struct weir_sub_prefix *p, uint32_t n, uint8_t family)
{
	uint8_t (*key)[17] = malloc(((size_t)n + 1) * sizeof(*key));
	uint32_t m = 0, groups = 0;

	if (key == NULL)
		return UINT32_MAX;
	for (uint32_t i = 0; i < n; i++) {
		if (p[i].family != family || p[i].len <= 24)
			continue;
		memcpy(key[m], p[i].addr, 16);
		key[m][16] = p[i].len;
		m++;
	}
	qsort(key, m, sizeof(*key), cmp_bytes16);
	/* A group at level k is new unless the last one made at that level
	 * had the same leading k bytes (equal leading bytes are neighbours). */
	uint8_t last[16][16];
	bool have[16] = { false };

	for (uint32_t i = 0; i < m; i++) {
		unsigned int need = (key[i][16] + 7u) / 8u;    /* bytes the prefix spans */

		if (family == 4)
			need = 4;
		for (unsigned int k = 3; k < need; k++) {
			if (have[k] && memcmp(last[k], key[i], k) == 0)
				continue;
			memcpy(last[k], key[i], k);
			have[k] = true;
			groups++;
		}
	}
	free(key);
	return groups;
}

static const struct weir_sub_prefix *v4_base;

static int
v4_len_cmp(const void *x, const void *y)
{
	const struct weir_sub_prefix *a = &v4_base[*(const uint32_t *)x];
	const struct weir_sub_prefix *b = &v4_base[*(const uint32_t *)y];

	return (int)a->len - (int)b->len;
}

/* One prefix into the tables (all shorter ones are in already). */
static int
v4_put(struct weir_sub_lpm *l, uint32_t a, uint8_t len, uint32_t sub, uint32_t max_groups)
{
	uint32_t hi = a >> 8;

	if (len <= 24) {
		for (uint32_t i = 0; i < 1u << (24 - len); i++)
			l->tbl24[hi + i] = sub + 1;
		return 0;
	}
	if (!(l->tbl24[hi] & V4_GROUP)) {
		uint32_t g = l->n_tbl8++, cover = l->tbl24[hi];

		if (g >= max_groups)
			return -1;
		for (int i = 0; i < 256; i++)
			l->tbl8[g][i] = cover;
		l->tbl24[hi] = V4_GROUP | g;
	}
	for (uint32_t i = 0; i < 1u << (32 - len); i++)
		l->tbl8[l->tbl24[hi] & ~V4_GROUP][(a & 255) + i] = sub + 1;
	return 0;
}

static int
build_v4(struct weir_sub_lpm *l, const struct weir_subs *s, uint32_t n4, int socket, char *err,
	 size_t errlen)
{
	const struct weir_sub_prefix *p = weir_subs_prefixes(s);
	uint32_t n = weir_subs_prefix_count(s), m = 0;
	uint32_t groups = tbl8_groups(p, n, 4);
	uint32_t *idx = malloc(((size_t)n4 + 1) * sizeof(*idx));

	(void)socket;
	l->tbl24 = calloc(1u << 24, sizeof(*l->tbl24));
	l->tbl8 = calloc((size_t)groups + 1, sizeof(*l->tbl8));
	if (idx == NULL || l->tbl24 == NULL || l->tbl8 == NULL || groups == UINT32_MAX) {
		free(idx);
		snprintf(err, errlen, "out of memory for %u IPv4 prefixes", n4);
		return -1;
	}
	l->bytes += (size_t)(1u << 24) * 4 + (size_t)groups * 256 * 4;
	for (uint32_t i = 0; i < n; i++)
		if (p[i].family == 4)
			idx[m++] = i;
	v4_base = p;
	qsort(idx, m, sizeof(*idx), v4_len_cmp);
	for (uint32_t k = 0; k < m; k++) {
		uint32_t a;

		memcpy(&a, p[idx[k]].addr, 4);
		if (v4_put(l, rte_be_to_cpu_32(a), p[idx[k]].len, p[idx[k]].sub, groups + 1) != 0) {
			free(idx);
			snprintf(err, errlen, "IPv4 table: more than %u groups", groups + 1);
			return -1;
		}
	}
	free(idx);
	return 0;
}

static inline uint32_t
v4_lookup(const struct weir_sub_lpm *l, uint32_t a)
{
	uint32_t e;

	if (l->tbl24 == NULL)
		return WEIR_SUB_NONE;
	e = l->tbl24[a >> 8];
	if (e & V4_GROUP)
		e = l->tbl8[e & ~V4_GROUP][a & 255];
	return e - 1;   /* 0 - 1 == WEIR_SUB_NONE */
}

static int
build_v6(struct weir_sub_lpm *l, const struct weir_subs *s, uint32_t n6, int socket, char *err,
	 size_t errlen)
{
	const struct weir_sub_prefix *p = weir_subs_prefixes(s);
	uint32_t n = weir_subs_prefix_count(s);
	struct rte_lpm6_config c = { .max_rules = n6 > 0 ? n6 : 1 };
	char name[RTE_LPM6_NAMESIZE];

	c.number_tbl8s = tbl8_groups(p, n, 6) + 16;
	snprintf(name, sizeof(name), "wsub6_%u",
		 __atomic_fetch_add(&lpm_seq, 1, __ATOMIC_RELAXED));
	l->v6 = rte_lpm6_create(name, socket, &c);
	if (l->v6 == NULL) {
		snprintf(err, errlen, "rte_lpm6_create (%u prefixes, %u tbl8 groups): %s", n6,
			 c.number_tbl8s, rte_strerror(rte_errno));
		return -1;
	}
	l->bytes += (size_t)(1u << 24) * 4 + (size_t)c.number_tbl8s * 256 * 4 +
		    (size_t)c.max_rules * 40;
	for (uint32_t i = 0; i < n; i++) {
		if (p[i].family != 6)
			continue;
		if (rte_lpm6_add(l->v6, p[i].addr, p[i].len, p[i].sub) != 0) {
			snprintf(err, errlen, "rte_lpm6_add: prefix %u of %u refused", i, n);
			return -1;
		}
	}
	return 0;
}

struct weir_sub_lpm *
weir_sub_lpm_build(const struct weir_subs *s, int socket_id, char *err, size_t errlen)
{
	struct weir_sub_lpm *l = calloc(1, sizeof(*l));
	const struct weir_sub_prefix *p = weir_subs_prefixes(s);
	uint32_t n = weir_subs_prefix_count(s), n4 = 0, n6 = 0;

	if (l == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (uint32_t i = 0; i < n; i++)
		*(p[i].family == 4 ? &n4 : &n6) += 1;
	/* Only the families in use: an empty rte_lpm still takes 64 MB. */
	if ((n4 > 0 && build_v4(l, s, n4, socket_id, err, errlen) != 0) ||
	    (n6 > 0 && build_v6(l, s, n6, socket_id, err, errlen) != 0)) {
		weir_sub_lpm_free(l);
		return NULL;
	}
	return l;
}

void
weir_sub_lpm_free(struct weir_sub_lpm *l)
{
	if (l == NULL)
		return;
	free(l->tbl24);
	free(l->tbl8);
	rte_lpm6_free(l->v6);
	free(l);
}

uint32_t
weir_sub_lpm_lookup(const struct weir_sub_lpm *l, uint8_t family, const uint8_t *addr)
{
	uint32_t hop;

	if (family == 4) {
		uint32_t a;

		memcpy(&a, addr, 4);
		return v4_lookup(l, rte_be_to_cpu_32(a));
	}
	if (l->v6 == NULL)
		return WEIR_SUB_NONE;
	return rte_lpm6_lookup(l->v6, addr, &hop) == 0 ? hop : WEIR_SUB_NONE;
}

uint32_t
weir_sub_lpm_lookup_tuple(const struct weir_sub_lpm *l, const struct weir_cls_tuple *t)
{
	uint8_t a[16];

	if (t->family == 4) {
		/* the tuple keeps IPv4 in the top half of its first word */
		return v4_lookup(l, (uint32_t)(t->addr[0][0] >> 32));
	}
	for (int i = 0; i < 8; i++) {
		a[i] = (uint8_t)(t->addr[0][0] >> (56 - 8 * i));
		a[8 + i] = (uint8_t)(t->addr[0][1] >> (56 - 8 * i));
	}
	return weir_sub_lpm_lookup(l, 6, a);
}

size_t
weir_sub_lpm_memory(const struct weir_sub_lpm *l)
{
	return l->bytes;
}
