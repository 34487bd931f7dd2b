/* SPDX-License-Identifier: BSD-3-Clause
 * The ipabr mode on the thesis' satellite path, on a fake clock
 * (test/unit/satsim.h): 32 window-limited senders, 1.536 Mbit/s, 450 ms
 * each way, weir's default flow queue (128 packets). What IP-ABR promises
 * there: every flow held to its share's pipe (Eq. 4.6), so the senders'
 * round trip stays near the path's and nothing stands in weir's queue,
 * and the weights hold from the start, not only once flows grow up.
 *
 * WEIR_SIM_TRACE=1 prints the class's queue, the senders' RTT and the
 * flows' filtered round-trip halves every 5 s (the measurement behind
 * docs/ipabr.md "Limits").
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include "unit.h"
#include "satsim.h"
#include "drr.h"
#include "ipabr.h"
#include "tcpwin.h"

static bool trace;

static struct weir_ipabr *
ia_of(struct sim *s)
{
	return s->r.w->svc.mode_state[WEIR_MODE_IPABR];
}

/* Median over the started flows of the senders' smoothed RTT, ms. */
static double
srtt_ms(struct sim *s)
{
	double v[SIM_MAXF];
	unsigned int k = 0;

	for (unsigned int i = 0; i < s->n; i++)
		if (s->f[i].srtt)
			v[k++] = (double)s->f[i].srtt / (double)s->ms;
	for (unsigned int i = 1; i < k; i++)
		for (unsigned int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return k ? v[k / 2] : 0;
}

static void
trace_line(struct sim *s, const char *tag)
{
	const struct weir_ipabr *ia = ia_of(s);
	const struct weir_ipabr_class *cs = &ia->dir[0].cls[1];
	double l = 0, r = 0, lmax = 0;
	unsigned int n = 0;

	if (!trace)
		return;
	for (unsigned int slot = 0; slot < ia->n_flows; slot++) {
		const struct weir_ipabr_flow *tf = &ia->f[0][slot];

		if (tf->rtt_right == 0)
			continue;
		l += (double)tf->rtt_left;
		r += (double)tf->rtt_right;
		lmax = RTE_MAX(lmax, (double)tf->rtt_left);
		n++;
	}
	printf("%s t=%5.1f s queue %4u pkts srtt %7.0f ms  left %6.1f (max %6.1f) right %6.1f ms"
	       "  samples L %" PRIu64 " R %" PRIu64 " young %" PRIu64 " retx %" PRIu64
	       "  active %u heavy %u unit/avail %.3f\n",
	       tag, (double)(s->now - s->hz) / (double)s->hz, sim_qlen(s, 1), srtt_ms(s),
	       n ? l / n / (double)s->ms : 0, lmax / (double)s->ms, n ? r / n / (double)s->ms : 0,
	       ia->st.rtt_left, ia->st.rtt_right, ia->st.young, s->retx, cs->wsum, cs->wheavy,
	       (double)cs->unit_bpt / (double)RTE_MAX(cs->avail_bpt, 1u));
}

/* Bytes each flow got acknowledged between two points of the run. */
static void
acked_now(const struct sim *s, uint64_t *out)
{
	for (unsigned int i = 0; i < s->n; i++)
		out[i] = s->f[i].acked;
}

/*
 * 32 flows, one ipabr class at 1.536 Mbit/s, 450 ms each way, default
 * queue limits, starts spread as the thesis spreads them (8 flows every
 * 0.5 s, Sec. 5.2.2). After 60 s every flow is window-limited to its
 * share's pipe: weir's queue is a few packets per flow at most, not
 * seconds of data, and the senders see about the path's round trip.
 */
static void
test_satellite_queue(void)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 1536000, .mode = WEIR_MODE_IPABR, .young = WEIR_DRR_YOUNG_DEFAULT },
			  { .rate = 0 } },
	};
	struct sim *s = rte_zmalloc("sim", sizeof(*s), 64);
	uint64_t a0[SIM_MAXF], a1[SIM_MAXF];
	double lo = 1e18, hi = 0;
	uint32_t q;
	double rtt;

	if (s == NULL || sim_init(s, &pc, "sat_q", 32, 5000, 450) != 0) {
		CHECK(0, "sim");
		return;
	}
	for (unsigned int i = 0; i < 32; i++)
		s->f[i].start = s->hz + (i / 8) * (s->hz / 2);
	for (int t = 1; t <= 60; t += 1) {
		sim_run_until(s, s->hz + (uint64_t)t * s->hz);
		trace_line(s, "sat");
		if (t == 40)
			acked_now(s, a0);
	}
	acked_now(s, a1);
	for (unsigned int i = 0; i < 32; i++) {
		double kbps = (double)(a1[i] - a0[i]) * 8 / 20 / 1e3;

		lo = RTE_MIN(lo, kbps);
		hi = RTE_MAX(hi, kbps);
	}
	q = sim_qlen(s, 1);
	rtt = srtt_ms(s);
	/* Each flow's share is 48 kbit/s on the wire, 46.3 of payload. */
	CHECK(lo > 40 && hi < 53, "every flow near its share from 40 to 60 s (%.1f-%.1f kbit/s)", lo, hi);
	/* Headroom (1 ms) and the window's rounding to whole segments: a
	 * few packets a flow; 2 s of data is 250 packets. */
	CHECK(q <= 64, "no standing queue at weir after 60 s (%u packets)", q);
	CHECK(rtt < 1400, "the senders' RTT near the path's 900 ms (%.0f ms)", rtt);
	CHECK(s->retx == 0, "nothing retransmitted (%" PRIu64 ")", s->retx);
	sim_free(s);
	rte_free(s);
}

