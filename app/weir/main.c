/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the appliance's main: configuration, EAL, ports, lcore launch,
 * signals, and a clean shutdown that accounts for every mbuf.
 *
 * Usage: weir [EAL args] -- --config FILE [--stats-file FILE] [--check]
 * EAL args may also come from the config's `eal` list; without -l/-c/--lcores
 * weir derives the lcore list from the config's `lcores` group.
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include "app.h"
#include "mgmt.h"
#include "stats.h"
#include "rebalance.h"
#include "reload.h"
#include "captures.h"
#include "hooks.h"
#include "subs_live.h"
#include "ipfix_export.h"
#include "rest.h"
#include "telemetry.h"
#include "mbuf_meta.h"
#include "notify.h"
#include "worker_view.h"

static struct weir_app app;

static void
on_signal(int sig)
{
	if (sig == SIGHUP)
		app.reload = 1;         /* the management loop re-reads the policy */
	else
		app.quit = 1;
}

static void
usage(FILE *out, const char *prog)
{
	fprintf(out,
		"Usage: %s [EAL options] -- --config FILE [options]\n"
		"  --config FILE      libconfig file (see conf/weir.cfg)\n"
		"  --stats-file FILE  write JSON counters here every stats interval (overrides the config)\n"
		"  --check            validate the config file and exit\n"
		"  --version          print the version and exit\n", prog);
}

struct app_args {
	const char *config;
	const char *stats_file;
	bool check;
};

/* 0 = go on, 1 = exit 0 (help/version), -1 = usage error. */
static int
parse_app_args(int argc, char **argv, struct app_args *a)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "stats-file", required_argument, NULL, 's' },
		{ "check", no_argument, NULL, 'k' },
		{ "version", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': a->config = optarg; break;
		case 's': a->stats_file = optarg; break;
		case 'k': a->check = true; break;
		case 'v': printf("weir %s\n", WEIR_VERSION); return 1;
		case 'h': usage(stdout, argv[0]); return 1;
		default: usage(stderr, argv[0]); return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
		return -1;
	}
	if (a->config == NULL) {
		fprintf(stderr, "%s: --config FILE is required\n", argv[0]);
		usage(stderr, argv[0]);
		return -1;
	}
	return 0;
}

static bool
has_lcore_arg(char **args, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(args[i], "-c") == 0 ||
		    strncmp(args[i], "--lcores", 8) == 0 || strncmp(args[i], "-l", 2) == 0)
			return true;
	return false;
}

/* argv0, the config's eal list, the command line's EAL args, and the lcore
 * list from the config when neither set one. */
static int
build_eal_argv(const struct weir_config *cfg, char *argv0, char **cl, int ncl, char **out, int max,
	       char *lcores, size_t lcores_len, char *main_lcore, size_t main_len)
{
	int n = 0;

	out[n++] = argv0;
	for (int i = 0; i < cfg->n_eal_args && n < max; i++)
		out[n++] = cfg->eal_args[i];
	for (int i = 0; i < ncl && n < max; i++)
		out[n++] = cl[i];
	if (!has_lcore_arg(out + 1, n - 1) && n + 4 <= max) {
		size_t off = (size_t)snprintf(lcores, lcores_len, "%u", cfg->mgmt_lcore);
		for (unsigned int i = 0; i < cfg->n_workers && off < lcores_len; i++)
			off += (size_t)snprintf(lcores + off, lcores_len - off, ",%u", cfg->worker_lcores[i]);
		snprintf(main_lcore, main_len, "%u", cfg->mgmt_lcore);
		out[n++] = (char *)"-l";
		out[n++] = lcores;
		out[n++] = (char *)"--main-lcore";
		out[n++] = main_lcore;
	}
	out[n] = NULL;
	return n;
}

