/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a policy compiled on a thread of its own while the management
 * loop goes on (compile_job.h says why).
 *
 * A thread per job, not a resident one: a switch is rare, creating a
 * thread costs microseconds against the compile's milliseconds to seconds,
 * and a thread that exists only while it has work needs no queue, no
 * condition variable and no wake-up at shutdown: waiting is pthread_join.
 * The work's input and output are handed over whole (arg): the loop does
 * not touch them until the job has ended, and the job touches nothing else.
 */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <rte_lcore.h>
#include <rte_log.h>

#include "compile_job.h"
#include "policy_lua.h"

struct weir_compile_job {
	pthread_t thread;
	bool joinable;                  /* false: worked inline, no thread to join */
	atomic_bool ended;              /* set by the job once work returned */
	weir_compile_work_fn *work;
	weir_compile_done_fn *done;
	void *arg;
};

static void *
job_main(void *arg)
{
	struct weir_compile_job *j = arg;

	/* Beside the management lcore's hooks: scripts here keep their own
	 * time limit. */
	weir_lua_thread_own_clock();
	j->work(j->arg);
	/* What the work freed sits in this thread's malloc arena, which glibc
	 * keeps for the next thread (~20 MB of RSS more than before the job
	 * existed, at 16,384 rules): given back here, off the loop (~1 ms). */
	malloc_trim(0);
	/* Release: the loop that sees ended sees the work's results too. */
	atomic_store_explicit(&j->ended, true, memory_order_release);
	return NULL;
}

bool
weir_compile_job_busy(const struct weir_app *a)
{
	return a->compile_job != NULL;
}

int
weir_compile_job_start(struct weir_app *a, weir_compile_work_fn *work, weir_compile_done_fn *done,
		       void *arg)
{
	struct weir_compile_job *j;
	sigset_t all, old;

	if (a->compile_job != NULL)
		return -1;
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return -1;
	j->work = work;
	j->done = done;
	j->arg = arg;
	atomic_init(&j->ended, false);
	/* The thread blocks every signal (it inherits the mask): SIGTERM and
	 * SIGHUP must interrupt the management loop's wait, not the job. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* A DPDK control thread: a plain pthread on the cores EAL was given
	 * but no lcore uses (the main lcore's where there are none), so the
	 * job takes time from neither the workers nor, where it can, the
	 * management lcore. */
	j->joinable = rte_ctrl_thread_create(&j->thread, "weir-compile", NULL, job_main, j) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!j->joinable) {
		/* No thread: the old way, on the loop. */
		RTE_LOG(WARNING, USER1, "cannot start a thread to compile the policy: it is "
			"compiled on the management lcore\n");
		work(arg);
		atomic_store(&j->ended, true);
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
	j->done(a, j->arg);
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
