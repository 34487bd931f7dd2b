/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the subscriber files uploaded through the REST API (docs/subscribers.md,
 * docs/fleet.md: what scripts/weir-push sends).
 *
 * PUT /api/v1/subscribers (text/csv: a ShapedDevices.csv) and PUT
 * /api/v1/subscribers/network (application/json: a network.json), each
 * with ?dry_run=true to check only. The upload is written beside the
 * configured file and read with the other one exactly as a re-read of the
 * files is (this box's partition, every bad row as FILE:LINE naming the
 * configured file); a file with problems changes nothing. A good one: only
 * its diff is put in force (subs_apply), then it is renamed over the
 * configured file, so what a restart reads is what is in force.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_log.h>

#include "rest_int.h"
#include "subs_apply.h"
#include "lqos.h"

/* Problems of a file read from tmp, named by the configured path. */
static json_t *
problems_named(const struct weir_sub_errs *e, const char *tmp, const char *path)
{
	json_t *lines = rest_sub_error_lines(e), *out = json_array(), *v;
	size_t k, tl = strlen(tmp);

	json_array_foreach(lines, k, v) {
		const char *s = json_string_value(v);

		if (strncmp(s, tmp, tl) == 0)
			json_array_append_new(out, json_sprintf("%s%s", path, s + tl));
		else
			json_array_append(out, v);
	}
	json_decref(lines);
	return out;
}

static int
dry_run_arg(struct MHD_Connection *c, struct rest_reply *r, bool *dry)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "dry_run");

	*dry = false;
	if (v == NULL)
		return 0;
	if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
		*dry = true;
	else if (strcmp(v, "false") != 0 && strcmp(v, "0") != 0) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "'dry_run' must be true or false");
		return -1;
	}
	return 0;
}

/* The upload's end: tmp (which holds the file for `path`) is checked with
 * the other configured file, applied and renamed over path; or removed. */
static void
upload(struct weir_app *a, struct rest_req *rq, struct rest_reply *r, bool csv, bool dry)
{
	const char *path = csv ? a->cfg.subs_csv : a->cfg.subs_network;
	const struct weir_policy *p = a->cfg.policy;
	char tmp[sizeof(a->cfg.subs_csv) + 32], err[sizeof(a->reload_error)];
	struct weir_sub_errs e = { 0 };
	struct weir_sub_diff d;
	struct weir_subs *s;
	json_t *diff;
	int rc;

	if (rest_temp_write(path, rq->body, rq->len, 0644, tmp, sizeof(tmp)) != 0) {
		rest_reply_error(r, errno == ENOSPC || errno == EDQUOT
				 ? MHD_HTTP_INSUFFICIENT_STORAGE : MHD_HTTP_INTERNAL_SERVER_ERROR,
				 "cannot write beside %s: %s", path, strerror(errno));
		return;
	}
	s = weir_subs_load_lqos(csv ? tmp : a->cfg.subs_csv,
				csv ? (a->cfg.subs_network[0] ? a->cfg.subs_network : NULL) : tmp,
				a->cfg.subs_box, &e);
	if (s == NULL) {
		json_t *probs = problems_named(&e, tmp, path);

		unlink(tmp);
		if (e.n_full != 0)
			a->subs_full++;
		/* The first problem in the message: what a push tool shows a box's refusal by. */
		rest_reply_error(r, e.n_full != 0 ? MHD_HTTP_INSUFFICIENT_STORAGE
				 : MHD_HTTP_UNPROCESSABLE_CONTENT, "%s (%u problems; nothing of the "
				 "file applied)", json_string_value(json_array_get(probs, 0)) ?: path,
				 e.n);
		json_object_set_new(json_object_get(r->json, "error"), "problems", probs);
		json_object_set_new(json_object_get(r->json, "error"), "epoch",
				    json_integer(p->epoch));
		weir_sub_errs_free(&e);
		return;
	}
	weir_subs_diff(p->subs, s, &d, NULL, NULL);
	diff = rest_sub_diff_json(&d);
	if (dry) {
		unlink(tmp);
		weir_subs_free(s);
		rest_reply_json(r, json_pack("{s:b, s:b, s:I, s:o}", "dry_run", 1, "switched", 0,
					     "epoch", (json_int_t)p->epoch, "diff", diff));
		return;
	}
	rc = subs_apply(a, s, &d, err, sizeof(err));
	if (rc < 0) {
		unlink(tmp);
		json_decref(diff);
		rest_reply_policy_error(a, r, rc == WEIR_SUBS_FULL ? MHD_HTTP_INSUFFICIENT_STORAGE
					: MHD_HTTP_UNPROCESSABLE_CONTENT, err);
		return;
	}
	/* In force: the file follows, so a restart or a re-read keeps it. */
	if (rename(tmp, path) != 0) {
		int en = errno;

		unlink(tmp);
		json_decref(diff);
		RTE_LOG(ERR, USER1, "subscribers: %s in force but not written: %s\n", path,
			strerror(en));
		rest_reply_policy_error(a, r, MHD_HTTP_INTERNAL_SERVER_ERROR, "in force, but "
					"cannot replace the file; a reload would go back to it");
		return;
	}
	rest_dir_sync(path);
	rest_reply_json(r, json_pack("{s:b, s:I, s:s, s:o}", "switched", subs_diff_any(&d),
				     "epoch", (json_int_t)a->cfg.policy->epoch, "file", path,
				     "diff", diff));
}

static void
h_upload(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r,
	 bool csv)
{
	const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_TYPE);
	const struct weir_policy *p = a->cfg.policy;
	bool dry;

	if (dry_run_arg(c, r, &dry) < 0)
		return;
	if (!rest_ctype_is(ct, csv ? "text/csv" : "application/json")) {
		rest_reply_error(r, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "the body must be %s",
				 csv ? "text/csv (a ShapedDevices.csv)"
				     : "application/json (a network.json)");
		return;
	}
	if (p == NULL || p->subs == NULL) {
		rest_reply_error(r, MHD_HTTP_CONFLICT, "no subscribers: the config has no "
				 "'subscribers'");
		return;
	}
	if (!csv && a->cfg.subs_network[0] == '\0') {
		rest_reply_error(r, MHD_HTTP_CONFLICT, "the config has no subscribers.network to "
				 "replace");
		return;
	}
	if (rq->len == 0) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "the body is empty");
		return;
	}
	if (!dry && rest_switch_busy(a, r))
		return;
	upload(a, rq, r, csv, dry);
}

void
h_subs_upload_csv(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		  struct rest_reply *r)
{
	h_upload(a, c, rq, r, true);
}

void
h_subs_upload_network(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		      struct rest_reply *r)
{
	h_upload(a, c, rq, r, false);
}
