/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the stats snapshot the management lcore publishes (JSON file, console).
 */
#include <stdio.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "ipabr.h"
#include "pep.h"
#include "stats.h"
#include "subs_live.h"
#include "ipsec.h"
#include "captures.h"
#include "ipfix_export.h"
#include "text.h"
#include "worker_view.h"

static const char *const role_name[WEIR_PORT__COUNT] = { "lan", "wan" };

static void
sum_workers(const struct weir_app *app, struct weir_worker_counters *sum)
{
	static struct weir_worker_counters copy[WEIR_MAX_WORKERS];  /* management lcore only */
	const struct weir_worker_counters *blocks[WEIR_MAX_WORKERS];

	for (unsigned int i = 0; i < app->n_workers; i++) {
		weir_worker_port_counters(app->workers[i], &copy[i]);
		blocks[i] = &copy[i];
	}
	weir_counters_sum(blocks, app->n_workers, sum);
}

static void
sum_flows(const struct weir_app *app, struct weir_flow_stats *fs)
{
	memset(fs, 0, sizeof(*fs));
	for (unsigned int i = 0; i < app->n_workers; i++) {
		const struct weir_flow_stats *s = weir_flow_table_stats(app->flows[i]);

		fs->inserted += s->inserted;
		fs->expired += s->expired;
		fs->full += s->full;
		fs->lookups += s->lookups;
		fs->active += s->active;
	}
}

static json_t *
port_json(const struct weir_app *app, const struct weir_port_counters *pc, int role)
{
	json_t *mal = json_object();
	struct rte_eth_stats es;
	json_t *o;

	for (unsigned int r = 1; r < WEIR_MAL__COUNT; r++)
		json_object_set_new(mal, weir_malformed_name(r), json_integer((json_int_t)pc->malformed_by[r]));
	o = json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}",
		      "device", weir_json_text(app->cfg.port[role].device),
		      "rx", (json_int_t)pc->rx_pkts, "rx_bytes", (json_int_t)pc->rx_bytes,
		      "tx", (json_int_t)pc->tx_pkts, "tx_bytes", (json_int_t)pc->tx_bytes,
		      "forwarded", (json_int_t)pc->forwarded, "tx_full", (json_int_t)pc->tx_full,
		      "dropped", (json_int_t)pc->dropped, "non_ip", (json_int_t)pc->non_ip,
		      "fragments", (json_int_t)pc->fragments, "malformed", (json_int_t)pc->malformed,
		      "flow_full", (json_int_t)pc->flow_full, "managed", (json_int_t)pc->managed,
		      "malformed_by", mal);
	json_object_set_new(o, "refused", json_integer((json_int_t)pc->refused));
	json_object_set_new(o, "l2_control", json_integer((json_int_t)pc->l2_control));
	json_object_set_new(o, "l3_control", json_integer((json_int_t)pc->l3_control));
	json_object_set_new(o, "l3_control_dropped", json_integer((json_int_t)pc->l3_control_dropped));
	json_object_set_new(o, "malformed_dropped", json_integer((json_int_t)pc->malformed_dropped));
	json_object_set_new(o, "win_clamped", json_integer((json_int_t)pc->win_clamped));
	json_object_set_new(o, "sack_passed", json_integer((json_int_t)pc->sack_passed));
	json_object_set_new(o, "flow_split", json_integer((json_int_t)pc->flow_split));
	/* IPsec SAs' frames and their sequence figures (lib/flow/sa_seq.h), summed. */
	json_object_set_new(o, "ipsec", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		"pkts", (json_int_t)pc->ipsec, "gaps", (json_int_t)pc->ipsec_gaps,
		"late", (json_int_t)pc->ipsec_late, "dup", (json_int_t)pc->ipsec_dup,
		"old", (json_int_t)pc->ipsec_old, "resync", (json_int_t)pc->ipsec_resync,
		"plain", (json_int_t)pc->ipsec_plain, "untracked", (json_int_t)pc->ipsec_untracked));
	/* Segments of TCP-MD5/AO flows, left as they came (shaped pfq). */
	json_object_set_new(o, "tcp_signed", json_integer((json_int_t)pc->tcp_signed));
	/* Last miles: windows clamped, frames of exempt flows shaped pfq. */
	json_object_set_new(o, "last_mile", json_pack("{s:I, s:I}",
		"clamped", (json_int_t)pc->lm_clamped, "exempt", (json_int_t)pc->lm_exempt));
	/* What the PMD itself saw: frames lost before weir could poll them. */
	if (app->ports.started[role] && rte_eth_stats_get(app->ports.id[role], &es) == 0) {
		json_object_set_new(o, "pmd_rx_missed", json_integer((json_int_t)es.imissed));
		json_object_set_new(o, "pmd_rx_nombuf", json_integer((json_int_t)es.rx_nombuf));
		json_object_set_new(o, "pmd_rx_errors", json_integer((json_int_t)es.ierrors));
		json_object_set_new(o, "pmd_tx_errors", json_integer((json_int_t)es.oerrors));
	}
	return o;
}

