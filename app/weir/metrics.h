/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the counters in Prometheus' text exposition format (0.0.4).
 */
#ifndef WEIR_METRICS_H
#define WEIR_METRICS_H

#include <stddef.h>

#include "app.h"

/* The whole exposition, malloc'ed (the caller frees); NULL when out of
 * memory. *len gets its length. */
char *weir_metrics_text(const struct weir_app *a, size_t *len);

#endif /* WEIR_METRICS_H */
