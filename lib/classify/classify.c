/* SPDX-License-Identifier: BSD-3-Clause
 * weir: flow classification (see classify.h and docs/classify.md).
 *
 * Rules are compiled into a flat array scanned in order. Each compiled rule
 * keeps its prefixes as (mask, value) pairs of two host-order uint64 words,
 * so a 128-bit prefix test is two ANDs and two compares with no per-lookup
 * byte loops, and IPv4 (in the high word) takes the same path. The cheap
 * scalar tests (family, protocol, initiator, VLAN, DSCP) come first because
 * most rules fail one of them.
 */
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_common.h>

#include "classify.h"
#include "classify_int.h"

/* Large enough for any real policy, small enough that a typo in a generated
 * config (a million rules) fails loudly at build time rather than making
 * every new flow scan for milliseconds. */

#ifndef IPPROTO_UDPLITE
#define IPPROTO_UDPLITE 136
#endif

/* The fields every rule test reads come first (one cache line with the
 * ports); prefixes, read only by rules that get that far, follow. */

struct weir_classifier {
	unsigned int n;
	uint16_t default_class;
	struct weir_cls_acl *acl;       /* NULL: scan the rules */
	struct weir_cls_acl_rule rules[];
};

static const char *const side_name[WEIR_CLS__SIDES] = { "src", "dst", "lan", "wan" };

static inline int
proto_has_ports(uint8_t proto)
{
	return proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP ||
	       proto == IPPROTO_UDPLITE;
}

/* 16 address bytes (network order, IPv4 in the first 4) as two host words. */
static inline void
addr_words(const uint8_t a[16], uint64_t w[2])
{
	uint64_t be[2];

	memcpy(be, a, 16);
	w[0] = rte_be_to_cpu_64(be[0]);
	w[1] = rte_be_to_cpu_64(be[1]);
}

/* Mask of the first len bits of a 128-bit value split in two words. */
static void
prefix_mask(unsigned int len, uint64_t m[2])
{
	m[0] = len == 0 ? 0 : len >= 64 ? UINT64_MAX : UINT64_MAX << (64 - len);
	m[1] = len <= 64 ? 0 : len >= 128 ? UINT64_MAX : UINT64_MAX << (128 - len);
}

static void __rte_format_printf(3, 4)
set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Compile rule i into *o; on a problem write "rule i: ..." and return -1. */
static int
compile_rule(unsigned int i, const struct weir_classify_rule *r, struct weir_cls_acl_rule *o,
	     char *err, size_t errlen)
{
	static const uint8_t zero[16];

	memset(o, 0, sizeof(*o));
	for (int s = 0; s < WEIR_CLS__SIDES; s++) {
		const struct weir_cls_prefix *px = &r->prefix[s];
		unsigned int max;
		uint64_t a[2];

		if (px->family == 0) {
			if (px->len != 0 || memcmp(px->addr, zero, 16) != 0) {
				set_err(err, errlen, "rule %u: %s prefix has a length or address but no family",
					i, side_name[s]);
				return -1;
			}
			continue;
		}
		if (px->family != 4 && px->family != 6) {
			set_err(err, errlen, "rule %u: %s prefix: family %u is neither 4 nor 6",
				i, side_name[s], px->family);
			return -1;
		}
		max = px->family == 4 ? 32 : 128;
		if (px->len > max) {
			set_err(err, errlen, "rule %u: %s prefix: length %u > %u for IPv%u",
				i, side_name[s], px->len, max, px->family);
			return -1;
		}
		if (px->family == 4 && memcmp(px->addr + 4, zero, 12) != 0) {
			set_err(err, errlen, "rule %u: %s prefix: IPv4 address with bytes past the 4th",
				i, side_name[s]);
			return -1;
		}
		/* Both sides' prefixes must agree on a family: otherwise the rule
		 * could never match, which is surely a mistake worth reporting. */
		if (o->family != 0 && o->family != px->family) {
			set_err(err, errlen, "rule %u: mixes IPv4 and IPv6 prefixes (can never match)", i);
			return -1;
		}
		o->family = px->family;
		addr_words(px->addr, a);
		prefix_mask(px->len, o->mask[s]);
		/* Host bits past the length usually mean a typo (10.1.2.3/8 for
		 * 10.0.0.0/8 or 10.1.2.3/32); refuse rather than guess which. */
		if ((a[0] & ~o->mask[s][0]) != 0 || (a[1] & ~o->mask[s][1]) != 0) {
			set_err(err, errlen, "rule %u: %s prefix: address has bits set past /%u",
				i, side_name[s], px->len);
			return -1;
		}
		o->val[s][0] = a[0];
		o->val[s][1] = a[1];
		o->pfx_used |= 1u << s;
	}
	for (int s = 0; s < WEIR_CLS__SIDES; s++) {
		const struct weir_cls_ports *pr = &r->port[s];

		if (pr->lo == 0 && pr->hi == 0)
			continue;
		if (pr->lo > pr->hi) {
			set_err(err, errlen, "rule %u: %s port range %u..%u has lo > hi",
				i, side_name[s], pr->lo, pr->hi);
			return -1;
		}
		if (r->proto != 0 && !proto_has_ports(r->proto)) {
			set_err(err, errlen, "rule %u: %s port range with protocol %u, which has no ports",
				i, side_name[s], r->proto);
			return -1;
		}
		o->plo[s] = pr->lo;
		o->phi[s] = pr->hi;
		o->port_used |= 1u << s;
	}
	if (r->dir > WEIR_CLS_DIR_IN) {
		set_err(err, errlen, "rule %u: direction %u is not any (0), out (1) or in (2)", i, r->dir);
		return -1;
	}
	if (r->vlan > 4095 && r->vlan != WEIR_CLS_VLAN_UNTAGGED) {
		set_err(err, errlen, "rule %u: VLAN ID %u is out of range 1..4095", i, r->vlan);
		return -1;
	}
	if (r->spi_hi != 0 || r->spi_lo != 0) {
		if (r->spi_lo == 0 || r->spi_lo > r->spi_hi) {
			set_err(err, errlen, "rule %u: SPI range %u..%u: SPIs are 1..2^32-1, lo <= hi",
				i, r->spi_lo, r->spi_hi);
			return -1;
		}
		if (r->proto != 0 && r->proto != IPPROTO_ESP && r->proto != IPPROTO_AH) {
			set_err(err, errlen, "rule %u: an SPI with protocol %u (only esp and ah have one)",
				i, r->proto);
			return -1;
		}
		if (r->port[0].hi || r->port[1].hi || r->port[2].hi || r->port[3].hi) {
			set_err(err, errlen, "rule %u: an SPI and ports (an SA has no ports)", i);
			return -1;
		}
	}
	o->spi_lo = r->spi_lo;
	o->spi_hi = r->spi_hi;
	o->dscp_mask = r->dscp_mask;
	o->vlan = r->vlan;
	o->class_id = r->class_id;
	o->proto = r->proto;
	/* The rule's dir values are weir_dir + 1, zero staying "any". */
	o->init_dir = r->dir;
	return 0;
}