/* A class's marker (docs/markers.md): its settings and colour counters,
 * summed over the workers. */
static json_t *
marker_json(const struct weir_app *app, int dir, uint32_t cls)
{
	const struct weir_marker_conf *mc = &app->cfg.policy->tree[dir].classes[cls].marker;
	static const char *const colour[WEIR_COLOURS] = { "green", "yellow", "red" };
	struct weir_marker_counters sum = { 0 };
	json_t *o, *pk, *by;

	for (unsigned int i = 0; i < app->n_workers; i++) {
		struct weir_marker_counters v;

		if (weir_worker_marker_view(app->workers[i], app->cfg.policy, dir, cls, &v) != 0)
			continue;
		for (int c = 0; c < WEIR_COLOURS; c++) {
			sum.pkts[c] += v.pkts[c];
			sum.bytes[c] += v.bytes[c];
		}
		sum.held += v.held;
		sum.early += v.early;
		sum.dropped += v.dropped;
		sum.not_ip += v.not_ip;
		sum.token_rate += v.token_rate;
		sum.qlen += v.qlen;
	}
	o = json_pack("{s:s, s:I, s:I, s:I}", "type", weir_marker_type_name(mc->type),
		      "cir_bps", (json_int_t)mc->cir, "cbs", (json_int_t)mc->cbs,
		      "token_rate_bps", (json_int_t)sum.token_rate);
	pk = json_object();
	by = json_object();
	for (int c = 0; c < WEIR_COLOURS; c++) {
		json_object_set_new(pk, colour[c], json_integer((json_int_t)sum.pkts[c]));
		json_object_set_new(by, colour[c], json_integer((json_int_t)sum.bytes[c]));
	}
	json_object_set_new(o, "pkts", pk);
	json_object_set_new(o, "bytes", by);
	json_object_set_new(o, "held", json_integer((json_int_t)sum.held));
	json_object_set_new(o, "held_now", json_integer((json_int_t)sum.qlen));
	json_object_set_new(o, "early", json_integer((json_int_t)sum.early));
	json_object_set_new(o, "dropped", json_integer((json_int_t)sum.dropped));
	json_object_set_new(o, "not_rewritten", json_integer((json_int_t)sum.not_ip));
	if (mc->type == WEIR_MARK_TBQ || mc->type == WEIR_MARK_TBQ_LD)
		json_object_set_new(o, "queue", json_integer((json_int_t)mc->queue));
	return o;
}

/* Class `cls` of direction `dir`, summed over the workers (each holds a
 * share of every class). Reads the workers' counters as they run
 * (worker_view.h); a worker that has not taken the policy in force yet is
 * left out until it has. */
