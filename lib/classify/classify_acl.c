/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the classifier's rules compiled into DPDK ACL tries (librte_acl).
 *
 * The first-match scan of lib/classify/classify.c costs a rule test per rule: fine
 * for tens of rules, not for the hundred thousand a generated policy may
 * have (a worker classifies every new flow). rte_acl answers in roughly
 * constant time whatever the count, so a classifier with at least
 * WEIR_CLS_ACL_MIN rules gets two ACL contexts (IPv4, IPv6) once EAL is up
 * (weir_classifier_accelerate); the scan stays the reference and the
 * fallback (tests compare the two on random rules and tuples).
 *
 * Mapping rules onto ACL fields (all compared on the tuple, LAN/WAN apart):
 *  - src/dst conditions depend on who opened the flow, so a rule using them
 *    becomes one ACL rule per opening direction with src/dst folded into
 *    lan/wan (prefixes and port ranges intersected; an empty intersection
 *    drops that half);
 *  - a DSCP set becomes one ACL rule per run of consecutive code points;
 *  - "has ports" (a port condition needs a protocol with ports) and the
 *    opening direction share one bitmask byte;
 *  - first match = highest priority: rule i gets MAX - i; the result is
 *    i + 1 (0: no rule matched).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <rte_acl.h>
#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_errno.h>

#include "classify_int.h"

/* What the tries read, in network order (rte_acl compares bytes). The
 * first field must be one byte; fields sharing 4 bytes share an input. */
struct key4 {
	uint8_t proto, _p[3];
	uint32_t lan, wan;
	uint16_t lan_port, wan_port;
	uint16_t vlan;
	uint8_t dscp, flags;
};

struct key6 {
	uint8_t proto, _p[3];
	uint32_t lan[4], wan[4];
	uint16_t lan_port, wan_port;
	uint16_t vlan;
	uint8_t dscp, flags;
};

#define FL_IN 0x01              /* opened by a WAN host */
#define FL_PORTS 0x02           /* the protocol has ports */

enum { F4_PROTO, F4_LAN, F4_WAN, F4_LPORT, F4_WPORT, F4_VLAN, F4_DSCP, F4_FLAGS, F4_N };
enum { F6_PROTO, F6_LAN, F6_WAN = F6_LAN + 4, F6_LPORT = F6_WAN + 4, F6_WPORT, F6_VLAN, F6_DSCP,
       F6_FLAGS, F6_N };

RTE_ACL_RULE_DEF(acl_rule6, F6_N);      /* the larger; v4 rules use its first F4_N fields */

struct weir_cls_acl {
	struct rte_acl_ctx *ctx[2];     /* [0] IPv4, [1] IPv6; NULL when no rule applies */
	uint32_t n_acl_rules[2];
};

static void
def(struct rte_acl_config *c, unsigned int f, uint8_t type, uint8_t size, uint8_t input,
    uint32_t off)
{
	c->defs[f] = (struct rte_acl_field_def){ .type = type, .size = size, .field_index = (uint8_t)f,
						 .input_index = input, .offset = off };
}

static void
config4(struct rte_acl_config *c)
{
	memset(c, 0, sizeof(*c));
	c->num_categories = 1;
	c->num_fields = F4_N;
	def(c, F4_PROTO, RTE_ACL_FIELD_TYPE_BITMASK, 1, 0, offsetof(struct key4, proto));
	def(c, F4_LAN, RTE_ACL_FIELD_TYPE_MASK, 4, 1, offsetof(struct key4, lan));
	def(c, F4_WAN, RTE_ACL_FIELD_TYPE_MASK, 4, 2, offsetof(struct key4, wan));
	def(c, F4_LPORT, RTE_ACL_FIELD_TYPE_RANGE, 2, 3, offsetof(struct key4, lan_port));
	def(c, F4_WPORT, RTE_ACL_FIELD_TYPE_RANGE, 2, 3, offsetof(struct key4, wan_port));
	def(c, F4_VLAN, RTE_ACL_FIELD_TYPE_RANGE, 2, 4, offsetof(struct key4, vlan));
	def(c, F4_DSCP, RTE_ACL_FIELD_TYPE_RANGE, 1, 4, offsetof(struct key4, dscp));
	def(c, F4_FLAGS, RTE_ACL_FIELD_TYPE_BITMASK, 1, 4, offsetof(struct key4, flags));
}