struct weir_classifier *
weir_classifier_build(const struct weir_classify_rule *rules, unsigned int n, uint16_t default_class,
		      char *err, size_t errlen)
{
	struct weir_classifier *c;

	set_err(err, errlen, "%s", "");
	if (n > 0 && rules == NULL) {
		set_err(err, errlen, "%u rules but no rule array", n);
		return NULL;
	}
	if (n > WEIR_CLS_MAX_RULES) {
		set_err(err, errlen, "%u rules: more than the %u allowed", n, WEIR_CLS_MAX_RULES);
		return NULL;
	}
	/* Process memory, not rte_malloc: a policy is built (and checked)
	 * before EAL starts, and one object serves workers on every socket. */
	size_t sz = RTE_ALIGN_CEIL(sizeof(*c) + (size_t)n * sizeof(c->rules[0]), RTE_CACHE_LINE_SIZE);

	c = aligned_alloc(RTE_CACHE_LINE_SIZE, sz);
	if (c != NULL)
		memset(c, 0, sz);
	if (c == NULL) {
		set_err(err, errlen, "out of memory for %u rules", n);
		return NULL;
	}
	for (unsigned int i = 0; i < n; i++) {
		if (compile_rule(i, &rules[i], &c->rules[i], err, errlen) != 0) {
			free(c);
			return NULL;
		}
	}
	c->n = n;
	c->default_class = default_class;
	return c;
}

int
weir_classifier_accelerate(struct weir_classifier *c, int socket_id, char *err, size_t errlen)
{
	set_err(err, errlen, "%s", "");
	if (c == NULL || c->acl != NULL || c->n < WEIR_CLS_ACL_MIN)
		return 0;
	/* The tries have no SPI field: a policy with SPI rules is scanned. */
	for (unsigned int i = 0; i < c->n; i++)
		if (c->rules[i].spi_hi != 0)
			return 0;
	c->acl = weir_cls_acl_build(c->rules, c->n, socket_id, err, errlen);
	return c->acl != NULL ? 1 : -1;
}

bool
weir_classifier_accelerated(const struct weir_classifier *c)
{
	return c->acl != NULL;
}

void
weir_classifier_free(struct weir_classifier *c)
{
	if (c != NULL)
		weir_cls_acl_free(c->acl);
	free(c);
}

unsigned int
weir_classifier_n_rules(const struct weir_classifier *c)
{
	return c->n;
}

uint16_t
weir_classifier_default(const struct weir_classifier *c)
{
	return c->default_class;
}

void
weir_classify_tuple_make(const uint8_t *frame, const struct weir_pkt *p, enum weir_dir dir,
			 struct weir_cls_tuple *t)
{
	const uint8_t *src = frame + p->l3_off + p->saddr_off;
	const uint8_t *dst = src + p->addr_len;
	uint8_t a[16] = { 0 };
	/* The LAN endpoint is the sender of an outbound packet and the receiver
	 * of an inbound one; index 0 of the tuple is always the LAN side. */
	const unsigned int lan_is_src = dir == WEIR_DIR_OUT;
	const unsigned int alen = p->addr_len <= 16 ? p->addr_len : 16;

