/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for last miles (lib/worker/lastmile.h, lib/worker/worker_ack.c, lib/classify/policy.c): the policy's
 * targets, the advertised-window clamp (pipe + buffer + one segment, never
 * raised), the per-flow opt-out, and the fairness exemption (a postack
 * leaf holds none of an exempt flow's ACKs; its frames are shaped pfq).
 */
#include <netinet/in.h>
#include <string.h>

#include "unit.h"
#include "rig.h"
#include "lastmile.h"
#include "ackstore_int.h"

#define LM_RATE 56000ull
#define LM_RTT 350
#define LM_BUF 3
#define MSS 256
/* 56 kbit/s x 350 ms = 2450 bytes: 7 segments of 256 + 80 on the wire, plus
 * the buffer's 3, of 256 - 12 bytes of data each. */
#define LM_LIMIT ((2450u / (MSS + 80) + LM_BUF) * (MSS - 12))

/* Set: every segment seg() makes carries a TCP-MD5 signature (RFC 2385's
 * option, 18 bytes, and 2 of padding; the digest is not checked here). */
static bool seg_md5;

/* A TCP segment like tcp_frame's, with a window and, on SYNs, MSS and
 * window-scale options (shift 2). */
static struct rte_mbuf *
seg(int in, uint16_t lport, uint8_t flags, uint32_t seq, uint32_t ack, uint16_t win, uint16_t payload)
{
	const int syn = flags & SYN;
	const uint16_t opt = (uint16_t)((syn ? 8 : 0) + (seg_md5 ? 20 : 0));
	struct rte_mbuf *m = tcp_frame(in, 1, lport, 1, 80, flags, seq, 0);
	uint8_t *f;
	uint16_t len = (uint16_t)(14 + 20 + 20 + opt + payload);

	rte_pktmbuf_reset(m);
	f = (uint8_t *)rte_pktmbuf_append(m, len);
	{
		struct rte_mbuf *t = tcp_frame(in, 1, lport, 1, 80, flags, seq, 0);

		memcpy(f, rte_pktmbuf_mtod(t, uint8_t *), 54);
		rte_pktmbuf_free(t);
	}
	memset(f + 54, 0, len - 54u);
	f[16] = (uint8_t)((len - 14) >> 8);
	f[17] = (uint8_t)(len - 14);
	f[42] = (uint8_t)(ack >> 24);
	f[43] = (uint8_t)(ack >> 16);
	f[44] = (uint8_t)(ack >> 8);
	f[45] = (uint8_t)ack;
	f[46] = (uint8_t)((5 + opt / 4) << 4);
	f[48] = (uint8_t)(win >> 8);
	f[49] = (uint8_t)win;
	if (syn) {
		uint8_t o[8] = { 2, 4, MSS >> 8, MSS & 0xff, 1, 3, 3, 2 };

		memcpy(f + 54, o, 8);
	}
	if (seg_md5) {
		uint8_t *o = f + 54 + (syn ? 8 : 0);

		o[0] = 1;
		o[1] = 1;
		o[2] = 19;
		o[3] = 18;
		for (int i = 0; i < 16; i++)
			o[4 + i] = (uint8_t)(0xa0 + i);
	}
	return m;
}

static uint16_t
win_of(struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);

	return (uint16_t)(f[48] << 8 | f[49]);
}

