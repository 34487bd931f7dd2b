/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a new policy's ACL tries, built on a thread of their own while the
 * management loop goes on (compile_job.h says why).
 *
 * A thread per job, not a resident one: a switch is rare, creating a
 * thread costs microseconds against the build's milliseconds to seconds,
 * and a thread that exists only while it has work needs no queue, no
 * condition variable and no wake-up at shutdown: waiting is pthread_join.
 * The policy is handed over whole: the loop does not touch it until the
 * job has ended, and the job touches nothing else.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_log.h>

#include "compile_job.h"
#include "reload.h"

struct weir_compile_job {
	pthread_t thread;
	bool joinable;                  /* false: built inline, no thread to join */
	atomic_bool ended;              /* set by the job once np is built */
	struct weir_policy *np;
	int socket;                     /* the management lcore's: where the workers' tries go */
	uint64_t build_us;
	weir_compile_done_fn *done;
	void *arg;
};

static void
build(struct weir_compile_job *j)
{
	uint64_t t0 = rte_rdtsc();

	weir_policy_accelerate(j->np, j->socket);
	j->build_us = (rte_rdtsc() - t0) * 1000000 / rte_get_tsc_hz();
	/* Release: the loop that sees ended sees the tries too. */
	atomic_store_explicit(&j->ended, true, memory_order_release);
}

static void *
job_main(void *arg)
{
	build(arg);
	return NULL;
}

bool
weir_compile_job_busy(const struct weir_app *a)
{
	return a->compile_job != NULL;
}

int
weir_compile_job_start(struct weir_app *a, struct weir_policy *np, weir_compile_done_fn *done,
		       void *arg)
{
	struct weir_compile_job *j;
	sigset_t all, old;

	if (a->compile_job != NULL)
		return -1;
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return -1;
	j->np = np;
	j->socket = (int)rte_socket_id();
	j->done = done;
	j->arg = arg;
	atomic_init(&j->ended, false);
	/* The thread blocks every signal (it inherits the mask): SIGTERM and
	 * SIGHUP must interrupt the management loop's wait, not the build. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	j->joinable = pthread_create(&j->thread, NULL, job_main, j) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (j->joinable) {
		pthread_setname_np(j->thread, "weir-compile");
	} else {
		/* No thread: the old way, on the loop; done still comes from
		 * the poll, so callers see one order of events. */
		RTE_LOG(WARNING, USER1, "cannot start a thread for the ACL build: it runs on the "
			"management lcore\n");
		build(j);
	}
	a->compile_job = j;
	return 0;
}

static void
finish(struct weir_app *a, struct weir_compile_job *j)
{
	if (j->joinable)
		pthread_join(j->thread, NULL);
	/* Cleared before done: done may start the next job. */
	a->compile_job = NULL;
	j->done(a, j->np, j->build_us, j->arg);
	free(j);
}

void
weir_compile_job_poll(struct weir_app *a)
{
	struct weir_compile_job *j = a->compile_job;

	if (j != NULL && atomic_load_explicit(&j->ended, memory_order_acquire))
		finish(a, j);
}

void
weir_compile_job_wait(struct weir_app *a)
{
	if (a->compile_job != NULL)
		finish(a, a->compile_job);
}
