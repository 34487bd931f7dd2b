/* SPDX-License-Identifier: BSD-3-Clause
 * weir: IPFIX export from the management lcore (ipfix_export.c,
 * docs/ipfix.md): a record per flow when it ends (the workers' flow-end
 * events) and for long flows every active timeout, to one collector over
 * UDP, with the templates resent periodically as RFC 7011 asks of UDP.
 */
#ifndef WEIR_IPFIX_EXPORT_H
#define WEIR_IPFIX_EXPORT_H

#include <jansson.h>

#include "app.h"

/* Open the socket (non-blocking; a collector that is down costs counted
 * send errors and nothing else). 0, or -1 with err. No-op without
 * export.ipfix. */
int weir_ipfix_init(struct weir_app *a, char *err, size_t errlen);
/* A worker's flow-end event (hooks.c hands every one over). */
void weir_ipfix_flow_end(struct weir_app *a, unsigned int worker, const struct weir_flow_event *ev);
/* Each management wake: templates when due, a slice of the active-timeout
 * scan, and the records gathered sent. */
void weir_ipfix_poll(struct weir_app *a);
/* At stop (workers stopped): every flow still in the tables is reported
 * (flowEndReason 4, forced end), with the flow-end events still queued. */
void weir_ipfix_flush(struct weir_app *a);
/* Counters for the stats (null without export). */
json_t *weir_ipfix_json(const struct weir_app *a);
void weir_ipfix_free(struct weir_app *a);

#endif /* WEIR_IPFIX_EXPORT_H */