	memset(t, 0, sizeof(*t));
	memcpy(a, lan_is_src ? src : dst, alen);
	addr_words(a, t->addr[0]);
	memcpy(a, lan_is_src ? dst : src, alen);
	addr_words(a, t->addr[1]);
	t->proto = p->l4proto;
	t->family = p->l3;
	t->dscp = p->dscp & 0x3f;
	t->vlan = p->vlan_outer & 0xfff;
	/* A fragment carries no ports (its pseudo-flow is its host pair's):
	 * rules with ports never match it. */
	t->has_ports = proto_has_ports(p->l4proto) && !(p->flags & WEIR_PF_FRAGMENT);
	if (unlikely(p->ipsec != WEIR_IPSEC_NONE)) {
		/* An SA: its SPI, and ESP in UDP 4500 is ESP like any other. */
		t->spi = (uint32_t)p->sport << 16 | p->dport;
		t->has_ports = 0;
		if (p->ipsec == WEIR_IPSEC_NATT)
			t->proto = IPPROTO_ESP;
	}
	if (t->has_ports) {
		t->port[0] = lan_is_src ? p->sport : p->dport;
		t->port[1] = lan_is_src ? p->dport : p->sport;
	}
	t->init_dir = (uint8_t)dir;
	/* A SYN+ACK answers a SYN we did not see (flow picked up at the reply):
	 * the initiator is the other side, so src/dst still name the opener. */
	if (p->l4proto == IPPROTO_TCP &&
	    (p->tcp_flags & (WEIR_TCP_SYN | WEIR_TCP_ACK)) == (WEIR_TCP_SYN | WEIR_TCP_ACK))
		t->init_dir ^= 1;
}

static inline int
rule_matches(const struct weir_cls_acl_rule *r, const struct weir_cls_tuple *t, const uint8_t side_idx[],
	     uint16_t tvlan)
{
	if (r->family != 0 && r->family != t->family)
		return 0;
	if (r->proto != 0 && r->proto != t->proto)
		return 0;
	if (r->init_dir != 0 && r->init_dir != t->init_dir + 1u)
		return 0;
	if (r->vlan != 0 && r->vlan != tvlan)
		return 0;
	if (r->dscp_mask != 0 && ((r->dscp_mask >> t->dscp) & 1) == 0)
		return 0;
	if (r->spi_hi != 0 && (t->spi < r->spi_lo || t->spi > r->spi_hi))
		return 0;
	if (r->port_used != 0) {
		if (!t->has_ports)
			return 0;
		for (unsigned int s = 0; s < WEIR_CLS__SIDES; s++) {
			uint16_t port = t->port[side_idx[s]];

			if ((r->port_used >> s & 1) && (port < r->plo[s] || port > r->phi[s]))
				return 0;
		}
	}
	for (unsigned int s = 0; s < WEIR_CLS__SIDES; s++) {
		const uint64_t *a = t->addr[side_idx[s]];

		if ((r->pfx_used >> s & 1) &&
		    (((a[0] & r->mask[s][0]) ^ r->val[s][0]) | ((a[1] & r->mask[s][1]) ^ r->val[s][1])) != 0)
			return 0;
	}
	return 1;
}

int
weir_classify_rule_index(const struct weir_classifier *c, const struct weir_cls_tuple *t)
{
	if (c->acl != NULL)
		return weir_cls_acl_lookup(c->acl, t);
	return weir_classify_scan(c, t);
}

int
weir_classify_scan(const struct weir_classifier *c, const struct weir_cls_tuple *t)
{
	/* Where each side of a rule is found in the tuple: src is the LAN side
	 * when the flow was opened from the LAN, and the WAN side otherwise. */
	const uint8_t s = t->init_dir == WEIR_DIR_OUT ? 0 : 1;
	const uint8_t side_idx[WEIR_CLS__SIDES] = { s, (uint8_t)(s ^ 1), 0, 1 };
	/* Untagged flows carry VLAN 0 in the tuple; rules say "untagged" with
	 * a value no real VLAN ID has, so "any" can keep the zero. */
	const uint16_t tvlan = t->vlan != 0 ? t->vlan : WEIR_CLS_VLAN_UNTAGGED;

	for (unsigned int i = 0; i < c->n; i++)
		if (rule_matches(&c->rules[i], t, side_idx, tvlan))
			return (int)i;
	return -1;
}

uint16_t
weir_classify_tuple(const struct weir_classifier *c, const struct weir_cls_tuple *t)
{
	int i = weir_classify_rule_index(c, t);

	return i < 0 ? c->default_class : c->rules[i].class_id;
}

uint16_t
weir_classify(const struct weir_classifier *c, const uint8_t *frame, const struct weir_pkt *p,
	      enum weir_dir dir)
{
	struct weir_cls_tuple t;

	if (!weir_pkt_manageable(p) || (p->addr_len != 4 && p->addr_len != 16))
		return c->default_class;
	weir_classify_tuple_make(frame, p, dir, &t);
	return weir_classify_tuple(c, &t);
}
