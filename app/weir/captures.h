/* SPDX-License-Identifier: BSD-3-Clause
 * weir: packet captures run through the REST API (captures.c,
 * docs/capture.md). The workers copy the frames a capture's filter takes
 * onto their rings (lib/observe/capture.h); the management lcore drains the rings
 * at each wake and writes each capture's pcapng file with librte_pcapng,
 * with weir's verdict on each frame as its comment.
 */
#ifndef WEIR_CAPTURES_H
#define WEIR_CAPTURES_H

#include <jansson.h>

#include "app.h"

/* The copy pool and one ring per worker (before the workers are made:
 * weir_captures_worker_conf hands them over), the capture directory, and
 * rte_pdump with capture.pdump. 0, or -1 with err. */
int weir_captures_init(struct weir_app *a, char *err, size_t errlen);
void weir_captures_worker_conf(struct weir_app *a, unsigned int i, struct weir_worker_conf *wc);
/* Each management wake: drain the rings into the files, end captures at
 * their limits, free taps the workers no longer use, remove old files. */
void weir_captures_poll(struct weir_app *a);
/* At stop (workers stopped): end every capture, free everything. */
void weir_captures_free(struct weir_app *a);

/* The REST API's part. Each returns an HTTP status and sets *out (an
 * object, or {"error"...}'s message in msg). */
unsigned int weir_captures_start(struct weir_app *a, const json_t *req, json_t **out, char *msg,
				 size_t msglen);
json_t *weir_captures_list(struct weir_app *a);
unsigned int weir_captures_get(struct weir_app *a, const char *id, json_t **out);
unsigned int weir_captures_stop(struct weir_app *a, const char *id, bool remove, json_t **out);
/* The file of an ended capture: an open fd and its size, or a status. */
unsigned int weir_captures_file(struct weir_app *a, const char *id, int *fd, uint64_t *len,
				char *msg, size_t msglen);
/* Counters for the stats (null when captures are off). */
json_t *weir_captures_json(const struct weir_app *a);

#endif /* WEIR_CAPTURES_H */
