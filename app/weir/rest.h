/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the management REST API (/api/v1/...) and Prometheus metrics
 * (/metrics), served by libmicrohttpd on the management lcore.
 *
 * No server thread: the management loop waits on the server's sockets
 * (weir_rest_wait) and runs every request's handler itself, so handlers
 * read the appliance's state as the rest of the loop does, without locks.
 * They only read the workers' counters and flow tables, never call into
 * a worker.
 */
#ifndef WEIR_REST_H
#define WEIR_REST_H

#include <stddef.h>

#include "app.h"

/* Listen on management.listen:port (nothing when port is 0). 0, or -1
 * with err ("FILE:LINE: ..."). */
int weir_rest_start(struct weir_app *a, char *err, size_t errlen);

/* Wait `us` microseconds serving requests as they come (a plain sleep
 * without a server); returns early only when a->quit is set. */
void weir_rest_wait(struct weir_app *a, unsigned int us);

/* Close the server and every connection (no-op without one). */
void weir_rest_stop(struct weir_app *a);

#endif /* WEIR_REST_H */
