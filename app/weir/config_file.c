/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the config file's top level (weir_config_load and the API of
 * config.h): which sections load in which order, and the sections of its
 * own (lcores, ports, sizes, flows, stats, management), the mbuf budget
 * and the @include checks. The other sections load in
 * config_eal.c, config_policy.c and config_export.c, with the getters of
 * config_loader.h; all of them fill struct weir_config (config.h).
 */
#include <errno.h>
#include <libgen.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <libconfig.h>
#include <rte_lcore.h>
#include <rte_log.h>

#include "config.h"
#include "config_loader.h"
#include "config_eal.h"
#include "config_policy.h"

static const struct {
	const char *name;
	int level;
} log_levels[] = {
	{ "emerg", RTE_LOG_EMERG }, { "alert", RTE_LOG_ALERT }, { "crit", RTE_LOG_CRIT },
	{ "error", RTE_LOG_ERR }, { "warning", RTE_LOG_WARNING }, { "notice", RTE_LOG_NOTICE },
	{ "info", RTE_LOG_INFO }, { "debug", RTE_LOG_DEBUG },
};

static int
load_top(struct loader *ld, const config_setting_t *root, struct weir_config *cfg)
{
	static const char *const keys[] = { "eal", "log_level", "lcores", "ports", "mempool",
					    "rings", "worker", "flows", "shaping", "rules",
					    "policy", "stats", "management", "capture", "export",
					    "subscribers",
					    NULL };
	const config_setting_t *eal = config_setting_get_member(root, "eal");
	char level[16];

	if (cfg_check_keys(ld, root, keys) < 0)
		return -1;
	if (eal != NULL) {
		if (!config_setting_is_array(eal) && !config_setting_is_list(eal))
			return cfg_fail(ld, eal, "'eal' must be a list of strings, e.g. [\"--no-huge\"]");
		for (int i = 0; i < config_setting_length(eal); i++) {
			const config_setting_t *a = config_setting_get_elem(eal, i);

			if (config_setting_type(a) != CONFIG_TYPE_STRING)
				return cfg_fail(ld, a, "'eal' item %d must be a string", i + 1);
			if (cfg->n_eal_args >= WEIR_MAX_EAL_ARGS)
				return cfg_fail(ld, a, "'eal' has more than %d arguments", WEIR_MAX_EAL_ARGS);
			cfg->eal_args[cfg->n_eal_args++] = strdup(config_setting_get_string(a));
		}
		if (cfg_check_eal(ld, eal) < 0)
			return -1;
	}
	if (cfg_str(ld, root, "log_level", "notice", level, sizeof(level)) < 0)
		return -1;
	cfg->log_level = -1;
	for (size_t i = 0; i < RTE_DIM(log_levels); i++)
		if (strcasecmp(level, log_levels[i].name) == 0)
			cfg->log_level = log_levels[i].level;
	if (cfg->log_level < 0)
		return cfg_fail(ld, config_setting_get_member(root, "log_level"),
			       "'log_level' is \"%s\"; use one of emerg, alert, crit, error, warning, "
			       "notice, info, debug", level);
	return 0;
}