static json_t *
class_json(const struct weir_app *app, int dir, uint32_t cls)
{
	const struct weir_policy_class *pk = &app->cfg.policy->tree[dir].classes[cls];
	struct weir_cbq_stats sum = { 0 };
	struct weir_class_view cc = { 0 };
	struct weir_qm_stats qm = { 0 };
	bool has_qm = false;
	/* With several workers, each one's part: how the rebalancer split the
	 * class and what each worker did with it (docs/multiworker.md). */
	json_t *o, *per = app->n_workers > 1 ? json_array() : NULL;

	for (unsigned int i = 0; i < app->n_workers; i++) {
		struct weir_class_view v;
		const struct weir_cbq_stats *st = &v.cbq;

		if (weir_worker_class_view(app->workers[i], app->cfg.policy, dir, cls, &v) != 0) {
			if (per != NULL)
				json_array_append_new(per, json_null());
			continue;
		}
		if (per != NULL)
			json_array_append_new(per, json_pack("{s:I, s:I, s:I, s:I, s:I}",
				"rate_bps", (json_int_t)st->rate_bps, "ceil_bps", (json_int_t)st->ceil_bps,
				"bytes", (json_int_t)st->bytes, "queued_pkts", (json_int_t)st->qlen,
				"backlogged_flows", (json_int_t)st->backlogged));
		sum.bytes += st->bytes;
		sum.pkts += st->pkts;
		sum.drops_flow += st->drops_flow;
		sum.drops_class += st->drops_class;
		sum.drops_pool += st->drops_pool;
		sum.borrowed += st->borrowed;
		sum.lent += st->lent;
		sum.qlen += st->qlen;
		sum.qbytes += st->qbytes;
		sum.backlogged += st->backlogged;
		sum.new_flows += st->new_flows;
		sum.new_deferred += st->new_deferred;
		sum.young_flows += st->young_flows;
		sum.young_spent += st->young_spent;
		sum.drops_aqm += st->drops_aqm;
		sum.drops_qm += st->drops_qm;
		if (v.has_qm) {
			/* Counters add up over workers; the price and the fair
			 * rate are each worker's own: the highest is shown. */
			qm.drops_early += v.qm.drops_early;
			qm.drops_forced += v.qm.drops_forced;
			qm.drops_choke += v.qm.drops_choke;
			qm.drops_victim += v.qm.drops_victim;
			qm.drops_penalty += v.qm.drops_penalty;
			qm.monitor_added += v.qm.monitor_added;
			qm.monitor_full += v.qm.monitor_full;
			qm.monitored += v.qm.monitored;
			qm.monitor_size += v.qm.monitor_size;
			qm.state_bytes += v.qm.state_bytes;
			qm.avg = RTE_MAX(qm.avg, v.qm.avg);
			qm.prob = RTE_MAX(qm.prob, v.qm.prob);
			qm.price = RTE_MAX(qm.price, v.qm.price);
			qm.fair_bps = RTE_MAX(qm.fair_bps, v.qm.fair_bps);
			has_qm = true;
		}
		sum.rate_bps += st->rate_bps;
		sum.ceil_bps += st->ceil_bps;
		cc.flows += v.flows;
		cc.active += v.active;
		cc.heavy += v.heavy;
		cc.admitted += v.admitted;
		cc.refused += v.refused;
		cc.diverted += v.diverted;
	}
	o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		"parent", cls == 0 ? "" : app->cfg.policy->tree[dir].classes[pk->cbq.parent].name,
		"rate_bps", (json_int_t)pk->cbq.rate, "ceil_bps", (json_int_t)pk->cbq.ceil,
		"prio", (json_int_t)pk->cbq.prio,
		"bytes", (json_int_t)sum.bytes, "pkts", (json_int_t)sum.pkts,
		"drops_flow", (json_int_t)sum.drops_flow, "drops_class", (json_int_t)sum.drops_class,
		"borrowed_bytes", (json_int_t)sum.borrowed, "lent_bytes", (json_int_t)sum.lent,
		"queued_pkts", (json_int_t)sum.qlen, "queued_bytes", (json_int_t)sum.qbytes,
		"backlogged_flows", (json_int_t)sum.backlogged);
	/* What the workers' trees are set to now (their shares add up to this
	 * when rates are split among workers). */
	json_object_set_new(o, "worker_rate_bps", json_integer((json_int_t)sum.rate_bps));
	json_object_set_new(o, "worker_ceil_bps", json_integer((json_int_t)sum.ceil_bps));
	if (per != NULL)
		json_object_set_new(o, "per_worker", per);
	if (pk->is_leaf) {
		json_object_set_new(o, "flows", json_integer((json_int_t)cc.flows));
		json_object_set_new(o, "flows_sending", json_integer((json_int_t)cc.active));
		json_object_set_new(o, "flows_heavy", json_integer((json_int_t)cc.heavy));
		/* DRR's new-flows list and CoDel (lib/sched/drr.h, lib/sched/codel.h). */
		json_object_set_new(o, "new_flows", json_integer((json_int_t)sum.new_flows));
		json_object_set_new(o, "new_deferred", json_integer((json_int_t)sum.new_deferred));
		json_object_set_new(o, "young_flows", json_integer((json_int_t)sum.young_flows));
		json_object_set_new(o, "young_spent", json_integer((json_int_t)sum.young_spent));
		json_object_set_new(o, "drops_aqm", json_integer((json_int_t)sum.drops_aqm));
		/* Refused because the tree's share of the mempool was spent. */
		json_object_set_new(o, "drops_pool", json_integer((json_int_t)sum.drops_pool));
		json_object_set_new(o, "admitted", json_integer((json_int_t)cc.admitted));
		json_object_set_new(o, "refused", json_integer((json_int_t)cc.refused));
		json_object_set_new(o, "diverted", json_integer((json_int_t)cc.diverted));
		json_object_set_new(o, "flow_min_bps", json_integer((json_int_t)pk->flow_min));
		if (pk->marker.type != WEIR_MARK_NONE)
			json_object_set_new(o, "marker", marker_json(app, dir, cls));
	}
	if (has_qm) {
		/* The fifo leaf's queue manager (lib/sched/qm.h, docs/pqm.md). */
		json_object_set_new(o, "aqm", json_string(weir_qm_name(pk->cbq.qm)));
		json_object_set_new(o, "drops_qm", json_integer((json_int_t)sum.drops_qm));
		json_object_set_new(o, "qm", json_pack(
			"{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f}",
			"drops_early", (json_int_t)qm.drops_early,
			"drops_forced", (json_int_t)qm.drops_forced,
			"drops_choke", (json_int_t)qm.drops_choke,
			"drops_victim", (json_int_t)qm.drops_victim,
			"drops_penalty", (json_int_t)qm.drops_penalty,
			"monitor_added", (json_int_t)qm.monitor_added,
			"monitor_full", (json_int_t)qm.monitor_full,
			"monitored", (json_int_t)qm.monitored,
			"monitor_size", (json_int_t)qm.monitor_size,
			"state_bytes", (json_int_t)qm.state_bytes,
			"avg_queue", qm.avg, "price", qm.price, "prob", qm.prob,
			"fair_bps", qm.fair_bps));
	}
	return o;
}

