/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the appliance's configuration (libconfig file -> validated struct).
 *
 * Every error is reported as "FILE:LINE: message" and loading stops before
 * anything is touched: the caller exits non-zero on failure.
 */
#ifndef WEIR_APP_CONFIG_H
#define WEIR_APP_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "counters.h"
#include "flow.h"
#include "policy.h"
#include "policy_lua.h"
#include "worker.h"

#define WEIR_MAX_WORKERS 64
#define WEIR_MAX_EAL_ARGS 64
#define WEIR_CONFIG_ERR_LEN 8192

struct weir_port_config {
	char device[256];       /* vdev args ("net_af_packet0,iface=x") or PCI address */
	int line;               /* where it was set, for later error messages */
};

/* ports.distribution: what spreads flows over several workers' queues. */
enum weir_distribution {
	WEIR_DIST_RSS = 0,              /* the NIC's RSS with a symmetric key (ports.c) */
	/* net_af_packet qpairs=N: the kernel's PACKET_FANOUT hash, which is
	 * symmetric, with the PMD's rollover flag (a flow may move under
	 * overload: counted as flow_split). */
	WEIR_DIST_KERNEL_FANOUT,
};

struct weir_config {
	char path[4096];

	int n_eal_args;
	char *eal_args[WEIR_MAX_EAL_ARGS];      /* strdup'ed */

	int log_level;                          /* RTE_LOG_* */

	unsigned int mgmt_lcore;
	unsigned int n_workers;
	unsigned int worker_lcores[WEIR_MAX_WORKERS];
	int lcores_line;

	struct weir_port_config port[WEIR_PORT__COUNT];
	enum weir_distribution distribution;
	int dist_line;
	/* ports.on_failure = "closed": the ports' links go down when weir
	 * stops (ports.c at a clean stop, dist/weir-failopen after any stop),
	 * so routers see an HA box gone; "open" (false): bridged instead. */
	bool fail_closed;

	uint32_t mbufs;
	uint32_t mbuf_cache;
	int mbufs_line;
	uint16_t rx_desc, tx_desc;

	uint16_t burst;
	uint32_t idle_sleep_us;
	bool cut_through;               /* worker.cut_through: see weir_worker_conf */
	uint32_t malformed_pps;         /* worker.malformed_pps: see weir_worker_conf */
	bool l3_control;                /* worker.l3_control: see weir_worker_conf */
	uint32_t l3_control_pps;        /* worker.l3_control_pps */

	uint32_t flow_capacity;
	struct weir_flow_timeouts timeouts;

	/* Link shaping per direction ([WEIR_PORT_LAN] = outbound, LAN to WAN;
	 * [WEIR_PORT_WAN] = inbound), bit/s; 0 = bridged unshaped. */
	uint64_t shape_rate[WEIR_PORT__COUNT];
	uint16_t shape_overhead;                /* bytes added per frame for rate accounting */
	uint16_t shape_flow_limit;              /* packets per flow queue */
	uint32_t shape_flow_quantum;            /* DRR bytes per round per flow; 0 = one frame */
	uint32_t shape_burst_us;                /* token bucket depth in time (docs/cbq.md) */
	bool shape_no_aqm;                      /* shaping.aqm = "none": no CoDel in pfq/tcr leaves */
	uint8_t shape_qm;                       /* shaping.aqm = "red"...: fifo leaves' queue manager */
	struct weir_qm_params shape_qm_params;  /* shaping.red / shaping.pqm (lib/sched/qm.h) */
	uint32_t shape_young;                   /* shaping.young_bytes: young-flow budget (lib/sched/drr.h) */
	uint8_t shape_new_quanta;               /* shaping.new_quanta: the new-flows list's bound (lib/sched/drr.h) */
	bool shape_plain;                       /* shaping.new_flows = false: plain DRR (lib/sched/drr.h) */
	uint8_t shape_mode;                     /* default enum weir_shape_mode of classes */
	uint32_t postack_acks;                  /* ACK records per worker */
	uint16_t postack_ack_limit;             /* ACKs one flow may hold */
	uint32_t postack_idle_ms;               /* data idle this long: release the flow's ACKs */
	bool postack_clamp;                     /* window <= share x path RTT + target (postack_mode.c) */
	uint32_t postack_clamp_target_ms;       /* that target's time at the share (at least 2 MSS) */
	double postack_clamp_margin;            /* share x RTT raised by this fraction of it */
	bool ipabr_sws_credit;                  /* Eq. 5.4-5.6's credit in ipabr windows (ipabr.c) */
	uint32_t ipabr_headroom_us;             /* added to a flow's round trip in Eq. 4.6 (ipabr.c) */
	int64_t postack_mbufs;                  /* held ACKs that may keep their mbufs, per worker; -1 = auto */
	int64_t pep_copies;                     /* pep's copies per worker; -1 = auto (weir_config_pep_copies) */
	uint32_t pep_drain_ms;                  /* at stop: delivery of p-acked data before resets */
	bool pep_wm_measured;                   /* shaping.pep.watermark = "measured" */
	/* Class trees and rules, compiled (lib/classify/policy.h); NULL when neither
	 * direction is shaped. Owned by the config. */
	struct weir_policy *policy;
	/* policy.script: the Lua policy the trees and rules come from instead
	 * of shaping.outbound/inbound and rules ("" = those); resolved against
	 * the config file's directory. */
	char policy_script[4096];
	/* subscribers: LibreQoS's files (resolved), "" = none; the class they
	 * hang from (docs/subscribers.md). */
	char subs_csv[4096], subs_network[4096];
	char subs_parent[32];
	uint16_t subs_box;              /* subscribers.box: this box's partition (0: all) */
	uint32_t subs_max;              /* subscribers.max: the most this box takes (0: what its trees hold) */
	uint64_t policy_instructions;           /* Lua instruction budget per run */
	uint64_t policy_memory;                 /* bytes the script may allocate */
	uint32_t policy_events_per_s;           /* flow events a worker may post a second */
	uint32_t policy_max_rules;              /* weir.rule calls (policy_limits.h) */