static int
load_lcores(struct loader *ld, const config_setting_t *root, struct weir_config *cfg)
{
	static const char *const keys[] = { "management", "workers", NULL };
	const config_setting_t *g = cfg_group(ld, root, "lcores", false);
	const config_setting_t *wl;
	long long v;

	if (ld->failed)
		return -1;
	cfg->lcores_line = g ? config_setting_source_line(g) : 0;
	if (g != NULL && cfg_check_keys(ld, g, keys) < 0)
		return -1;
	if (cfg_int(ld, g, "management", 0, 0, RTE_MAX_LCORE - 1, &v) < 0)
		return -1;
	cfg->mgmt_lcore = (unsigned int)v;
	wl = g ? config_setting_get_member(g, "workers") : NULL;
	if (wl == NULL) {
		cfg->n_workers = 1;
		cfg->worker_lcores[0] = cfg->mgmt_lcore + 1;
		return 0;
	}
	if (!config_setting_is_array(wl) && !config_setting_is_list(wl))
		return cfg_fail(ld, wl, "'lcores.workers' must be a list of lcore ids, e.g. [1, 2]");
	if (config_setting_length(wl) == 0)
		return cfg_fail(ld, wl, "'lcores.workers' is empty; weir needs at least one worker");
	if (config_setting_length(wl) > WEIR_MAX_WORKERS)
		return cfg_fail(ld, wl, "'lcores.workers' has more than %d lcores", WEIR_MAX_WORKERS);
	for (int i = 0; i < config_setting_length(wl); i++) {
		const config_setting_t *e = config_setting_get_elem(wl, i);
		long long id;

		if (config_setting_type(e) != CONFIG_TYPE_INT)
			return cfg_fail(ld, e, "'lcores.workers' item %d must be an integer", i + 1);
		id = config_setting_get_int(e);
		if (id < 0 || id >= RTE_MAX_LCORE)
			return cfg_fail(ld, e, "lcore %lld is out of range 0..%d", id, RTE_MAX_LCORE - 1);
		if ((unsigned int)id == cfg->mgmt_lcore)
			return cfg_fail(ld, e, "lcore %lld is the management lcore; workers need their own", id);
		for (unsigned int k = 0; k < cfg->n_workers; k++)
			if (cfg->worker_lcores[k] == (unsigned int)id)
				return cfg_fail(ld, e, "lcore %lld is listed twice in 'lcores.workers'", id);
		cfg->worker_lcores[cfg->n_workers++] = (unsigned int)id;
	}
	return 0;
}

static int
load_ports(struct loader *ld, const config_setting_t *root, struct weir_config *cfg)
{
	static const char *const keys[] = { "lan", "wan", "distribution", "on_failure", NULL };
	static const char *const port_keys[] = { "device", NULL };
	static const char *const names[WEIR_PORT__COUNT] = { "lan", "wan" };
	const config_setting_t *g = cfg_group(ld, root, "ports", true);
	const config_setting_t *dist;
	char dname[32];

	if (g == NULL || cfg_check_keys(ld, g, keys) < 0)
		return -1;
	/* How flows reach workers (docs/multiworker.md): "rss" (the default)
	 * asks the NIC for symmetric RSS; "kernel-fanout" trusts the kernel's
	 * PACKET_FANOUT hash that net_af_packet's qpairs=N already uses. */
	if (cfg_str(ld, g, "distribution", "rss", dname, sizeof(dname)) < 0)
		return -1;
	dist = config_setting_get_member(g, "distribution");
	cfg->dist_line = dist ? config_setting_source_line(dist) : 0;
	if (strcmp(dname, "rss") == 0)
		cfg->distribution = WEIR_DIST_RSS;
	else if (strcmp(dname, "kernel-fanout") == 0)
		cfg->distribution = WEIR_DIST_KERNEL_FANOUT;
	else
		return cfg_fail(ld, dist, "'ports.distribution' is \"%s\"; expected \"rss\" or "
				"\"kernel-fanout\"", dname);
	/* What the links do when weir stops (docs/fleet.md): "open" (bridged
	 * by the hook, the standalone default) or "closed" (down, so an HA
	 * pair's routers see the box gone and steer to the other). */
	if (cfg_str(ld, g, "on_failure", "open", dname, sizeof(dname)) < 0)
		return -1;
	if (strcmp(dname, "open") == 0)
		cfg->fail_closed = false;
	else if (strcmp(dname, "closed") == 0)
		cfg->fail_closed = true;
	else
		return cfg_fail(ld, config_setting_get_member(g, "on_failure"),
				"'ports.on_failure' is \"%s\"; expected \"open\" or \"closed\"",
				dname);
	for (int r = 0; r < WEIR_PORT__COUNT; r++) {
		const config_setting_t *p = cfg_group(ld, g, names[r], true);

		if (p == NULL || cfg_check_keys(ld, p, port_keys) < 0)
			return -1;
		if (cfg_str(ld, p, "device", NULL, cfg->port[r].device, sizeof(cfg->port[r].device)) < 0)
			return -1;
		cfg->port[r].line = config_setting_source_line(config_setting_get_member(p, "device"));
		if (cfg->port[r].device[0] == '\0')
			return cfg_fail(ld, config_setting_get_member(p, "device"),
				       "'ports.%s.device' is empty", names[r]);
	}
	/* Compare device names only (before the first comma: the vdev args). */
	if (strcspn(cfg->port[0].device, ",") == strcspn(cfg->port[1].device, ",") &&
	    strncmp(cfg->port[0].device, cfg->port[1].device, strcspn(cfg->port[0].device, ",")) == 0)
		return cfg_fail(ld, config_setting_get_member(config_setting_get_member(g, "wan"), "device"),
			       "the LAN and WAN ports are the same device");
	return 0;
}

