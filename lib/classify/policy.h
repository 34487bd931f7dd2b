/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the compiled policy — what the workers consult to shape a flow.
 *
 * A policy is built once (from the config file today, from Lua later) and
 * is immutable afterwards, so every worker reads one object without locks
 * and the management lcore can build the next one beside it.
 *
 * It holds, per direction, the class tree (named classes, the root being
 * the link), and a classifier whose result is a *target*: a class name
 * resolved in both directions at once, plus a per-flow DRR weight. A rule
 * naming "gold" sends the flow to leaf "gold" of the outbound tree and leaf
 * "gold" of the inbound tree; a direction without such a leaf uses its
 * default class. A flow keeps its target index (weir_flow.class_id), so a
 * packet finds its leaf with one table read: targets[t].leaf[dir].
 *
 * Per-flow minimum with admission (the PostACK paper's introduction): a
 * leaf may promise each of its flows at least flow_min bit/s. A new flow is
 * admitted while (flows + 1) x flow_min <= the leaf's rate on this worker;
 * otherwise the leaf's action applies: divert the flow to a fallback class,
 * or drop its packets (a TCP SYN retried later is admitted once a flow has
 * left).
 */
#ifndef WEIR_POLICY_H
#define WEIR_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "cbq.h"
#include "classify.h"
#include "marker.h"
#include "subscriber.h"
#include "subscriber_lpm.h"

#define WEIR_POLICY_NAME_LEN 32
/* Classes a policy's tree may have, the root included: its indexes are
 * 16-bit (weir_policy_tree.n_classes, targets, weir_flow.class_id). The
 * config's and Lua's own classes stop at WEIR_CBQ_MAX_CLASSES - 1; a
 * subscriber set's leaves and nodes may take a tree up to this. */
#define WEIR_POLICY_MAX_CLASSES 65535
/* Targets: the default, one per (class, weight, last mile) in use. A
 * policy's table holds WEIR_POLICY_TARGETS_BASE plus its trees' classes,
 * at most this (16-bit target indexes). */
#define WEIR_POLICY_MAX_TARGETS 65535
#define WEIR_POLICY_TARGETS_BASE 4096
#define WEIR_POLICY_DIRS 2              /* enum weir_dir */

/* What a leaf does with a flow that would push its per-flow share below flow_min. */
enum weir_admit_action {
	WEIR_ADMIT_DROP = 0,            /* drop the flow's packets (TCP: its SYN) */
	WEIR_ADMIT_FALLBACK = 1,        /* shape the flow in the fallback class */
};

/* How a leaf shapes TCP (the paper's schemes). Non-TCP flows are always
 * queued per flow. */
enum weir_shape_mode {
	WEIR_MODE_POSTACK = 0,          /* per-flow queues + ACKs held by the release rule (default) */
	WEIR_MODE_PFQ = 1,              /* per-flow queues only: data waits at the gateway */
	WEIR_MODE_FIFO = 2,             /* one queue for the class (the paper's "pure CBQ") */
	WEIR_MODE_TCR = 3,              /* per-flow queues + window sizing and ACK pacing (lib/modes/tcr.c) */
	WEIR_MODE_PACED = 4,            /* per-flow queues + PostACK as on-off ACK pacing (Fig. 4) */
	WEIR_MODE_IPABR = 5,            /* per-flow queues + an explicit rate per flow by window (lib/modes/ipabr.h) */
	WEIR_MODE_PEP = 6,              /* per-flow queues + premature ACKs with a watermark (lib/modes/pep.h) */
	WEIR_MODE__COUNT
};
/* The mode's name, from the modes table (lib/modes/mode.c): the one place
 * names are, for the config, Lua, the API and stats alike. */
const char *weir_shape_mode_name(unsigned int mode);

/* ---- what a front end (config file, Lua) describes ---- */

/*
 * A last mile (seed 002 ch. 3, docs/lastmile.md): the hosts a class or rule
 * matches sit behind a slow or long-thin link of `rate` and round trip
 * `rtt_ms` with a drop-tail buffer of `buffer` packets. The advertised
 * window of data towards them is clamped (never raised) to that pipe plus
 * the buffer, and with WEIR_LM_EXEMPT their flows are left out of weir's
 * per-flow fairness: no ACK mode (PostACK holding, TCR, IP-ABR) acts on
 * them, and they do not count in their class's per-flow share.
 */
struct weir_last_mile {
	uint64_t rate;                          /* bit/s; 0 = no last mile */
	uint32_t rtt_ms;                        /* the last mile's round trip */
	uint16_t buffer;                        /* last-hop buffer, packets (the window adds one MSS each) */
	uint8_t flags;                          /* WEIR_LM_* */
	uint8_t _pad;
};
#define WEIR_LM_EXEMPT  0x01    /* out of weir's per-flow fairness */
#define WEIR_LM_WAN     0x02    /* the hosts are on the WAN side (default: the LAN side) */
#define WEIR_LM_OFF     0x80    /* a rule's opt-out: no last mile, whatever its class says */

struct weir_policy_class_conf {
	char name[WEIR_POLICY_NAME_LEN];
	char parent[WEIR_POLICY_NAME_LEN];     /* "" = the root (the link) */
	uint64_t rate;                          /* guaranteed, bit/s */
	uint64_t ceil;                          /* bit/s, 0 = the parent's ceil */
	uint8_t prio;                           /* 0 borrows first */
	uint32_t limit;                         /* packets queued in the leaf; 0 = tree default */
	uint32_t quantum;                       /* bytes; 0 = one frame */
	uint64_t flow_min;                      /* bit/s per flow; 0 = no admission control */
	uint8_t admit;                          /* enum weir_admit_action */
	char fallback[WEIR_POLICY_NAME_LEN];    /* class for WEIR_ADMIT_FALLBACK */
	uint8_t mode;                           /* enum weir_shape_mode */
	uint8_t qm;                             /* enum weir_qm_kind, when qm_set */
	uint8_t qm_set;                         /* 0: a fifo leaf takes the tree's qm */
	struct weir_marker_conf marker;         /* DiffServ marker (type NONE: none) */
	struct weir_last_mile last_mile;        /* of the hosts its flows go to (rate 0: none) */
};

struct weir_policy_tree_conf {
	uint64_t rate;                          /* the link, bit/s; 0 = this direction is not shaped */
	uint16_t n_classes;                     /* classes under the root; 0 = one leaf "default" */
	const struct weir_policy_class_conf *classes;   /* parents before children */
	char default_class[WEIR_POLICY_NAME_LEN];       /* leaf for unmatched and non-IP; "" with n_classes == 0 */
	uint32_t default_limit;                 /* leaf limit when a class says 0 */
	uint8_t mode;                           /* of the one "default" leaf when n_classes == 0 */
	uint8_t no_aqm;                         /* 1: no CoDel in this tree's pfq and tcr leaves */
	uint8_t qm;                             /* fifo leaves' queue manager (lib/sched/qm.h) by default */
	struct weir_qm_params qm_params;        /* its parameters (0 fields: defaults) */
	uint32_t young;                         /* young-flow budget, bytes (lib/sched/drr.h); 0 = none */
	uint8_t new_quanta;                     /* the new-flows list's bound (lib/sched/drr.h); 0 = default */
	uint8_t plain;                          /* 1: plain DRR in every leaf, no new-flows list */
};

struct weir_policy_rule_conf {
	struct weir_classify_rule match;        /* class_id ignored */
	char class_name[WEIR_POLICY_NAME_LEN];
	uint8_t weight;                         /* per-flow DRR weight, 0 = 1 */
	/* rate 0: its class's; WEIR_LM_OFF: none (a per-flow opt-out). */
	struct weir_last_mile last_mile;
};

struct weir_policy_conf {
	struct weir_policy_tree_conf tree[WEIR_POLICY_DIRS];
	unsigned int n_rules;
	const struct weir_policy_rule_conf *rules;
	/* Subscribers (lib/classify/policy_subs.h): their classes are in the
	 * trees' class lists already; this maps them to targets. NULL: none. */
	const struct weir_subs *subs;
	uint16_t subs_base[WEIR_POLICY_DIRS];   /* classes before the subscribers' in each tree */
};

/* Where a build failed, so the front end can point at its source line. */
enum weir_policy_err_kind {
	WEIR_POLICY_ERR_GENERAL = 0,
	WEIR_POLICY_ERR_TREE,                   /* err.dir's tree as a whole */
	WEIR_POLICY_ERR_CLASS,                  /* class err.index of err.dir's tree */
	WEIR_POLICY_ERR_RULE,                   /* rule err.index */
};

struct weir_policy_err {
	enum weir_policy_err_kind kind;
	int dir;
	int index;
	char msg[256];
};

/* ---- the compiled object the workers read ---- */

#define WEIR_TARGET_DEFAULT 0           /* targets[0]: both directions' default classes */

struct weir_policy_target {
	uint32_t leaf[WEIR_POLICY_DIRS];        /* cbq class index; WEIR_CBQ_NONE if unshaped */
	uint8_t mode[WEIR_POLICY_DIRS];         /* the leaf's enum weir_shape_mode (copied: one read) */
	uint8_t weight;
	uint8_t lm_flags;                       /* WEIR_LM_ON | WEIR_LM_EXEMPT | WEIR_LM_WAN, 0: none */
	uint16_t lm_buffer;                     /* last-hop buffer, packets */
	uint32_t lm_pipe;                       /* last mile rate x rtt, bytes */
	struct weir_last_mile last_mile;        /* as configured (for the API) */
	uint8_t lm_rule;                        /* the last mile is a rule's own (or its opt-out),
						 * not the class's: hooks naming the class skip it */
	char name[WEIR_POLICY_NAME_LEN];
};
#define WEIR_LM_ON      0x04    /* target.lm_flags: a last mile is set */

/* Per class of one direction: what the cbq needs plus admission. */
struct weir_policy_class {
	char name[WEIR_POLICY_NAME_LEN];
	struct weir_cbq_class_conf cbq;         /* parent index, rates as configured (whole link) */
	uint64_t flow_min;
	uint16_t fallback_target;               /* target index for WEIR_ADMIT_FALLBACK */
	uint8_t admit;
	uint8_t is_leaf;
	uint8_t mode;
	struct weir_marker_conf marker;         /* checked, defaults filled */
	struct weir_last_mile last_mile;
};

struct weir_policy_tree {
	uint16_t n_classes;                     /* including the root; 0 = unshaped */
	uint32_t default_leaf;
	struct weir_policy_class *classes;
	struct weir_qm_params qm_params;        /* fifo leaves' queue managers (cbq conf) */
};

/* The markers' contracts of tree t, class by class (lib/sched/marker.h). */
static inline struct weir_marker_confs
weir_policy_tree_markers(const struct weir_policy_tree *t)
{
	return (struct weir_marker_confs){
		.first = t->n_classes > 0 ? &t->classes[0].marker : NULL,
		.stride = sizeof(t->classes[0]),
		.n = t->n_classes,
	};
}

/* A policy's own copy of what it was built from. */
struct weir_policy_src {
	struct weir_policy_conf conf;           /* its arrays point at the two below */
	struct weir_policy_class_conf *classes[WEIR_POLICY_DIRS];
	struct weir_policy_rule_conf *rules;
};

struct weir_policy {
	uint32_t epoch;                         /* flows classified under an older epoch are re-classified */
	uint16_t n_targets;
	uint32_t cap_targets;                   /* entries `targets` holds */
	struct weir_policy_target *targets;
	struct weir_policy_tree tree[WEIR_POLICY_DIRS];
	struct weir_classifier *classifier;     /* rule results are target indices */
	struct weir_policy_src src;
	/* Subscribers: the set (a reference), subscriber index -> target (the
	 * one place a subscriber maps to its leaves), and the address lookup
	 * (weir_policy_subs_accelerate; NULL until then). */
	const struct weir_subs *subs;
	uint16_t *sub_target;
	struct weir_sub_lpm *sub_lpm;
};

/* A new flow's target: its LAN address's subscriber, else the first
 * matching rule, else the default. Once per flow, not per packet. */
static inline uint16_t
weir_policy_classify(const struct weir_policy *p, const struct weir_cls_tuple *t)
{
	if (p->sub_lpm != NULL) {
		uint32_t i = weir_sub_lpm_lookup_tuple(p->sub_lpm, t);

		if (i != WEIR_SUB_NONE)
			return p->sub_target[i];
	}
	return weir_classify_tuple(p->classifier, t);
}

/* Has p a leaf of mode `mode` in either direction? */
bool weir_policy_uses_mode(const struct weir_policy *p, uint8_t mode);

/* A change to one class at run time: 0 / -1 leave a field as it is. */
struct weir_policy_class_change {
	uint64_t rate, ceil;                    /* bit/s, 0 = unchanged */
	uint64_t contract;                      /* its marker's cir, bit/s, 0 = unchanged */
	int mode;                               /* enum weir_shape_mode, -1 = unchanged */
};

/* p rebuilt (validated like any policy) with class `name` of direction dir
 * changed; NULL with err (an unknown class, a child above its parent...). */
struct weir_policy *weir_policy_with_class(const struct weir_policy *p, int dir, const char *name,
					   const struct weir_policy_class_change *chg,
					   uint32_t epoch, struct weir_policy_err *err);

/* Validate and compile. NULL on error, with err filled. */
struct weir_policy *weir_policy_build(const struct weir_policy_conf *conf, uint32_t epoch,
				      struct weir_policy_err *err);
void weir_policy_free(struct weir_policy *p);

/* The cbq class confs of direction `dir` (n_classes of them) with every
 * rate and ceil multiplied by num/den (a worker's share); out must hold
 * tree[dir].n_classes entries. Returns the count (0: unshaped). A fifo
 * leaf's shared queue id is the caller's choice: the worker uses flow
 * capacity + 1 + class index, so its trees need n_queues = capacity + 1 +
 * WEIR_POLICY_QUEUES_EXTRA(p). */
#define WEIR_POLICY_QUEUES_EXTRA(p) \
	((uint32_t)RTE_MAX((p)->tree[0].n_classes, (p)->tree[1].n_classes))
uint16_t weir_policy_cbq_classes(const struct weir_policy *p, int dir, uint64_t num, uint64_t den,
				 struct weir_cbq_class_conf *out);

/* The target that puts a flow in leaf `name` (weight 1; each direction
 * resolves it as a rule's class would), or -1. Every leaf has one. */
int weir_policy_target_find(const struct weir_policy *p, const char *name);

/* Class index by name in direction dir's tree, or -1. */
int weir_policy_class_find(const struct weir_policy *p, int dir, const char *name);

/* The class name of subscriber i / node i (fits WEIR_POLICY_NAME_LEN):
 * its id or name when short enough, else "sub-I" / "node-I". The policy
 * finds a subscriber's leaf by it; lib/classify/policy_subs.c makes the
 * classes. */
void weir_subs_class_name(const struct weir_subs *s, uint32_t i, char out[WEIR_POLICY_NAME_LEN]);
void weir_subs_node_class_name(const struct weir_subs *s, uint32_t i,
			       char out[WEIR_POLICY_NAME_LEN]);

#endif /* WEIR_POLICY_H */
