/* SPDX-License-Identifier: BSD-3-Clause
 * weir: policy reload. The compile job reads and checks the file, runs its
 * script and compiles the new policy before anything changes; the
 * management lcore then switches the workers to it (switchover.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_pause.h>

#include "reload.h"
#include "compile_job.h"
#include "hooks.h"
#include "policy_lua.h"
#include "text.h"

/* The management token is re-read with every reload, so a rotated token
 * file takes effect without a restart. A file that cannot be used keeps
 * the token in force (never none) and does not fail the policy's reload.
 * The TLS files are read at start only: MHD keeps the key it started
 * with. */
static void
token_update(struct weir_app *a, const struct weir_config *nc)
{
	json_t *t;

	if (strcmp(a->cfg.mgmt_tls_cert, nc->mgmt_tls_cert) != 0 ||
	    strcmp(a->cfg.mgmt_tls_key, nc->mgmt_tls_key) != 0)
		RTE_LOG(WARNING, USER1, "management.tls_cert and tls_key are read at start only: "
			"restart weir to use the new ones\n");
	if (nc->mgmt_token_error[0] != '\0') {
		snprintf(a->token_error, sizeof(a->token_error), "%s (the token in force stays)",
			 nc->mgmt_token_error);
		RTE_LOG(ERR, USER1, "%s\n", a->token_error);
		/* It goes into the stats' JSON, which a byte that is not UTF-8
		 * (in a path) would make fail as a whole. */
		t = json_string(a->token_error);
		if (t == NULL)
			snprintf(a->token_error, sizeof(a->token_error), "management.token_file "
				 "cannot be used (the message is not UTF-8: see the log); the token "
				 "in force stays");
		json_decref(t);
		return;
	}
	a->token_error[0] = '\0';
	if (strcmp(a->cfg.mgmt_token, nc->mgmt_token) == 0)
		return;
	snprintf(a->cfg.mgmt_token, sizeof(a->cfg.mgmt_token), "%s", nc->mgmt_token);
	snprintf(a->cfg.mgmt_token_file, sizeof(a->cfg.mgmt_token_file), "%s", nc->mgmt_token_file);
	if (nc->mgmt_token[0] != '\0')
		RTE_LOG(NOTICE, USER1, "management token reloaded from %s\n", nc->mgmt_token_file);
	else
		RTE_LOG(WARNING, USER1, "management.token_file removed: the API asks for no token\n");
}

/* A reload under way: what the job reads (a copy: the app is the loop's),
 * then what it made, until the switch ends on the management loop. */
struct reload_job {
	char path[sizeof(((struct weir_config *)0)->path)];
	bool shaped[WEIR_PORT__COUNT];  /* the policy in force's directions */
	int socket;                     /* the management lcore's, for the tries */
	weir_reload_done_fn *done;
	void *arg;
	/* The job's results. */
	bool loaded;                    /* nc holds the file (its token goes in force) */
	bool failed;                    /* err says why, nothing to switch to */
	struct weir_config nc;
	struct weir_lua *l;             /* a script's engine, the hooks' once in force */
	struct weir_policy *np;
	uint64_t build_us;              /* the ACL tries' build */
	char err[sizeof(((struct weir_app *)0)->reload_error)];
};

/* The end of every reload, in force or not: logged, counted and kept for
 * the API. rc as weir_mgmt_reload. */
static int
reload_report(struct weir_app *app, int rc, const char *err)
{
	weir_utf8_copy(app->reload_error, sizeof(app->reload_error), err);
	if (rc >= 0) {
		/* In force; a late worker is worth saying, not a failure. */
		RTE_LOG(NOTICE, USER1, "policy %u in force (reload %" PRIu64 ")%s%s\n",
			app->cfg.policy->epoch, app->reloads, rc > 0 ? ": " : "", app->reload_error);
		return 0;
	}
	app->reload_failures++;
	RTE_LOG(ERR, USER1, "reload failed, policy %u stays in force: %s\n",
		app->cfg.policy ? app->cfg.policy->epoch : 0, app->reload_error);
	return -1;
}