static int
load_sizes(struct loader *ld, const config_setting_t *root, struct weir_config *cfg)
{
	static const char *const mp_keys[] = { "mbufs", "cache", NULL };
	static const char *const ring_keys[] = { "rx_desc", "tx_desc", NULL };
	static const char *const wk_keys[] = { "burst", "idle_sleep_us", "cut_through",
					       "malformed_pps", "l3_control", "l3_control_pps",
					       NULL };
	const config_setting_t *mp = cfg_group(ld, root, "mempool", false);
	const config_setting_t *rings = cfg_group(ld, root, "rings", false);
	const config_setting_t *wk = cfg_group(ld, root, "worker", false);
	long long v;

	if (ld->failed)
		return -1;
	if ((mp && cfg_check_keys(ld, mp, mp_keys) < 0) || (rings && cfg_check_keys(ld, rings, ring_keys) < 0) ||
	    (wk && cfg_check_keys(ld, wk, wk_keys) < 0))
		return -1;
	if (cfg_int(ld, mp, "mbufs", 16383, 1023, 1 << 26, &v) < 0)
		return -1;
	cfg->mbufs = (uint32_t)v;
	cfg->mbufs_line = mp && config_setting_get_member(mp, "mbufs")
		? config_setting_source_line(config_setting_get_member(mp, "mbufs")) : 0;
	if (cfg_int(ld, mp, "cache", 256, 0, 512, &v) < 0)
		return -1;
	cfg->mbuf_cache = (uint32_t)v;
	if (cfg_int(ld, rings, "rx_desc", 1024, 64, 32768, &v) < 0)
		return -1;
	cfg->rx_desc = (uint16_t)v;
	if (cfg_int(ld, rings, "tx_desc", 1024, 64, 32768, &v) < 0)
		return -1;
	cfg->tx_desc = (uint16_t)v;
	if (cfg_int(ld, wk, "burst", 32, 1, WEIR_BURST_MAX, &v) < 0)
		return -1;
	cfg->burst = (uint16_t)v;
	if (cfg_int(ld, wk, "idle_sleep_us", 100, 0, 100000, &v) < 0)
		return -1;
	cfg->idle_sleep_us = (uint32_t)v;
	if (cfg_bool(ld, wk, "cut_through", true, &cfg->cut_through) < 0)
		return -1;
	if (cfg_int(ld, wk, "malformed_pps", 1000, 0, 100000000, &v) < 0)
		return -1;
	cfg->malformed_pps = (uint32_t)v;
	/* Routers' hellos, BFD and BGP cross ahead of shaping (lib/net/l3ctl.h);
	 * 10000 a second carries a BGP full table in seconds and BFD for
	 * hundreds of sessions, and is a small share of a link. */
	if (cfg_bool(ld, wk, "l3_control", true, &cfg->l3_control) < 0)
		return -1;
	if (cfg_int(ld, wk, "l3_control_pps", 10000, 0, 100000000, &v) < 0)
		return -1;
	cfg->l3_control_pps = (uint32_t)v;
	return 0;
}

static int
load_flows(struct loader *ld, const config_setting_t *root, struct weir_config *cfg)
{
	static const char *const keys[] = { "capacity", "timeouts", NULL };
	static const char *const to_keys[] = { "tcp_syn", "tcp_established", "tcp_closing",
					       "tcp_closed", "udp", "other", NULL };
	const config_setting_t *g = cfg_group(ld, root, "flows", false);
	const config_setting_t *to;
	struct {
		const char *name;
		long long def;
		uint32_t *out;
	} tos[] = {
		{ "tcp_syn", 30, &cfg->timeouts.tcp_syn },
		{ "tcp_established", 3600, &cfg->timeouts.tcp_established },
		{ "tcp_closing", 60, &cfg->timeouts.tcp_closing },
		{ "tcp_closed", 10, &cfg->timeouts.tcp_closed },
		{ "udp", 60, &cfg->timeouts.udp },
		{ "other", 30, &cfg->timeouts.other },
	};
	long long v;

	if (ld->failed || (g && cfg_check_keys(ld, g, keys) < 0))
		return -1;
	if (cfg_int(ld, g, "capacity", 65536, 64, 1 << 26, &v) < 0)
		return -1;
	cfg->flow_capacity = (uint32_t)v;
	to = g ? cfg_group(ld, g, "timeouts", false) : NULL;
	if (ld->failed || (to && cfg_check_keys(ld, to, to_keys) < 0))
		return -1;
	for (size_t i = 0; i < RTE_DIM(tos); i++) {
		if (cfg_int(ld, to, tos[i].name, tos[i].def, 1, 7 * 24 * 3600, &v) < 0)
			return -1;
		*tos[i].out = (uint32_t)v;
	}
	return 0;
}

