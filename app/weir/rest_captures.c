/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the REST API's packet captures (captures.c does the work):
 *   POST   /api/v1/captures               start one (201)
 *   GET    /api/v1/captures               list them, with the limits
 *   GET    /api/v1/captures/{id}          its status
 *   GET    /api/v1/captures/{id}/pcapng   its file, once ended
 *   POST   /api/v1/captures/{id}/stop     end it now, keep the file
 *   DELETE /api/v1/captures/{id}          end it and remove the file
 */
#include "rest_int.h"
#include "captures.h"

/* "ID" or "ID/WHAT" of a prefix route: the id in id, what follows in *what. */
static bool
split_sub(const char *sub, char *id, size_t idlen, const char **what)
{
	const char *slash = strchr(sub, '/');
	size_t n = slash != NULL ? (size_t)(slash - sub) : strlen(sub);

	if (n == 0 || n >= idlen)
		return false;
	memcpy(id, sub, n);
	id[n] = '\0';
	*what = slash != NULL ? slash + 1 : "";
	return true;
}

/* A capture id is a number: anything else is a malformed request. */
static bool
id_ok(const char *id, struct rest_reply *r)
{
	if (strspn(id, "0123456789") == strlen(id))
		return true;            /* too large for any capture: 404 */
	rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "a capture id is a number, not '%.40s'", id);
	return false;
}

static void
reply_status(struct rest_reply *r, unsigned int status, json_t *j, const char *msg, const char *id)
{
	if (status == 404)
		rest_reply_error(r, MHD_HTTP_NOT_FOUND, "no capture %s", id);
	else if (status >= 400)
		rest_reply_error(r, status, "%s", msg);
	else {
		rest_reply_json(r, j);
		r->status = status;
	}
}

void
h_captures_post(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	json_t *body, *out = NULL;
	char msg[768] = "";
	unsigned int st;

	if (rest_body_object(c, rq, r, &body) < 0)
		return;
	if (body == NULL)
		body = json_object();
	st = weir_captures_start(a, body, &out, msg, sizeof(msg));
	json_decref(body);
	reply_status(r, st, out, msg, "");
}

void
h_captures_list(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	rest_reply_json(r, weir_captures_list(a));
}

void
h_capture_get(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	char id[32], msg[512] = "";
	const char *what;
	json_t *out = NULL;
	unsigned int st;

	if (!split_sub(rq->sub, id, sizeof(id), &what) || (what[0] != '\0' &&
							   strcmp(what, "pcapng") != 0)) {
		rest_reply_error(r, MHD_HTTP_NOT_FOUND, "no such resource: /api/v1/captures/%s", rq->sub);
		return;
	}
	if (!id_ok(id, r))
		return;
	if (what[0] == '\0') {
		st = weir_captures_get(a, id, &out);
		reply_status(r, st, out, msg, id);
		return;
	}
	st = weir_captures_file(a, id, &r->file_fd, &r->file_len, msg, sizeof(msg));
	if (st != 200) {
		reply_status(r, st, NULL, msg, id);
		return;
	}
	r->file = true;
	r->status = MHD_HTTP_OK;
	r->ctype = "application/x-pcapng";
}

void
h_capture_post(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	char id[32];
	const char *what;
	json_t *out = NULL;
	unsigned int st;

	if (!split_sub(rq->sub, id, sizeof(id), &what) || strcmp(what, "stop") != 0) {
		rest_reply_error(r, MHD_HTTP_NOT_FOUND, "no such resource: /api/v1/captures/%s "
			    "(POST /api/v1/captures/ID/stop ends a capture)", rq->sub);
		return;
	}
	if (!id_ok(id, r))
		return;
	if (rq->len != 0) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "stop takes no body");
		return;
	}
	st = weir_captures_stop(a, id, false, &out);

	reply_status(r, st, out, "", id);
}

void
h_capture_delete(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	char id[32];
	const char *what;
	json_t *out = NULL;

	if (!split_sub(rq->sub, id, sizeof(id), &what) || what[0] != '\0') {
		rest_reply_error(r, MHD_HTTP_NOT_FOUND, "no such resource: /api/v1/captures/%s", rq->sub);
		return;
	}
	unsigned int st;

	if (!id_ok(id, r))
		return;
	st = weir_captures_stop(a, id, true, &out);

	reply_status(r, st, out, "", id);
}