/* One direction's shaping: totals (the root) and every class by name. */
static json_t *
shaping_json(const struct weir_app *app, int dir)
{
	const struct weir_policy_tree *t;
	json_t *classes, *o, *root;
	json_int_t drops_flow = 0, drops_class = 0, qlen = 0, qbytes = 0;

	if (app->cfg.policy == NULL || app->cfg.policy->tree[dir].n_classes == 0)
		return json_null();
	t = &app->cfg.policy->tree[dir];
	classes = json_object();
	for (uint16_t c = 1; c < t->n_classes; c++) {
		json_t *cj = class_json(app, dir, c);

		if (t->classes[c].is_leaf) {
			drops_flow += json_integer_value(json_object_get(cj, "drops_flow"));
			drops_class += json_integer_value(json_object_get(cj, "drops_class"));
			qlen += json_integer_value(json_object_get(cj, "queued_pkts"));
			qbytes += json_integer_value(json_object_get(cj, "queued_bytes"));
		}
		json_object_set_new(classes, t->classes[c].name, cj);
	}
	root = class_json(app, dir, 0);
	o = json_pack("{s:I, s:O, s:O, s:I, s:I, s:I, s:I, s:s, s:o}",
		"rate_bps", (json_int_t)t->classes[0].cbq.rate,
		"bytes", json_object_get(root, "bytes"), "pkts", json_object_get(root, "pkts"),
		"drops_flow", drops_flow, "drops_class", drops_class,
		"queued_pkts", qlen, "queued_bytes", qbytes,
		"default", t->classes[t->default_leaf].name,
		"classes", classes);
	json_decref(root);
	return o;
}

/* The Lua policy's hooks: calls and errors per kind, what they moved, and
 * the workers' flow events; null without policy.script. */
static json_t *
hooks_json(const struct weir_app *app)
{
	static const char *const kind[WEIR_LUA__HOOKS] = { "timer", "on_flow", "on_flow_end",
							    "on_stats" };
	const struct weir_lua_counters *lc;
	uint64_t sent = 0, dropped = 0, applied = 0, stale = 0;
	json_t *o, *k;

	if (app->lua == NULL)
		return json_null();
	lc = weir_lua_counters(app->lua);
	k = json_object();
	for (int h = 0; h < WEIR_LUA__HOOKS; h++)
		if (weir_lua_has(app->lua, (enum weir_lua_hook)h))
			json_object_set_new(k, kind[h], json_pack("{s:I, s:I}",
				"calls", (json_int_t)lc->hook[h].calls,
				"errors", (json_int_t)lc->hook[h].errors));
	for (unsigned int i = 0; i < app->n_workers; i++) {
		struct weir_worker_info wi;

		weir_worker_info(app->workers[i], &wi);
		sent += wi.events_sent;
		dropped += wi.events_dropped;
		applied += wi.cmds_applied;
		stale += wi.cmds_stale;
	}
	/* The script's path and its last error may be any bytes (a message
	 * quotes the script): repaired so the whole snapshot never fails. */
	o = json_pack("{s:o, s:o, s:I, s:o, s:I, s:I, s:I, s:I, s:I, s:I}",
		"script", weir_json_text(app->cfg.policy_script), "hooks", k,
		"errors", (json_int_t)app->hook_errors, "last_error", weir_json_text(app->hook_error),
		"events_sent", (json_int_t)sent, "events_dropped", (json_int_t)dropped,
		"moves", (json_int_t)app->hook_moves,
		"moves_dropped", (json_int_t)app->hook_moves_dropped,
		"moves_applied", (json_int_t)applied, "moves_stale", (json_int_t)stale);
	/* Wakes whose hook time ran out with events still waiting. */
	json_object_set_new(o, "wakes_over_budget", json_integer((json_int_t)app->hook_wakes_full));
	return o;
}