static int
load_stats(struct loader *ld, const config_setting_t *root, struct weir_config *cfg)
{
	static const char *const keys[] = { "interval", "file", "print", "tcp_measure", NULL };
	const config_setting_t *g = cfg_group(ld, root, "stats", false);

	if (ld->failed || (g && cfg_check_keys(ld, g, keys) < 0))
		return -1;
	if (cfg_float(ld, g, "interval", 1.0, 0.05, 3600.0, &cfg->stats_interval) < 0 ||
	    cfg_str(ld, g, "file", "", cfg->stats_file, sizeof(cfg->stats_file)) < 0 ||
	    cfg_bool(ld, g, "print", false, &cfg->stats_print) < 0 ||
	    cfg_bool(ld, g, "tcp_measure", true, &cfg->tcp_measure) < 0)
		return -1;
	return 0;
}

/* management.<key>, a file named relative to the config's directory:
 * resolved into out and checked readable now. "" when not set. */
static int
mgmt_file(struct loader *ld, const config_setting_t *g, const char *key,
	  const struct weir_config *cfg, char *out, size_t outlen)
{
	const config_setting_t *s;
	char path[4096], dir[sizeof(cfg->path)];
	FILE *f;

	out[0] = '\0';
	if (cfg_str(ld, g, key, "", path, sizeof(path)) < 0)
		return -1;
	if (path[0] == '\0')
		return 0;
	s = config_setting_get_member(g, key);
	snprintf(dir, sizeof(dir), "%s", cfg->path);
	if (path[0] == '/')
		snprintf(out, outlen, "%s", path);
	else if (snprintf(out, outlen, "%s/%s", dirname(dir), path) >= (int)outlen)
		return cfg_fail(ld, s, "'management.%s': path too long", key);
	f = fopen(out, "r");
	if (f == NULL)
		return cfg_fail(ld, s, "cannot read 'management.%s' %s: %s", key, out,
				strerror(errno));
	fclose(f);
	return 0;
}

/* management = { listen; port; token_file; tls_cert; tls_key; }: the REST
 * API (rest_http.c). The token is read now so a missing or empty file is a
 * config error; the TLS files are checked readable (rest_http.c reads them). */