static void
test_policy_targets(void)
{
	struct weir_policy_class_conf cls[2] = {
		{ .name = "slow", .rate = 1000000, .mode = WEIR_MODE_POSTACK,
		  .last_mile = { .rate = LM_RATE, .rtt_ms = LM_RTT, .buffer = LM_BUF, .flags = WEIR_LM_EXEMPT } },
		{ .name = "bulk", .rate = 500000, .mode = WEIR_MODE_POSTACK },
	};
	struct weir_policy_rule_conf rules[3] = {
		{ .class_name = "slow", .match = { .port = { [3] = { 80, 80 } } } },
		{ .class_name = "slow", .match = { .port = { [3] = { 81, 81 } } },
		  .last_mile = { .flags = WEIR_LM_OFF } },
		{ .class_name = "bulk", .match = { .port = { [3] = { 82, 82 } } },
		  .last_mile = { .rate = 9600, .rtt_ms = 900, .buffer = 20 } },
	};
	struct weir_policy_conf pc = {
		.tree = { { .rate = 1500000, .n_classes = 2, .classes = cls, .default_class = "bulk" },
			  { .rate = 1500000, .n_classes = 2, .classes = cls, .default_class = "bulk" } },
		.n_rules = 3, .rules = rules,
	};
	struct weir_policy_err e;
	struct weir_policy *p = weir_policy_build(&pc, 1, &e);
	int t_slow, t_off = -1, t_ltn = -1;

	CHECK(p != NULL, "policy: %s", e.msg);
	if (p == NULL)
		return;
	t_slow = weir_policy_target_find(p, "slow");
	for (int i = 1; i < p->n_targets; i++) {
		if (strcmp(p->targets[i].name, "slow") == 0 && p->targets[i].lm_flags == 0)
			t_off = i;
		if (strcmp(p->targets[i].name, "bulk") == 0 && p->targets[i].lm_flags != 0)
			t_ltn = i;
	}
	CHECK(t_slow > 0 && p->targets[t_slow].lm_flags == (WEIR_LM_ON | WEIR_LM_EXEMPT) &&
	      p->targets[t_slow].lm_pipe == 2450 && p->targets[t_slow].lm_buffer == LM_BUF,
	      "class's last mile: flags %x pipe %u", t_slow > 0 ? p->targets[t_slow].lm_flags : 0,
	      t_slow > 0 ? p->targets[t_slow].lm_pipe : 0);
	CHECK(t_off > 0 && t_off != t_slow, "a rule's opt-out is its own target without a last mile");
	CHECK(t_ltn > 0 && p->targets[t_ltn].lm_pipe == 1080 && p->targets[t_ltn].lm_buffer == 20 &&
	      !(p->targets[t_ltn].lm_flags & WEIR_LM_EXEMPT), "a rule's own last mile (not exempt)");
	CHECK(weir_policy_target_find(p, "bulk") != t_ltn, "hooks naming bulk get the class's target");
	weir_policy_free(p);

	rules[2].last_mile.rtt_ms = 0;
	p = weir_policy_build(&pc, 1, &e);
	CHECK(p == NULL && e.kind == WEIR_POLICY_ERR_RULE && e.index == 2, "rtt 0 refused: %s", e.msg);
	weir_policy_free(p);
}

/* A download to LAN host 10.0.0.1 port lport through an inbound leaf in
 * `mode` with the last mile on the class (or not): handshake, then data in
 * and ACKs out with window `win`; returns the window the last ACK left with. */
static uint16_t
download(uint8_t mode, bool lm, bool exempt, bool opt_out, uint16_t win, uint64_t *held,
	 uint64_t *exempt_frames, uint64_t *clamped)
{
	struct weir_policy_class_conf cls[1] = {
		{ .name = "slow", .rate = 1000000, .mode = mode,
		  .last_mile = { .rate = lm ? LM_RATE : 0, .rtt_ms = LM_RTT, .buffer = LM_BUF,
				 .flags = exempt ? WEIR_LM_EXEMPT : 0 } },
	};
	struct weir_policy_rule_conf rules[1] = {
		{ .class_name = "slow", .last_mile = { .flags = opt_out ? WEIR_LM_OFF : 0 } },
	};
	struct weir_policy_conf pc = {
		.tree = { { .rate = 0 },        /* the ACKs go out unshaped */
			  { .rate = 1500000, .n_classes = 1, .classes = cls, .default_class = "slow" } },
		.n_rules = opt_out ? 1 : 0, .rules = rules,
	};
	uint64_t now = rte_get_tsc_hz();
	struct rte_mbuf *m, *out[64];
	uint16_t left = 0;
	struct rig r;

	if (rig_make_pa(&r, &pc, "lm", 256) != 0) {
		CHECK(0, "rig");
		return 0;
	}
	feed(&r, seg(0, 4000, SYN, 100, 0, 65535, 0), 0, now);
	feed(&r, seg(1, 4000, SYN | ACK, 500, 101, 65535, 0), 1, now + 1000);
	while (rig_dequeue(&r, WEIR_PORT_WAN, now + 2000, out, 64) > 0)
		rte_pktmbuf_free(out[0]);
	/* Data in (queued in the 1.5 Mbit/s class), then the host's ACKs out. */
	for (uint32_t i = 0; i < 8; i++)
		feed(&r, seg(1, 4000, ACK, 501 + i * MSS, 101, 1000, MSS), 1, now + 3000 + i);
	for (uint32_t i = 0; i < 4; i++) {
		m = seg(0, 4000, ACK, 101, 501 + (i + 1) * MSS, win, 0);
		if (feed(&r, m, 0, now + 10000 + i) == 0)
			continue;       /* held (freed by the rig when released) */
	}
	/* One more, caught as it leaves, to read its window. */
	m = seg(0, 4000, ACK, 101, 501 + 5 * MSS, win, 0);
	{
		struct rte_mbuf *one = m;

		if (rig_process(&r, &one, 1, WEIR_PORT_LAN, now + 20000) == 1) {
			left = win_of(one);
			rte_pktmbuf_free(one);
		}
	}
	*held = r.w->svc.pa->st.held;
	*exempt_frames = r.w->svc.ctr.port[WEIR_PORT_WAN].lm_exempt;
	*clamped = r.w->svc.ctr.port[WEIR_PORT_LAN].lm_clamped;
	while (rig_dequeue(&r, WEIR_PORT_WAN, now + rte_get_tsc_hz(), out, 64) > 0)
		rte_pktmbuf_free(out[0]);
	rig_free(&r);
	return left;
}

