/* SPDX-License-Identifier: BSD-3-Clause
 * weir: installing a policy script through the REST API (PUT policy, POST
 * policy/rollback): the file written beside the old one and renamed, the
 * policy switch started on the compile job (install start) and its answer
 * made when it ends (install end).
 */
#include "rest_int.h"

/* ---- PUT /api/v1/policy, POST /api/v1/policy/rollback ---- */

/* The whole file, or NULL (missing, unreadable, or over REST_UPLOAD_MAX). */
char *
rest_file_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;

	if (f == NULL)
		return NULL;
	buf = malloc(REST_UPLOAD_MAX + 1);
	*len = buf != NULL ? fread(buf, 1, REST_UPLOAD_MAX + 1, f) : 0;
	if (ferror(f) || *len > REST_UPLOAD_MAX) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* data in a new file next to path, with mode, flushed to disk: its name
 * is made by mkstemp, which creates it with O_EXCL, so no existing file or
 * planted symlink is ever written through. 0 with the name in out, or -1
 * with errno and nothing left behind. */
int
rest_temp_write(const char *path, const char *data, size_t len, mode_t mode, char *out,
	   size_t outlen)
{
	size_t off = 0;
	int fd, e;

	if (snprintf(out, outlen, "%s.upload.XXXXXX", path) >= (int)outlen) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = mkostemp(out, O_CLOEXEC);
	if (fd < 0)
		return -1;
	while (off < len) {
		ssize_t n = write(fd, data + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		off += (size_t)n;
	}
	if (fchmod(fd, mode) != 0 || fsync(fd) != 0)
		goto fail;
	if (close(fd) != 0) {
		e = errno;
		unlink(out);
		errno = e;
		return -1;
	}
	return 0;
fail:
	e = errno;
	close(fd);
	unlink(out);
	errno = e;
	return -1;
}

/* Make the renames in path's directory durable: without it a power cut
 * after the reply can bring the old name back. */
void
rest_dir_sync(const char *path)
{
	char d[sizeof(((struct weir_config *)0)->policy_script)];
	int fd;

	snprintf(d, sizeof(d), "%s", path);
	fd = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) != 0)
		RTE_LOG(WARNING, USER1, "rest: cannot sync the directory of %s: %s\n", path,
			strerror(errno));
	if (fd >= 0)
		close(fd);
}

static unsigned int
write_status(int e)
{
	return e == ENOSPC || e == EDQUOT ? MHD_HTTP_INSUFFICIENT_STORAGE
					  : MHD_HTTP_INTERNAL_SERVER_ERROR;
}

/* Every "from" in s becomes "to" (the validation ran on a temp file; the
 * administrator knows the script by its own name). */
static void
str_replace_all(char *s, size_t size, const char *from, const char *to)
{
	char out[1024];
	size_t fl = strlen(from), o = 0;

	for (const char *p = s; *p != '\0' && o + 1 < sizeof(out);) {
		if (strncmp(p, from, fl) == 0) {
			o += (size_t)snprintf(out + o, sizeof(out) - o, "%s", to);
			p += fl;
		} else {
			out[o++] = *p++;
		}
	}
	o = RTE_MIN(o, RTE_MIN(sizeof(out), size) - 1);
	memcpy(s, out, o);
	s[o] = '\0';
}

void
rest_reply_policy_error(struct weir_app *a, struct rest_reply *r, unsigned int status, const char *msg)
{
	rest_reply_error(r, status, "%s", msg);
	json_object_set_new(json_object_get(r->json, "error"), "epoch",
			    json_integer(a->cfg.policy ? a->cfg.policy->epoch : 0));
}

/* An upload between the script's rename and the end of its switch. */
struct install {
	char path[sizeof(((struct weir_config *)0)->policy_script)];
	char keep[sizeof(((struct weir_config *)0)->policy_script) + 16];
	char prev[sizeof(((struct weir_config *)0)->policy_script) + 16];
	char *old;                      /* the replaced text: the next rollback's */
	size_t old_len;
	/* A rollback's text, taken from a->rest->prev: freed if the switch
	 * is done, put back if not. NULL for a PUT. */
	char *held;
};

