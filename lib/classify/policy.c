/* SPDX-License-Identifier: BSD-3-Clause
 * weir: compile a policy description into the object workers read.
 * Cold path only: runs at start-up and on reload, never per packet. Plain
 * process memory: a config is checked before EAL starts, and the object is
 * small, read-mostly and shared by workers on every socket.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

static struct weir_policy *
fail(struct weir_policy *p, struct weir_policy_err *err, enum weir_policy_err_kind kind,
     int dir, int index, const char *fmt, ...)
{
	va_list ap;

	err->kind = kind;
	err->dir = dir;
	err->index = index;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	weir_policy_free(p);
	return NULL;
}

static const char *const dir_name[WEIR_POLICY_DIRS] = { "outbound", "inbound" };

int
weir_policy_class_find(const struct weir_policy *p, int dir, const char *name)
{
	const struct weir_policy_tree *t = &p->tree[dir];

	for (int i = 1; i < t->n_classes; i++)
		if (strcmp(t->classes[i].name, name) == 0)
			return i;
	return -1;
}

static int
valid_name(const char *s)
{
	size_t n = strnlen(s, WEIR_POLICY_NAME_LEN);

	if (n == 0 || n == WEIR_POLICY_NAME_LEN || strcmp(s, "root") == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == '-' || s[i] == '_' || s[i] == '.' ||
		      (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z')))
			return 0;
	return 1;
}

/* Build direction d's tree (classes only; fallbacks are resolved later,
 * once targets exist). Returns 0, or -1 with err filled. */
static int
build_tree(struct weir_policy *p, const struct weir_policy_tree_conf *tc, int d,
	   struct weir_policy_err *err)
{
	struct weir_policy_tree *t = &p->tree[d];
	/* A direction given only a rate has one leaf, "default", at that rate. */
	const struct weir_policy_class_conf dflt = { .name = "default", .rate = tc->rate,
						     .mode = tc->mode };
	const char *why;
	const struct weir_policy_class_conf *cc = tc->n_classes ? tc->classes : &dflt;
	uint16_t n = tc->n_classes ? tc->n_classes : 1;
	int i;

	if (tc->rate == 0) {
		if (tc->n_classes) {
			fail(NULL, err, WEIR_POLICY_ERR_TREE, d, -1,
			     "%s: classes need a link rate", dir_name[d]);
			return -1;
		}
		return 0;       /* bridged unshaped */
	}
	if (tc->rate < WEIR_CBQ_RATE_MIN || tc->rate > WEIR_CBQ_RATE_MAX) {
		fail(NULL, err, WEIR_POLICY_ERR_TREE, d, -1,
		     "%s: link rate must be 8kbit .. 400gbit", dir_name[d]);
		return -1;
	}
	if ((unsigned int)n + 1 > WEIR_POLICY_MAX_CLASSES) {
		fail(NULL, err, WEIR_POLICY_ERR_TREE, d, -1, "%s: more than %d classes",
		     dir_name[d], WEIR_POLICY_MAX_CLASSES - 1);
		return -1;
	}
	t->classes = calloc((size_t)n + 1, sizeof(t->classes[0]));
	if (t->classes == NULL) {
		fail(NULL, err, WEIR_POLICY_ERR_GENERAL, d, -1, "out of memory");
		return -1;
	}
	t->n_classes = (uint16_t)(n + 1);
	t->qm_params = tc->qm_params;
	snprintf(t->classes[0].name, sizeof(t->classes[0].name), "root");
	t->classes[0].cbq.rate = t->classes[0].cbq.ceil = tc->rate;
	t->classes[0].cbq.parent = WEIR_CBQ_NONE;
	t->classes[0].is_leaf = 0;