/* On the compile job's thread: the file, its script, the policy and its
 * ACL tries; everything a reload computes, nothing it changes. */
static void
reload_work(void *arg)
{
	struct reload_job *j = arg;
	uint64_t t0;

	if (weir_config_load_reload(j->path, &j->nc, j->err, sizeof(j->err)) < 0) {
		j->failed = true;
		return;
	}
	j->loaded = true;
	j->np = j->nc.policy;
	if (j->nc.policy_script[0] != '\0') {
		/* A Lua policy: its live engine (hooks) and the engine's compile. */
		const struct weir_policy_lua_limits lim = weir_config_lua_limits(&j->nc);

		j->l = weir_lua_open(j->nc.policy_script, &lim, j->err, sizeof(j->err));
		j->np = j->l != NULL ? weir_lua_compile(j->l, 0, j->err, sizeof(j->err)) : NULL;
		if (j->np == NULL) {
			j->failed = true;
			return;
		}
	}
	/* No tries for a policy the switch refuses anyway (apply says why). */
	for (int d = 0; d < WEIR_PORT__COUNT; d++)
		if (j->np == NULL || j->shaped[d] != (j->np->tree[d].n_classes != 0))
			return;
	t0 = rte_rdtsc();
	weir_policy_accelerate(j->np, j->socket);
	j->build_us = (rte_rdtsc() - t0) * 1000000 / rte_get_tsc_hz();
}

/* Back on the management loop: switch to what the job made. */
static void
reload_switch(struct weir_app *a, void *arg)
{
	struct reload_job *j = arg;
	char err[sizeof(a->reload_error)];
	int rc = -1;

	snprintf(err, sizeof(err), "%s", j->err);
	if (j->loaded)
		token_update(a, &j->nc);
	if (!j->failed)
		rc = weir_policy_apply_built(a, j->np, &j->nc, j->build_us, err, sizeof(err));
	if (rc >= 0) {          /* in force (late or not): np is the app's */
		if (j->np == j->nc.policy)
			j->nc.policy = NULL;    /* in force now: not nc's to free */
		snprintf(a->cfg.policy_script, sizeof(a->cfg.policy_script), "%s",
			 j->nc.policy_script);
		a->cfg.policy_events_per_s = j->nc.policy_events_per_s;
		weir_hooks_replace(a, j->l);
	} else {
		if (j->np != j->nc.policy)
			weir_policy_free(j->np);
		weir_lua_close(j->l);
	}
	if (j->loaded)
		weir_config_free(&j->nc);
	rc = reload_report(a, rc, err);
	if (j->done != NULL)
		j->done(a, rc, j->arg);
	free(j);
}

int
weir_mgmt_reload_start(struct weir_app *a, weir_reload_done_fn *done, void *arg)
{
	struct reload_job *j;

	if (weir_compile_job_busy(a))
		return reload_report(a, -1, "a policy switch is under way: try again when it ends");
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return reload_report(a, -1, "out of memory reloading the policy");
	snprintf(j->path, sizeof(j->path), "%s", a->cfg.path);
	for (int d = 0; d < WEIR_PORT__COUNT; d++)
		j->shaped[d] = a->cfg.policy != NULL && a->cfg.policy->tree[d].n_classes != 0;
	j->socket = (int)rte_socket_id();
	j->done = done;
	j->arg = arg;
	if (weir_compile_job_start(a, reload_work, reload_switch, j) < 0) {
		free(j);
		return reload_report(a, -1, "out of memory reloading the policy");
	}
	return 1;
}

static void
sync_done(struct weir_app *a, int rc, void *arg)
{
	(void)a;
	*(int *)arg = rc;
}

int
weir_mgmt_reload(struct weir_app *app)
{
	int rc;

	weir_compile_job_wait(app);     /* one switch at a time */
	rc = weir_mgmt_reload_start(app, sync_done, &rc);
	if (rc > 0)
		weir_compile_job_wait(app);     /* sets rc */
	return rc;
}