static int
load_management(struct loader *ld, const config_setting_t *root, struct weir_config *cfg)
{
	static const char *const keys[] = { "listen", "port", "token_file", "tls_cert", "tls_key",
					    NULL };
	const config_setting_t *g = cfg_group(ld, root, "management", false);
	const config_setting_t *tf;
	unsigned char addr[16];
	char path[sizeof(cfg->mgmt_token_file)], dir[sizeof(cfg->path)], msg[4500];
	long long v;

	if (ld->failed || (g && cfg_check_keys(ld, g, keys) < 0))
		return -1;
	cfg->mgmt_line = g ? config_setting_source_line(g) : 0;
	if (cfg_str(ld, g, "listen", "127.0.0.1", cfg->mgmt_listen, sizeof(cfg->mgmt_listen)) < 0 ||
	    cfg_int(ld, g, "port", 8080, 0, 65535, &v) < 0 ||
	    cfg_str(ld, g, "token_file", "", path, sizeof(path)) < 0)
		return -1;
	cfg->mgmt_port = (uint16_t)v;
	if (inet_pton(AF_INET, cfg->mgmt_listen, addr) != 1 &&
	    inet_pton(AF_INET6, cfg->mgmt_listen, addr) != 1)
		return cfg_fail(ld, config_setting_get_member(g, "listen"),
			       "'management.listen' is \"%s\"; it must be an IPv4 or IPv6 address",
			       cfg->mgmt_listen);
	if (mgmt_file(ld, g, "tls_cert", cfg, cfg->mgmt_tls_cert, sizeof(cfg->mgmt_tls_cert)) < 0 ||
	    mgmt_file(ld, g, "tls_key", cfg, cfg->mgmt_tls_key, sizeof(cfg->mgmt_tls_key)) < 0)
		return -1;
	if ((cfg->mgmt_tls_cert[0] == '\0') != (cfg->mgmt_tls_key[0] == '\0'))
		return cfg_fail(ld, config_setting_get_member(g, cfg->mgmt_tls_cert[0] != '\0'
							      ? "tls_cert" : "tls_key"),
				"'management.tls_cert' and 'management.tls_key' go together: "
				"give both (HTTPS) or neither (HTTP)");
	if (path[0] == '\0')
		return 0;
	tf = config_setting_get_member(g, "token_file");
	snprintf(dir, sizeof(dir), "%s", cfg->path);
	if (path[0] == '/')
		snprintf(cfg->mgmt_token_file, sizeof(cfg->mgmt_token_file), "%s", path);
	else if (snprintf(cfg->mgmt_token_file, sizeof(cfg->mgmt_token_file), "%s/%s", dirname(dir),
			  path) >= (int)sizeof(cfg->mgmt_token_file))
		return cfg_fail(ld, tf, "'management.token_file': path too long");
	if (weir_token_read(cfg->mgmt_token_file, cfg->mgmt_token, sizeof(cfg->mgmt_token), msg,
			    sizeof(msg)) < 0) {
		if (!ld->token_soft)
			return cfg_fail(ld, tf, "%s", msg);
		if (snprintf(cfg->mgmt_token_error, sizeof(cfg->mgmt_token_error), "%s:%d: %s",
			     config_setting_source_file(tf) ? config_setting_source_file(tf)
							    : ld->path,
			     config_setting_source_line(tf), msg) >= (int)sizeof(cfg->mgmt_token_error))
			RTE_LOG(ERR, USER1, "%s\n", msg);      /* the whole of it, paths included */
	}
	return 0;
}

int
weir_token_read(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
	char tok[sizeof(((struct weir_config *)0)->mgmt_token)];
	struct stat st;
	FILE *f;

	f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "cannot read 'management.token_file' %s: %s", path,
			 strerror(errno));
		return -1;
	}
	/* A secret others can read or write is no secret (ssh refuses such
	 * keys for the same reason). */
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) ||
	    (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
		snprintf(err, errlen, "'management.token_file' %s must be a regular file that "
			 "only its owner can read and write (mode %04o; chmod 600 it)", path,
			 (unsigned int)(st.st_mode & 07777));
		fclose(f);
		return -1;
	}
	if (fgets(tok, sizeof(tok), f) == NULL)
		tok[0] = '\0';
	fclose(f);
	tok[strcspn(tok, "\r\n")] = '\0';
	if (strlen(tok) < 16 || strlen(tok) >= sizeof(tok) - 1 || strlen(tok) >= outlen) {
		snprintf(err, errlen, "the token in %s must be 16 to %zu characters on its first line",
			 path, sizeof(tok) - 2);
		return -1;
	}
	snprintf(out, outlen, "%s", tok);
	return 0;
}

/* What the descriptor rings, the bursts in flight and the per-lcore caches
 * may hold of the mempool. */
static uint64_t
mbufs_reserved(const struct weir_config *cfg)
{
	uint64_t lcores = cfg->n_workers + 1;

	return (uint64_t)WEIR_PORT__COUNT * cfg->n_workers * (cfg->rx_desc + cfg->tx_desc) +
	       lcores * (cfg->mbuf_cache + 2 * WEIR_BURST_MAX);
}

/* ACKs PostACK may keep as mbufs, all workers together. */
static uint64_t
postack_held(const struct weir_config *cfg)
{
	return cfg->postack_mbufs >= 0 ? (uint64_t)cfg->postack_mbufs * cfg->n_workers
				       : cfg->mbufs / 8;
}

/* The least the class trees need: a few bursts each, two per worker. */
static uint64_t
trees_least(const struct weir_config *cfg)
{
	return (uint64_t)2 * cfg->n_workers * 2 * WEIR_BURST_MAX;
}

