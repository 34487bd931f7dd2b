/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a new policy's ACL tries, built off the management loop.
 *
 * Building the tries is nearly all of a large policy's switch (1.3 s at
 * 16,384 rules on the shared VM); done on the management lcore it would
 * stop REST, telemetry, the stats and the hooks for that long. So the
 * management lcore hands a compiled policy to a job: a plain pthread (not
 * an EAL lcore: rte_acl_create, rte_acl_build and rte_malloc take locks
 * and need no lcore id) builds the tries and ends; the loop finds it done
 * at its next wake and calls the job's `done` there, where the switch
 * itself happens, with the loop's state as usual.
 *
 * One job at a time: while one runs, starting another is refused
 * (weir_compile_job_busy); callers say "try again" or wait for a wake.
 */
#ifndef WEIR_COMPILE_JOB_H
#define WEIR_COMPILE_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "app.h"

/* On the management lcore once np's tries are built (or failed: then np
 * stays on the first-match scan, logged, as before). np is the caller's
 * again; build_us is how long the tries took. */
typedef void weir_compile_done_fn(struct weir_app *a, struct weir_policy *np, uint64_t build_us,
				  void *arg);

/* Whether a job is running or waiting for its done. */
bool weir_compile_job_busy(const struct weir_app *a);

/* Build np's tries on a thread, then call done(a, np, arg) from
 * weir_compile_job_poll. Nothing may touch np meanwhile. 0, or -1 (busy,
 * or out of memory) and nothing started. Without a thread (pthread_create
 * failed) the tries are built here, and done still comes from the poll. */
int weir_compile_job_start(struct weir_app *a, struct weir_policy *np, weir_compile_done_fn *done,
			   void *arg);

/* Every management wake: a job that ended has its done called. */
void weir_compile_job_poll(struct weir_app *a);

/* Wait for the job, if any, and call its done (shutdown, or a caller
 * that needs the switch over before it goes on). */
void weir_compile_job_wait(struct weir_app *a);

#endif /* WEIR_COMPILE_JOB_H */
