/* SPDX-License-Identifier: BSD-3-Clause
 * weir: subscribers (an ISP's circuits) and the node tree they hang from.
 *
 * A subscriber has an id, a name, download and upload rates (guaranteed
 * `min` and `max`), a parent node, and devices: IPv4/IPv6 prefixes and MACs.
 * Nodes (sites, access points) form a tree with their own capacities; a
 * `virtual` node is for display only: what hangs from it attaches to its
 * nearest real ancestor. A subscriber may carry a `box` (which appliance of
 * a fleet shapes it) and may have shaping switched off.
 *
 * A set is built by a front end (LibreQoS files, the config, Lua, REST):
 * nodes and subscribers are added with the FILE:LINE they came from, then
 * weir_subs_check() resolves names and reports EVERY bad row; a set that
 * failed the check is never used. A checked set is immutable: the policy
 * reads it, and the next set is built beside it.
 *
 * Indexes are uint32_t everywhere, so a class tree of more than 65,535
 * classes can take a set as it is.
 *
 * Memory: sizeof(struct weir_sub) (192 bytes) a subscriber, 24 bytes a
 * prefix, 8 a MAC, plus the id index (4 bytes a subscriber) and the
 * compiled lookup (lib/classify/subscriber_lpm.h).
 */
#ifndef WEIR_SUBSCRIBER_H
#define WEIR_SUBSCRIBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WEIR_SUB_ID_LEN   64            /* id, name, node name: bytes with the NUL */
#define WEIR_SUB_NONE     UINT32_MAX    /* no node: the root (the link) */
#define WEIR_SUB_MAX      (1u << 21)    /* subscribers a set may hold (rte_lpm6's 21-bit next hop) */
#define WEIR_SUB_MAX_NODES (1u << 20)
#define WEIR_SUB_MAX_DEPTH 6            /* real node levels under the link (cbq: 8 with root and leaf) */

/* Direction of a subscriber's rates. */
enum weir_sub_dir {
	WEIR_SUB_DOWN = 0,                      /* towards the subscriber (the inbound tree) */
	WEIR_SUB_UP = 1,                        /* from the subscriber (the outbound tree) */
};

#define WEIR_SUBF_UNSHAPED 0x01         /* shaping off: its traffic passes unshaped */

struct weir_sub_node {
	char name[WEIR_SUB_ID_LEN];
	char id[WEIR_SUB_ID_LEN];               /* network.json's "id", may be "" */
	char parent_name[WEIR_SUB_ID_LEN];      /* as read; resolved by the check */
	uint32_t parent;                        /* node index, WEIR_SUB_NONE = root */
	uint32_t real_parent;                   /* nearest non-virtual ancestor (what the tree uses) */
	uint64_t rate[2];                       /* bit/s by enum weir_sub_dir; 0 = its parent's */
	uint8_t is_virtual;
	uint8_t depth;                          /* real levels from the root, 1 = under the link */
	uint16_t file;                          /* index into the set's file names */
	uint32_t line;
};

struct weir_sub {
	char id[WEIR_SUB_ID_LEN];
	char name[WEIR_SUB_ID_LEN];
	uint64_t min[2], max[2];                /* bit/s by enum weir_sub_dir; min 0: none */
	uint32_t node;                          /* real node index, WEIR_SUB_NONE = the root */
	uint32_t first_prefix, n_prefixes;      /* into the set's prefixes, after the check */
	uint32_t first_mac, n_macs;
	uint16_t box;                           /* fleet partition, 0 = any */
	uint8_t flags;                          /* WEIR_SUBF_* */
	uint8_t _pad;
	uint16_t file;
	uint32_t line;
};

struct weir_sub_prefix {
	uint8_t family;                         /* 4 or 6 */
	uint8_t len;
	uint8_t addr[16];                       /* network order, host bits zero */
	uint32_t sub;                           /* subscriber index */
};

struct weir_sub_mac {
	uint8_t addr[6];
	uint16_t _pad;
};

/* What a front end hands in for one subscriber. Several calls with one id
 * are one subscriber (LibreQoS: a row per device): the first gives the
 * plan, later ones add devices and must agree with it. */
struct weir_sub_conf {
	const char *id, *name, *parent;         /* parent: a node's name or id, "" = the root */
	uint64_t min[2], max[2];
	uint16_t box;
	uint8_t flags;
};