static void
test_clamp_and_exempt(void)
{
	uint64_t held, ex, cl;
	/* Window field is scaled by 2^2 (both SYNs carried wscale 2). */
	const uint16_t want = (uint16_t)((LM_LIMIT + 3) / 4);
	uint16_t w;

	w = download(WEIR_MODE_PFQ, true, true, false, 60000, &held, &ex, &cl);
	CHECK(w > 0 && (uint32_t)w * 4 >= LM_LIMIT && (uint32_t)w * 4 < LM_LIMIT + 4 && cl > 0,
	      "pfq: window clamped to pipe + buffer: %u (x4 = %u, want %u) clamped %lu", w, w * 4,
	      want * 4, (unsigned long)cl);
	w = download(WEIR_MODE_PFQ, true, true, false, 100, &held, &ex, &cl);
	/* Only the host's SYN (65535, unscaled) was cut; the ACKs' 100 stays. */
	CHECK(w == 100 && cl == 1, "a smaller window is never raised: %u (cut %lu)", w,
	      (unsigned long)cl);
	w = download(WEIR_MODE_PFQ, false, false, false, 60000, &held, &ex, &cl);
	CHECK(w == 60000 && cl == 0, "no last mile: untouched: %u", w);
	w = download(WEIR_MODE_PFQ, true, true, true, 60000, &held, &ex, &cl);
	CHECK(w == 60000 && cl == 0, "per-flow opt-out: untouched: %u", w);

	/* A postack leaf: the exempt flow's ACKs are never held. */
	w = download(WEIR_MODE_POSTACK, true, true, false, 60000, &held, &ex, &cl);
	CHECK(held == 0 && ex > 0 && w > 0 && (uint32_t)w * 4 < LM_LIMIT + 4,
	      "postack, exempt: none held (%lu), frames pfq (%lu), clamped %u", (unsigned long)held,
	      (unsigned long)ex, w);
	w = download(WEIR_MODE_POSTACK, true, false, false, 60000, &held, &ex, &cl);
	CHECK(held > 0 && ex == 0, "postack, not exempt: ACKs held as usual (%lu)", (unsigned long)held);
}

/* Issue 36 item 6: a flow signed by TCP-MD5 (TCP-AO alike) is never
 * rewritten: the signature covers the window, and the host drops a segment
 * whose window weir changed. Neither the last mile's clamp nor any ACK
 * mode touches its windows (its SYN's included) or holds its ACKs; it is
 * shaped per flow as pfq and counted. */
static void
test_signed_untouched(void)
{
	static const uint8_t modes[] = { WEIR_MODE_POSTACK, WEIR_MODE_PACED, WEIR_MODE_TCR,
					 WEIR_MODE_IPABR };
	uint64_t held, ex, cl;
	uint16_t w;

	seg_md5 = true;
	for (unsigned int i = 0; i < RTE_DIM(modes); i++) {
		w = download(modes[i], true, false, false, 60000, &held, &ex, &cl);
		CHECK(w == 60000 && cl == 0 && held == 0,
		      "mode %u, signed: window %u left as sent, none clamped (%lu) or held (%lu)",
		      modes[i], w, (unsigned long)cl, (unsigned long)held);
	}
	seg_md5 = false;
	w = download(WEIR_MODE_POSTACK, true, false, false, 60000, &held, &ex, &cl);
	CHECK(w == 0 || w < 60000, "unsigned: the same download is clamped (%u)", w);
}

/* The largest window (bytes: the field x 4) of the host's ACKs that left
 * (LAN port 4000, travelling out; all caught in r->emitted[]). */
static uint32_t
max_ack_win(struct rig *r)
{
	uint32_t max = 0;

	for (unsigned int i = 0; i < r->n_emitted; i++) {
		const uint8_t *f = rte_pktmbuf_mtod(r->emitted[i], const uint8_t *);

		if (r->emitted_to[i] == WEIR_PORT_WAN && !(f[47] & SYN))
			max = RTE_MAX(max, (uint32_t)win_of(r->emitted[i]) * 4);
	}
	return max;
}

