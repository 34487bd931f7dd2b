/* SPDX-License-Identifier: BSD-3-Clause
 * weir: Prometheus metrics. Built from the same snapshot as the stats file
 * (weir_stats_json), so the two never disagree, plus a walk of the flow
 * tables for flows by state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy_subs.h"
#include "metrics.h"
#include "stats.h"
#include "flow.h"
#include "measure.h"
#include "captures.h"
#include "ipfix_export.h"

/* One metric family being written: its HELP and TYPE go out before its
 * first sample, once. */
struct fam {
	FILE *out;
	const char *name;
	bool started;
};

static void
fam_begin(struct fam *f, FILE *out, const char *name, const char *type, const char *help)
{
	f->out = out;
	f->name = name;
	f->started = true;
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value as the exposition format wants it: \, " and newline escaped. */
static void
put_label_value(FILE *out, const char *v)
{
	for (; *v != '\0'; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(out, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", out);
		else
			fputc(*v, out);
	}
}

/* A sample with up to three labels (name, value pairs; NULL name ends). */
static void
sample(struct fam *f, double v, const char *k1, const char *v1, const char *k2, const char *v2,
       const char *k3, const char *v3)
{
	const char *k[3] = { k1, k2, k3 }, *val[3] = { v1, v2, v3 };

	fputs(f->name, f->out);
	for (int i = 0; i < 3 && k[i] != NULL; i++) {
		fprintf(f->out, "%s%s=\"", i == 0 ? "{" : ",", k[i]);
		put_label_value(f->out, val[i]);
		fputc('"', f->out);
		if (i == 2 || k[i + 1] == NULL)
			fputc('}', f->out);
	}
	/* %.17g keeps 64-bit counters exact up to 2^53. */
	fprintf(f->out, " %.17g\n", v);
}

static double
num(const json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

static const char *const port_role[2] = { "lan", "wan" };
static const char *const dir_name[2] = { "outbound", "inbound" };

/* One family of per-worker counters kept per rx port (stats "workers"[i][key]). */
static void
worker_by_port(struct fam *f, FILE *out, const json_t *workers, const char *key,
	       const char *name, const char *help)
{
	fam_begin(f, out, name, "counter", help);
	for (size_t i = 0; i < json_array_size(workers); i++) {
		const json_t *c = json_object_get(json_array_get(workers, i), key);
		char id[24];

		snprintf(id, sizeof(id), "%zu", i);
		for (int r = 0; r < 2; r++)
			sample(f, num(c, port_role[r]), "worker", id, "port", port_role[r], NULL, NULL);
	}
}

static void
port_metrics(FILE *out, const json_t *ports)
{
	static const struct {
		const char *key;
		const char *reason;
	} drops[] = {
		{ "tx_full", "tx_full" }, { "dropped", "queue_full" }, { "refused", "admission" },
		{ "malformed_dropped", "malformed_over_rate" },
		{ "l3_control_dropped", "l3_control_over_rate" },
		{ "pmd_rx_missed", "pmd_rx_missed" }, { "pmd_rx_nombuf", "pmd_rx_nombuf" },
	}, unmanaged[] = {
		{ "non_ip", "non_ip" }, { "l2_control", "l2_control" },
		{ "l3_control", "l3_control" }, { "fragments", "fragment" },
		{ "malformed", "malformed" },
		{ "flow_full", "flow_table_full" },
	};
	struct fam f;

	fam_begin(&f, out, "weir_port_packets_total", "counter",
		  "Frames received (dir=rx) and sent (dir=tx) on a port.");
	for (int r = 0; r < 2; r++) {
		const json_t *p = json_object_get(ports, port_role[r]);

		sample(&f, num(p, "rx"), "port", port_role[r], "dir", "rx", NULL, NULL);
		sample(&f, num(p, "tx"), "port", port_role[r], "dir", "tx", NULL, NULL);
	}
	fam_begin(&f, out, "weir_port_bytes_total", "counter",
		  "Bytes received (dir=rx) and sent (dir=tx) on a port.");
	for (int r = 0; r < 2; r++) {
		const json_t *p = json_object_get(ports, port_role[r]);

		sample(&f, num(p, "rx_bytes"), "port", port_role[r], "dir", "rx", NULL, NULL);
		sample(&f, num(p, "tx_bytes"), "port", port_role[r], "dir", "tx", NULL, NULL);
	}
	fam_begin(&f, out, "weir_port_dropped_total", "counter",
		  "Frames received on a port and dropped, by reason.");
	for (int r = 0; r < 2; r++) {
		const json_t *p = json_object_get(ports, port_role[r]);

		for (size_t i = 0; i < RTE_DIM(drops); i++)
			if (json_object_get(p, drops[i].key) != NULL)
				sample(&f, num(p, drops[i].key), "port", port_role[r],
				       "reason", drops[i].reason, NULL, NULL);
	}
	fam_begin(&f, out, "weir_port_flow_split_total", "counter",
		  "Frames of TCP flows received by a worker that never saw their SYN (a flow "
		  "split across workers; 0 with one worker).");
	for (int r = 0; r < 2; r++)
		sample(&f, num(json_object_get(ports, port_role[r]), "flow_split"), "port",
		       port_role[r], NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_port_tcp_signed_total", "counter",
		  "Segments of TCP connections signed by TCP-MD5 or TCP-AO received on a port: "
		  "shaped per flow, never rewritten, held or answered.");
	for (int r = 0; r < 2; r++)
		sample(&f, num(json_object_get(ports, port_role[r]), "tcp_signed"), "port",
		       port_role[r], NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_port_unmanaged_total", "counter",
		  "Frames not tracked as a connection, by kind (fragment: shaped per host pair; "
		  "l2_control, l3_control: sent ahead of shaping; the rest: the default class).");
	for (int r = 0; r < 2; r++) {
		const json_t *p = json_object_get(ports, port_role[r]);

		for (size_t i = 0; i < RTE_DIM(unmanaged); i++)
			sample(&f, num(p, unmanaged[i].key), "port", port_role[r],
			       "reason", unmanaged[i].reason, NULL, NULL);
	}
}

/* Every class of both directions: one family at a time, so each family's
 * samples stay together as the format requires. */
/* Subscribers' leaves get no series of their own (docs/subscribers.md: 100,000
 * subscribers would be millions of series a scrape): aggregates and a top-N. */
static const struct weir_subs *metrics_subs;

static void
class_family(FILE *out, const json_t *shaping, const char *name, const char *type,
	     const char *help, const char *key, const char *key2, bool leaf_only)
{
	struct fam f = { .started = false };

	for (int d = 0; d < 2; d++) {
		const json_t *t = json_object_get(shaping, dir_name[d]);
		const json_t *classes = json_object_get(t, "classes");
		const char *cname;
		json_t *c;

		if (!json_is_object(t))
			continue;
		json_object_foreach((json_t *)classes, cname, c) {
			if (leaf_only && json_object_get(c, "flows") == NULL)
				continue;
			if (weir_subs_is_class(metrics_subs, cname))
				continue;
			if (!f.started)
				fam_begin(&f, out, name, type, help);
			if (key2 == NULL) {
				sample(&f, num(c, key), "direction", dir_name[d], "class", cname,
				       NULL, NULL);
			} else {
				sample(&f, num(c, key), "direction", dir_name[d], "class", cname,
				       "reason", "flow_queue_full");
				sample(&f, num(c, key2), "direction", dir_name[d], "class", cname,
				       "reason", "class_limit");
				/* The tree's share of the mempool (docs/classes.md). */
				sample(&f, num(c, "drops_pool"), "direction", dir_name[d], "class",
				       cname, "reason", "pool_share");
			}
		}
	}
}

/* Classes with a DiffServ marker (docs/markers.md): bytes and packets per colour. */
static void
marker_family(FILE *out, const json_t *shaping, const char *name, const char *help,
	      const char *key)
{
	static const char *const colour[3] = { "green", "yellow", "red" };
	struct fam f = { .started = false };

	for (int d = 0; d < 2; d++) {
		const json_t *classes = json_object_get(json_object_get(shaping, dir_name[d]), "classes");
		const char *cname;
		json_t *c;

		json_object_foreach((json_t *)classes, cname, c) {
			const json_t *by = json_object_get(json_object_get(c, "marker"), key);

			if (by == NULL)
				continue;
			if (!f.started)
				fam_begin(&f, out, name, "counter", help);
			for (int k = 0; k < 3; k++)
				sample(&f, num(by, colour[k]), "direction", dir_name[d], "class", cname,
				       "colour", colour[k]);
		}
	}
}

#define SUBS_TOP_N 10

struct sub_top {
	double bytes;
	const char *name;
};

static int
sub_top_cmp(const void *x, const void *y)
{
	const struct sub_top *a = x, *b = y;

	return a->bytes < b->bytes ? 1 : a->bytes > b->bytes ? -1 : strcmp(a->name, b->name);
}

/* Per direction: the subscribers' sums and the SUBS_TOP_N largest by bytes. */
static void
subscriber_metrics(FILE *out, const json_t *shaping)
{
	struct fam fn = { .started = false }, fb = { .started = false },
		   fd = { .started = false }, ft = { .started = false };

	if (metrics_subs == NULL)
		return;
	fam_begin(&fn, out, "weir_subscribers", "gauge", "Subscribers in force.");
	sample(&fn, weir_subs_count(metrics_subs), NULL, NULL, NULL, NULL, NULL, NULL);
	for (int d = 0; d < 2; d++) {
		const json_t *classes = json_object_get(json_object_get(shaping, dir_name[d]),
							"classes");
		struct sub_top top[SUBS_TOP_N + 1];
		unsigned int n_top = 0;
		double bytes = 0, drops = 0;
		const char *cname;
		json_t *c;

		json_object_foreach((json_t *)classes, cname, c) {
			if (!weir_subs_is_class(metrics_subs, cname))
				continue;
			bytes += num(c, "bytes");
			drops += num(c, "drops_flow") + num(c, "drops_class") + num(c, "drops_pool");
			if (num(c, "bytes") == 0)
				continue;       /* idle: not a "top" one */
			top[n_top++] = (struct sub_top){ num(c, "bytes"), cname };
			qsort(top, n_top, sizeof(top[0]), sub_top_cmp);
			if (n_top > SUBS_TOP_N)
				n_top = SUBS_TOP_N;
		}
		if (!fb.started)
			fam_begin(&fb, out, "weir_subscribers_bytes_total", "counter",
				  "Bytes all subscribers' leaves sent.");
		sample(&fb, bytes, "direction", dir_name[d], NULL, NULL, NULL, NULL);
		if (!fd.started)
			fam_begin(&fd, out, "weir_subscribers_drops_total", "counter",
				  "Packets all subscribers' leaves refused.");
		sample(&fd, drops, "direction", dir_name[d], NULL, NULL, NULL, NULL);
		for (unsigned int k = 0; k < n_top; k++) {
			char rank[8];

			if (!ft.started)
				fam_begin(&ft, out, "weir_subscriber_top_bytes", "gauge",
					  "Bytes of the 10 subscribers that sent most, by rank "
					  "(the set changes from scrape to scrape).");
			snprintf(rank, sizeof(rank), "%u", k + 1);
			sample(&ft, top[k].bytes, "direction", dir_name[d], "class", top[k].name,
			       "rank", rank);
		}
	}
}

static void
class_metrics(FILE *out, const json_t *shaping)
{
	subscriber_metrics(out, shaping);
	marker_family(out, shaping, "weir_class_marked_bytes_total",
		      "Bytes a class's marker coloured, by colour (frame bytes).", "bytes");
	marker_family(out, shaping, "weir_class_marked_packets_total",
		      "Packets a class's marker coloured, by colour.", "pkts");
	class_family(out, shaping, "weir_class_bytes_total", "counter",
		     "Bytes a class sent (a parent counts its children's).", "bytes", NULL, false);
	class_family(out, shaping, "weir_class_packets_total", "counter",
		     "Packets a class sent (a parent counts its children's).", "pkts", NULL, false);
	class_family(out, shaping, "weir_class_drops_total", "counter",
		     "Packets a leaf class refused, by reason.", "drops_flow", "drops_class", true);
	class_family(out, shaping, "weir_class_borrowed_bytes_total", "counter",
		     "Bytes a class sent above its rate, borrowed from its parent.", "borrowed_bytes",
		     NULL, false);
	class_family(out, shaping, "weir_class_queue_packets", "gauge",
		     "Packets queued in a leaf class now.", "queued_pkts", NULL, true);
	class_family(out, shaping, "weir_class_queue_bytes", "gauge",
		     "Wire bytes queued in a leaf class now.", "queued_bytes", NULL, true);
	class_family(out, shaping, "weir_class_rate_bps", "gauge",
		     "A class's configured guaranteed rate, bit/s.", "rate_bps", NULL, false);
	class_family(out, shaping, "weir_class_ceil_bps", "gauge",
		     "A class's configured ceiling, bit/s.", "ceil_bps", NULL, false);
	class_family(out, shaping, "weir_class_flows", "gauge",
		     "Flows classified into a leaf class now.", "flows", NULL, true);
	class_family(out, shaping, "weir_class_admission_refused_total", "counter",
		     "Flows a leaf class refused admission.", "refused", NULL, true);
}

static int
count_state(const struct weir_flow *f, const struct weir_flow_key *key, void *arg)
{
	uint64_t *by_state = arg;

	by_state[f->state < WEIR_FS__COUNT ? f->state : 0]++;
	return 0;
}

static void
flow_metrics(FILE *out, const struct weir_app *a, const json_t *flows)
{
	uint64_t by_state[WEIR_FS__COUNT] = { 0 };
	struct fam f;

	fam_begin(&f, out, "weir_flows_active", "gauge", "Flows in the flow tables now.");
	sample(&f, num(flows, "active"), NULL, NULL, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_flows_capacity", "gauge", "Flows the flow tables can hold.");
	sample(&f, num(flows, "capacity"), NULL, NULL, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_flows_inserted_total", "counter", "Flows created.");
	sample(&f, num(flows, "inserted"), NULL, NULL, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_flows_expired_total", "counter", "Flows removed when idle.");
	sample(&f, num(flows, "expired"), NULL, NULL, NULL, NULL, NULL, NULL);
	/* A snapshot of tables the workers change as we read: each entry is
	 * counted once, in the state it had when read. */
	for (unsigned int i = 0; i < a->n_workers; i++)
		weir_flow_walk(a->flows[i], count_state, by_state);
	fam_begin(&f, out, "weir_flows", "gauge", "Flows in the flow tables now, by state.");
	for (unsigned int s = 0; s < WEIR_FS__COUNT; s++)
		sample(&f, (double)by_state[s], "state", weir_flow_state_name(s), NULL, NULL,
		       NULL, NULL);
}

/* Each worker's run-time class changes (stats "workers"[i].class_cmds). */
static void
class_cmd_metrics(struct fam *f, FILE *out, const json_t *workers)
{
	static const char *const result[] = { "applied", "failed", "stale" };

	fam_begin(f, out, "weir_worker_class_cmds_total", "counter",
		  "Run-time class changes a worker took, by result (stale: made for another policy).");
	for (size_t i = 0; i < json_array_size(workers); i++) {
		const json_t *c = json_object_get(json_array_get(workers, i), "class_cmds");
		char id[24];

		snprintf(id, sizeof(id), "%zu", i);
		for (size_t k = 0; k < RTE_DIM(result); k++)
			sample(f, num(c, result[k]), "worker", id, "result", result[k], NULL, NULL);
	}
	fam_begin(f, out, "weir_worker_class_cmd_latency_seconds", "gauge",
		  "From a class change's request to in force on a worker: the last one and the most.");
	for (size_t i = 0; i < json_array_size(workers); i++) {
		const json_t *c = json_object_get(json_array_get(workers, i), "class_cmds");
		char id[24];

		snprintf(id, sizeof(id), "%zu", i);
		sample(f, num(c, "lat_last_us") / 1e6, "worker", id, "which", "last", NULL, NULL);
		sample(f, num(c, "lat_max_us") / 1e6, "worker", id, "which", "max", NULL, NULL);
	}
}

static void
worker_metrics(FILE *out, const json_t *workers)
{
	static const struct {
		const char *name, *type, *help, *key;
	} fams[] = {
		{ "weir_worker_busy_seconds_total", "counter",
		  "Time a worker spent in loops that moved packets.", "busy_s" },
		{ "weir_worker_loops_total", "counter", "A worker's poll loops.", "loops" },
		{ "weir_worker_idle_loops_total", "counter", "A worker's loops that received nothing.",
		  "idle_loops" },
		{ "weir_worker_flows_active", "gauge", "Flows in a worker's table now.",
		  "flows_active" },
	};
	struct fam f;

	for (size_t k = 0; k < RTE_DIM(fams); k++) {
		fam_begin(&f, out, fams[k].name, fams[k].type, fams[k].help);
		for (size_t i = 0; i < json_array_size(workers); i++) {
			char id[24];

			snprintf(id, sizeof(id), "%zu", i);
			sample(&f, num(json_array_get(workers, i), fams[k].key), "worker", id,
			       NULL, NULL, NULL, NULL);
		}
	}
	class_cmd_metrics(&f, out, workers);
	worker_by_port(&f, out, workers, "tcp_signed", "weir_worker_tcp_signed_total",
		       "Segments of TCP-MD5/AO connections a worker left untouched, by rx port.");
	worker_by_port(&f, out, workers, "flow_split", "weir_worker_flow_split_total",
		       "Frames of TCP flows a worker received without having seen their SYN, by rx port.");
}

/* A sample of one SA (or tunnel, `tunnel`) with every label its identity
 * needs (app/weir/ipsec.h): src, dst, spi, vlan, and sport, dport for ESP
 * in UDP (a tunnel: a, b, vlan, a_port, b_port), so two SAs never share a
 * series. */
static void
sa_sample(struct fam *f, double v, const json_t *o, bool tunnel)
{
	static const char *const sa_keys[] = { "src", "dst", "spi", "vlan", "sport", "dport" };
	static const char *const tun_keys[] = { "a", "b", "vlan", "a_port", "b_port" };
	const char *const *keys = tunnel ? tun_keys : sa_keys;
	const size_t n = tunnel ? RTE_DIM(tun_keys) : RTE_DIM(sa_keys);
	bool first = true;

	fputs(f->name, f->out);
	for (size_t i = 0; i < n; i++) {
		const json_t *j = json_object_get(o, keys[i]);
		char buf[24];
		const char *val = buf;

		if (j == NULL)
			continue;       /* ports: ESP in UDP only */
		if (json_is_string(j))
			val = json_string_value(j);
		else if (strcmp(keys[i], "spi") == 0)
			snprintf(buf, sizeof(buf), "0x%08llx", (unsigned long long)json_integer_value(j));
		else
			snprintf(buf, sizeof(buf), "%llu", (unsigned long long)json_integer_value(j));
		fprintf(f->out, "%s%s=\"", first ? "{" : ",", keys[i]);
		put_label_value(f->out, val);
		fputc('"', f->out);
		first = false;
	}
	if (!first)
		fputc('}', f->out);
	fprintf(f->out, " %.17g\n", v);
}

/* IPsec: per port the SAs' frames and sequence figures; per SA (the ones
 * the stats list, at most WEIR_IPSEC_LIST_MAX) and per tunnel the loss
 * upstream of weir. */
static void
ipsec_metrics(FILE *out, const json_t *ports, const json_t *ip)
{
	static const char *const kinds[] = { "gaps", "late", "dup", "old", "resync", "plain" };
	const json_t *sa = json_object_get(ip, "sa"), *tun = json_object_get(ip, "tunnels"), *v;
	const char *key;
	struct fam f;

	fam_begin(&f, out, "weir_ipsec_packets_total", "counter",
		  "Frames of IPsec SAs (ESP, AH, ESP in UDP 4500) received on a port.");
	for (int r = 0; r < 2; r++)
		sample(&f, num(json_object_get(json_object_get(ports, port_role[r]), "ipsec"), "pkts"),
		       "port", port_role[r], NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_ipsec_seq_total", "counter",
		  "IPsec sequence numbers by kind: gaps (skipped: lost upstream), late (filled a "
		  "gap: reordered), dup, old, resync (jumps/wraps); plain: frames shaped pfq "
		  "instead of their leaf's mode.");
	for (int r = 0; r < 2; r++)
		for (size_t i = 0; i < RTE_DIM(kinds); i++)
			sample(&f, num(json_object_get(json_object_get(ports, port_role[r]), "ipsec"),
				       kinds[i]), "port", port_role[r], "kind", kinds[i], NULL, NULL);
	fam_begin(&f, out, "weir_last_mile_clamped_total", "counter",
		  "TCP segments from a last mile's hosts whose advertised window was clamped to "
		  "its pipe plus buffer.");
	for (int r = 0; r < 2; r++)
		sample(&f, num(json_object_get(json_object_get(ports, port_role[r]), "last_mile"),
			       "clamped"), "port", port_role[r], NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_last_mile_exempt_total", "counter",
		  "Frames of flows exempt from per-flow fairness (a last mile) shaped pfq instead "
		  "of their leaf's mode.");
	for (int r = 0; r < 2; r++)
		sample(&f, num(json_object_get(json_object_get(ports, port_role[r]), "last_mile"),
			       "exempt"), "port", port_role[r], NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_ipsec_sas", "gauge", "IPsec SAs in the flow tables.");
	sample(&f, num(ip, "sas_active"), NULL, NULL, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_ipsec_sa_packets_total", "counter", "Packets of one IPsec SA.");
	json_object_foreach((json_t *)sa, key, v)
		sa_sample(&f, num(v, "pkts"), v, false);
	fam_begin(&f, out, "weir_ipsec_sa_lost_total", "counter",
		  "Packets of one IPsec SA lost before weir (sequence gaps not filled late).");
	json_object_foreach((json_t *)sa, key, v)
		sa_sample(&f, num(v, "lost"), v, false);
	fam_begin(&f, out, "weir_ipsec_sa_reordered_total", "counter",
		  "Packets of one IPsec SA that arrived after a higher sequence number.");
	json_object_foreach((json_t *)sa, key, v)
		sa_sample(&f, num(v, "late"), v, false);
	fam_begin(&f, out, "weir_ipsec_tunnel_loss_ratio", "gauge",
		  "Share of a tunnel's packets (both SAs) lost before weir.");
	json_object_foreach((json_t *)tun, key, v)
		sa_sample(&f, num(v, "loss"), v, true);
}

/* Upper bounds (seconds) of the round-trip buckets. */
static const double rtt_le[] = { 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5 };
#define RTT_BUCKETS (RTE_DIM(rtt_le) + 1)

/* Per class: how the smoothed round trips of its flows sampled in the last
 * interval spread over the buckets, each side; bucketed here from the flow
 * views at each scrape rather than per sample in the worker, which would
 * cost the fast path a search per sample and per-class arrays rebuilt at
 * every policy switch. So it is a gauge histogram (what the flows of the
 * last interval look like now), cumulative in le as a histogram's buckets
 * are: histogram_quantile() reads it. */
/* One unlabelled sample of family name. */
static void
single(FILE *out, const char *name, const char *type, const char *help, double v)
{
	struct fam f;

	fam_begin(&f, out, name, type, help);
	sample(&f, v, NULL, NULL, NULL, NULL, NULL, NULL);
}

/* Captures (captures.c) and the IPFIX exporter (ipfix_export.c), when on. */
static void
observe_metrics(FILE *out, const struct weir_app *a)
{
	json_t *c = weir_captures_json(a), *x = weir_ipfix_json(a);
	struct fam f;

	if (json_is_object(c)) {
		single(out, "weir_captures_running", "gauge", "Captures running now.",
		       num(c, "running"));
		single(out, "weir_captures_started_total", "counter", "Captures started.",
		       num(c, "started"));
		single(out, "weir_capture_packets_copied_total", "counter",
		       "Frames the workers copied for captures.", num(c, "copied"));
		fam_begin(&f, out, "weir_capture_packets_lost_total", "counter",
			  "Frames a capture wanted that were not copied, by reason.");
		sample(&f, num(c, "lost_pool_empty"), "reason", "pool_empty", NULL, NULL, NULL, NULL);
		sample(&f, num(c, "lost_ring_full"), "reason", "ring_full", NULL, NULL, NULL, NULL);
	}
	if (json_is_object(x)) {
		single(out, "weir_ipfix_records_total", "counter", "IPFIX data records exported.",
		       num(x, "records"));
		single(out, "weir_ipfix_messages_total", "counter",
		       "IPFIX messages (UDP packets) sent.", num(x, "messages"));
		single(out, "weir_ipfix_bytes_total", "counter", "IPFIX bytes sent.", num(x, "bytes"));
		single(out, "weir_ipfix_send_errors_total", "counter",
		       "IPFIX messages that could not be sent (the collector down, a full socket).",
		       num(x, "send_errors"));
	}
	json_decref(c);
	json_decref(x);
}

static void
tcp_metrics(FILE *out, const struct weir_app *a)
{
	const struct weir_policy *p = a->cfg.policy;
	struct weir_meas m;
	struct weir_tcp_totals tot = { 0 };
	struct fam f;
	static const char *const side_name[2] = { "lan", "wan" };

	for (unsigned int i = 0; i < a->n_workers; i++) {
		struct weir_tcp_totals t;

		weir_worker_tcp_totals(a->workers[i], &t);
		tot.segs += t.segs, tot.samples += t.samples, tot.retrans_segs += t.retrans_segs;
		tot.ooo += t.ooo, tot.dupacks += t.dupacks;
	}
	fam_begin(&f, out, "weir_tcp_segments_measured_total", "counter",
		  "TCP segments measured (stats.tcp_measure), all workers.");
	sample(&f, (double)tot.segs, NULL, NULL, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_tcp_rtt_samples_total", "counter", "Round-trip samples taken.");
	sample(&f, (double)tot.samples, NULL, NULL, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_tcp_retrans_segments_total", "counter",
		  "TCP segments sent again (below the highest sequence seen).");
	sample(&f, (double)tot.retrans_segs, NULL, NULL, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_tcp_ooo_segments_total", "counter",
		  "TCP segments that left a hole before them.");
	sample(&f, (double)tot.ooo, NULL, NULL, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_tcp_dupacks_total", "counter", "Duplicate TCP ACKs.");
	sample(&f, (double)tot.dupacks, NULL, NULL, NULL, NULL, NULL, NULL);
	if (p == NULL || !a->cfg.tcp_measure || weir_meas_collect(a, &m) != 0)
		return;
	fam_begin(&f, out, "weir_class_tcp_rtt_flows", "gauge",
		  "Flows of a leaf class sampled in the last interval whose smoothed round trip "
		  "on a side of weir (lan, wan) is at most le seconds (a gauge histogram).");
	for (int d = 0; d < WEIR_POLICY_DIRS; d++) {
		for (uint32_t cls = 0; cls < p->tree[d].n_classes; cls++) {
			/* Subscribers' leaves: no series of their own (above). */
			if (!p->tree[d].classes[cls].is_leaf ||
			    weir_subs_is_class(metrics_subs, p->tree[d].classes[cls].name))
				continue;
			for (int sd = 0; sd < 2; sd++) {
				uint64_t n[RTT_BUCKETS] = { 0 };
				uint64_t cum = 0;

				for (size_t i = 0; i < m.n; i++) {
					const struct weir_tcp_side_view *v = sd ? &m.f[i].t.wan : &m.f[i].t.lan;
					double x;
					size_t b = 0;

					if (m.f[i].leaf[d] != (int)cls || !weir_meas_recent(&m, v))
						continue;
					x = v->srtt_us / 1e6;
					while (b < RTE_DIM(rtt_le) && x > rtt_le[b])
						b++;
					n[b]++;
				}
				for (size_t b = 0; b < RTT_BUCKETS; b++) {
					char le[32];

					cum += n[b];
					if (b < RTE_DIM(rtt_le))
						snprintf(le, sizeof(le), "%g", rtt_le[b]);
					else
						snprintf(le, sizeof(le), "+Inf");
					fprintf(out, "weir_class_tcp_rtt_flows{direction=\"%s\",class=\"",
						dir_name[d]);
					put_label_value(out, p->tree[d].classes[cls].name);
					fprintf(out, "\",side=\"%s\",le=\"%s\"} %" PRIu64 "\n",
						side_name[sd], le, cum);
				}
			}
		}
	}
	weir_meas_free(&m);
}

char *
weir_metrics_text(const struct weir_app *a, size_t *len)
{
	json_t *s = weir_stats_json(a);
	const json_t *pa = json_object_get(s, "postack");
	const json_t *pol = json_object_get(s, "policy");
	char *buf = NULL;
	struct fam f;
	FILE *out;

	*len = 0;
	out = open_memstream(&buf, len);
	if (s == NULL || out == NULL) {
		json_decref(s);
		if (out != NULL)
			fclose(out);
		free(buf);
		return NULL;
	}
	fam_begin(&f, out, "weir_build_info", "gauge", "The running weir's version (always 1).");
	sample(&f, 1, "version", WEIR_VERSION, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_uptime_seconds", "gauge", "Seconds since weir started.");
	sample(&f, num(s, "uptime_s"), NULL, NULL, NULL, NULL, NULL, NULL);
	port_metrics(out, json_object_get(s, "ports"));
	metrics_subs = a->cfg.policy != NULL ? a->cfg.policy->subs : NULL;
	class_metrics(out, json_object_get(s, "shaping"));
	flow_metrics(out, a, json_object_get(s, "flows"));
	worker_metrics(out, json_object_get(s, "workers"));
	ipsec_metrics(out, json_object_get(s, "ports"), json_object_get(s, "ipsec"));
	tcp_metrics(out, a);
	observe_metrics(out, a);
	if (json_is_object(pa)) {
		fam_begin(&f, out, "weir_postack_acks_held", "gauge",
			  "ACKs PostACK holds now, all workers.");
		sample(&f, num(pa, "acks_held"), NULL, NULL, NULL, NULL, NULL, NULL);
		fam_begin(&f, out, "weir_postack_acks_held_total", "counter",
			  "ACKs PostACK has held.");
		sample(&f, num(pa, "held"), NULL, NULL, NULL, NULL, NULL, NULL);
		fam_begin(&f, out, "weir_postack_pool_full_total", "counter",
			  "ACKs sent on unheld: no free record.");
		sample(&f, num(pa, "pool_full"), NULL, NULL, NULL, NULL, NULL, NULL);
	}
	fam_begin(&f, out, "weir_mbufs_in_use", "gauge", "Packet buffers out of the pool now.");
	sample(&f, num(json_object_get(s, "mbufs"), "in_use"), NULL, NULL, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_mbufs", "gauge", "Packet buffers in the pool.");
	sample(&f, num(json_object_get(s, "mbufs"), "total"), NULL, NULL, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_policy_epoch", "gauge", "Epoch of the policy in force.");
	sample(&f, num(pol, "epoch"), NULL, NULL, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_policy_reloads_total", "counter", "Policies switched to live.");
	sample(&f, num(pol, "reloads"), NULL, NULL, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_policy_reload_failures_total", "counter",
		  "Reloads refused (the running policy stayed).");
	sample(&f, num(pol, "reload_failures"), NULL, NULL, NULL, NULL, NULL, NULL);
	fam_begin(&f, out, "weir_subscribers_full_total", "counter",
		  "Subscriber changes refused because a table (subscribers, nodes, classes) was full.");
	sample(&f, num(pol, "subscribers_full"), NULL, NULL, NULL, NULL, NULL, NULL);
	json_decref(s);
	if (fclose(out) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
