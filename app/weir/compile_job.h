/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a new policy compiled off the management loop.
 *
 * Compiling a large policy takes seconds (1.6 s at 16,384 rules on the
 * shared VM, nearly all of it the ACL tries' build); done on the management
 * lcore it would stop REST, telemetry, the stats and the hooks for that
 * long. So the management lcore hands the work to a job: a DPDK control
 * thread (a pthread, not an EAL lcore: rte_acl_create, rte_acl_build and
 * rte_malloc take their locks and need no lcore id; Lua runs there with a
 * clock of its own, policy_lua.h) runs `work` on what it was given and
 * nothing else, and ends; the loop finds it done at its next wake and calls `done` there,
 * where the result meets the appliance's state (the switch itself).
 *
 * One job at a time: while one runs, starting another is refused
 * (weir_compile_job_busy); callers say "try again" or wait for a wake.
 */
#ifndef WEIR_COMPILE_JOB_H
#define WEIR_COMPILE_JOB_H

#include <stdbool.h>

#include "app.h"

/* On the job's thread: may touch arg and what only arg reaches, never
 * the app (the loop runs on meanwhile). */
typedef void weir_compile_work_fn(void *arg);
/* On the management lcore, once work has returned. */
typedef void weir_compile_done_fn(struct weir_app *a, void *arg);

/* Whether a job is running or waiting for its done. */
bool weir_compile_job_busy(const struct weir_app *a);

/* Run work(arg) on a thread, then done(a, arg) from weir_compile_job_poll.
 * 0, or -1 (busy, or out of memory) and nothing started. Without a thread
 * (pthread_create failed) work runs here, and done still comes from the
 * poll, so callers see one order of events. */
int weir_compile_job_start(struct weir_app *a, weir_compile_work_fn *work,
			   weir_compile_done_fn *done, void *arg);

/* Every management wake: a job whose work ended has its done called. */
void weir_compile_job_poll(struct weir_app *a);

/* Wait for the job, if any, and call its done (shutdown, or a caller
 * that needs it over before it goes on). */
void weir_compile_job_wait(struct weir_app *a);

#endif /* WEIR_COMPILE_JOB_H */