uint32_t
weir_config_pep_copies(const struct weir_config *cfg)
{
	const uint64_t n = RTE_MAX(cfg->n_workers, 1u);
	int64_t spare;

	if (cfg->pep_copies >= 0)
		return (uint32_t)cfg->pep_copies;
	/* Auto: an eighth of the pool, less where a small pool has not
	 * that much beside the rings, held ACKs and the trees (16 a worker
	 * at the least: a pool that small holds next to nothing anyway). */
	spare = (int64_t)cfg->mbufs - (int64_t)(mbufs_reserved(cfg) + postack_held(cfg) +
						 trees_least(cfg));
	spare = RTE_MIN(spare, (int64_t)cfg->mbufs / 8);
	return (uint32_t)RTE_MAX(spare / (int64_t)n, (int64_t)16);
}

uint32_t
weir_config_tree_backlog(const struct weir_config *cfg)
{
	uint64_t held = mbufs_reserved(cfg);
	int64_t spare;

	/* ACKs PostACK keeps as mbufs and pep's copies (a policy may turn
	 * either on later). */
	held += postack_held(cfg) + (uint64_t)weir_config_pep_copies(cfg) * cfg->n_workers;
	spare = (int64_t)cfg->mbufs - (int64_t)held;
	/* Two trees (one per direction) per worker share the rest. A pool
	 * that barely covers the rings still lets each tree hold a few
	 * bursts: on af_packet/af_xdp the rings hold no mbufs anyway. */
	return (uint32_t)RTE_MAX(spare / (2 * (int64_t)cfg->n_workers), (int64_t)2 * WEIR_BURST_MAX);
}

/* The mempool must cover every descriptor ring plus what is in flight in
 * bursts and per-lcore caches, or rx stalls with "no mbufs" under load. */
static int
check_mbuf_budget(struct loader *ld, const config_setting_t *root, const struct weir_config *cfg)
{
	uint64_t need = mbufs_reserved(cfg);
	const config_setting_t *mp = config_setting_get_member(root, "mempool");
	const config_setting_t *s = mp ? config_setting_get_member(mp, "mbufs") : NULL;

	if (cfg->mbufs < need)
		return cfg_fail(ld, s ? s : root,
			       "'mempool.mbufs' is %u but %u workers with %u rx and %u tx descriptors per "
			       "queue on 2 ports need at least %llu", cfg->mbufs, cfg->n_workers,
			       cfg->rx_desc, cfg->tx_desc, (unsigned long long)need);
	/* What ACK holding and pep's copies were told to keep comes on top,
	 * and the class trees still need a few bursts each: a pool that
	 * cannot hold them all would starve receive while the check believed
	 * none held. (Auto budgets shrink to fit instead.) */
	if (cfg->postack_mbufs >= 0 || cfg->pep_copies >= 0) {
		uint64_t kept = postack_held(cfg) + (uint64_t)weir_config_pep_copies(cfg) * cfg->n_workers;
		uint64_t trees = trees_least(cfg);

		if (cfg->mbufs < need + kept + trees)
			return cfg_fail(ld, s ? s : root,
				       "'mempool.mbufs' is %u but the rings and caches (%llu), held ACKs "
				       "and pep copies (shaping.postack.mbufs, shaping.pep.copies: %llu) "
				       "and the class trees (%llu) need %llu", cfg->mbufs,
				       (unsigned long long)need, (unsigned long long)kept,
				       (unsigned long long)trees,
				       (unsigned long long)(need + kept + trees));
	}
	if (cfg->mbuf_cache > cfg->mbufs / 16)
		return cfg_fail(ld, s ? s : root, "'mempool.cache' must be at most mbufs/16 (%u)",
			       cfg->mbufs / 16);
	return 0;
}

/* ---- @include ----
 *
 * libconfig 1.5 has no include hook: it opens whatever the name resolves
 * to, and flex exits the process (reload included) on a directory such as
 * @include "" gives, and blocks on a FIFO. So the includes are found and
 * checked first, and each included file remembers who included it, for
 * the messages libconfig gives about the included file alone. */

#define INCLUDE_DEPTH 10                /* libconfig's own limit */
#define INCLUDES_MAX 64

struct include {
	char path[4096];                /* as libconfig resolves it */
	char name[256];                 /* as written, which libconfig's errors give */
	int from;                       /* the includer's index; -1: the main file */
	int line;
};

struct includes {
	struct include inc[INCLUDES_MAX];
	unsigned int n;
};

