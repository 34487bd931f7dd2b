/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the config's policy sections (config_policy.c).
 */
#ifndef WEIR_APP_CONFIG_POLICY_H
#define WEIR_APP_CONFIG_POLICY_H

#include "config_loader.h"

/* The shaping trees and the classification rules. */
int cfg_load_policy(struct loader *ld, const config_setting_t *root, struct weir_config *cfg);

#endif /* WEIR_APP_CONFIG_POLICY_H */