static void install_done(struct weir_app *a, int rc, void *arg);
static int script_install_end(struct weir_app *a, struct install *in, int rc, struct rest_reply *r);

/* Put text in place of the policy script and switch to it: checked in the
 * sandbox first (nothing changes if it fails), then renamed over the
 * script, then reloaded so the workers, the hooks' engine and the file
 * agree. The replaced file stays linked as PATH.keep until the switch is
 * done, so putting it back is a rename, which needs no disk space; it then
 * becomes PATH.prev, and its text the one rollback restores. 0, or -1 with
 * r made; or 1: the switch is under way, the connection is suspended and
 * the answer is made when it ends (script_install_end), which then also
 * frees or puts back held (a rollback's text; the caller's otherwise). */
static int
script_install(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, const char *text,
	       size_t len, char *held, struct rest_reply *r)
{
	const char *path = a->cfg.policy_script;
	const struct weir_policy_lua_limits lim = weir_config_lua_limits(&a->cfg);
	char tmp[sizeof(a->cfg.policy_script) + 16];
	char err[sizeof(a->reload_error)];
	struct weir_lua *l;
	struct weir_policy *np = NULL;
	struct install *in;
	struct stat st;
	mode_t mode = 0644;
	int e, rc;

	in = calloc(1, sizeof(*in));
	if (in == NULL) {
		rest_reply_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return -1;
	}
	snprintf(in->path, sizeof(in->path), "%s", path);
	snprintf(in->prev, sizeof(in->prev), "%s.prev", path);
	snprintf(in->keep, sizeof(in->keep), "%s.keep", path);
	if (stat(path, &st) == 0)
		mode = st.st_mode & 0777;
	if (rest_temp_write(path, text, len, mode, tmp, sizeof(tmp)) != 0) {
		e = errno;
		rest_reply_error(r, write_status(e), "cannot write the upload next to %s: %s", path,
			    strerror(e));
		free(in);
		return -1;
	}
	l = weir_lua_open(tmp, &lim, err, sizeof(err));
	if (l != NULL)
		np = weir_lua_compile(l, 0, err, sizeof(err));
	weir_policy_free(np);
	weir_lua_close(l);
	if (np == NULL) {
		unlink(tmp);
		str_replace_all(err, sizeof(err), tmp, path);
		rest_reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, err);
		free(in);
		return -1;
	}
	in->old = rest_file_read(path, &in->old_len);
	unlink(in->keep);               /* left by a crash, or planted: never written */
	if (in->old == NULL || link(path, in->keep) != 0 || rename(tmp, path) != 0) {
		e = in->old == NULL ? EIO : errno;
		rest_reply_error(r, write_status(e), "cannot replace %s: %s", path,
			    in->old == NULL ? "cannot read it" : strerror(e));
		unlink(tmp);
		unlink(in->keep);
		free(in->old);
		free(in);
		return -1;
	}
	rest_dir_sync(path);
	rc = weir_mgmt_reload_start(a, install_done, rq);
	if (rc > 0) {
		in->held = held;
		rq->inst = in;
		rest_req_suspend(c, rq);
		return 1;
	}
	return script_install_end(a, in, rc, r);
}

/* The switch of an upload ended (rc as weir_mgmt_reload): keep the new
 * file, or put the old one back; make r. Frees in. 0, or -1. */