/* Whether a string on this line holds "\x00". libconfig 1.5 drops the
 * byte ("a\x00b" reads as "ab"), so a class named so would be accepted
 * under a name other than the one written; no setting may hold a NUL, and
 * names only letters, digits, '-', '_' and '.'. Comments are skipped (a
 * block comment's inner lines are read as code: a false alarm there needs
 * a "\x00" inside quotes in a comment). */
static bool
line_has_nul_escape(const char *l)
{
	bool in = false;

	for (const char *p = l; *p != '\0'; p++) {
		if (!in) {
			if (*p == '#' || (p[0] == '/' && (p[1] == '/' || p[1] == '*')))
				return false;
			in = *p == '"';
		} else if (*p == '\\') {
			if (p[1] == 'x' && p[2] == '0' && p[3] == '0')
				return true;
			if (p[1] != '\0')
				p++;
		} else if (*p == '"') {
			in = false;
		}
	}
	return false;
}

/* file's @include lines, checked and recorded, recursively; and every
 * line's strings for "\x00". 0, or -1 with err naming file and the line. */
static int
check_includes(const char *file, int self, const char *incdir, int depth, struct includes *is,
	       const regex_t *re, char *err, size_t errlen)
{
	FILE *f = fopen(file, "r");
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0, rc = 0;

	if (f == NULL)
		return 0;               /* config_read_file reports it */
	while (rc == 0 && getline(&line, &cap, f) >= 0) {
		regmatch_t m[2];
		struct include *in;
		struct stat st;
		char name[4096];

		lineno++;
		if (line_has_nul_escape(line)) {
			snprintf(err, errlen, "%s:%d: a string holds \\x00 (a NUL byte), which no "
				 "setting may contain", file, lineno);
			rc = -1;
			break;
		}
		if (regexec(re, line, 2, m, 0) != 0)
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(m[1].rm_eo - m[1].rm_so), line + m[1].rm_so);
		if (name[0] == '\0') {
			snprintf(err, errlen, "%s:%d: @include \"\" names no file", file, lineno);
			rc = -1;
			break;
		}
		if (depth >= INCLUDE_DEPTH || is->n == INCLUDES_MAX) {
			snprintf(err, errlen, "%s:%d: @include \"%s\": more than %d levels or %d "
				 "includes", file, lineno, name, INCLUDE_DEPTH, INCLUDES_MAX);
			rc = -1;
			break;
		}
		in = &is->inc[is->n++];
		in->from = self;
		in->line = lineno;
		snprintf(in->name, sizeof(in->name), "%.*s", (int)(sizeof(in->name) - 1), name);
		if (snprintf(in->path, sizeof(in->path), "%s%s%s",
			     name[0] == '/' || incdir == NULL ? "" : incdir,
			     name[0] == '/' || incdir == NULL ? "" : "/", name) >= (int)sizeof(in->path)) {
			snprintf(err, errlen, "%s:%d: @include: path too long", file, lineno);
			rc = -1;
		} else if (stat(in->path, &st) != 0 || access(in->path, R_OK) != 0) {
			snprintf(err, errlen, "%s:%d: @include \"%s\": cannot read %s: %s", file,
				 lineno, name, in->path, strerror(errno));
			rc = -1;
		} else if (!S_ISREG(st.st_mode)) {
			snprintf(err, errlen, "%s:%d: @include \"%s\": %s is not a regular file",
				 file, lineno, name, in->path);
			rc = -1;
		} else {
			rc = check_includes(in->path, (int)(in - is->inc), incdir, depth + 1, is, re,
					    err, errlen);
		}
	}
	free(line);
	fclose(f);
	return rc;
}

/* An included file's error: libconfig names the file as the @include
 * wrote it; give its path and " (included from FILE:LINE)". NULL if file
 * is not an included one. */
static const struct include *
included(const struct includes *is, const char *file)
{
	for (unsigned int i = 0; file != NULL && i < is->n; i++)
		if (strcmp(is->inc[i].path, file) == 0 || strcmp(is->inc[i].name, file) == 0)
			return &is->inc[i];
	return NULL;
}