	double stats_interval;                  /* seconds */
	char stats_file[4096];                  /* empty: none */
	bool stats_print;                       /* one line per interval on stdout */
	bool tcp_measure;                       /* round trips, retransmissions of TCP flows */

	/* management = { ... }: the REST API and /metrics (rest_http.c). */
	char mgmt_listen[64];                   /* IPv4 or IPv6 address */
	uint16_t mgmt_port;                     /* 0 = no server */
	char mgmt_token_file[4096];             /* resolved path; "" = no token asked */
	char mgmt_token[256];                   /* its first line */
	/* FILE:LINE: why the token file could not be used ("" = it could);
	 * only weir_config_load_reload leaves it set instead of failing. */
	char mgmt_token_error[1024];
	char mgmt_tls_cert[4096];               /* resolved PEM paths; both "" = plain HTTP */
	char mgmt_tls_key[4096];
	int mgmt_line;
	/* capture = { ... }: packet captures through the REST API (capture.c). */
	char capture_dir[4096];                 /* where capture files are written */
	uint64_t capture_max_bytes;             /* largest file one capture may write */
	uint32_t capture_keep_s;                /* an ended capture's file is removed after */
	uint32_t capture_pool;                  /* copies in flight (the capture mempool) */
	uint32_t capture_ring;                  /* copies a worker's ring holds */
	bool capture_pdump;                     /* rte_pdump_init: let dpdk-dumpcap attach */
	/* export.ipfix = { ... }: flow records to a collector (ipfix_export.c). */
	bool ipfix;                             /* a collector is configured */
	char ipfix_collector[128];              /* "ADDR:PORT" or "[ADDR6]:PORT", numeric */
	uint32_t ipfix_domain;                  /* observation domain id */
	uint32_t ipfix_pen;                     /* enterprise number of weir's own elements */
	uint32_t ipfix_template_s;              /* templates resent every (UDP: RFC 7011 8.4) */
	uint32_t ipfix_active_s;                /* a long flow is reported every (active timeout) */
	int ipfix_line;
	/* The line that decides whether a direction (WEIR_PORT_LAN: outbound)
	 * is shaped, for the reload's "needs a restart". */
	int shaping_line[WEIR_PORT__COUNT];
};

/* Load and validate `path`. On error, returns -1 with "FILE:LINE: message" in err. */
int weir_config_load(const char *path, struct weir_config *cfg, char *err, size_t errlen);
/* The same for a reload: a token file that cannot be used is reported in
 * cfg->mgmt_token_error rather than failing the load, so it never blocks a
 * policy reload (the running token then stays). */
int weir_config_load_reload(const char *path, struct weir_config *cfg, char *err,
			    size_t errlen);

/* Checks that need EAL up (lcores enabled). Same error format. */
int weir_config_check_eal(const struct weir_config *cfg, char *err, size_t errlen);

/* Packets one worker's class tree of one direction may queue: its share of
 * the mempool once the rings, caches and PostACK's kept ACKs are counted
 * (weir_cbq_conf.backlog_limit). */
uint32_t weir_config_tree_backlog(const struct weir_config *cfg);
/* Copies pep may hold per worker (shaping.pep.copies, or an eighth of the
 * pool shared among the workers), reserved in the pool beside PostACK's. */
uint32_t weir_config_pep_copies(const struct weir_config *cfg);

void weir_config_free(struct weir_config *cfg);

/* The bearer token: the first line of path, 16 to 254 characters, from a
 * regular file only its owner may read or write. 0, or -1 with err (no
 * FILE:LINE: the caller knows which setting named the file). */
int weir_token_read(const char *path, char *out, size_t outlen, char *err, size_t errlen);

/* The limits a Lua policy of config c runs under, and what the config knows
 * and the script does not (leaf limit, default mode, aqm, young budget). */
struct weir_policy_lua_limits weir_config_lua_limits(const struct weir_config *c);

#endif /* WEIR_APP_CONFIG_H */