static void
config6(struct rte_acl_config *c)
{
	memset(c, 0, sizeof(*c));
	c->num_categories = 1;
	c->num_fields = F6_N;
	def(c, F6_PROTO, RTE_ACL_FIELD_TYPE_BITMASK, 1, 0, offsetof(struct key6, proto));
	for (unsigned int w = 0; w < 4; w++) {
		def(c, F6_LAN + w, RTE_ACL_FIELD_TYPE_MASK, 4, (uint8_t)(1 + w),
		    (uint32_t)(offsetof(struct key6, lan) + 4 * w));
		def(c, F6_WAN + w, RTE_ACL_FIELD_TYPE_MASK, 4, (uint8_t)(5 + w),
		    (uint32_t)(offsetof(struct key6, wan) + 4 * w));
	}
	def(c, F6_LPORT, RTE_ACL_FIELD_TYPE_RANGE, 2, 9, offsetof(struct key6, lan_port));
	def(c, F6_WPORT, RTE_ACL_FIELD_TYPE_RANGE, 2, 9, offsetof(struct key6, wan_port));
	def(c, F6_VLAN, RTE_ACL_FIELD_TYPE_RANGE, 2, 10, offsetof(struct key6, vlan));
	def(c, F6_DSCP, RTE_ACL_FIELD_TYPE_RANGE, 1, 10, offsetof(struct key6, dscp));
	def(c, F6_FLAGS, RTE_ACL_FIELD_TYPE_BITMASK, 1, 10, offsetof(struct key6, flags));
}

/* One side's address condition after folding src/dst in: value and mask
 * as two host-order 64-bit words (mask all zero = any). */
struct side_cond {
	uint64_t val[2], mask[2];
	uint16_t plo, phi;
};

/* Intersect condition b into a; false when nothing can match both. */
static bool
side_and(struct side_cond *a, const uint64_t val[2], const uint64_t mask[2], bool pfx,
	 uint16_t plo, uint16_t phi, bool port)
{
	if (pfx) {
		for (int k = 0; k < 2; k++) {
			if (((a->val[k] ^ val[k]) & a->mask[k] & mask[k]) != 0)
				return false;   /* disjoint prefixes */
			a->val[k] |= val[k];
			a->mask[k] |= mask[k];  /* prefix masks: the union is the longer */
		}
	}
	if (port) {
		a->plo = RTE_MAX(a->plo, plo);
		a->phi = RTE_MIN(a->phi, phi);
		if (a->plo > a->phi)
			return false;
	}
	return true;
}

static unsigned int
prefix_len(const uint64_t m[2])
{
	return (unsigned int)(__builtin_popcountll(m[0]) + __builtin_popcountll(m[1]));
}

/* The 32-bit word w (0-3) of a 128-bit host-order address and its share
 * of a prefix of length len. */
static void
word_of(const uint64_t v[2], unsigned int len, unsigned int w, uint32_t *val, uint32_t *bits)
{
	uint64_t x = v[w / 2];

	*val = (uint32_t)(w % 2 == 0 ? x >> 32 : x);
	*bits = len > 32 * w ? RTE_MIN(len - 32 * w, 32u) : 0;
}