static int
start_workers(struct weir_app *a, char *err, size_t errlen)
{
	if (weir_captures_init(a, err, errlen) != 0)
		return -1;
	if (weir_hooks_init(a, err, errlen) != 0)
		return -1;
	if (a->cfg.policy != NULL)
		weir_policy_accelerate(a->cfg.policy, (int)rte_socket_id());
	if (subs_live_init(a, err, errlen) != 0)
		return -1;
	if (weir_rebalance_init(a) != 0) {
		snprintf(err, errlen, "cannot allocate the rate-sharing state for %u workers",
			 a->cfg.n_workers);
		return -1;
	}
	for (unsigned int i = 0; i < a->cfg.n_workers; i++) {
		unsigned int lc = a->cfg.worker_lcores[i];
		int socket = (int)rte_lcore_to_socket_id(lc);
		char name[32];
		struct weir_flow_table_conf fc = {
			.name = name,
			.capacity = a->cfg.flow_capacity,
			.socket_id = socket,
			.tsc_hz = rte_get_tsc_hz(),
			.timeouts = a->cfg.timeouts,
		};
		struct weir_worker_conf wc = {
			.port_id = { a->ports.id[WEIR_PORT_LAN], a->ports.id[WEIR_PORT_WAN] },
			.queue = (uint16_t)i,
			.burst = a->cfg.burst,
			.idle_sleep_us = a->cfg.idle_sleep_us,
			.cut_through = a->cfg.cut_through,
			.count_split = a->cfg.n_workers > 1,
			.malformed_pps = a->cfg.malformed_pps,
			.l3_control = a->cfg.l3_control,
			.l3_control_pps = a->cfg.l3_control_pps,
			.expire_budget = 64,
			.policy = a->cfg.policy,
			.share_box = a->share_box[i],
			.tcp_measure = a->cfg.tcp_measure,
		};

		weir_hooks_worker_conf(a, i, &wc);
		subs_live_worker_conf(a, i, &wc);
		weir_captures_worker_conf(a, i, &wc);

		struct weir_cbq *shaper[WEIR_PORT__COUNT] = { NULL, NULL };

		snprintf(name, sizeof(name), "weir_flows_%u", i);
		a->flows[i] = weir_flow_table_create(&fc);
		if (a->flows[i] == NULL) {
			snprintf(err, errlen, "%s: cannot allocate a flow table of %u flows for worker %u "
				 "(raise EAL memory, -m)", a->cfg.path, a->cfg.flow_capacity, i);
			return -1;
		}
		for (int dir = 0; dir < WEIR_PORT__COUNT; dir++) {
			if (a->cfg.policy == NULL || a->cfg.policy->tree[dir].n_classes == 0)
				continue;
			shaper[dir] = weir_app_shaper(&a->cfg, a->cfg.policy, dir, socket);
			if (shaper[dir] == NULL) {
				snprintf(err, errlen, "%s: cannot create the %s shaper for worker %u "
					 "(raise EAL memory, -m)", a->cfg.path,
					 dir == WEIR_PORT_LAN ? "outbound" : "inbound", i);
				weir_cbq_free(shaper[0]);
				return -1;
			}
		}
		if (a->cfg.policy != NULL && a->cfg.postack_acks > 0) {
			const struct weir_postack_conf pc = {
				.n_flows = a->cfg.flow_capacity,
				.n_acks = a->cfg.postack_acks,
				.ack_limit = a->cfg.postack_ack_limit,
				.idle_us = a->cfg.postack_idle_ms * 1000,
				.share_clamp = a->cfg.postack_clamp,
				.clamp_target_us = a->cfg.postack_clamp_target_ms * 1000,
				.clamp_margin16 = (uint32_t)(a->cfg.postack_clamp_margin * 65536.0 + 0.5),
				.mbuf_cap = a->cfg.postack_mbufs >= 0 ? (uint32_t)a->cfg.postack_mbufs :
					    a->cfg.mbufs / 8 / a->cfg.n_workers,
				.tsc_hz = rte_get_tsc_hz(),
				.socket_id = socket,
				.mp = a->mp,
			};

			wc.postack = weir_postack_create(&pc);
			if (wc.postack == NULL) {
				snprintf(err, errlen, "%s: cannot allocate %u PostACK records for worker %u "
					 "(raise EAL memory, -m, or lower shaping.postack.acks)",
					 a->cfg.path, a->cfg.postack_acks, i);
				weir_cbq_free(shaper[0]);
				weir_cbq_free(shaper[1]);
				return -1;
			}
		}
		wc.ipabr_no_sws_credit = !a->cfg.ipabr_sws_credit;
		wc.ipabr_headroom_us = a->cfg.ipabr_headroom_us;
		wc.pep_copies = weir_config_pep_copies(&a->cfg);
		wc.stop_drain_us = a->cfg.pep_drain_ms * 1000;
		wc.pep_wm_measured = a->cfg.pep_wm_measured;
		a->workers[i] = weir_worker_create(&wc, a->flows[i], shaper, socket);
		if (a->workers[i] == NULL) {
			snprintf(err, errlen, "cannot allocate worker %u", i);
			return -1;
		}
		a->n_workers = i + 1;
	}
	/* Before the workers run: their first flows' ends are exported. */
	if (weir_ipfix_init(a, err, errlen) != 0)
		return -1;
	for (unsigned int i = 0; i < a->n_workers; i++)
		rte_eal_remote_launch(weir_worker_main, a->workers[i], a->cfg.worker_lcores[i]);
	return 0;
}