	for (i = 0; i < n; i++) {
		const struct weir_policy_class_conf *c = &cc[i];
		struct weir_policy_class *k = &t->classes[i + 1];
		const struct weir_policy_class *par;
		int pi = 0;

		if (!valid_name(c->name)) {
			fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i,
			     "class name '%.*s' must be 1-%d letters, digits, '-', '_' or '.' (not 'root')",
			     WEIR_POLICY_NAME_LEN, c->name, WEIR_POLICY_NAME_LEN - 1);
			return -1;
		}
		/* Names must be unique; weir_policy_class_find sees only the
		 * classes set so far (n_classes counts them all, names are
		 * still zero past i), which is what we want here. */
		if (weir_policy_class_find(p, d, c->name) >= 0) {
			fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i, "class '%s' is defined twice", c->name);
			return -1;
		}
		if (c->parent[0] != '\0' && strcmp(c->parent, "root") != 0) {
			pi = weir_policy_class_find(p, d, c->parent);
			if (pi < 0) {
				fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i,
				     "class '%s': parent '%s' is not defined before it", c->name, c->parent);
				return -1;
			}
		}
		par = &t->classes[pi];
		memcpy(k->name, c->name, sizeof(k->name));
		k->cbq.parent = (uint16_t)pi;
		k->cbq.prio = c->prio;
		k->cbq.rate = c->rate;
		k->cbq.ceil = c->ceil ? c->ceil : par->cbq.ceil;
		k->cbq.limit = c->limit ? c->limit : tc->default_limit;
		k->cbq.quantum = c->quantum;
		k->flow_min = c->flow_min;
		k->admit = c->admit;
		k->mode = c->mode;
		k->last_mile = c->last_mile;
		if (c->last_mile.rate != 0 && (c->last_mile.rtt_ms == 0 || c->last_mile.rtt_ms > 60000 ||
					       c->last_mile.buffer > 10000)) {
			fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i, "class '%s': last_mile needs "
			     "rtt 1..60000 ms and buffer 0..10000 packets", c->name);
			return -1;
		}
		k->cbq.fifo = c->mode == WEIR_MODE_FIFO;
		/* CoDel per flow queue where data waits at the gateway (pfq, tcr);
		 * PostACK's modes keep queues short by holding ACKs instead, and a
		 * fifo is the paper's plain CBQ. */
		k->cbq.aqm = !tc->no_aqm && (c->mode == WEIR_MODE_PFQ || c->mode == WEIR_MODE_TCR);
		/* A queue manager works on one shared queue: fifo leaves only
		 * (the tree's default skips the others; a class naming one
		 * without mode "fifo" is an error). */
		k->cbq.qm = c->qm_set ? c->qm : (c->mode == WEIR_MODE_FIFO ? tc->qm : WEIR_QM_NONE);
		if (k->cbq.qm >= WEIR_QM__COUNT ||
		    (k->cbq.qm != WEIR_QM_NONE && c->mode != WEIR_MODE_FIFO)) {
			fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i,
			     "class '%s': aqm \"%s\" manages a fifo leaf's one queue: it needs "
			     "mode = \"fifo\"", c->name, weir_qm_name(k->cbq.qm) ?: "?");
			return -1;
		}
		why = k->cbq.qm != WEIR_QM_NONE ? weir_qm_params_check(&tc->qm_params, k->cbq.limit)
						: NULL;
		if (why != NULL) {
			fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i, "class '%s': aqm \"%s\": %s",
			     c->name, weir_qm_name(k->cbq.qm), why);
			return -1;
		}
		k->cbq.young = tc->young;
		k->cbq.new_quanta = tc->new_quanta;
		k->cbq.plain = tc->plain;
		k->is_leaf = 1;
		if (c->mode >= WEIR_MODE__COUNT) {
			fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i, "class '%s': unknown mode %u",
			     c->name, c->mode);
			return -1;
		}
		if (c->prio >= WEIR_CBQ_NUM_PRIO) {
			fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i, "class '%s': prio must be 0..%d",
			     c->name, WEIR_CBQ_NUM_PRIO - 1);
			return -1;
		}
		if (c->rate < WEIR_CBQ_RATE_MIN || c->rate > WEIR_CBQ_RATE_MAX) {
			fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i,
			     "class '%s': rate must be 8kbit .. 400gbit", c->name);
			return -1;
		}
		if (k->cbq.ceil < c->rate) {
			fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i,
			     "class '%s': ceil (%llu bit/s) is below its rate (%llu bit/s)", c->name,
			     (unsigned long long)k->cbq.ceil, (unsigned long long)c->rate);
			return -1;
		}
		if (c->rate > par->cbq.rate) {
			fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i,
			     "class '%s': rate exceeds its parent's ('%s') rate", c->name,
			     pi ? par->name : "the link");
			return -1;
		}
		if (c->flow_min && c->flow_min > c->rate) {
			fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i,
			     "class '%s': flow_min exceeds the class rate: no flow could be admitted",
			     c->name);
			return -1;
		}
		k->marker = c->marker;
		{
			char merr[200];

			if (weir_marker_conf_check(&k->marker, k->cbq.ceil, merr, sizeof(merr)) < 0) {
				fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i, "class '%s': %s", c->name,
				     merr);
				return -1;
			}
		}
		if (c->admit == WEIR_ADMIT_FALLBACK && c->fallback[0] == '\0') {
			fail(NULL, err, WEIR_POLICY_ERR_CLASS, d, i,
			     "class '%s': admission 'fallback' needs a fallback class", c->name);
			return -1;
		}
	}
	if (tc->n_classes == 0) {
		t->default_leaf = 1;
	} else {
		int dl = weir_policy_class_find(p, d, tc->default_class);

		if (tc->default_class[0] == '\0' || dl < 0) {
			fail(NULL, err, WEIR_POLICY_ERR_TREE, d, -1,
			     "%s: default class '%s' is not one of its classes", dir_name[d],
			     tc->default_class);
			return -1;
		}
		t->default_leaf = (uint16_t)dl;
	}
	return 0;
}