/* PostACK's ACK queues, summed over the workers. */
static json_t *
postack_json(const struct weir_app *app)
{
	struct weir_postack_stats sum = { 0 };
	bool any = false;

	for (unsigned int i = 0; i < app->n_workers; i++) {
		struct weir_postack_stats copy;
		const struct weir_postack_stats *st = &copy;

		if (weir_worker_postack_stats(app->workers[i], &copy) != 0)
			continue;
		any = true;
		sum.held += st->held;
		sum.released += st->released;
		sum.flushed += st->flushed;
		sum.idle_released += st->idle_released;
		sum.paced += st->paced;
		sum.caught_up += st->caught_up;
		sum.evicted += st->evicted;
		sum.pool_full += st->pool_full;
		sum.as_mbuf += st->as_mbuf;
		sum.kept_mbuf += st->kept_mbuf;
		sum.mbufs += st->mbufs;
		sum.nombuf += st->nombuf;
		sum.clamp_unknown += st->clamp_unknown;
		sum.in_use += st->in_use;
		sum.peak += st->peak;
	}
	if (!any)
		return json_null();
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		"held", (json_int_t)sum.held, "released", (json_int_t)sum.released,
		"flushed", (json_int_t)sum.flushed, "idle_released", (json_int_t)sum.idle_released,
		"paced", (json_int_t)sum.paced, "caught_up", (json_int_t)sum.caught_up,
		"limit_released", (json_int_t)sum.evicted, "pool_full", (json_int_t)sum.pool_full,
		"as_mbuf", (json_int_t)sum.as_mbuf, "nombuf", (json_int_t)sum.nombuf,
		"clamp_unknown", (json_int_t)sum.clamp_unknown,
		"kept_mbuf", (json_int_t)sum.kept_mbuf, "acks_in_mbufs", (json_int_t)sum.mbufs,
		"acks_held", (json_int_t)sum.in_use, "acks_held_peak", (json_int_t)sum.peak,
		"records", (json_int_t)app->cfg.postack_acks * app->n_workers,
		"bytes_per_ack", (json_int_t)weir_postack_bytes_per_ack());
}

/* The ipabr mode's counters, summed over the workers (docs/ipabr.md). */
static json_t *
ipabr_json(const struct weir_app *app)
{
	struct weir_ipabr_stats sum = { 0 };

	for (unsigned int i = 0; i < app->n_workers; i++) {
		struct weir_ipabr_stats st;

		weir_ipabr_stats_copy(weir_worker_modes_view(app->workers[i]), &st);
		sum.windows += st.windows;
		sum.cut += st.cut;
		sum.rtt_right += st.rtt_right;
		sum.rtt_left += st.rtt_left;
		sum.karn += st.karn;
		sum.left_unseen += st.left_unseen;
		sum.young += st.young;
		sum.sub_mss += st.sub_mss;
		sum.unknown += st.unknown;
		sum.no_ack += st.no_ack;
		sum.bad_weight += st.bad_weight;
	}
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		"windows", (json_int_t)sum.windows, "cut", (json_int_t)sum.cut,
		"rtt_samples_receiver", (json_int_t)sum.rtt_right,
		"rtt_samples_sender", (json_int_t)sum.rtt_left, "karn", (json_int_t)sum.karn,
		"left_unseen", (json_int_t)sum.left_unseen, "young", (json_int_t)sum.young,
		"sub_mss", (json_int_t)sum.sub_mss, "unknown", (json_int_t)sum.unknown,
		"no_ack_flows", (json_int_t)sum.no_ack, "bad_weight", (json_int_t)sum.bad_weight,
		"bytes_per_flow", (json_int_t)weir_ipabr_bytes_per_flow());
}