static void
fill_rule(struct acl_rule6 *o, int fam, const struct weir_cls_acl_rule *r, const struct side_cond s[2],
	  uint8_t flags_val, uint8_t flags_mask, uint8_t dlo, uint8_t dhi, uint32_t prio, uint32_t id)
{
	const unsigned int lan_len = prefix_len(s[0].mask), wan_len = prefix_len(s[1].mask);
	uint16_t vlo = 0, vhi = UINT16_MAX;

	memset(o, 0, sizeof(*o));
	o->data.category_mask = 1;
	o->data.priority = prio;
	o->data.userdata = id;
	if (r->vlan == WEIR_CLS_VLAN_UNTAGGED)
		vlo = vhi = 0;
	else if (r->vlan != 0)
		vlo = vhi = r->vlan;
	/* Both layouts: the protocol first; ports, VLAN, DSCP and flags last,
	 * in that order (F4_LPORT.. and F6_LPORT..); the addresses between. */
	struct rte_acl_field *tail = &o->field[fam == 0 ? F4_LPORT : F6_LPORT];

	RTE_BUILD_BUG_ON(F4_PROTO != 0 || F6_PROTO != 0 || F4_FLAGS != F4_LPORT + 4 ||
			 F6_FLAGS != F6_LPORT + 4);
	o->field[0].value.u8 = r->proto;
	o->field[0].mask_range.u8 = r->proto ? 0xff : 0;
	tail[0].value.u16 = s[0].plo;
	tail[0].mask_range.u16 = s[0].phi;
	tail[1].value.u16 = s[1].plo;
	tail[1].mask_range.u16 = s[1].phi;
	tail[2].value.u16 = vlo;
	tail[2].mask_range.u16 = vhi;
	tail[3].value.u8 = dlo;
	tail[3].mask_range.u8 = dhi;
	tail[4].value.u8 = flags_val;
	tail[4].mask_range.u8 = flags_mask;
	if (fam == 0) {
		/* IPv4 addresses are the top 32 bits of the first word. */
		o->field[F4_LAN].value.u32 = (uint32_t)(s[0].val[0] >> 32);
		o->field[F4_LAN].mask_range.u32 = RTE_MIN(lan_len, 32u);
		o->field[F4_WAN].value.u32 = (uint32_t)(s[1].val[0] >> 32);
		o->field[F4_WAN].mask_range.u32 = RTE_MIN(wan_len, 32u);
		return;
	}
	for (unsigned int w = 0; w < 4; w++) {
		word_of(s[0].val, lan_len, w, &o->field[F6_LAN + w].value.u32,
			&o->field[F6_LAN + w].mask_range.u32);
		word_of(s[1].val, wan_len, w, &o->field[F6_WAN + w].value.u32,
			&o->field[F6_WAN + w].mask_range.u32);
	}
}

/* Add rule i's ACL rules for family index fam (0 v4, 1 v6) to ctx (NULL:
 * only count them). Returns ACL rules added, or -1. */
static int
add_rule(struct rte_acl_ctx *ctx, int fam, unsigned int i, const struct weir_cls_acl_rule *r)
{
	const bool uses_sd = (r->pfx_used | r->port_used) & 0x3;
	const bool ports = r->port_used != 0;
	int added = 0;

	for (int d = 0; d < 2; d++) {           /* d: 0 opened from the LAN, 1 from the WAN */
		struct side_cond s[2] = { { .phi = UINT16_MAX }, { .phi = UINT16_MAX } };
		uint8_t fv = 0, fm = 0;

		if (r->init_dir != 0 && r->init_dir != d + 1)
			continue;
		if (!uses_sd && r->init_dir == 0 && d == 1)
			break;                  /* one rule serves both directions */
		if (uses_sd || r->init_dir != 0) {
			fv = d ? FL_IN : 0;
			fm = FL_IN;
		}
		if (ports) {
			fv |= FL_PORTS;
			fm |= FL_PORTS;
		}
		/* sides: 0 src, 1 dst, 2 lan, 3 wan; src is the LAN when d == 0 */
		bool ok = true;

		for (int side = 0; side < 4 && ok; side++) {
			int at = side >= 2 ? side - 2 : (side ^ d);     /* 0 LAN, 1 WAN */

			ok = side_and(&s[at], r->val[side], r->mask[side], r->pfx_used >> side & 1,
				      r->plo[side], r->phi[side], r->port_used >> side & 1);
		}
		if (!ok)
			continue;
		/* One ACL rule per run of DSCP code points. */
		uint64_t m = r->dscp_mask ? r->dscp_mask : ~0ull;

		while (m != 0) {
			unsigned int lo = (unsigned int)__builtin_ctzll(m), hi = lo;
			struct acl_rule6 o;

			while (hi + 1 < 64 && (m >> (hi + 1) & 1))
				hi++;
			m &= hi == 63 ? 0 : ~0ull << (hi + 1);
			if (ctx != NULL) {
				fill_rule(&o, fam, r, s, fv, fm, (uint8_t)lo, (uint8_t)hi,
					  RTE_ACL_MAX_PRIORITY - i, i + 1);
				if (rte_acl_add_rules(ctx, (const struct rte_acl_rule *)&o, 1) != 0)
					return -1;
			}
			added++;
		}
	}
	return added;
}