/* Leaves of the tree become inner classes when named as a parent: fix the
 * flags after the whole list is read (a child may come after siblings). */
static void
mark_inner(struct weir_policy_tree *t)
{
	for (uint16_t i = 1; i < t->n_classes; i++)
		t->classes[t->classes[i].cbq.parent].is_leaf = 0;
}

/* The last mile of a target: the rule's (lm, NULL for none), or its
 * opt-out, or the class's (the first direction that has one). */
static void
target_last_mile(const struct weir_policy *p, struct weir_policy_target *t,
		 const struct weir_last_mile *lm)
{
	const struct weir_last_mile *use = NULL;

	if (lm != NULL && (lm->flags & WEIR_LM_OFF)) {
		t->lm_rule = 1;
		return;
	}
	if (lm != NULL && lm->rate != 0) {
		use = lm;
		t->lm_rule = 1;
	}
	for (int d = 0; use == NULL && d < WEIR_POLICY_DIRS; d++)
		if (t->leaf[d] != WEIR_CBQ_NONE && strcmp(p->tree[d].classes[t->leaf[d]].name, t->name) == 0 &&
		    p->tree[d].classes[t->leaf[d]].last_mile.rate != 0)
			use = &p->tree[d].classes[t->leaf[d]].last_mile;
	if (use == NULL)
		return;
	t->last_mile = *use;
	t->lm_flags = (uint8_t)(WEIR_LM_ON | (use->flags & (WEIR_LM_EXEMPT | WEIR_LM_WAN)));
	t->lm_buffer = use->buffer;
	t->lm_pipe = (uint32_t)RTE_MIN((uint64_t)use->rate / 8 * use->rtt_ms / 1000, (uint64_t)INT32_MAX);
}

/* Index of the target for (name, weight, last mile), adding it if new; -1
 * when full, -2 when the name is no leaf in either direction, -3 when it
 * names an inner class. lm: a rule's last mile (NULL: the class's). */
