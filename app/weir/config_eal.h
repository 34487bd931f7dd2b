/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the config's `eal` list checked (config_eal.c).
 */
#ifndef WEIR_APP_CONFIG_EAL_H
#define WEIR_APP_CONFIG_EAL_H

#include "config_loader.h"

/* The `eal` list (all strings): known options with values of their form,
 * no stray values. */
int cfg_check_eal(struct loader *ld, const config_setting_t *eal);

#endif /* WEIR_APP_CONFIG_EAL_H */