/*
 * Issue 36 item 7: a last mile's clamp and the ACK mode's own cut on one
 * ACK. postack cuts to its hold window, 64 segments (64 x 256 = 16384
 * bytes; the round trip here is microseconds, its BDP nothing). Whichever
 * limit is smaller is the window that leaves, and lm_clamped counts only
 * the ACKs that left with the last mile's window. lm_rate/lm_rtt: the
 * last mile (bit/s, ms); returns the largest window of the host's ACKs
 * that left (bytes) and the counters.
 */
static uint32_t
lm_beside_postack(uint32_t lm_rate, uint32_t lm_rtt, uint64_t *lm_clamped, uint64_t *win_clamped)
{
	struct weir_policy_class_conf cls[1] = {
		{ .name = "slow", .rate = 1000000, .mode = WEIR_MODE_POSTACK,
		  .last_mile = { .rate = lm_rate, .rtt_ms = lm_rtt, .buffer = LM_BUF } },
	};
	struct weir_policy_conf pc = {
		.tree = { { .rate = 0 },
			  { .rate = 1500000, .n_classes = 1, .classes = cls, .default_class = "slow" } },
	};
	const uint64_t now = rte_get_tsc_hz();
	struct rte_mbuf *out[64];
	uint32_t max;
	uint16_t n;
	struct rig r;

	if (rig_make_pa(&r, &pc, "lm_pa", 256) != 0) {
		CHECK(0, "rig");
		return 0;
	}
	/* The host's SYN says 30000 (under either limit: not cut). */
	feed(&r, seg(0, 4000, SYN, 100, 0, 30000, 0), 0, now);
	feed(&r, seg(1, 4000, SYN | ACK, 500, 101, 65535, 0), 1, now + 1000);
	for (uint32_t i = 0; i < 8; i++)
		feed(&r, seg(1, 4000, ACK, 501 + i * MSS, 101, 1000, MSS), 1, now + 3000 + i);
	/* The host's ACKs, window 60000 x 4 = 240000: caught as they leave,
	 * now or when the data they answer leaves the tree. */
	for (uint32_t i = 0; i < 8; i++) {
		struct rte_mbuf *m = seg(0, 4000, ACK, 101, 501 + (i + 1) * MSS, 60000, 0);

		if (rig_process(&r, &m, 1, WEIR_PORT_LAN, now + 10000 + i) == 1)
			rig_emit(&r, WEIR_PORT_WAN, &m, 1);
	}
	for (int k = 0; k < 100; k++)
		while ((n = rig_dequeue(&r, WEIR_PORT_WAN, now + (uint64_t)k * rte_get_tsc_hz() / 100,
					out, 64)) > 0)
			rte_pktmbuf_free_bulk(out, n);
	rig_watchdog(&r, now + 10 * rte_get_tsc_hz());
	max = max_ack_win(&r);
	*lm_clamped = r.w->svc.ctr.port[WEIR_PORT_LAN].lm_clamped;
	*win_clamped = r.w->svc.ctr.port[WEIR_PORT_LAN].win_clamped;
	rig_free(&r);
	return max;
}

static void
test_smallest_limit_wins(void)
{
	/* 4 Mbit/s x 100 ms = 50000 bytes: 148 segments + 3, of 244 bytes. */
	const uint32_t big = (50000u / (MSS + 80) + LM_BUF) * (MSS - 12), hold = 64 * MSS;
	uint64_t lm, pa;
	uint32_t max;

	/* The last mile's limit is the smaller: postack's cut must not undo it. */
	max = lm_beside_postack(LM_RATE, LM_RTT, &lm, &pa);
	CHECK(max > 0 && max < LM_LIMIT + 4 && lm == 9,
	      "last mile below the mode: windows <= %u (largest %u), lm_clamped %lu of 9 (the SYN and 8 ACKs)",
	      LM_LIMIT, max, (unsigned long)lm);
	/* postack's is the smaller: the last mile's cut must not raise it. */
	max = lm_beside_postack(4000000, 100, &lm, &pa);
	CHECK(max > 0 && max < hold + 4 && big > hold,
	      "mode below the last mile: windows <= %u (largest %u; last mile %u)", hold, max, big);
	CHECK(lm == 0 && pa == 8, "counted where it took effect: lm_clamped %lu, win_clamped %lu",
	      (unsigned long)lm, (unsigned long)pa);
}

int
main(int argc, char **argv)
{
	(void)argc;
	unit_eal_init(argv[0], "lastmile", "256");
	rig_mempool("lm_mp");
	test_policy_targets();
	test_clamp_and_exempt();
	test_smallest_limit_wins();
	test_signed_untouched();
	return unit_report();
}
