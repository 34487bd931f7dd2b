/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the web dashboard's files (GET /dashboard/, /dashboard/FILE), from
 * the copies embedded at build time (rest_asset.h). The page is code, not
 * data: it is served without the bearer token, and everything it shows it
 * fetches from the API with the token the operator types in.
 *
 * Caching: each file's ETag is its hash, and Cache-Control: no-cache makes
 * a browser ask again at every load and get a bodiless 304 while weir runs
 * the same files; a new binary's files are seen at once. A 304 costs the
 * management lcore a string compare.
 */
#include "rest_int.h"
#include "rest_asset.h"

/* Not this page's business: frames, other sites, inline scripts. The page
 * loads only its own files and talks only to the API that served it. */
#define DASHBOARD_CSP "default-src 'none'; script-src 'self'; style-src 'self'; " \
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; " \
	"frame-ancestors 'none'"

bool
dashboard_path(const char *url)
{
	return strcmp(url, "/dashboard") == 0 || strncmp(url, "/dashboard/", 11) == 0;
}

static const struct weir_asset *
asset_find(const char *name)
{
	if (name[0] == '\0')
		name = "index.html";
	for (size_t i = 0; i < weir_dashboard_assets_n; i++)
		if (strcmp(weir_dashboard_assets[i].name, name) == 0)
			return &weir_dashboard_assets[i];
	return NULL;
}

/* If-None-Match names the file's ETag (one of a list, or *). */
static bool
not_modified(struct MHD_Connection *c, const char *etag)
{
	const char *inm = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						      MHD_HTTP_HEADER_IF_NONE_MATCH);
	size_t el = strlen(etag);

	if (inm == NULL)
		return false;
	for (const char *p = inm; *p != '\0'; ) {
		p += strspn(p, " ,\t");
		if (strncmp(p, "W/", 2) == 0)
			p += 2;
		if (*p == '*' || (strncmp(p, etag, el) == 0 && (p[el] == '\0' || p[el] == ',' ||
							      p[el] == ' ' || p[el] == '\t')))
			return true;
		p += strcspn(p, ",");
	}
	return false;
}

void
h_dashboard(struct weir_app *a, struct MHD_Connection *c, struct rest_req *rq, struct rest_reply *r)
{
	const struct weir_asset *f = asset_find(rq->sub);

	if (f == NULL) {
		rest_reply_error(r, MHD_HTTP_NOT_FOUND, "no such file of the dashboard: %s", rq->sub);
		return;
	}
	r->etag = f->etag;
	r->cache_control = "no-cache";
	r->ctype = f->ctype;
	r->csp = DASHBOARD_CSP;
	if (not_modified(c, f->etag)) {
		r->status = MHD_HTTP_NOT_MODIFIED;
		r->persistent = "";
		r->persistent_len = 0;
		return;
	}
	r->status = MHD_HTTP_OK;
	r->persistent = (const char *)f->data;
	r->persistent_len = f->len;
}
