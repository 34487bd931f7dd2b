/* SPDX-License-Identifier: BSD-3-Clause
 * weir: helpers shared by the config file's section loaders (config_file.c,
 * config_eal.c, config_policy.c), defined in config_loader.c. Internal to
 * the appliance.
 *
 * Every getter reports its own error as "FILE:LINE: message" through
 * cfg_fail (the first error wins) and returns -1; an absent optional
 * setting leaves the default and returns 0.
 */
#ifndef WEIR_APP_CONFIG_LOADER_H
#define WEIR_APP_CONFIG_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libconfig.h>

#include "config.h"

struct loader {
	const char *path;
	char *err;
	size_t errlen;
	bool failed;
	bool token_soft;                /* weir_config_load_reload */
};

int cfg_fail(struct loader *ld, const config_setting_t *s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* "shaping.outbound.rate": a setting's dotted path, for messages. */
void cfg_path(const config_setting_t *s, const char *name, char *buf, size_t len);
/* Unknown keys are errors: a typo must not fall back to a default silently. */
int cfg_check_keys(struct loader *ld, const config_setting_t *grp, const char *const *allowed);
const config_setting_t *cfg_group(struct loader *ld, const config_setting_t *parent,
				  const char *name, bool required);
int cfg_int(struct loader *ld, const config_setting_t *grp, const char *name, long long def,
	    long long min, long long max, long long *out);
int cfg_float(struct loader *ld, const config_setting_t *grp, const char *name, double def,
	      double min, double max, double *out);
int cfg_bool(struct loader *ld, const config_setting_t *grp, const char *name, bool def, bool *out);
/* def NULL: required. */
int cfg_str(struct loader *ld, const config_setting_t *grp, const char *name, const char *def,
	    char *out, size_t outlen);

/* config_export.c: capture = { ... } and export.ipfix = { ... }. */
int cfg_load_capture(struct loader *ld, const config_setting_t *root, struct weir_config *cfg);
int cfg_load_export(struct loader *ld, const config_setting_t *root, struct weir_config *cfg);

#endif /* WEIR_APP_CONFIG_LOADER_H */