static int
target_get_lm(struct weir_policy *p, const char *name, uint8_t weight, const struct weir_last_mile *lm)
{
	struct weir_policy_target t = { .weight = weight ? weight : 1 };
	int found = 0;

	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		const struct weir_policy_tree *tr = &p->tree[d];
		int c;

		if (tr->n_classes == 0) {
			t.leaf[d] = WEIR_CBQ_NONE;
			t.mode[d] = WEIR_MODE_PFQ;
			continue;
		}
		c = weir_policy_class_find(p, d, name);
		if (c >= 0 && !tr->classes[c].is_leaf)
			return -3;
		if (c >= 0)
			found = 1;
		t.leaf[d] = c >= 0 ? (uint16_t)c : tr->default_leaf;
		t.mode[d] = tr->classes[t.leaf[d]].mode;
	}
	if (!found)
		return -2;
	snprintf(t.name, sizeof(t.name), "%s", name);
	target_last_mile(p, &t, lm);
	for (int i = 0; i < p->n_targets; i++)
		if (strcmp(p->targets[i].name, name) == 0 && p->targets[i].weight == t.weight &&
		    i != WEIR_TARGET_DEFAULT && p->targets[i].lm_flags == t.lm_flags &&
		    p->targets[i].lm_rule == t.lm_rule &&
		    memcmp(&p->targets[i].last_mile, &t.last_mile, sizeof(t.last_mile)) == 0)
			return i;
	if (p->n_targets >= p->cap_targets)
		return -1;
	p->targets[p->n_targets] = t;
	return p->n_targets++;
}

static int
target_get(struct weir_policy *p, const char *name, uint8_t weight)
{
	return target_get_lm(p, name, weight, NULL);
}

static int conf_copy(struct weir_policy_src *dst, const struct weir_policy_conf *c);

/* Each subscriber's target: the leaf its class name gives
 * (weir_subs_class_name, the one place the name is made). */
static int
subs_targets(struct weir_policy *p, const struct weir_subs *s)
{
	char name[WEIR_POLICY_NAME_LEN];

	p->sub_target = calloc((size_t)weir_subs_count(s) + 1, sizeof(*p->sub_target));
	if (p->sub_target == NULL)
		return -1;
	weir_subs_ref(s);
	p->subs = s;
	for (uint32_t i = 0; i < weir_subs_count(s); i++) {
		int t;

		weir_subs_class_name(s, i, name);
		t = weir_policy_target_find(p, name);
		if (t < 0)
			return -1;
		p->sub_target[i] = (uint16_t)t;
	}
	return 0;
}

