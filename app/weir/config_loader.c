/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the getters the config file's section loaders share (config_file.c,
 * config_eal.c, config_policy.c; config_loader.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libconfig.h>

#include "config_loader.h"

int
cfg_fail(struct loader *ld, const config_setting_t *s, const char *fmt, ...)
{
	const char *file = ld->path;
	int line = 0;
	int off;
	va_list ap;

	if (ld->failed)
		return -1;
	if (s != NULL) {
		line = config_setting_source_line(s);
		if (config_setting_source_file(s) != NULL)
			file = config_setting_source_file(s);
	}
	off = snprintf(ld->err, ld->errlen, "%s:%d: ", file, line);
	if (off > 0 && (size_t)off < ld->errlen) {
		va_start(ap, fmt);
		vsnprintf(ld->err + off, ld->errlen - off, fmt, ap);
		va_end(ap);
	}
	ld->failed = true;
	return -1;
}

/* "flows.timeouts.udp" for messages: a setting's dotted path from the root. */
void
cfg_path(const config_setting_t *s, const char *name, char *buf, size_t len)
{
	const char *parts[16];
	int n = 0;
	size_t off = 0;

	for (const config_setting_t *p = s; p != NULL && n < 16; p = config_setting_parent(p))
		if (config_setting_name(p) != NULL)
			parts[n++] = config_setting_name(p);
	buf[0] = '\0';
	while (n-- > 0 && off < len)
		off += snprintf(buf + off, len - off, "%s.", parts[n]);
	if (off < len)
		snprintf(buf + off, len - off, "%s", name);
}

/* Reject settings the loader does not know: a typo must not silently fall
 * back to a default on a production box. */
int
cfg_check_keys(struct loader *ld, const config_setting_t *grp, const char *const *allowed)
{
	for (int i = 0; i < config_setting_length(grp); i++) {
		const config_setting_t *s = config_setting_get_elem(grp, i);
		const char *name = config_setting_name(s);
		bool ok = false;
		char full[256];

		for (const char *const *a = allowed; *a != NULL; a++)
			ok |= strcmp(*a, name) == 0;
		if (!ok) {
			cfg_path(grp, name, full, sizeof(full));
			return cfg_fail(ld, s, "unknown setting '%s'", full);
		}
	}
	return 0;
}

const config_setting_t *
cfg_group(struct loader *ld, const config_setting_t *parent, const char *name, bool required)
{
	const config_setting_t *g = config_setting_get_member(parent, name);
	char full[256];

	cfg_path(parent, name, full, sizeof(full));
	if (g == NULL) {
		if (required)
			cfg_fail(ld, parent, "missing group '%s'", full);
		return NULL;
	}
	if (!config_setting_is_group(g)) {
		cfg_fail(ld, g, "'%s' must be a group { ... }", full);
		return NULL;
	}
	return g;
}

int
cfg_int(struct loader *ld, const config_setting_t *grp, const char *name, long long def,
	long long min, long long max, long long *out)
{
	const config_setting_t *s = grp ? config_setting_get_member(grp, name) : NULL;
	char full[256];

	*out = def;
	if (s == NULL)
		return 0;
	cfg_path(grp, name, full, sizeof(full));
	if (config_setting_type(s) != CONFIG_TYPE_INT && config_setting_type(s) != CONFIG_TYPE_INT64)
		return cfg_fail(ld, s, "'%s' must be an integer", full);
	*out = config_setting_get_int64(s);
	if (*out < min || *out > max)
		return cfg_fail(ld, s, "'%s' is %lld; it must be between %lld and %lld", full, *out, min, max);
	return 0;
}

int
cfg_float(struct loader *ld, const config_setting_t *grp, const char *name, double def,
	  double min, double max, double *out)
{
	const config_setting_t *s = grp ? config_setting_get_member(grp, name) : NULL;
	char full[256];

	*out = def;
	if (s == NULL)
		return 0;
	cfg_path(grp, name, full, sizeof(full));
	if (config_setting_type(s) == CONFIG_TYPE_FLOAT)
		*out = config_setting_get_float(s);
	else if (config_setting_type(s) == CONFIG_TYPE_INT || config_setting_type(s) == CONFIG_TYPE_INT64)
		*out = (double)config_setting_get_int64(s);
	else
		return cfg_fail(ld, s, "'%s' must be a number", full);
	if (!(*out >= min && *out <= max))
		return cfg_fail(ld, s, "'%s' is %g; it must be between %g and %g", full, *out, min, max);
	return 0;
}

int
cfg_bool(struct loader *ld, const config_setting_t *grp, const char *name, bool def, bool *out)
{
	const config_setting_t *s = grp ? config_setting_get_member(grp, name) : NULL;
	char full[256];

	*out = def;
	if (s == NULL)
		return 0;
	cfg_path(grp, name, full, sizeof(full));
	if (config_setting_type(s) != CONFIG_TYPE_BOOL)
		return cfg_fail(ld, s, "'%s' must be true or false", full);
	*out = config_setting_get_bool(s);
	return 0;
}

/* String into a fixed buffer; `def` NULL means required. */
int
cfg_str(struct loader *ld, const config_setting_t *grp, const char *name, const char *def,
	char *out, size_t outlen)
{
	const config_setting_t *s = grp ? config_setting_get_member(grp, name) : NULL;
	char full[256];
	const char *v;

	cfg_path(grp, name, full, sizeof(full));
	if (s == NULL) {
		if (def == NULL)
			return cfg_fail(ld, grp, "missing setting '%s'", full);
		snprintf(out, outlen, "%s", def);
		return 0;
	}
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return cfg_fail(ld, s, "'%s' must be a string", full);
	v = config_setting_get_string(s);
	if (strlen(v) >= outlen)
		return cfg_fail(ld, s, "'%s' is longer than %zu characters", full, outlen - 1);
	snprintf(out, outlen, "%s", v);
	return 0;
}
