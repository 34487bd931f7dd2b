/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the dashboard's files, embedded in the binary at build time
 * (embed.py --assets, from app/weir/dashboard/): served by the REST
 * listener under /dashboard/, nothing read from disk at run time.
 */
#ifndef WEIR_REST_ASSET_H
#define WEIR_REST_ASSET_H
#include <stddef.h>

struct weir_asset {
	const char *name;               /* file name: "index.html", "app.js" */
	const char *ctype;              /* Content-Type */
	const char *etag;               /* quoted: a prefix of the file's SHA-256 */
	const unsigned char *data;
	size_t len;
};

extern const struct weir_asset weir_dashboard_assets[];
extern const size_t weir_dashboard_assets_n;

#endif