struct weir_policy *
weir_policy_build(const struct weir_policy_conf *conf, uint32_t epoch, struct weir_policy_err *err)
{
	struct weir_policy *p;
	struct weir_classify_rule *rules = NULL;
	char cerr[256];
	int d;

	memset(err, 0, sizeof(*err));
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return fail(NULL, err, WEIR_POLICY_ERR_GENERAL, 0, -1, "out of memory");
	p->epoch = epoch;
	for (d = 0; d < WEIR_POLICY_DIRS; d++) {
		if (build_tree(p, &conf->tree[d], d, err) < 0) {
			weir_policy_free(p);
			return NULL;
		}
		mark_inner(&p->tree[d]);
	}
	/* The default target first, then one per (class, weight) in use. */
	p->cap_targets = RTE_MIN((uint32_t)WEIR_POLICY_MAX_TARGETS, WEIR_POLICY_TARGETS_BASE +
				 (uint32_t)p->tree[0].n_classes + p->tree[1].n_classes);
	p->targets = calloc(p->cap_targets, sizeof(p->targets[0]));
	if (p->targets == NULL)
		return fail(p, err, WEIR_POLICY_ERR_GENERAL, 0, -1, "out of memory");
	p->n_targets = 1;
	snprintf(p->targets[0].name, sizeof(p->targets[0].name), "default");
	p->targets[0].weight = 1;
	for (d = 0; d < WEIR_POLICY_DIRS; d++) {
		const struct weir_policy_tree *t = &p->tree[d];

		p->targets[0].leaf[d] = t->n_classes ? t->default_leaf : WEIR_CBQ_NONE;
		p->targets[0].mode[d] = t->n_classes ? t->classes[t->default_leaf].mode : WEIR_MODE_PFQ;
		if (t->n_classes && !t->classes[t->default_leaf].is_leaf)
			return fail(p, err, WEIR_POLICY_ERR_TREE, d, -1,
				    "%s: default class '%s' has children; it must be a leaf",
				    dir_name[d], t->classes[t->default_leaf].name);
	}
	/* Unmatched flows have the default leaves' last mile, if one has. */
	for (d = 0; d < WEIR_POLICY_DIRS; d++) {
		struct weir_policy_target *t0 = &p->targets[0];

		if (t0->lm_flags == 0 && t0->leaf[d] != WEIR_CBQ_NONE &&
		    p->tree[d].classes[t0->leaf[d]].last_mile.rate != 0) {
			snprintf(t0->name, sizeof(t0->name), "%s", p->tree[d].classes[t0->leaf[d]].name);
			target_last_mile(p, t0, NULL);
			snprintf(t0->name, sizeof(t0->name), "default");
		}
	}
	for (d = 0; d < WEIR_POLICY_DIRS; d++) {
		const struct weir_policy_tree_conf *tc = &conf->tree[d];
		struct weir_policy_tree *t = &p->tree[d];

		for (uint16_t i = 1; i < t->n_classes && tc->n_classes; i++) {
			struct weir_policy_class *k = &t->classes[i];
			const struct weir_policy_class_conf *c = &tc->classes[i - 1];
			int fb;

			if (!k->is_leaf && k->marker.type != WEIR_MARK_NONE)
				return fail(p, err, WEIR_POLICY_ERR_CLASS, d, i - 1,
					    "class '%s' has children: a marker colours a leaf's frames",
					    k->name);
			if (!k->is_leaf && k->flow_min)
				return fail(p, err, WEIR_POLICY_ERR_CLASS, d, i - 1,
					    "class '%s' has children: flow_min applies to leaves only",
					    k->name);
			if (!k->flow_min || k->admit != WEIR_ADMIT_FALLBACK)
				continue;
			if (strcmp(c->fallback, k->name) == 0)
				return fail(p, err, WEIR_POLICY_ERR_CLASS, d, i - 1,
					    "class '%s' cannot be its own fallback", k->name);
			fb = target_get(p, c->fallback, 1);
			if (fb == -2 || fb == -3 || weir_policy_class_find(p, d, c->fallback) < 0)
				return fail(p, err, WEIR_POLICY_ERR_CLASS, d, i - 1,
					    "class '%s': fallback '%s' is not a leaf class of the %s tree",
					    k->name, c->fallback, dir_name[d]);
			if (fb < 0)
				return fail(p, err, WEIR_POLICY_ERR_GENERAL, d, -1, "too many targets");
			k->fallback_target = (uint16_t)fb;
		}
	}
	if (conf->n_rules > 0) {
		rules = calloc(conf->n_rules, sizeof(*rules));
		if (rules == NULL)
			return fail(p, err, WEIR_POLICY_ERR_GENERAL, 0, -1, "out of memory");
	}
	for (unsigned int r = 0; r < conf->n_rules; r++) {
		const struct weir_policy_rule_conf *rc = &conf->rules[r];
		int t;

		if (p->tree[0].n_classes == 0 && p->tree[1].n_classes == 0) {
			free(rules);
			return fail(p, err, WEIR_POLICY_ERR_RULE, 0, (int)r,
				    "rules need shaping: neither direction has a link rate");
		}
		if (rc->last_mile.rate != 0 && (rc->last_mile.rtt_ms == 0 || rc->last_mile.rtt_ms > 60000 ||
						rc->last_mile.buffer > 10000)) {
			free(rules);
			return fail(p, err, WEIR_POLICY_ERR_RULE, 0, (int)r, "last_mile needs rtt "
				    "1..60000 ms and buffer 0..10000 packets");
		}
		t = target_get_lm(p, rc->class_name, rc->weight, &rc->last_mile);
		if (t < 0) {
			free(rules);
			return fail(p, err, WEIR_POLICY_ERR_RULE, 0, (int)r,
				    t == -3 ? "class '%s' has children; rules must name a leaf class"
				    : t == -2 ? "class '%s' is not defined in either direction"
				    : "too many distinct (class, weight) pairs%.0s", rc->class_name);
		}
		rules[r] = rc->match;
		rules[r].class_id = (uint16_t)t;
	}
	/* A target (weight 1) for every leaf, so a policy hook can move a flow to
	 * any leaf by name, not only to those a rule names. */
	for (d = 0; d < WEIR_POLICY_DIRS; d++)
		for (uint16_t i = 0; i < p->tree[d].n_classes; i++)
			if (p->tree[d].classes[i].is_leaf)
				(void)target_get(p, p->tree[d].classes[i].name, 1);
	p->classifier = weir_classifier_build(rules, conf->n_rules, WEIR_TARGET_DEFAULT,
					      cerr, sizeof(cerr));
	free(rules);
	if (p->classifier == NULL) {
		unsigned int r;

		if (sscanf(cerr, "rule %u", &r) == 1) {
			const char *colon = strchr(cerr, ':');

			return fail(p, err, WEIR_POLICY_ERR_RULE, 0, (int)r, "%s",
				    colon ? colon + 2 : cerr);
		}
		return fail(p, err, WEIR_POLICY_ERR_GENERAL, 0, -1, "%s", cerr);
	}
	/* ipabr keeps per-class state in arrays of WEIR_CBQ_MAX_CLASSES (lib/modes/ipabr.h). */
	if ((p->tree[0].n_classes > WEIR_CBQ_MAX_CLASSES || p->tree[1].n_classes > WEIR_CBQ_MAX_CLASSES)
	    && weir_policy_uses_mode(p, WEIR_MODE_IPABR))
		return fail(p, err, WEIR_POLICY_ERR_GENERAL, 0, -1, "mode ipabr holds at most %d "
			    "classes a tree", WEIR_CBQ_MAX_CLASSES - 1);
	if (conf->subs != NULL && subs_targets(p, conf->subs) != 0)
		return fail(p, err, WEIR_POLICY_ERR_GENERAL, 0, -1,
			    "a subscriber has no leaf class in either tree");
	if (conf_copy(&p->src, conf) != 0)
		return fail(p, err, WEIR_POLICY_ERR_GENERAL, 0, -1, "out of memory");
	return p;
}