static void
stop_workers(struct weir_app *a)
{
	for (unsigned int i = 0; i < a->n_workers; i++)
		weir_worker_stop(a->workers[i]);
	rte_eal_mp_wait_lcore();
}

int
main(int argc, char **argv)
{
	struct app_args args = { 0 };
	char err[WEIR_CONFIG_ERR_LEN];
	char *eal_argv[2 * WEIR_MAX_EAL_ARGS + 8];
	char lcores[512], main_lcore[16];
	int sep, n_eal, rc, status = EXIT_FAILURE;
	unsigned int leaked;

	/* EAL args before "--", the app's after; without "--" all are the app's. */
	for (sep = 1; sep < argc && strcmp(argv[sep], "--") != 0; sep++)
		;
	if (sep == argc)
		sep = 0;
	rc = parse_app_args(argc - sep, argv + sep, &args);
	if (rc != 0)
		return rc > 0 ? EXIT_SUCCESS : 2;

	/* Every config error is reported before EAL or any port is touched. */
	if (weir_config_load(args.config, &app.cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return EXIT_FAILURE;
	}
	if (args.stats_file != NULL)
		snprintf(app.cfg.stats_file, sizeof(app.cfg.stats_file), "%s", args.stats_file);
	if (args.check) {
		printf("%s: OK\n", args.config);
		weir_config_free(&app.cfg);
		return EXIT_SUCCESS;
	}

	n_eal = build_eal_argv(&app.cfg, argv[0], argv + 1, sep > 0 ? sep - 1 : 0, eal_argv,
			       (int)RTE_DIM(eal_argv) - 1, lcores, sizeof(lcores), main_lcore,
			       sizeof(main_lcore));
	if (rte_eal_init(n_eal, eal_argv) < 0) {
		fprintf(stderr, "weir: EAL initialisation failed: %s\n", rte_strerror(rte_errno));
		weir_config_free(&app.cfg);
		return EXIT_FAILURE;
	}
	rte_log_set_global_level((uint32_t)app.cfg.log_level);
	if (weir_config_check_eal(&app.cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		goto out_eal;
	}

	if (app.cfg.stats_file[0] != '\0') {
		/* The stats file's directory may live on a tmpfs like /run. */
		char dir[sizeof(app.cfg.stats_file)];

		snprintf(dir, sizeof(dir), "%s", app.cfg.stats_file);
		if (mkdir(dirname(dir), 0755) != 0 && errno != EEXIST)
			RTE_LOG(WARNING, USER1, "cannot create the directory of %s\n", app.cfg.stats_file);
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	/* A script or hook running when SIGTERM comes stops at its next check. */
	weir_lua_set_stop_flag(&app.quit);
	app.start_tsc = rte_rdtsc();
	/* Debug only (docs/management.md): a short wait makes every policy
	 * switch late, so tests reach that path with workers that run. */
	if (getenv("WEIR_DEBUG_SWITCH_WAIT_US") != NULL) {
		app.switch_wait_us = (uint32_t)strtoul(getenv("WEIR_DEBUG_SWITCH_WAIT_US"), NULL, 10);
		if (app.switch_wait_us == 0)
			app.switch_wait_us = 1;
		RTE_LOG(WARNING, USER1, "WEIR_DEBUG_SWITCH_WAIT_US: policy switches wait %u us for "
			"the workers (a debugging knob)\n", app.switch_wait_us);
	}

	app.mp = rte_pktmbuf_pool_create("weir_mbufs", app.cfg.mbufs, app.cfg.mbuf_cache,
					 WEIR_MBUF_PRIV_SIZE, RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
	if (app.mp == NULL) {
		fprintf(stderr, "%s:%d: cannot create a pool of %u mbufs: %s (raise EAL memory, -m)\n",
			app.cfg.path, app.cfg.mbufs_line, app.cfg.mbufs, rte_strerror(rte_errno));
		goto out_eal;
	}
	if (weir_ports_init(&app.cfg, app.mp, &app.ports, err, sizeof(err)) < 0 ||
	    start_workers(&app, err, sizeof(err)) < 0 ||
	    weir_rest_start(&app, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		goto out_ports;
	}
	weir_telemetry_init(&app);
	printf("weir %s: bridging %s (lan, port %u) <-> %s (wan, port %u) with %u worker(s)\n",
	       WEIR_VERSION, app.cfg.port[0].device, app.ports.id[0], app.cfg.port[1].device,
	       app.ports.id[1], app.n_workers);
	fflush(stdout);
	{
		char status[300];

		snprintf(status, sizeof(status), "bridging %.120s and %.120s with %u worker(s)",
			 app.cfg.port[0].device, app.cfg.port[1].device, app.n_workers);
		weir_notify_ready(status);
	}

	weir_mgmt_loop(&app);
	weir_notify_stopping();
	/* An HA box that stops must look gone to the routers at once, not
	 * once its queues have drained. */
	if (app.cfg.fail_closed)
		weir_ports_links_down(&app.ports, &app.cfg);

	stop_workers(&app);
	weir_reload_shutdown(&app);     /* a late switch ends here */
	weir_captures_free(&app);       /* files closed whole; the copies back in their pool */
	weir_ipfix_flush(&app);         /* flows still in the tables: their last records */
	for (unsigned int i = 0; i < app.n_workers; i++)
		weir_worker_flush_queues(app.workers[i]);       /* counted as dropped */
	printf("weir: stopping; final counters:\n");
	weir_stats_print(&app, stdout);
	weir_stats_write_file(&app);
	status = EXIT_SUCCESS;
out_ports:
	weir_telemetry_stop();
	weir_rest_stop(&app);
	stop_workers(&app);
	weir_captures_free(&app);       /* after a failed start: while the workers exist */
	weir_ports_close(&app.ports);
	if (app.mp != NULL) {
		/* With the ports closed every mbuf must be back in the pool. */
		leaked = rte_mempool_in_use_count(app.mp);
		printf("weir: mbufs in use after shutdown: %u of %u\n", leaked, app.mp->size);
		if (leaked != 0 && status == EXIT_SUCCESS)
			status = 3;
	}
	for (unsigned int i = 0; i < app.n_workers; i++) {
		weir_worker_free(app.workers[i]);
		weir_flow_table_free(app.flows[i]);
	}
	rte_mempool_free(app.mp);
	weir_ipfix_free(&app);
	weir_rebalance_free(&app);
	weir_hooks_free(&app);
	subs_live_fini(&app);
out_eal:
	/* The policy's ACL tries (32 rules or more) are EAL memory, and
	 * rte_acl_free takes EAL's tailq lock: freed while EAL is still up,
	 * or shutdown crashes (SIGSEGV) after every policy that had them. */
	weir_policy_free(app.cfg.policy);
	app.cfg.policy = NULL;
	rte_eal_cleanup();
	weir_config_free(&app.cfg);
	return status;
}
