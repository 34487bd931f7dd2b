/* SPDX-License-Identifier: BSD-3-Clause
 * weir: flow classification into leaf classes.
 *
 * A flow is classified once, on the first packet the worker sees of it, and
 * the class id is kept in the flow entry; classification is therefore not on
 * the per-packet path and a compact linear scan over compiled rules is enough
 * (see docs/classify.md for the semantics and measured cost).
 *
 * Rules are written from the LAN host's point of view. A connection has a
 * LAN endpoint and a WAN endpoint (known from the direction the packet
 * travels), and an initiator (who sent the first packet). A rule can name:
 *   lan / wan   the LAN-side / WAN-side endpoint: the same for both
 *               directions of the flow, whichever packet comes first;
 *   src / dst   the initiating packet's source / destination: src is the
 *               LAN side when the LAN host opened the flow, the WAN side
 *               when a WAN host did.
 * All conditions of a rule must hold (AND); the first matching rule wins;
 * nothing matching gives the default class.
 *
 * A zero-initialised rule matches everything: every field's zero means "any",
 * so a config parser fills in only what it read.
 *
 * The built classifier is immutable: lookups only read it, so any number of
 * workers may use one object while the management lcore builds the next and
 * publishes it with RCU.
 */
#ifndef WEIR_CLASSIFY_H
#define WEIR_CLASSIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flow.h"
#include "parse.h"

/* Which endpoint a prefix or port condition applies to. */
enum weir_cls_side {
	WEIR_CLS_SRC = 0,       /* the initiating packet's source */
	WEIR_CLS_DST,           /* the initiating packet's destination */
	WEIR_CLS_LAN,           /* the LAN-side endpoint */
	WEIR_CLS_WAN,           /* the WAN-side endpoint */
	WEIR_CLS__SIDES
};

/* Who opened the flow (enum weir_dir of the initiating packet), or any. */
enum weir_cls_dir {
	WEIR_CLS_DIR_ANY = 0,
	WEIR_CLS_DIR_OUT,       /* opened by a LAN host */
	WEIR_CLS_DIR_IN,        /* opened by a WAN host */
};

/* rule.vlan: 0 = any; 1..4095 = that outer VLAN ID; this = untagged only
 * (priority-tagged frames, VLAN ID 0, count as untagged, as in the flow key). */
#define WEIR_CLS_VLAN_UNTAGGED 0xffff

/* family 0 = no condition (then len and addr must be zero); 4 or 6: the
 * first len bits of addr (network byte order; IPv4 in addr[0..3]) must match,
 * and only flows of that family match. Bits past len must be zero. */
struct weir_cls_prefix {
	uint8_t family;
	uint8_t len;
	uint8_t addr[16];
};

/* Inclusive range. {0, 0} = no condition (port 0 is not a usable port). A
 * port condition only matches protocols with ports (TCP, UDP, SCTP, UDPLite). */
struct weir_cls_ports {
	uint16_t lo, hi;
};

struct weir_classify_rule {
	struct weir_cls_prefix prefix[WEIR_CLS__SIDES];  /* by enum weir_cls_side */
	struct weir_cls_ports port[WEIR_CLS__SIDES];
	uint64_t dscp_mask;     /* bit d set: DSCP d matches; 0 = any */
	uint16_t vlan;          /* see WEIR_CLS_VLAN_UNTAGGED */
	uint16_t class_id;      /* the result when this rule matches */
	uint8_t proto;          /* IPPROTO_*, 0 = any */
	uint8_t dir;            /* enum weir_cls_dir */
	/* IPsec SA's SPI range, inclusive; {0, 0} = no condition. Only IPsec
	 * SAs (ESP, AH, ESP in UDP 4500) match a rule with one. */
	uint32_t spi_lo, spi_hi;
};

/*
 * What a flow is classified on: the packet's fields oriented by side.
 * weir_classify() builds it from a packet; weir_classify_tuple_make() is
 * public so a re-classification (policy epoch changed) on a later packet
 * can override init_dir with what the flow remembers.
 */
struct weir_cls_tuple {
	uint64_t addr[2][2];    /* [0 = LAN, 1 = WAN][0 = high, 1 = low 64 bits], host order */
	uint16_t port[2];       /* [LAN, WAN] */
	uint16_t vlan;          /* outer VLAN ID, 0 when untagged */
	uint8_t proto;
	uint8_t family;         /* 4 or 6 */
	uint8_t dscp;
	uint8_t init_dir;       /* enum weir_dir of the flow's initiating packet */
	uint8_t has_ports;      /* proto carries ports */
	uint8_t _pad;
	uint32_t spi;           /* an IPsec SA's SPI (then proto is esp or ah), else 0 */
};

struct weir_classifier;

#define WEIR_CLS_MAX_RULES (1u << 20)

/*
 * Validate and compile n rules. Returns NULL on error with "rule I: problem"
 * (or a general problem) in err. Allocated from process memory (it may be
 * built before EAL starts, to check a config). n == 0 is valid: everything gets default_class.
 */
struct weir_classifier *weir_classifier_build(const struct weir_classify_rule *rules, unsigned int n,
					      uint16_t default_class,
					      char *err, size_t errlen);
void weir_classifier_free(struct weir_classifier *c);

unsigned int weir_classifier_n_rules(const struct weir_classifier *c);
uint16_t weir_classifier_default(const struct weir_classifier *c);

/*
 * Fill t from a manageable packet (weir_pkt_manageable()) travelling in dir.
 * The initiator is taken to be the packet's sender, except for a TCP SYN+ACK,
 * which answers the initiator (the flow's SYN was not seen).
 */
void weir_classify_tuple_make(const uint8_t *frame, const struct weir_pkt *p, enum weir_dir dir,
			      struct weir_cls_tuple *t);

/* First matching rule's class, else the default. Pure: reads c only. */
uint16_t weir_classify_tuple(const struct weir_classifier *c, const struct weir_cls_tuple *t);

/* Classify a flow by its first packet: tuple_make + classify_tuple. A packet
 * that is not manageable IP gets the default class. */
uint16_t weir_classify(const struct weir_classifier *c, const uint8_t *frame,
		       const struct weir_pkt *p, enum weir_dir dir);

/* Index of the first matching rule, or -1 (for tests and "why this class"). */
int weir_classify_rule_index(const struct weir_classifier *c, const struct weir_cls_tuple *t);
/* The same by scanning the rules in order, ACL or not (the reference). */
int weir_classify_scan(const struct weir_classifier *c, const struct weir_cls_tuple *t);

/*
 * Match with DPDK ACL tries from now on (needs EAL; lib/classify/classify_acl.c)
 * when there are WEIR_CLS_ACL_MIN rules or more. Returns 1 when built, 0
 * when not needed, -1 on failure (err says why; the scan stays in use).
 * Call before the classifier is shared with workers.
 */
int weir_classifier_accelerate(struct weir_classifier *c, int socket_id, char *err, size_t errlen);
bool weir_classifier_accelerated(const struct weir_classifier *c);

#endif /* WEIR_CLASSIFY_H */