/* What the policy was built from, kept so a run-time change to one class
 * can rebuild it through the same validation (weir_policy_with_class). */
static int
conf_copy(struct weir_policy_src *dst, const struct weir_policy_conf *c)
{
	memset(dst, 0, sizeof(*dst));
	dst->conf = *c;
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		size_t n = c->tree[d].n_classes;

		if (n == 0)
			continue;
		dst->classes[d] = malloc(n * sizeof(*dst->classes[d]));
		if (dst->classes[d] == NULL)
			return -1;
		memcpy(dst->classes[d], c->tree[d].classes, n * sizeof(*dst->classes[d]));
		dst->conf.tree[d].classes = dst->classes[d];
	}
	if (c->n_rules > 0) {
		dst->rules = malloc(c->n_rules * sizeof(*dst->rules));
		if (dst->rules == NULL)
			return -1;
		memcpy(dst->rules, c->rules, c->n_rules * sizeof(*dst->rules));
	}
	dst->conf.rules = dst->rules;
	return 0;
}

struct weir_policy *
weir_policy_with_class(const struct weir_policy *p, int dir, const char *name,
		       const struct weir_policy_class_change *chg, uint32_t epoch,
		       struct weir_policy_err *err)
{
	struct weir_policy_class_conf *cls, *k = NULL;
	struct weir_policy_conf c = p->src.conf;
	struct weir_policy *np;
	size_t n;