static int
config_load(const char *path, struct weir_config *cfg, bool token_soft, char *err,
	    size_t errlen)
{
	struct loader ld = { .path = path, .err = err, .errlen = errlen, .token_soft = token_soft };
	config_t lc;
	const config_setting_t *root;
	char incdir[4096];
	struct includes *is = NULL;
	regex_t re;
	int rc = -1;

	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->path, sizeof(cfg->path), "%s", path);
	config_init(&lc);
	/* @include "x.cfg" is relative to the including file, not the cwd. */
	snprintf(incdir, sizeof(incdir), "%s", path);
	config_set_include_dir(&lc, dirname(incdir));
	/* libconfig's scanner: @include at the start of a line, then a string */
	if (regcomp(&re, "^[ \t]*@include[ \t]+\"([^\"]*)\"", REG_EXTENDED) != 0) {
		snprintf(err, errlen, "%s:0: out of memory", path);
		goto out;
	}
	is = calloc(1, sizeof(*is));
	if (is == NULL || check_includes(path, -1, config_get_include_dir(&lc), 0, is, &re, err,
					 errlen) < 0) {
		if (is == NULL)
			snprintf(err, errlen, "%s:0: out of memory", path);
		regfree(&re);
		goto out;
	}
	regfree(&re);
	if (config_read_file(&lc, path) != CONFIG_TRUE) {
		const struct include *in = included(is, config_error_file(&lc));

		if (config_error_type(&lc) == CONFIG_ERR_FILE_IO)
			snprintf(err, errlen, "%s:0: cannot read file: %s", path, strerror(errno));
		else if (in != NULL)
			snprintf(err, errlen, "%s:%d: syntax error: %s (included from %s:%d)",
				 in->path, config_error_line(&lc), config_error_text(&lc),
				 in->from < 0 ? path : is->inc[in->from].path, in->line);
		else
			snprintf(err, errlen, "%s:%d: syntax error: %s",
				 config_error_file(&lc) ? config_error_file(&lc) : path,
				 config_error_line(&lc), config_error_text(&lc));
		goto out;
	}
	root = config_root_setting(&lc);
	if (load_top(&ld, root, cfg) < 0 || load_lcores(&ld, root, cfg) < 0 ||
	    load_ports(&ld, root, cfg) < 0 || load_sizes(&ld, root, cfg) < 0 ||
	    load_flows(&ld, root, cfg) < 0 || cfg_load_policy(&ld, root, cfg) < 0 ||
	    load_stats(&ld, root, cfg) < 0 || load_management(&ld, root, cfg) < 0 ||
	    cfg_load_capture(&ld, root, cfg) < 0 || cfg_load_export(&ld, root, cfg) < 0 ||
	    check_mbuf_budget(&ld, root, cfg) < 0)
		goto out;
	rc = 0;
out:
	free(is);
	config_destroy(&lc);
	if (rc < 0)
		weir_config_free(cfg);
	return rc;
}

int
weir_config_load(const char *path, struct weir_config *cfg, char *err, size_t errlen)
{
	return config_load(path, cfg, false, err, errlen);
}

int
weir_config_load_reload(const char *path, struct weir_config *cfg, char *err, size_t errlen)
{
	return config_load(path, cfg, true, err, errlen);
}

int
weir_config_check_eal(const struct weir_config *cfg, char *err, size_t errlen)
{
	if (!rte_lcore_is_enabled(cfg->mgmt_lcore) || rte_get_main_lcore() != cfg->mgmt_lcore) {
		snprintf(err, errlen, "%s:%d: management lcore %u is not the EAL main lcore "
			 "(EAL main lcore is %u; weir passes -l/--main-lcore itself unless the EAL "
			 "arguments set them)", cfg->path, cfg->lcores_line, cfg->mgmt_lcore,
			 rte_get_main_lcore());
		return -1;
	}
	for (unsigned int i = 0; i < cfg->n_workers; i++) {
		if (!rte_lcore_is_enabled(cfg->worker_lcores[i])) {
			snprintf(err, errlen, "%s:%d: worker lcore %u is not enabled in EAL's lcore list",
				 cfg->path, cfg->lcores_line, cfg->worker_lcores[i]);
			return -1;
		}
	}
	return 0;
}

void
weir_config_free(struct weir_config *cfg)
{
	weir_policy_free(cfg->policy);
	cfg->policy = NULL;
	for (int i = 0; i < cfg->n_eal_args; i++)
		free(cfg->eal_args[i]);
	cfg->n_eal_args = 0;
}
