/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the management lcore's loop. It is the only caller of the parts
 * below it (REST, reload, rebalance, hooks, stats, telemetry), which do
 * not import one another in a circle: they read the snapshot (stats.h)
 * and the workers (worker_view.h), and are called from here. A reload and
 * a hook's set_class both end in a switch (switchover.h), which calls
 * neither.
 */
#include <rte_cycles.h>
#include <rte_log.h>

#include "mgmt.h"
#include "compile_job.h"
#include "notify.h"
#include "captures.h"
#include "hooks.h"
#include "ipfix_export.h"
#include "rebalance.h"
#include "reload.h"
#include "rest.h"
#include "stats.h"
#include "telemetry.h"

void
weir_mgmt_loop(struct weir_app *app)
{
	uint64_t hz = rte_get_tsc_hz();
	uint64_t period = (uint64_t)(app->cfg.stats_interval * (double)hz);
	uint64_t next = rte_rdtsc() + period;

	while (!app->quit) {
		/* The management lcore is not a poller: it wakes every 10 ms,
		 * which bounds the latency of signals, and serves REST requests
		 * as they come in between. */
		weir_rest_wait(app, 10000);
		/* Here, not on a timer: only a loop that still turns proves
		 * the management lcore is alive. */
		weir_notify_watchdog(rte_rdtsc() / (hz / 1000000));
		/* A SIGHUP during a switch waits for it to end: one at a time. */
		if (app->reload && !weir_compile_job_busy(app)) {
			app->reload = 0;
			(void)weir_mgmt_reload_start(app, NULL, NULL);
		}
		weir_compile_job_poll(app);     /* a switch whose compile ended */
		weir_reload_retire(app);        /* after a late switch */
		weir_rebalance(app);
		weir_hooks_poll(app);           /* flow-end events reach the export here */
		weir_ipfix_poll(app);
		weir_captures_poll(app);
		if (rte_rdtsc() < next)
			continue;
		next += period;
		weir_hooks_stats(app);
		if (weir_stats_write_file(app) != 0)
			RTE_LOG(WARNING, USER1, "cannot write stats file %s\n", app->cfg.stats_file);
		weir_telemetry_publish(app);
		if (app->cfg.stats_print)
			weir_stats_print(app, stdout);
	}
	/* A switch under way ends (its request resumed with the answer) while
	 * the workers still run: MHD must not stop with a connection suspended. */
	weir_compile_job_wait(app);
}