/* pep's premature ACKs and copies, summed over the workers (read while
 * they write: counters a packet apart at worst, like the others here). */
static json_t *
pep_json(const struct weir_app *app)
{
	struct weir_pep_stats s = { 0 };
	bool any = false;

	for (unsigned int i = 0; i < app->n_workers; i++) {
		struct weir_pep_stats copy;
		const struct weir_pep_stats *w = &copy;

		if (!weir_pep_stats_copy(weir_worker_modes_view(app->workers[i]), &copy))
			continue;
		any = true;
		s.flows += w->flows;
		s.flows_full += w->flows_full;
		s.copied += w->copied;
		s.packed += w->packed;
		s.pack_sent += w->pack_sent;
		s.withheld += w->withheld;
		s.win_updates += w->win_updates;
		s.real_dropped += w->real_dropped;
		s.real_passed += w->real_passed;
		s.purged += w->purged;
		s.sacked += w->sacked;
		s.fast_retx += w->fast_retx;
		s.rto_retx += w->rto_retx;
		s.give_ups += w->give_ups;
		s.r_resets += w->r_resets;
		s.rst_sent += w->rst_sent;
		s.flow_cap += w->flow_cap;
		s.pool_cap += w->pool_cap;
		s.buf_full += w->buf_full;
		s.not_packable += w->not_packable;
		s.nombuf += w->nombuf;
		s.ended_copies += w->ended_copies;
		s.class_dropped += w->class_dropped;
		s.lost_resent += w->lost_resent;
		s.rst_ignored += w->rst_ignored;
		s.rst_held += w->rst_held;
		s.ece_sent += w->ece_sent;
		s.retx_again += w->retx_again;
		s.flushed += w->flushed;
		s.drain_resets += w->drain_resets;
		s.flushed_owed += w->flushed_owed;
		s.copies += w->copies;
		s.copy_cap += w->copy_cap;
		s.active += w->active;
		s.peak_copies = RTE_MAX(s.peak_copies, w->peak_copies);
	}
	if (!any)
		return json_null();
	json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		"flows", (json_int_t)s.flows, "flows_full", (json_int_t)s.flows_full,
		"copied", (json_int_t)s.copied, "packed", (json_int_t)s.packed,
		"pack_sent", (json_int_t)s.pack_sent, "withheld", (json_int_t)s.withheld,
		"win_updates", (json_int_t)s.win_updates, "real_dropped", (json_int_t)s.real_dropped,
		"real_passed", (json_int_t)s.real_passed, "purged", (json_int_t)s.purged,
		"sacked", (json_int_t)s.sacked, "fast_retx", (json_int_t)s.fast_retx,
		"rto_retx", (json_int_t)s.rto_retx);
	json_t *o2 = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		"give_ups", (json_int_t)s.give_ups, "r_resets", (json_int_t)s.r_resets, "rst_sent", (json_int_t)s.rst_sent,
		"flow_cap", (json_int_t)s.flow_cap, "pool_cap", (json_int_t)s.pool_cap,
		"buf_full", (json_int_t)s.buf_full, "not_packable", (json_int_t)s.not_packable,
		"nombuf", (json_int_t)s.nombuf, "ended_copies", (json_int_t)s.ended_copies,
		"copies", (json_int_t)s.copies, "copy_cap", (json_int_t)s.copy_cap,
		"active", (json_int_t)s.active, "peak_copies", (json_int_t)s.peak_copies,
		"bytes_per_flow", (json_int_t)weir_pep_bytes_per_flow(),
		"bytes_per_copy", (json_int_t)weir_pep_bytes_per_copy());

	json_object_update(o, o2);
	json_decref(o2);
	o2 = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		"class_dropped", (json_int_t)s.class_dropped, "lost_resent", (json_int_t)s.lost_resent,
		"rst_ignored", (json_int_t)s.rst_ignored, "rst_held", (json_int_t)s.rst_held,
		"flushed", (json_int_t)s.flushed, "drain_resets", (json_int_t)s.drain_resets,
		"flushed_owed", (json_int_t)s.flushed_owed, "ece_sent", (json_int_t)s.ece_sent,
		"retx_again", (json_int_t)s.retx_again);
	json_object_update(o, o2);
	json_decref(o2);
	return o;
}