/* Every problem found, one "FILE:LINE: why" a line. */
struct weir_sub_errs {
	char *text;                             /* malloc'd, NUL-terminated, '\n' after each */
	size_t len, cap;
	uint32_t n;
	uint32_t n_conflicts;                   /* of them: a prefix another circuit holds */
	uint32_t n_full;                        /* of them: the set's table of subscribers/nodes full */
};
void weir_sub_errs_add(struct weir_sub_errs *e, const char *file, uint32_t line,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void weir_sub_errs_free(struct weir_sub_errs *e);

struct weir_subs;

struct weir_subs *weir_subs_new(void);
/* A set is shared by the policies built from it: free drops one reference. */
void weir_subs_free(struct weir_subs *s);
void weir_subs_ref(const struct weir_subs *s);

/* The file name later calls' `file` index refers to (kept for errors). */
uint16_t weir_subs_file(struct weir_subs *s, const char *name);

/* Add a node; parent "" = the root. Name and parent are resolved by the check. */
int weir_subs_node_add(struct weir_subs *s, const char *name, const char *id, const char *parent,
		       const uint64_t rate[2], bool is_virtual, uint16_t file, uint32_t line,
		       struct weir_sub_errs *e);

/* Add (or extend, same id) a subscriber; returns its index or -1 (e says why). */
int64_t weir_subs_add(struct weir_subs *s, const struct weir_sub_conf *c, uint16_t file,
		      uint32_t line, struct weir_sub_errs *e);

/* Give subscriber `sub` a prefix "ADDR[/LEN]" (v4 or v6) or a MAC. */
int weir_subs_add_prefix_text(struct weir_subs *s, uint32_t sub, const char *text,
			      uint16_t file, uint32_t line, struct weir_sub_errs *e);
int weir_subs_add_mac_text(struct weir_subs *s, uint32_t sub, const char *text,
			   uint16_t file, uint32_t line, struct weir_sub_errs *e);

/*
 * Resolve parents and check the whole set: unknown parent, a node cycle or
 * a tree too deep, min above max, a rate above its node's, a prefix claimed
 * twice, a subscriber without any plan. Every problem goes to e; returns the
 * number of problems (0: the set may be used, and is sealed).
 */
uint32_t weir_subs_check(struct weir_subs *s, struct weir_sub_errs *e);

/*
 * The start of the next set: a new, unchecked set holding checked set s's
 * nodes and the subscribers keep(arg, i) accepts (every one when keep is
 * NULL), with their devices, file names and lines. For one it refuses,
 * place(arg, t, i) (when not NULL) may add its replacement to the new set t
 * at that position: a replaced subscriber keeps its index, which is what
 * lets a plan change go in force without a switch (app/weir/subs_live.c).
 * A front end then adds or replaces subscribers and checks it. NULL with e
 * when out of memory.
 */
struct weir_subs *weir_subs_copy(const struct weir_subs *s, bool (*keep)(void *arg, uint32_t i),
				 void (*place)(void *arg, struct weir_subs *t, uint32_t i),
				 void *arg, struct weir_sub_errs *e);

/* ---- reading a checked set ---- */
uint32_t weir_subs_count(const struct weir_subs *s);
uint32_t weir_subs_node_count(const struct weir_subs *s);
uint32_t weir_subs_prefix_count(const struct weir_subs *s);
const struct weir_sub *weir_subs_get(const struct weir_subs *s, uint32_t i);
const struct weir_sub_node *weir_subs_node(const struct weir_subs *s, uint32_t i);
const struct weir_sub_prefix *weir_subs_prefixes(const struct weir_subs *s);
const struct weir_sub_mac *weir_subs_macs(const struct weir_subs *s);
const char *weir_subs_file_name(const struct weir_subs *s, uint16_t file);
/* Subscriber index by id, or -1 (binary search of the sealed set). */
int64_t weir_subs_find(const struct weir_subs *s, const char *id);
/* Node index by name or id, or -1. */
int64_t weir_subs_node_find(const struct weir_subs *s, const char *name);
/* Bytes the set holds (the figure docs/subscribers.md states). */
size_t weir_subs_memory(const struct weir_subs *s);


/* Text of prefix p ("10.0.0.0/24", "2001:db8::/56"). */
void weir_sub_prefix_text(const struct weir_sub_prefix *p, char *buf, size_t len);

/* ---- what changed between two checked sets ---- */
enum weir_sub_change {
	WEIR_SUB_ADDED = 0,
	WEIR_SUB_REMOVED,
	WEIR_SUB_RATES,                         /* only min/max changed: a rate change in place */
	WEIR_SUB_CHANGED,                       /* parent, prefixes, MACs, flags or name */
};
struct weir_sub_diff {
	uint32_t n[4];                          /* by enum weir_sub_change */
	uint32_t unchanged;
	bool nodes_changed;
};
/* Compare old and new. visit (may be NULL) is called for each difference
 * with the index in old (REMOVED) or new (the others). */
void weir_subs_diff(const struct weir_subs *old, const struct weir_subs *new_,
		    struct weir_sub_diff *d,
		    void (*visit)(void *arg, enum weir_sub_change, uint32_t idx), void *arg);

#endif /* WEIR_SUBSCRIBER_H */