/* The silly-window credit (Eq. 5.4-5.6) where it should matter: receivers
 * without window scaling (weir writes windows to the byte) and senders that
 * send whole segments only. 64 flows over 900 ms share 1.536 Mbit/s: Eq.
 * 4.6's window is 1.85 segments. Without the credit every flow rounds it
 * down to one (the thesis' Sec. 5.3: a bit over half the class); with it
 * the windows alternate between 1 and 2 segments and the class is full. */
static double
sws_run(bool credit)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 1536000, .mode = WEIR_MODE_IPABR, .young = WEIR_DRR_YOUNG_DEFAULT },
			  { .rate = 0 } },
	};
	struct sim *s = rte_zmalloc("sim", sizeof(*s), 64);
	uint64_t a0 = 0, a1 = 0;

	if (s == NULL || sim_init(s, &pc, credit ? "sws_on" : "sws_off", 64, 5000, 450) != 0) {
		CHECK(0, "sim");
		return 0;
	}
	s->r.w->svc.conf.ipabr_no_sws_credit = !credit;
	for (unsigned int i = 0; i < 64; i++)
		s->f[i].start = s->hz + (i / 8) * (s->hz / 2);
	sim_run_until(s, s->hz + 20 * s->hz);
	trace_line(s, credit ? "sws on " : "sws off");
	for (unsigned int i = 0; i < 64; i++)
		a0 += s->f[i].acked;
	sim_run_until(s, s->hz + 40 * s->hz);
	trace_line(s, credit ? "sws on " : "sws off");
	for (unsigned int i = 0; i < 64; i++)
		a1 += s->f[i].acked;
	sim_free(s);
	rte_free(s);
	/* Payload over the class's payload rate (1448 of each 1502-byte frame). */
	return (double)(a1 - a0) * 8 / 20 / (1536000.0 * SIM_SEG / (SIM_SEG + 54));
}

static void
test_sws_scale0(void)
{
	double on, off;

	sim_rx_ws = 0;
	off = sws_run(false);
	on = sws_run(true);
	sim_rx_ws = 7;
	if (trace)
		printf("sws scale 0: class payload used, credit off %.3f, on %.3f\n", off, on);
	/* Measured 0.55 and 0.92 (a window of 1 segment is 0.54 of 1.85) */
	CHECK(off < 0.70, "without the credit the windows round down to one segment (%.3f)", off);
	CHECK(on > 0.85 && on > off + 0.25, "with it the class is nearly full (%.3f)", on);
}

/* Groups of 8 flows with rule weights w[g] (LAN ports 5000 + 8g ...) in one
 * ipabr class of `bps` over `wan_ms` each way; each group's share of what
 * the flows got acknowledged from `from` to `to` s. */