json_t *
weir_stats_json(const struct weir_app *app)
{
	struct weir_worker_counters sum;
	struct weir_flow_stats fs;
	json_t *workers = json_array(), *o;
	json_t *ports = json_object();
	double hz = (double)rte_get_tsc_hz();

	sum_workers(app, &sum);
	sum_flows(app, &fs);
	for (int r = 0; r < WEIR_PORT__COUNT; r++)
		json_object_set_new(ports, role_name[r], port_json(app, &sum.port[r], r));
	for (unsigned int i = 0; i < app->n_workers; i++) {
		struct weir_worker_info wi;
		struct weir_worker_counters wc;
		struct weir_postack_stats pa;
		json_t *wo;

		weir_worker_info(app->workers[i], &wi);
		weir_worker_port_counters(app->workers[i], &wc);
		wo = json_pack("{s:i, s:i, s:I, s:I, s:I, s:f, s:I, s:I, s:{s:I, s:I}}",
			"lcore", (int)app->cfg.worker_lcores[i], "queue", (int)wi.queue,
			"loops", (json_int_t)wi.loops, "idle_loops", (json_int_t)wi.idle_loops,
			"sleeps", (json_int_t)wi.sleeps, "busy_s", (double)wi.busy_tsc / hz,
			"flows_active", (json_int_t)weir_flow_table_stats(app->flows[i])->active,
			"rate_updates", (json_int_t)wi.rate_updates,
			/* Frames of flows split across workers, by rx port. */
			"flow_split", "lan", (json_int_t)wc.port[WEIR_PORT_LAN].flow_split,
				      "wan", (json_int_t)wc.port[WEIR_PORT_WAN].flow_split);
		/* Segments of TCP-MD5/AO flows this worker left untouched, by rx port. */
		json_object_set_new(wo, "tcp_signed", json_pack("{s:I, s:I}",
			"lan", (json_int_t)wc.port[WEIR_PORT_LAN].tcp_signed,
			"wan", (json_int_t)wc.port[WEIR_PORT_WAN].tcp_signed));
		/* Which worker holds and paces ACKs (TCR's few held ACKs are
		 * missed by sampling acks_held; these only grow). */
		json_object_set_new(wo, "postack", weir_worker_postack_stats(app->workers[i], &pa) != 0
				    ? json_null()
				    : json_pack("{s:I, s:I, s:I}", "held", (json_int_t)pa.held,
						"paced", (json_int_t)pa.paced,
						"acks_held", (json_int_t)pa.in_use));
		/* Class changes taken live (subs_live.c): applied, failed, stale, latency. */
		json_object_set_new(wo, "class_cmds", subs_live_worker_json(app, i));
		json_array_append_new(workers, wo);
	}
	o = json_pack("{s:s, s:f, s:o, s:{s:o, s:o}, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:o, s:I, "
			 "s:o, s:{s:I, s:I, s:I, s:o, s:o, s:I, s:I, s:I}, s:{s:I, s:I}}",
		"version", WEIR_VERSION,
		"uptime_s", (double)(rte_rdtsc() - app->start_tsc) / hz,
		"ports", ports,
		"shaping", "outbound", shaping_json(app, WEIR_PORT_LAN),
			   "inbound", shaping_json(app, WEIR_PORT_WAN),
		"postack", postack_json(app),
		"flows", "active", (json_int_t)fs.active, "capacity",
			 (json_int_t)app->cfg.flow_capacity * app->n_workers,
			 "inserted", (json_int_t)fs.inserted, "expired", (json_int_t)fs.expired,
			 "full", (json_int_t)fs.full, "lookups", (json_int_t)fs.lookups,
		"workers", workers,
		"rebalances", (json_int_t)app->rebalances,
		"hooks", hooks_json(app),
		"policy", "epoch", (json_int_t)(app->cfg.policy ? app->cfg.policy->epoch : 0),
			  "reloads", (json_int_t)app->reloads,
			  "reload_failures", (json_int_t)app->reload_failures,
			  "reload_error", weir_json_text(app->reload_error),
			  "token_error", weir_json_text(app->token_error),
			  "switch_prepare_us", (json_int_t)app->switch_prepare_us,
			  "switch_take_us", (json_int_t)app->switch_take_us,
			  "subscribers_full", (json_int_t)app->subs_full,
		"mbufs", "total", (json_int_t)app->mp->size,
			 "in_use", (json_int_t)rte_mempool_in_use_count(app->mp));
	{
		/* How each port spreads flows over the workers, and what the
		 * start-up self-test found (app/weir/ports.c). */
		json_t *d = json_pack("{s:s}", "config", app->cfg.distribution == WEIR_DIST_KERNEL_FANOUT
					       ? "kernel-fanout" : "rss");

		for (int r = 0; r < WEIR_PORT__COUNT; r++) {
			const struct weir_port_rss *x = &app->ports.rss[r];

			json_object_set_new(d, r == WEIR_PORT_LAN ? "lan" : "wan",
				json_pack("{s:s, s:s, s:I, s:I}", "hash", x->hash ? x->hash : "none",
					  "check", x->check ? x->check : "none",
					  "selftest_flows", (json_int_t)x->selftest_flows,
					  "selftest_split", (json_int_t)x->selftest_split));
		}
		json_object_set_new(o, "distribution", d);
	}
	json_object_set_new(o, "ipsec", weir_ipsec_json(app));
	/* Switches some worker took after the wait (in force all the same;
	 * the previous policy is freed once it did). */
	json_object_set_new(json_object_get(o, "policy"), "switches_late",
			    json_integer((json_int_t)app->switches_late));
	json_object_set_new(o, "ipabr", ipabr_json(app));
	json_object_set_new(o, "capture", weir_captures_json(app));
	json_object_set_new(o, "ipfix", weir_ipfix_json(app));
	json_object_set_new(o, "pep", pep_json(app));
	json_object_set_new(o, "subs_live", subs_live_json());
	return o;
}

