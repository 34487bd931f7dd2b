/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a collector's address as the config names it (config_export.c).
 */
#ifndef WEIR_CONFIG_EXPORT_H
#define WEIR_CONFIG_EXPORT_H

#include <stddef.h>
#include <sys/socket.h>

/* "ADDR:PORT" or "[ADDR6]:PORT", numeric only: 0, or -1 with err. */
int weir_collector_parse(const char *s, struct sockaddr_storage *ss, socklen_t *len, char *err,
			 size_t errlen);

#endif /* WEIR_CONFIG_EXPORT_H */