	memset(err, 0, sizeof(*err));
	if (dir < 0 || dir >= WEIR_POLICY_DIRS || c.tree[dir].n_classes == 0) {
		snprintf(err->msg, sizeof(err->msg), "the %s direction has no classes",
			 dir == 0 ? "outbound" : "inbound");
		return NULL;
	}
	n = c.tree[dir].n_classes;
	cls = malloc(n * sizeof(*cls));
	if (cls == NULL) {
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return NULL;
	}
	memcpy(cls, c.tree[dir].classes, n * sizeof(*cls));
	for (size_t i = 0; i < n; i++)
		if (strcmp(cls[i].name, name) == 0)
			k = &cls[i];
	if (k == NULL) {
		snprintf(err->msg, sizeof(err->msg), "no class '%s' in the %s tree", name,
			 dir_name[dir]);
		free(cls);
		return NULL;
	}
	if (chg->rate)
		k->rate = chg->rate;
	if (chg->ceil)
		k->ceil = chg->ceil;
	if (chg->mode >= 0)
		k->mode = (uint8_t)chg->mode;
	if (chg->contract) {
		if (k->marker.type == WEIR_MARK_NONE) {
			snprintf(err->msg, sizeof(err->msg), "class '%s' has no marker: there is no "
				 "contract to change", name);
			free(cls);
			return NULL;
		}
		/* The depths and TBQ's queue that followed the old contract by
		 * default follow the new one: the source keeps them unset. */
		k->marker.cir = chg->contract;
	}
	c.tree[dir].classes = cls;
	np = weir_policy_build(&c, epoch, err);
	free(cls);
	return np;
}

bool
weir_policy_uses_mode(const struct weir_policy *p, uint8_t mode)
{
	for (int d = 0; p != NULL && d < WEIR_POLICY_DIRS; d++)
		for (uint16_t c = 0; c < p->tree[d].n_classes; c++)
			if (p->tree[d].classes[c].is_leaf && p->tree[d].classes[c].mode == mode)
				return true;
	return false;
}

void
weir_policy_free(struct weir_policy *p)
{
	if (p == NULL)
		return;
	weir_classifier_free(p->classifier);
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		free(p->tree[d].classes);
		free(p->src.classes[d]);
	}
	free(p->src.rules);
	free(p->targets);
	free(p->sub_target);
	weir_sub_lpm_free(p->sub_lpm);
	weir_subs_free((struct weir_subs *)(uintptr_t)p->subs);
	free(p);
}

uint16_t
weir_policy_cbq_classes(const struct weir_policy *p, int dir, uint64_t num, uint64_t den,
			struct weir_cbq_class_conf *out)
{
	const struct weir_policy_tree *t = &p->tree[dir];

	for (uint16_t i = 0; i < t->n_classes; i++) {
		out[i] = t->classes[i].cbq;
		if (!t->classes[i].is_leaf)
			out[i].qm = WEIR_QM_NONE;       /* a fifo class with children queues nothing */
		out[i].rate = (uint64_t)((unsigned __int128)out[i].rate * num / den);
		out[i].ceil = (uint64_t)((unsigned __int128)out[i].ceil * num / den);
		if (out[i].rate < WEIR_CBQ_RATE_MIN)
			out[i].rate = WEIR_CBQ_RATE_MIN;
		if (out[i].ceil < out[i].rate)
			out[i].ceil = out[i].rate;
	}
	return t->n_classes;
}

int
weir_policy_target_find(const struct weir_policy *p, const char *name)
{
	for (int i = 1; i < p->n_targets; i++)
		if (p->targets[i].weight == 1 && !p->targets[i].lm_rule &&
		    strcmp(p->targets[i].name, name) == 0)
			return i;
	return strcmp(name, "default") == 0 ? WEIR_TARGET_DEFAULT : -1;
}