int
weir_stats_write_file(const struct weir_app *app)
{
	char tmp[sizeof(app->cfg.stats_file) + 8];
	json_t *j;
	int rc;

	if (app->cfg.stats_file[0] == '\0')
		return 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp", app->cfg.stats_file);
	j = weir_stats_json(app);
	rc = json_dump_file(j, tmp, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_decref(j);
	/* Readers never see a half-written file. */
	if (rc == 0 && rename(tmp, app->cfg.stats_file) != 0)
		rc = -1;
	return rc;
}

void
weir_stats_print(const struct weir_app *app, FILE *out)
{
	struct weir_worker_counters sum;
	struct weir_flow_stats fs;

	sum_workers(app, &sum);
	sum_flows(app, &fs);
	for (int r = 0; r < WEIR_PORT__COUNT; r++) {
		const struct weir_port_counters *pc = &sum.port[r];

		fprintf(out, "port %s: rx %" PRIu64 " tx %" PRIu64 " forwarded %" PRIu64 " tx_full %"
			PRIu64 " dropped %" PRIu64 " refused %" PRIu64 " non_ip %" PRIu64
			" l2_control %" PRIu64 " fragments %" PRIu64 " malformed %" PRIu64
			" malformed_dropped %" PRIu64 " flow_full %" PRIu64 " flow_split %" PRIu64 "\n",
			role_name[r], pc->rx_pkts, pc->tx_pkts, pc->forwarded, pc->tx_full, pc->dropped,
			pc->refused, pc->non_ip, pc->l2_control, pc->fragments, pc->malformed,
			pc->malformed_dropped, pc->flow_full, pc->flow_split);
		if (pc->tcp_signed != 0)
			fprintf(out, "  tcp_signed %" PRIu64 "\n", pc->tcp_signed);
		if (pc->l3_control != 0)
			fprintf(out, "  l3_control %" PRIu64 " l3_control_dropped %" PRIu64 "\n",
				pc->l3_control, pc->l3_control_dropped);
		if (pc->ipsec != 0)
			fprintf(out, "  ipsec: pkts %" PRIu64 " gaps %" PRIu64 " late %" PRIu64 " dup %"
				PRIu64 " old %" PRIu64 " resync %" PRIu64 " plain %" PRIu64 " untracked %"
				PRIu64 "\n", pc->ipsec, pc->ipsec_gaps, pc->ipsec_late, pc->ipsec_dup,
				pc->ipsec_old, pc->ipsec_resync, pc->ipsec_plain, pc->ipsec_untracked);
		for (unsigned int m = 1; m < WEIR_MAL__COUNT; m++)
			if (pc->malformed_by[m] != 0)
				fprintf(out, "  malformed %s: %" PRIu64 "\n", weir_malformed_name(m),
					pc->malformed_by[m]);
	}
	fprintf(out, "flows: active %u inserted %" PRIu64 " expired %" PRIu64 " full %" PRIu64 "\n",
		fs.active, fs.inserted, fs.expired, fs.full);
	fflush(out);
}
