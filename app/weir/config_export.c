/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the config's capture = { ... } and export.ipfix = { ... } sections
 * (docs/capture.md, docs/ipfix.md).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_export.h"
#include "config_loader.h"

int
weir_collector_parse(const char *s, struct sockaddr_storage *ss, socklen_t *len, char *err,
		     size_t errlen)
{
	char host[128];
	const char *colon;
	char *end;
	long port;

	memset(ss, 0, sizeof(*ss));
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (close == NULL || close[1] != ':' || (size_t)(close - s - 1) >= sizeof(host))
			goto bad;
		memcpy(host, s + 1, (size_t)(close - s - 1));
		host[close - s - 1] = '\0';
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL || (size_t)(colon - s) >= sizeof(host))
			goto bad;
		memcpy(host, s, (size_t)(colon - s));
		host[colon - s] = '\0';
	}
	port = strtol(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end != '\0' || port < 1 || port > 65535)
		goto bad;
	if (inet_pton(AF_INET, host, &((struct sockaddr_in *)ss)->sin_addr) == 1) {
		((struct sockaddr_in *)ss)->sin_family = AF_INET;
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
		*len = sizeof(struct sockaddr_in);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)ss)->sin6_addr) == 1) {
		((struct sockaddr_in6 *)ss)->sin6_family = AF_INET6;
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
		*len = sizeof(struct sockaddr_in6);
		return 0;
	}
bad:
	snprintf(err, errlen, "'%s' is not ADDRESS:PORT (a numeric IPv4 address, or [IPv6]:PORT; "
		 "no names: resolving one could block the management lcore)", s);
	return -1;
}

int
cfg_load_capture(struct loader *ld, const config_setting_t *root, struct weir_config *cfg)
{
	static const char *const keys[] = { "dir", "max_bytes", "keep", "pool", "ring", "pdump",
					    NULL };
	const config_setting_t *g = cfg_group(ld, root, "capture", false);
	long long v;

	if (ld->failed || (g && cfg_check_keys(ld, g, keys) < 0))
		return -1;
	if (cfg_str(ld, g, "dir", "/var/tmp/weir-captures", cfg->capture_dir,
		    sizeof(cfg->capture_dir)) < 0)
		return -1;
	if (cfg_int(ld, g, "max_bytes", 64ll << 20, 1 << 16, 1ll << 32, &v) < 0)
		return -1;
	cfg->capture_max_bytes = (uint64_t)v;
	if (cfg_int(ld, g, "keep", 600, 1, 7 * 86400, &v) < 0)
		return -1;
	cfg->capture_keep_s = (uint32_t)v;
	if (cfg_int(ld, g, "pool", 2047, 63, 1 << 20, &v) < 0)
		return -1;
	cfg->capture_pool = (uint32_t)v;
	if (cfg_int(ld, g, "ring", 1024, 64, 1 << 16, &v) < 0)
		return -1;
	if ((v & (v - 1)) != 0)
		return cfg_fail(ld, config_setting_get_member(g, "ring"),
				"'capture.ring' must be a power of 2, not %lld", v);
	cfg->capture_ring = (uint32_t)v;
	return cfg_bool(ld, g, "pdump", false, &cfg->capture_pdump);
}

int
cfg_load_export(struct loader *ld, const config_setting_t *root, struct weir_config *cfg)
{
	static const char *const ekeys[] = { "ipfix", NULL };
	static const char *const keys[] = { "collector", "domain", "enterprise",
					    "template_interval", "active_timeout", NULL };
	const config_setting_t *e = cfg_group(ld, root, "export", false);
	const config_setting_t *g;
	struct sockaddr_storage ss;
	socklen_t len;
	long long v;
	char err[256];

	if (ld->failed || (e && cfg_check_keys(ld, e, ekeys) < 0))
		return -1;
	g = e != NULL ? cfg_group(ld, e, "ipfix", false) : NULL;
	if (ld->failed || (g && cfg_check_keys(ld, g, keys) < 0))
		return -1;
	if (g == NULL)
		return 0;
	cfg->ipfix = true;
	cfg->ipfix_line = config_setting_source_line(g);
	if (cfg_str(ld, g, "collector", NULL, cfg->ipfix_collector,
		    sizeof(cfg->ipfix_collector)) < 0)
		return -1;
	if (weir_collector_parse(cfg->ipfix_collector, &ss, &len, err, sizeof(err)) < 0)
		return cfg_fail(ld, config_setting_get_member(g, "collector"),
				"'export.ipfix.collector': %s", err);
	if (cfg_int(ld, g, "domain", 1, 0, UINT32_MAX, &v) < 0)
		return -1;
	cfg->ipfix_domain = (uint32_t)v;
	if (cfg_int(ld, g, "enterprise", 32473, 1, UINT32_MAX, &v) < 0)
		return -1;
	cfg->ipfix_pen = (uint32_t)v;
	if (cfg_int(ld, g, "template_interval", 60, 1, 3600, &v) < 0)
		return -1;
	cfg->ipfix_template_s = (uint32_t)v;
	if (cfg_int(ld, g, "active_timeout", 60, 1, 86400, &v) < 0)
		return -1;
	cfg->ipfix_active_s = (uint32_t)v;
	return 0;
}
