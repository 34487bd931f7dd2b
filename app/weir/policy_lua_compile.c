/* SPDX-License-Identifier: BSD-3-Clause
 * weir: compiling a Lua policy's declarations (policy_lua.c) into a
 * struct weir_policy_conf and the policy builder, with the builder's errors
 * mapped back to the declaration's line.
 */
#include "policy_subs.h"
#include "policy_lua_int.h"

/* Map a builder error to the declaration it is about: the set_class that
 * made it fail if there was one since the last compile (the last good
 * compile had the same declarations without it). */
static void
report_build(const struct weir_lua *x, const struct weir_policy_err *e, char *err, size_t errlen)
{
	int line = 0;

	switch (e->kind) {
	case WEIR_POLICY_ERR_TREE:
		line = x->link_line[e->dir];
		break;
	case WEIR_POLICY_ERR_CLASS:
		if (e->index >= 0 && (unsigned int)e->index < x->n_classes[e->dir]) {
			const struct class_line *cl = &x->class_line[e->dir][e->index];

			line = cl->set ? cl->set : cl->decl;
		}
		break;
	case WEIR_POLICY_ERR_RULE:
		if (e->index >= 0 && (unsigned int)e->index < x->n_rules)
			line = x->rule_line[e->index];
		if (x->last_set_line != 0)
			line = x->last_set_line;
		snprintf(err, errlen, "%s:%d: rule %d: %s", x->path, line, e->index + 1, e->msg);
		return;
	default:
		break;
	}
	if (x->last_set_line != 0 && (e->kind != WEIR_POLICY_ERR_CLASS || line == 0 ||
				      line == x->class_line[e->dir][e->index].decl))
		line = x->last_set_line;
	snprintf(err, errlen, "%s:%d: %s", x->path, line, e->msg);
}

/* The classes as compiled become the ones to return to; or, after a
 * failure, the classes return to them. */
static void
settle(struct weir_lua *x, bool good)
{
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		size_t n = x->n_classes[d] * sizeof(*x->good[d]);

		if (n == 0)
			continue;
		if (good)
			memcpy(x->good[d], x->classes[d], n);
		else
			memcpy(x->classes[d], x->good[d], n);
		for (unsigned int i = 0; i < x->n_classes[d]; i++)
			x->class_line[d][i].set = 0;
	}
	x->last_set_line = 0;
	x->dirty = false;
}

/*
 * The script's weir.subscriber set into pc: checked (every problem as
 * FILE:LINE; the first is the error), then each subscriber a leaf of both
 * trees under its node or the link, as the config file's subscribers are
 * (config_policy.c). cls[] receive the class arrays (the caller frees
 * them). 0, or -1 with err.
 */
static int
with_subs(struct weir_lua *x, struct weir_policy_conf *pc,
	  struct weir_policy_class_conf *cls[WEIR_POLICY_DIRS], char *err, size_t errlen)
{
	struct weir_sub_errs se = { 0 };

	if (weir_subs_check(x->subs, &se) != 0) {
		snprintf(err, errlen, "%.*s", (int)strcspn(se.text ? se.text : "", "\n"),
			 se.text ? se.text : "");
		weir_sub_errs_free(&se);
		return -1;
	}
	for (int d = 0; d < WEIR_POLICY_DIRS; d++)
		if (weir_subs_tree(x->subs, d, &pc->tree[d], "", &pc->subs_base[d], &cls[d], err,
				   errlen) < 0) {
			free(cls[0]);
			cls[0] = NULL;
			return -1;
		}
	pc->subs = x->subs;
	return 0;
}

static struct weir_policy *
compile(struct weir_lua *x, uint32_t epoch, char *err, size_t errlen)
{
	struct weir_policy_conf pc = { 0 };
	struct weir_policy_class_conf *cls[WEIR_POLICY_DIRS] = { NULL, NULL };
	struct weir_policy_err e;
	struct weir_policy *p;

	if (x->link_line[0] == 0 && x->link_line[1] == 0) {
		snprintf(err, errlen, "%s:%d: the policy declares no weir.link{ dir = \"outbound\" "
			 "or \"inbound\", rate = ... }: nothing to shape", x->path,
			 x->n_rules ? x->rule_line[0] : 0);
		return NULL;
	}
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		struct weir_policy_tree_conf *tc = &pc.tree[d];

		*tc = x->tree[d];
		tc->classes = x->classes[d];
		tc->n_classes = (uint16_t)x->n_classes[d];
		/* The config file's check, at the link's line. */
		if (tc->n_classes > 0 && tc->default_class[0] == '\0') {
			snprintf(err, errlen, "%s:%d: the %s link has classes, so it needs default = "
				 "\"<class>\" for traffic no rule matches", x->path,
				 x->link_line[d], dir_name[d]);
			return NULL;
		}
	}
	pc.rules = x->rules;
	pc.n_rules = x->n_rules;
	if (x->subs != NULL && with_subs(x, &pc, cls, err, errlen) < 0)
		return NULL;
	p = weir_policy_build(&pc, epoch, &e);
	free(cls[0]);
	free(cls[1]);
	if (p == NULL)
		report_build(x, &e, err, errlen);
	return p;
}

struct weir_policy *
weir_lua_compile_change(struct weir_lua *x, uint32_t epoch, char *err, size_t errlen)
{
	char msg[MSG_LEN];
	struct weir_policy *p = compile(x, epoch, msg, sizeof(msg));

	x->cnt.compiles++;
	if (p == NULL) {
		x->cnt.compile_errors++;
		snprintf(x->cnt.last_error, sizeof(x->cnt.last_error), "%s", msg);
		snprintf(err, errlen, "%s", msg);
		settle(x, false);
	}
	return p;
}

void
weir_lua_commit(struct weir_lua *x)
{
	settle(x, true);
}

struct weir_policy *
weir_lua_compile(struct weir_lua *x, uint32_t epoch, char *err, size_t errlen)
{
	struct weir_policy *p = weir_lua_compile_change(x, epoch, err, errlen);

	if (p != NULL)
		weir_lua_commit(x);
	return p;
}

struct weir_policy *
weir_policy_lua_load(const char *path, uint32_t epoch, const struct weir_policy_lua_limits *lim,
		     char *err, size_t errlen)
{
	struct weir_lua *x = weir_lua_open(path, lim, err, errlen);
	struct weir_policy *p;

	if (x == NULL)
		return NULL;
	p = weir_lua_compile(x, epoch, err, errlen);
	weir_lua_close(x);
	return p;
}