struct weir_cls_acl *
weir_cls_acl_build(const struct weir_cls_acl_rule *rules, unsigned int n, int socket_id,
		   char *err, size_t errlen)
{
	static atomic_uint seq;
	struct weir_cls_acl *a = calloc(1, sizeof(*a));
	unsigned int id = atomic_fetch_add(&seq, 1);

	if (a == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (int fam = 0; fam < 2; fam++) {
		struct rte_acl_config cfg;
		char name[RTE_ACL_NAMESIZE];
		struct rte_acl_param p = {
			.name = name, .socket_id = socket_id,
			.rule_size = RTE_ACL_RULE_SZ(fam ? F6_N : F4_N),
		};
		uint64_t count = 0;

		/* The context reserves room for max_rule_num up front: count the
		 * expansion first. */
		for (unsigned int i = 0; i < n; i++)
			if (rules[i].family == 0 || rules[i].family == (fam ? 6 : 4))
				count += (uint64_t)add_rule(NULL, fam, i, &rules[i]);
		if (count == 0)
			continue;
		if (count > RTE_ACL_MAX_INDEX) {
			snprintf(err, errlen, "%" PRIu64 " ACL rules: too many", count);
			goto fail;
		}
		p.max_rule_num = (uint32_t)count;
		snprintf(name, sizeof(name), "weir_cls%u_v%d", id, fam ? 6 : 4);
		a->ctx[fam] = rte_acl_create(&p);
		if (a->ctx[fam] == NULL) {
			snprintf(err, errlen, "rte_acl_create: %s", rte_strerror(rte_errno));
			goto fail;
		}
		for (unsigned int i = 0; i < n; i++) {
			int k;

			if (rules[i].family != 0 && rules[i].family != (fam ? 6 : 4))
				continue;
			k = add_rule(a->ctx[fam], fam, i, &rules[i]);
			if (k < 0) {
				snprintf(err, errlen, "rte_acl_add_rules: rule %u: too many", i);
				goto fail;
			}
			a->n_acl_rules[fam] += (uint32_t)k;
		}
		if (fam)
			config6(&cfg);
		else
			config4(&cfg);
		int rc = rte_acl_build(a->ctx[fam], &cfg);

		if (rc != 0) {
			snprintf(err, errlen, "rte_acl_build (IPv%d, %u ACL rules): %s", fam ? 6 : 4,
				 a->n_acl_rules[fam], rte_strerror(-rc));
			goto fail;
		}
	}
	return a;
fail:
	weir_cls_acl_free(a);
	return NULL;
}

void
weir_cls_acl_free(struct weir_cls_acl *a)
{
	if (a == NULL)
		return;
	rte_acl_free(a->ctx[0]);
	rte_acl_free(a->ctx[1]);
	free(a);
}

int
weir_cls_acl_lookup(const struct weir_cls_acl *a, const struct weir_cls_tuple *t)
{
	const uint8_t flags = (uint8_t)((t->init_dir == WEIR_DIR_IN ? FL_IN : 0) |
					(t->has_ports ? FL_PORTS : 0));
	const uint16_t lp = t->has_ports ? t->port[0] : 0, wp = t->has_ports ? t->port[1] : 0;
	uint32_t res = 0;

	if (t->family == 4) {
		struct key4 k = {
			.proto = t->proto,
			.lan = rte_cpu_to_be_32((uint32_t)(t->addr[0][0] >> 32)),
			.wan = rte_cpu_to_be_32((uint32_t)(t->addr[1][0] >> 32)),
			.lan_port = rte_cpu_to_be_16(lp), .wan_port = rte_cpu_to_be_16(wp),
			.vlan = rte_cpu_to_be_16(t->vlan), .dscp = t->dscp, .flags = flags,
		};
		const uint8_t *d = (const uint8_t *)&k;

		if (a->ctx[0] == NULL || rte_acl_classify(a->ctx[0], &d, &res, 1, 1) != 0)
			return -1;
	} else {
		struct key6 k = {
			.proto = t->proto,
			.lan_port = rte_cpu_to_be_16(lp), .wan_port = rte_cpu_to_be_16(wp),
			.vlan = rte_cpu_to_be_16(t->vlan), .dscp = t->dscp, .flags = flags,
		};
		const uint8_t *d = (const uint8_t *)&k;

		for (unsigned int w = 0; w < 4; w++) {
			uint32_t bits;

			word_of(t->addr[0], 128, w, &k.lan[w], &bits);
			word_of(t->addr[1], 128, w, &k.wan[w], &bits);
			k.lan[w] = rte_cpu_to_be_32(k.lan[w]);
			k.wan[w] = rte_cpu_to_be_32(k.wan[w]);
		}
		if (a->ctx[1] == NULL || rte_acl_classify(a->ctx[1], &d, &res, 1, 1) != 0)
			return -1;
	}
	return res == 0 ? -1 : (int)res - 1;
}
