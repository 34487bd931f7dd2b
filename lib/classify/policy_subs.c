/* SPDX-License-Identifier: BSD-3-Clause
 * weir: subscribers as classes of the policy's trees (policy_subs.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "subscriber_lpm.h"
#include "policy_subs.h"

void
weir_subs_class_name(const struct weir_subs *s, uint32_t i, char out[WEIR_POLICY_NAME_LEN])
{
	const struct weir_sub *u = weir_subs_get(s, i);

	if (u != NULL && strlen(u->id) < WEIR_POLICY_NAME_LEN)
		memcpy(out, u->id, strlen(u->id) + 1);
	else
		snprintf(out, WEIR_POLICY_NAME_LEN, "sub-%u", i);
}

void
weir_subs_node_class_name(const struct weir_subs *s, uint32_t i, char out[WEIR_POLICY_NAME_LEN])
{
	const struct weir_sub_node *n = weir_subs_node(s, i);

	if (n != NULL && strlen(n->name) < WEIR_POLICY_NAME_LEN)
		memcpy(out, n->name, strlen(n->name) + 1);
	else
		snprintf(out, WEIR_POLICY_NAME_LEN, "node-%u", i);
}

bool
weir_subs_is_class(const struct weir_subs *s, const char *name)
{
	char *end;
	unsigned long i;

	if (s == NULL)
		return false;
	if (weir_subs_find(s, name) >= 0)
		return true;
	if (strncmp(name, "sub-", 4) != 0 || name[4] < '0' || name[4] > '9')
		return false;
	i = strtoul(name + 4, &end, 10);
	return *end == '\0' && i < weir_subs_count(s) &&
	       strlen(weir_subs_get(s, (uint32_t)i)->id) >= WEIR_POLICY_NAME_LEN;
}

uint32_t
weir_subs_class_count(const struct weir_subs *s)
{
	uint32_t n = weir_subs_count(s);

	for (uint32_t i = 0; i < weir_subs_node_count(s); i++)
		n += !weir_subs_node(s, i)->is_virtual;
	return n;
}

void
weir_subs_leaf_plan(const struct weir_subs *s, uint32_t i, int pdir, uint64_t link_rate,
		    uint64_t *rate, uint64_t *ceil)
{
	const int sd = pdir == WEIR_DIR_OUT ? WEIR_SUB_UP : WEIR_SUB_DOWN;
	const struct weir_sub *u = weir_subs_get(s, i);
	uint64_t cap = link_rate;

	if (u->node != WEIR_SUB_NONE) {
		const struct weir_sub_node *n = weir_subs_node(s, u->node);

		if (n->rate[sd] != 0 && n->rate[sd] < cap)
			cap = n->rate[sd];
	}
	/* Shaping off: the whole of what is above it, no plan. */
	*ceil = u->flags & WEIR_SUBF_UNSHAPED ? cap : RTE_MIN(u->max[sd], cap);
	*rate = u->flags & WEIR_SUBF_UNSHAPED ? cap / 100 + 1
		: u->min[sd] != 0 ? RTE_MIN(u->min[sd], *ceil) : *ceil / 100 + 1;
}

/* Nodes in an order with parents first: by depth (at most the tree's). */
static uint32_t
nodes_by_depth(const struct weir_subs *s, uint32_t *order)
{
	uint32_t k = 0;

	for (uint8_t dep = 1; dep <= WEIR_SUB_MAX_DEPTH; dep++)
		for (uint32_t i = 0; i < weir_subs_node_count(s); i++) {
			const struct weir_sub_node *n = weir_subs_node(s, i);

			if (!n->is_virtual && n->depth == dep)
				order[k++] = i;
		}
	return k;
}

struct weir_policy_class_conf *
weir_subs_classes(const struct weir_subs *s, int pdir, uint64_t link_rate, const char *under,
		  const struct weir_policy_class_conf *base, uint16_t n_base, uint8_t mode,
		  char *err, size_t errlen)
{
	const int sd = pdir == WEIR_DIR_OUT ? WEIR_SUB_UP : WEIR_SUB_DOWN;
	uint64_t total = (uint64_t)n_base + weir_subs_class_count(s);
	struct weir_policy_class_conf *out, *c;
	uint32_t *order;
	uint32_t n_nodes;

	if (total + 1 > WEIR_POLICY_MAX_CLASSES) {
		snprintf(err, errlen, "%u subscribers and %u nodes make %llu classes; this class "
			 "tree holds %u", weir_subs_count(s), weir_subs_node_count(s),
			 (unsigned long long)total, WEIR_POLICY_MAX_CLASSES - 1);
		return NULL;
	}
	out = calloc(total + 1, sizeof(*out));
	order = malloc(((size_t)weir_subs_node_count(s) + 1) * sizeof(*order));
	if (out == NULL || order == NULL) {
		free(out);
		free(order);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memcpy(out, base, (size_t)n_base * sizeof(*base));
	c = out + n_base;
	n_nodes = nodes_by_depth(s, order);
	for (uint32_t k = 0; k < n_nodes; k++, c++) {
		const struct weir_sub_node *n = weir_subs_node(s, order[k]);
		uint64_t r = n->rate[sd] != 0 && n->rate[sd] < link_rate ? n->rate[sd] : link_rate;

		weir_subs_node_class_name(s, order[k], c->name);
		if (n->real_parent != WEIR_SUB_NONE)
			weir_subs_node_class_name(s, n->real_parent, c->parent);
		else
			snprintf(c->parent, sizeof(c->parent), "%s", under);
		c->rate = r;
		c->ceil = r;
		c->mode = mode;
	}
	for (uint32_t i = 0; i < weir_subs_count(s); i++, c++) {
		const struct weir_sub *u = weir_subs_get(s, i);

		weir_subs_class_name(s, i, c->name);
		if (u->node != WEIR_SUB_NONE)
			weir_subs_node_class_name(s, u->node, c->parent);
		else
			snprintf(c->parent, sizeof(c->parent), "%s", under);
		weir_subs_leaf_plan(s, i, pdir, link_rate, &c->rate, &c->ceil);
		c->mode = mode;
	}
	free(order);
	return out;
}

int
weir_policy_subs_accelerate(struct weir_policy *p, int socket_id, char *err, size_t errlen)
{
	if (p->subs == NULL || p->sub_lpm != NULL)
		return 0;
	p->sub_lpm = weir_sub_lpm_build(p->subs, socket_id, err, errlen);
	return p->sub_lpm != NULL ? 0 : -1;
}

int
weir_subs_tree(const struct weir_subs *s, int pdir, struct weir_policy_tree_conf *tc,
	       const char *under, uint16_t *base, struct weir_policy_class_conf **out,
	       char *err, size_t errlen)
{
	struct weir_policy_class_conf dflt = { .name = "default" };

	*out = NULL;
	if (tc->rate == 0)
		return 0;
	if (tc->n_classes == 0) {
		dflt.rate = tc->rate / 100 + 1;
		dflt.mode = tc->mode;
		snprintf(tc->default_class, sizeof(tc->default_class), "default");
	}
	*out = weir_subs_classes(s, pdir, tc->rate, under, tc->n_classes ? tc->classes : &dflt,
				 tc->n_classes ? tc->n_classes : 1, tc->mode, err, errlen);
	if (*out == NULL)
		return -1;
	*base = tc->n_classes ? tc->n_classes : 1;
	tc->n_classes = (uint16_t)(*base + weir_subs_class_count(s));
	tc->classes = *out;
	return 0;
}