static void
weighted_run(const char *name, const uint8_t *wt, unsigned int groups, uint64_t bps,
	     uint32_t wan_ms, unsigned int from, unsigned int to, double *share, double *flow_kbps)
{
	struct weir_policy_rule_conf rules[4];
	struct weir_policy_conf pc = {
		.tree = { { .rate = bps, .mode = WEIR_MODE_IPABR, .young = WEIR_DRR_YOUNG_DEFAULT },
			  { .rate = 0 } },
		.n_rules = groups, .rules = rules,
	};
	struct sim *s = rte_zmalloc("sim", sizeof(*s), 64);
	uint64_t a0[SIM_MAXF], a1[SIM_MAXF], tot = 0, g[4] = { 0 };

	memset(rules, 0, sizeof(rules));
	for (unsigned int k = 0; k < groups; k++) {
		snprintf(rules[k].class_name, sizeof(rules[k].class_name), "default");
		rules[k].weight = wt[k];
		rules[k].match.port[WEIR_CLS_LAN] =
			(struct weir_cls_ports){ (uint16_t)(5000 + 8 * k), (uint16_t)(5007 + 8 * k) };
	}
	if (s == NULL || sim_init(s, &pc, name, 8 * groups, 5000, wan_ms) != 0) {
		CHECK(0, "sim");
		return;
	}
	/* The thesis' start: 8 flows every 0.5 s, the groups interleaved. */
	for (unsigned int i = 0; i < 8 * groups; i++)
		s->f[i].start = s->hz + ((i % 8) * groups + i / 8) / 8 * (s->hz / 2);
	sim_run_until(s, s->hz + from * s->hz);
	trace_line(s, name);
	acked_now(s, a0);
	sim_run_until(s, s->hz + to * s->hz);
	trace_line(s, name);
	acked_now(s, a1);
	for (unsigned int i = 0; i < 8 * groups; i++) {
		g[i / 8] += a1[i] - a0[i];
		tot += a1[i] - a0[i];
	}
	for (unsigned int k = 0; k < groups; k++) {
		share[k] = tot ? (double)g[k] / (double)tot : 0;
		flow_kbps[k] = (double)g[k] * 8 / 8 / (to - from) / 1e3;
	}
	sim_free(s);
	rte_free(s);
}

/* Weights from the start (Sec. 7.4.2; issue: 24 flows 1:3:6 on 2 Mbit/s
 * over 600 ms got 0.21 / 0.31 / 0.48 from 20 to 60 s, every flow alike
 * for the first 30 s while a queue of 1,500-2,900 packets stood at weir),
 * and 1:2:4:8 over the satellite path (the weight-1 flows below one
 * segment per round trip: 1 : 1.46 : 2.87 : 5.89 in the testbed). Both
 * hold here with the code before the two fixes as well: the model senders
 * do not reproduce those runs (no delayed ACKs, no cubic, no jitter), so
 * this guards the weights on a fake clock; the testbed runs decide. */
static void
test_weights_early(void)
{
	const uint8_t w136[3] = { 1, 3, 6 }, w1248[4] = { 1, 2, 4, 8 };
	double sh[4], kb[4];

	weighted_run("w136", w136, 3, 2000000, 600, 20, 40, sh, kb);
	if (trace)
		printf("1:3:6 from 20 to 40 s: %.3f / %.3f / %.3f\n", sh[0], sh[1], sh[2]);
	/* Measured 0.083 / 0.315 / 0.603 (the weight-1 flows' 2.5-segment
	 * windows lose a little to whole segments; DRR gives it to the rest) */
	CHECK(sh[0] > 0.07 && sh[0] < 0.12 && fabs(sh[1] - 0.3) < 0.03 && fabs(sh[2] - 0.6) < 0.04,
	      "1:3:6 from 20 s on: %.3f / %.3f / %.3f", sh[0], sh[1], sh[2]);
	weighted_run("w1248", w1248, 4, 1536000, 450, 20, 60, sh, kb);
	if (trace)
		printf("1:2:4:8 from 20 to 60 s, kbit/s a flow: %.1f / %.1f / %.1f / %.1f"
		       " (1 : %.2f : %.2f : %.2f)\n", kb[0], kb[1], kb[2], kb[3],
		       kb[1] / kb[0], kb[2] / kb[0], kb[3] / kb[0]);
	CHECK(kb[1] / kb[0] > 1.7 && kb[2] / kb[1] > 1.8 && kb[3] / kb[2] > 1.8,
	      "1:2:4:8 (1 : %.2f : %.2f : %.2f)", kb[1] / kb[0], kb[2] / kb[0], kb[3] / kb[0]);
}

int
main(int argc, char **argv)
{
	RTE_SET_USED(argc);
	trace = getenv("WEIR_SIM_TRACE") != NULL;
	unit_eal_init(argv[0], "ipabr_sat", "512");
	mp = rte_pktmbuf_pool_create("sat_mp", 16384, 0, WEIR_MBUF_PRIV_SIZE, 2048, SOCKET_ID_ANY);
	if (mp == NULL) {
		printf("no mempool\n");
		return 2;
	}
	rig_flow_limit = 128;           /* weir's default (shaping.flow_limit) */
	test_satellite_queue();
	test_sws_scale0();
	test_weights_early();
	CHECK(rte_mempool_in_use_count(mp) == 0, "no mbuf leaked (%u in use)",
	      rte_mempool_in_use_count(mp));
	return unit_report();
}