static int
script_install_end(struct weir_app *a, struct install *in, int rc, struct rest_reply *r)
{
	char both[sizeof(a->reload_error) + 2 * sizeof(in->keep) + 256];
	const char *path = in->path;
	int e;

	if (rc != 0) {
		/* The script is fine but the switch is not (a change that needs a
		 * restart, or the config file's own error): the old file goes back. */
		if (rename(in->keep, path) == 0) {
			rest_dir_sync(path);
			rest_reply_policy_error(a, r, MHD_HTTP_UNPROCESSABLE_CONTENT, a->reload_error);
		} else {
			/* The rejected script must not be what the next reload or
			 * restart runs: better no script (which fails loudly). */
			e = errno;
			unlink(path);
			rest_dir_sync(path);
			RTE_LOG(ERR, USER1, "rest: cannot put %s back (%s); removed the rejected "
				"upload\n", path, strerror(e));
			if (snprintf(both, sizeof(both), "%s; and the previous script could not be "
				     "put back (%s: %s), so %s was removed: the running policy is "
				     "unchanged, but restore the file (from %s) before the next "
				     "reload or restart", a->reload_error, in->keep, strerror(e), path,
				     in->keep) >= (int)sizeof(both))
				RTE_LOG(ERR, USER1, "rest: %s\n", both);       /* cut in the reply */
			rest_reply_policy_error(a, r, MHD_HTTP_INTERNAL_SERVER_ERROR, both);
		}
		free(in->old);
		if (in->held != NULL)
			a->rest->prev = in->held;
		free(in);
		return -1;
	}
	if (rename(in->keep, in->prev) != 0)
		RTE_LOG(WARNING, USER1, "rest: cannot write %s: %s\n", in->prev, strerror(errno));
	rest_dir_sync(path);
	free(a->rest->prev);
	a->rest->prev = in->old;
	a->rest->prev_len = in->old_len;
	free(in->held);
	rest_reply_json(r, json_pack("{s:I, s:o, s:o, s:I}",
		"epoch", (json_int_t)a->cfg.policy->epoch, "script", weir_json_text(path),
		"previous", weir_json_text(in->prev),
		"reloads", (json_int_t)a->reloads));
	free(in);
	return 0;
}

/* The switch of an upload or rollback a request started has ended. */
static void
install_done(struct weir_app *a, int rc, void *arg)
{
	struct rest_req *rq = arg;
	struct install *in = rq->inst;

	rq->inst = NULL;
	script_install_end(a, in, rc, &rq->answer);
	rest_req_resume(rq);
}

static bool
script_configured(struct weir_app *a, struct rest_reply *r)
{
	if (a->cfg.policy_script[0] != '\0')
		return true;
	rest_reply_error(r, MHD_HTTP_CONFLICT, "the policy comes from %s's shaping and rules, not a "
		    "script: uploads need policy = { script = \"FILE\"; } in the config", a->cfg.path);
	return false;
}

bool
rest_ctype_is(const char *ct, const char *want)
{
	size_t n = strlen(want);

	return ct != NULL && strncasecmp(ct, want, n) == 0 &&
	       (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

void
rest_h_policy_put(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						      MHD_HTTP_HEADER_CONTENT_TYPE);

	if (!script_configured(a, r))
		return;
	if (!rest_ctype_is(ct, "text/x-lua") && !rest_ctype_is(ct, "text/plain")) {
		rest_reply_error(r, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
			    "the body must be a Lua script (text/x-lua or text/plain)");
		return;
	}
	if (rq->len == 0) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "the body must be a Lua script, not empty");
		return;
	}
	if (rest_switch_busy(a, r))
		return;
	script_install(a, c, rq, rq->body, rq->len, NULL, r);
}

void
rest_h_policy_rollback(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq,
		  struct rest_reply *r)
{
	char *text = a->rest->prev;
	int rc;

	if (!script_configured(a, r))
		return;
	/* First: a rollback under way holds the text (prev is NULL). */
	if (rest_switch_busy(a, r))
		return;
	if (text == NULL) {
		rest_reply_error(r, MHD_HTTP_CONFLICT, "no previous script to roll back to: none was "
			    "uploaded since weir started");
		return;
	}
	if (rq->len != 0) {
		rest_reply_error(r, MHD_HTTP_BAD_REQUEST, "rollback takes no body");
		return;
	}
	/* Held here while installing: a success makes the replaced text the
	 * next rollback's, so two rollbacks toggle. Under way (1), the
	 * install's end frees or puts it back. */
	a->rest->prev = NULL;
	rc = script_install(a, c, rq, text, a->rest->prev_len, text, r);
	if (rc == 0)
		free(text);
	else if (rc < 0)
		a->rest->prev = text;
}
