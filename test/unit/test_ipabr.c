/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for the ipabr mode (lib/modes/ipabr.c), with synthetic TCP frames
 * through a whole worker (test/unit/rig.h) and a fake clock: Eq. 4.6's
 * window and the silly-window credit (Eq. 5.4-5.6), the min-tracking RTT
 * filter (Eq. 4.7), no sample from a retransmission, the sender side from
 * the ACK clock, the allocation per active flow and per weight, the
 * available bandwidth cut by a higher-priority class and following the
 * link rate, the sub-MSS rule, and the counted fallbacks.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>

#include "unit.h"
#include "rig.h"
#include "ipabr.h"
#include "ackstore_int.h"

static void
set_cksums4(struct rte_mbuf *m)
{
	struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, 14);
	struct rte_tcp_hdr *tcp = (struct rte_tcp_hdr *)(ip + 1);

	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	tcp->cksum = 0;
	tcp->cksum = rte_ipv4_udptcp_cksum(ip, tcp);
}

static int
cksum4_ok(struct rte_mbuf *m)
{
	struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, 14);

	return rte_ipv4_udptcp_cksum_verify(ip, ip + 1) == 0;
}

/* A SYN or SYN+ACK of the flow from LAN port lport, MSS and window scale. */
static struct rte_mbuf *
syn_opts(int in, uint16_t lport, uint8_t flags, uint16_t mss, uint8_t ws)
{
	struct rte_mbuf *m = tcp_frame(in, 1, lport, 1, 80, flags, 0, 0);
	uint8_t *o = (uint8_t *)rte_pktmbuf_append(m, 8), *f = rte_pktmbuf_mtod(m, uint8_t *);
	const uint8_t opts[8] = { 2, 4, (uint8_t)(mss >> 8), (uint8_t)mss, 1, 3, 3, ws };

	memcpy(o, opts, 8);
	f[46] = 0x70;
	f[17] = (uint8_t)(f[17] + 8);
	set_cksums4(m);
	return m;
}

/* A pure ACK from the WAN receiver of flow lport. */
static struct rte_mbuf *
ack_of(uint16_t lport, uint32_t ack, uint16_t win)
{
	struct rte_mbuf *m = tcp_frame(1, 1, lport, 1, 80, ACK, 7, 0);
	struct rte_tcp_hdr *tcp = rte_pktmbuf_mtod_offset(m, struct rte_tcp_hdr *, 34);

	tcp->recv_ack = rte_cpu_to_be_32(ack);
	tcp->rx_win = rte_cpu_to_be_16(win);
	set_cksums4(m);
	return m;
}

static uint16_t
win_of(struct rte_mbuf *m)
{
	return rte_be_to_cpu_16(rte_pktmbuf_mtod_offset(m, struct rte_tcp_hdr *, 34)->rx_win);
}

/* Feed ACK m; returns its window in bytes (scale 7) when it went on, else
 * -1 (held). */
static int64_t
ack_win(struct rig *r, struct rte_mbuf *m, uint64_t now, int *ck)
{
	int64_t win = -1;

	if (rig_process(r, &m, 1, WEIR_PORT_WAN, now) == 1) {
		win = (int64_t)win_of(m) << 7;
		if (ck != NULL)
			*ck &= cksum4_ok(m);
		rte_pktmbuf_free(m);
	}
	return win;
}

/* Dequeue everything sendable outbound at `now` (frames freed). */
static unsigned int
drain_out(struct rig *r, uint64_t now)
{
	struct rte_mbuf *m[32];
	unsigned int n = 0;
	uint16_t k;

	r->w->next_tsc[WEIR_PORT_LAN] = 0;
	while ((k = rig_dequeue(r, WEIR_PORT_LAN, now, m, 32)) > 0) {
		n += k;
		for (uint16_t i = 0; i < k; i++)
			rte_pktmbuf_free(m[i]);
		r->w->next_tsc[WEIR_PORT_LAN] = 0;
	}
	return n;
}

/* Set frame m's ACK number and raw window (checksums redone). */
static struct rte_mbuf *
with_ack(struct rte_mbuf *m, uint32_t ack, uint16_t win)
{
	struct rte_tcp_hdr *tcp = rte_pktmbuf_mtod_offset(m, struct rte_tcp_hdr *, 34);

	tcp->recv_ack = rte_cpu_to_be_32(ack);
	tcp->rx_win = rte_cpu_to_be_16(win);
	set_cksums4(m);
	return m;
}

/* The upload of flow lport: handshake with the receiver rtt_ms away across
 * the WAN and the sender 0.1 ms away on the LAN, MSS 1460, scale 7. The
 * SYN+ACK offers syn_win bytes (a SYN's window is not scaled). */
static void
open_flow_win(struct rig *r, uint16_t lport, uint64_t t0, uint32_t rtt_ms, uint16_t syn_win)
{
	const uint64_t ms = rte_get_tsc_hz() / 1000;

	feed(r, syn_opts(0, lport, SYN, 1460, 7), 0, t0);
	drain_out(r, t0);
	feed(r, with_ack(syn_opts(1, lport, SYN | ACK, 1460, 7), 1, syn_win), 1, t0 + rtt_ms * ms);
	feed(r, tcp_frame(0, 1, lport, 1, 80, ACK, 1, 0), 0, t0 + rtt_ms * ms + ms / 10);
	drain_out(r, t0 + rtt_ms * ms + ms / 10);
}

/* As open_flow_win, the SYN+ACK offering one segment. */
static void
open_flow(struct rig *r, uint16_t lport, uint64_t t0, uint32_t rtt_ms)
{
	open_flow_win(r, lport, t0, rtt_ms, 1460);
}

/* Data of flow lport: seq, payload bytes, sent through the tree at now. */
static void
send_data(struct rig *r, uint16_t lport, uint32_t seq, uint16_t len, uint64_t now)
{
	feed(r, tcp_frame(0, 1, lport, 1, 80, ACK, seq, len), 0, now);
	drain_out(r, now);
}

/* A class's available rate, MB/s (avail_bpt is bytes per TSC tick << 32). */
static double
avail_mbs(const struct weir_ipabr_class *cs)
{
	return (double)cs->avail_bpt * (double)rte_get_tsc_hz() / 4294967296.0 / 1e6;
}

static struct weir_ipabr *
ia_of(struct rig *r)
{
	return r->w->svc.mode_state[WEIR_MODE_IPABR];
}

/* Eq. 4.7 alone: a lower sample pulls the average 3/4 of the way down, a
 * higher one moves it up by 1/512 of the difference. */
static void
test_filter(void)
{
	uint64_t a = 0;

	weir_ipabr_filter(&a, 900000);
	CHECK(a == 900000, "the first sample is the average");
	weir_ipabr_filter(&a, 800000);
	CHECK(a == 825000, "below: wt 0.75 (%" PRIu64 ")", a);
	weir_ipabr_filter(&a, 825000 + 512000);
	CHECK(a == 826000, "above: wt 1/512 (%" PRIu64 ")", a);
	for (int i = 0; i < 100; i++)
		weir_ipabr_filter(&a, 2000000);
	CHECK(a < 1100000, "a hundred samples of queueing delay barely move it (%" PRIu64 ")", a);
	CHECK(weir_ipabr_bytes_per_flow() == 128, "128 bytes of state per flow");
}

/* One flow, 8 Mbit/s, 40 ms: Eq. 4.6's window, in whole segments, the
 * remainder carried as credit so the window alternates W, W + MSS and its
 * mean is Wnd_opt; the checksum stays valid; the window is never raised
 * above what the receiver offers. */
static void
test_window(void)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .mode = WEIR_MODE_IPABR }, { .rate = 0 } },
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), ms = hz / 1000, t0 = hz;
	uint64_t t = t0 + 50 * ms;
	double sum = 0, opt;
	int ck = 1, whole = 1, alt = 1;
	int64_t lo = INT64_MAX, hi = 0, w;
	const int n = 40;

	if (rig_make_pa(&r, &pc, "ia_win", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	open_flow(&r, 4000, t0, 40);
	send_data(&r, 4000, 1, 1000, t);
	/* Data 1000 bytes in a 1054-byte frame: Wnd_opt = 1 MB/s x 40.1 ms x
	 * 1000/1054. */
	opt = 1e6 * (40.1e-3) * (double)((1000u << 16) / 1054) / 65536.0;
	for (int i = 0; i < n; i++) {
		uint32_t ack = 1001 + (uint32_t)i * 2000;

		w = ack_win(&r, ack_of(4000, ack, 65535), t + 40 * ms, &ck);
		/* The window in bytes as the sender sees it (rounded up to the
		 * scale): the limit is a whole number of segments. */
		whole &= w % 1000 < 128 || w % 1000 > 872;
		w = (w + 500) / 1000 * 1000;
		sum += (double)w;
		lo = RTE_MIN(lo, w);
		hi = RTE_MAX(hi, w);
		t += ms;
	}
	alt = hi - lo == 1000;
	CHECK(ck, "checksums valid after the rewrite");
	CHECK(whole && alt, "whole segments, W and W + MSS (%" PRId64 " .. %" PRId64 ")", lo, hi);
	CHECK(fabs(sum / n - opt) < 30, "mean window %.0f = Wnd_opt %.0f (credit carried)", sum / n, opt);
	CHECK(ia_of(&r)->st.cut == (uint64_t)n && r.w->svc.ctr.port[WEIR_PORT_WAN].win_clamped == (uint64_t)n,
	      "every ACK cut and counted");
	/* A receiver offering less than Wnd_opt keeps its own window. */
	w = ack_win(&r, ack_of(4000, 200000, 100), t, &ck);
	CHECK(w == 100 * 128, "never raised above the receiver's window (%" PRId64 ")", w);
	rig_free(&r);
}

/* shaping.ipabr.sws_credit = false: Eq. 4.6's window to the octet (within
 * the window scale's 128 bytes), the same on every ACK, no credit carried:
 * the sender's own rounding down to whole segments is what the credit is
 * there to undo (Sec. 5.3). */
static void
test_window_no_credit(void)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .mode = WEIR_MODE_IPABR }, { .rate = 0 } },
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), ms = hz / 1000, t0 = hz;
	uint64_t t = t0 + 50 * ms;
	double opt;
	int ck = 1, credit0 = 1;
	int64_t lo = INT64_MAX, hi = 0, w;

	if (rig_make_pa(&r, &pc, "ia_wnc", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	r.w->svc.conf.ipabr_no_sws_credit = true;
	open_flow(&r, 4000, t0, 40);
	send_data(&r, 4000, 1, 1000, t);
	opt = 1e6 * (40.1e-3) * (double)((1000u << 16) / 1054) / 65536.0;
	for (int i = 0; i < 20; i++) {
		w = ack_win(&r, ack_of(4000, 1001 + (uint32_t)i * 2000, 65535), t + 40 * ms, &ck);
		lo = RTE_MIN(lo, w);
		hi = RTE_MAX(hi, w);
		for (uint32_t k = 0; k < ia_of(&r)->n_flows; k++)
			credit0 &= ia_of(&r)->f[0][k].credit == 0 && ia_of(&r)->f[1][k].credit == 0;
		t += ms;
	}
	CHECK(ck, "checksums valid after the rewrite");
	CHECK(hi - lo <= 128 && fabs((double)lo - opt) < 130,
	      "the octet window %.0f on every ACK (%" PRId64 " .. %" PRId64 ")", opt, lo, hi);
	CHECK(credit0, "no credit carried");
	/* shaping.ipabr.headroom_us: 2 ms more round trip, 2 kB more window. */
	r.w->svc.conf.ipabr_headroom_us = 2000;
	w = ack_win(&r, ack_of(4000, 1001 + 20 * 2000, 65535), t + 40 * ms, &ck);
	opt = 1e6 * (42.1e-3) * (double)((1000u << 16) / 1054) / 65536.0;
	CHECK(ck && fabs((double)w - opt) < 130, "headroom 2 ms: window %" PRId64 " (want %.0f)", w, opt);
	rig_free(&r);
}

/* The receiver side's round trip: one timed segment at a time, from the
 * moment it leaves to the ACK covering it, filtered by Eq. 4.7; a
 * retransmission of it abandons the sample (Karn). */
static void
test_rtt(void)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .mode = WEIR_MODE_IPABR }, { .rate = 0 } },
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), ms = hz / 1000, t0 = hz;
	const struct weir_ipabr_flow *tf;
	uint64_t t = t0 + 100 * ms, before;

	if (rig_make_pa(&r, &pc, "ia_rtt", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	open_flow(&r, 4000, t0, 40);
	tf = &ia_of(&r)->f[0][0];
	send_data(&r, 4000, 1, 1000, t);
	send_data(&r, 4000, 1001, 1000, t + 1 * ms);
	/* An ACK for the first segment only does not end the sample timed on
	 * it? It does: the sample is the first segment, sent at t. */
	ack_win(&r, ack_of(4000, 1001, 65535), t + 30 * ms, NULL);
	CHECK(tf->rtt_right >= 40 * ms - 8 * ms - ms / 100 && tf->rtt_right <= 40 * ms - 7 * ms,
	      "a 30 ms sample under a 40 ms average: 3/4 of the way down (%.3f ms)",
	      (double)tf->rtt_right / (double)ms);
	CHECK(ia_of(&r)->st.rtt_right == 1, "one sample");
	/* The next segment sent is timed; a longer sample barely moves it. */
	send_data(&r, 4000, 2001, 1000, t + 40 * ms);
	before = tf->rtt_right;
	ack_win(&r, ack_of(4000, 3001, 65535), t + 240 * ms, NULL);
	CHECK(tf->rtt_right > before && tf->rtt_right - before <= (200 * ms) / 512 + 1,
	      "200 ms of queueing skimmed: +%.3f ms", (double)(tf->rtt_right - before) / (double)ms);
	/* Karn: the timed segment is sent again; its ACK times nothing. */
	send_data(&r, 4000, 3001, 1000, t + 300 * ms);
	send_data(&r, 4000, 3001, 1000, t + 301 * ms);
	before = tf->rtt_right;
	ack_win(&r, ack_of(4000, 4001, 65535), t + 302 * ms, NULL);
	CHECK(ia_of(&r)->st.karn == 1 && ia_of(&r)->st.rtt_right == 2 && tf->rtt_right == before,
	      "a retransmitted segment gives no sample (karn %" PRIu64 ")", ia_of(&r)->st.karn);
	/* New data after it is timed again. */
	send_data(&r, 4000, 4001, 1000, t + 400 * ms);
	ack_win(&r, ack_of(4000, 5001, 65535), t + 420 * ms, NULL);
	CHECK(ia_of(&r)->st.rtt_right == 3, "timing resumes with new data");
	rig_free(&r);
}

/* The sender side (Eq. 4.8's RTT_left), a download's WAN half: from the
 * handshake, then from the ACK clock (an ACK moves the right edge; the
 * first data past the old edge answers it), filtered. Data already in
 * flight below the old edge ends nothing. */
static void
test_left(void)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .mode = WEIR_MODE_IPABR }, { .rate = 0 } },
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), ms = hz / 1000, t0 = hz;
	const struct weir_ipabr_flow *tf;
	uint64_t t = t0 + 100 * ms;
	int64_t w;

	if (rig_make_pa(&r, &pc, "ia_left", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	open_flow(&r, 4000, t0, 40);
	tf = &ia_of(&r)->f[0][0];
	send_data(&r, 4000, 1, 1000, t);
	w = ack_win(&r, ack_of(4000, 1001, 65535), t + 40 * ms, NULL);
	CHECK(tf->rtt_left >= ms / 10 - ms / 1000 && tf->rtt_left <= ms / 10 + ms / 1000,
	      "the sender's side from the handshake (%.3f ms)", (double)tf->rtt_left / (double)ms);
	/* The first ACK showed edge 1001 + w. A second moves it further: the
	 * ACK clock starts at it, from edge 1001 + w. */
	ack_win(&r, ack_of(4000, 3001, 65535), t + 41 * ms, NULL);
	CHECK(tf->left_tsc == t + 41 * ms && tf->left_seq == 1001 + (uint32_t)w,
	      "sample started at the ACK that moved the edge");
	/* Data below the old edge (in flight before it) does not end it. */
	send_data(&r, 4000, 1001, 1000, t + 42 * ms);
	CHECK(ia_of(&r)->st.rtt_left == 0, "data below the old edge ends nothing");
	/* The first byte past it, 5 ms after the ACK: a 5 ms sample above the
	 * 0.1 ms average moves it by 1/512 of the difference. */
	send_data(&r, 4000, 1001 + (uint32_t)w - 500, 1000, t + 46 * ms);
	CHECK(ia_of(&r)->st.rtt_left == 1 && tf->rtt_left > ms / 10 &&
	      tf->rtt_left <= ms / 10 + (5 * ms) / 512 + 1,
	      "sampled past the old edge, skimmed (%.4f ms)", (double)tf->rtt_left / (double)ms);
	rig_free(&r);
}

/* The sender side's sample ends when the answer reaches weir, not when it
 * leaves: the time the data then waits in weir's queue is weir's, not the
 * path's. Timed at the dequeue, a flow with data standing at weir (its
 * window past its share's pipe) measured its own queue, kept its window
 * and so its queue (the runaway flow of the satellite case, queue 15). */
static void
test_left_queued(void)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .mode = WEIR_MODE_IPABR }, { .rate = 0 } },
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), ms = hz / 1000, t0 = hz;
	const struct weir_ipabr_flow *tf;
	uint64_t t = t0 + 100 * ms;
	int64_t w;

	if (rig_make_pa(&r, &pc, "ia_leftq", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	open_flow(&r, 4000, t0, 40);
	tf = &ia_of(&r)->f[0][0];
	send_data(&r, 4000, 1, 1000, t);
	w = ack_win(&r, ack_of(4000, 1001, 65535), t + 40 * ms, NULL);
	ack_win(&r, ack_of(4000, 3001, 65535), t + 41 * ms, NULL);
	CHECK(tf->left_tsc == t + 41 * ms, "sample started");
	/* The answer arrives 1 ms after the ACK and leaves 100 ms later. */
	feed(&r, tcp_frame(0, 1, 4000, 1, 80, ACK, 1001 + (uint32_t)w - 500, 1000), 0, t + 42 * ms);
	CHECK(ia_of(&r)->st.rtt_left == 1 && tf->left_tsc == 0, "ended on arrival (%" PRIu64 ")",
	      ia_of(&r)->st.rtt_left);
	drain_out(&r, t + 142 * ms);
	CHECK(ia_of(&r)->st.rtt_left == 1 && tf->rtt_left <= ms / 10 + (2 * ms) / 512,
	      "a 1 ms sample, not 101 ms: %.4f ms", (double)tf->rtt_left / (double)ms);
	rig_free(&r);
}

/* The ACK clock must not take data the sender could send before the ACK
 * for its answer: a window the modes never cut (a reply carrying an ACK,
 * the SYN+ACK's) lets it send ahead of the cut ACKs' edge. At 10 ms,
 * before, a download's first sample came from its request's window
 * (data already on its way, 1-8 ms after the ACK) and pulled the WAN
 * half from 10 to 3-5 ms: windows a third of the allocation for seconds. */
static void
test_left_unseen(void)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .mode = WEIR_MODE_IPABR }, { .rate = 0 } },
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), ms = hz / 1000, t0 = hz;
	const struct weir_ipabr_flow *tf, *tg;
	const struct weir_postack_q *q;
	uint64_t t = t0 + 100 * ms;
	uint32_t edge;
	int64_t w;

	if (rig_make_pa(&r, &pc, "ia_unseen", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	open_flow(&r, 4000, t0, 40);
	tf = &ia_of(&r)->f[0][0];
	q = &r.w->svc.pa->q[0][0];
	send_data(&r, 4000, 1, 1000, t);
	w = ack_win(&r, ack_of(4000, 1001, 65535), t + 40 * ms, NULL);
	/* The receiver replies (data, its ACK offering 2000 x 128 bytes): the
	 * sender may send up to 257001 whatever the cut ACKs say. */
	feed(&r, with_ack(tcp_frame(1, 1, 4000, 1, 80, ACK, 1, 100), 1001, 2000), 1, t + 40 * ms);
	CHECK((q->flags & WEIR_PAQ_SEEN_VALID) && q->seen_max == 1001 + 2000 * 128,
	      "the reply's edge is noted (%u)", q->seen_max);
	ack_win(&r, ack_of(4000, 3001, 65535), t + 41 * ms, NULL);
	CHECK(tf->left_tsc == 0, "an ACK short of the reply's edge starts no sample");
	send_data(&r, 4000, 1001 + (uint32_t)w - 500, 1000, t + 42 * ms);
	CHECK(ia_of(&r)->st.rtt_left == 0 && tf->rtt_left <= ms / 10 + ms / 1000,
	      "data sent up to it times nothing (%" PRIu64 " samples)", ia_of(&r)->st.rtt_left);
	/* Once an ACK moves the edge past it, the clock runs from there. */
	ack_win(&r, ack_of(4000, 256001, 65535), t + 60 * ms, NULL);
	CHECK(tf->left_tsc == t + 60 * ms && tf->left_seq == 1001 + 2000 * 128,
	      "sample started from the reply's edge");
	send_data(&r, 4000, 1001 + 2000 * 128, 1000, t + 65 * ms);
	CHECK(ia_of(&r)->st.rtt_left == 1, "and ended by the data past it");

	/* An edge weir did not see at all: data past every edge it knows ends
	 * no sample, and later ACKs below it start none. */
	t += 1000 * ms;
	open_flow_win(&r, 4001, t - 100 * ms, 40, 1460);
	tg = &ia_of(&r)->f[0][1];
	send_data(&r, 4001, 1, 1000, t);
	w = ack_win(&r, ack_of(4001, 1001, 65535), t + 40 * ms, NULL);
	ack_win(&r, ack_of(4001, 2001, 65535), t + 41 * ms, NULL);
	CHECK(tg->left_tsc == t + 41 * ms, "a sample runs");
	edge = r.w->svc.pa->q[0][1].re_max;
	send_data(&r, 4001, edge, 1000, t + 42 * ms);
	CHECK(tg->left_tsc == 0 && ia_of(&r)->st.left_unseen == 1 && ia_of(&r)->st.rtt_left == 1 &&
	      r.w->svc.pa->q[0][1].seen_max == edge + 1000,
	      "data past every edge seen abandons it (unseen %" PRIu64 ")", ia_of(&r)->st.left_unseen);

	/* The SYN+ACK's window (not scaled) is an edge the sender has seen. */
	open_flow_win(&r, 4002, t, 40, 65000);
	CHECK(r.w->svc.pa->q[0][2].seen_max == 1 + 65000, "the SYN+ACK's edge (%u)",
	      r.w->svc.pa->q[0][2].seen_max);
	rig_free(&r);
}

/* A flow whose first ACK finds it young beside grown-up flows (a short
 * transfer beside bulk ones) gets a window of the whole class over its
 * round trip, shared with the other young flows: the new-flows list sets
 * its rate. Flows that start young together (the satellite case's 32)
 * keep Eq. 4.6's windows, even once some of them have grown up, and so
 * does a flow that starts while the young are the most. */
static void
test_young(void)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .young = 262144, .mode = WEIR_MODE_IPABR }, { .rate = 0 } },
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), ms = hz / 1000, t0 = hz;
	uint64_t t = t0 + 100 * ms;
	const struct weir_flow *f0;
	struct weir_class_counters *c;
	int64_t wy, wo;
	double fifth, whole;

	if (rig_make_pa(&r, &pc, "ia_young", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	for (uint16_t i = 0; i < 5; i++)
		open_flow(&r, (uint16_t)(4000 + i), t0, 40);
	for (uint16_t i = 0; i < 5; i++)
		send_data(&r, (uint16_t)(4000 + i), 1, 1000, t + i * ms);
	CHECK(ia_of(&r)->dir[0].cls[1].wsum == 5, "five active (%u)", ia_of(&r)->dir[0].cls[1].wsum);
	f0 = weir_flow_by_slot(r.w->svc.flows, 0);
	c = &r.w->svc.cls_ctr[0][r.w->svc.policy->targets[f0->class_id].leaf[0]];
	/* Data bytes of 1 MB/s and of a fifth of it over 40.1 ms. */
	whole = 1e6 * 40.1e-3 * (double)((1000u << 16) / 1054) / 65536.0;
	fifth = whole / 5;
	/* Flow 1's first ACK: all five young (they started together). */
	c->active = 5;
	c->young = 5;
	wo = ack_win(&r, ack_of(4001, 1001, 65535), t + 40 * ms, NULL);
	CHECK(wo >= (int64_t)(fifth - 1000) && wo <= (int64_t)fifth + 128 && ia_of(&r)->st.young == 0,
	      "started together: 1/5 each (%" PRId64 ", opt %.0f)", wo, fifth);
	/* Flow 0's first ACK finds it the one young flow beside 4 grown up. */
	c->young = 1;
	wy = ack_win(&r, ack_of(4000, 1001, 65535), t + 40 * ms, NULL);
	CHECK(wy >= (int64_t)(whole - 1000) && wy <= (int64_t)whole + 128 && ia_of(&r)->st.young == 1,
	      "young beside 4 grown-up flows: the class (%" PRId64 ", opt %.0f)", wy, whole);
	/* Flow 1 is young too now, but started with the others: Eq. 4.6. */
	wo = ack_win(&r, ack_of(4001, 2001, 65535), t + 41 * ms, NULL);
	CHECK(wo <= (int64_t)fifth + 1460 && ia_of(&r)->st.young == 1,
	      "not when it started beside young flows (%" PRId64 ")", wo);
	/* Flow 2's first ACK finds 3 of 5 young: flows starting about
	 * together, the first few already past the budget (the satellite
	 * case's first seconds). Not a short transfer's start: Eq. 4.6. */
	c->young = 3;
	wo = ack_win(&r, ack_of(4002, 1001, 65535), t + 41 * ms, NULL);
	CHECK(wo <= (int64_t)fifth + 1460 && ia_of(&r)->st.young == 1,
	      "not when the young are the most (%" PRId64 ")", wo);
	/* Two young beside grown-up flows share the class. */
	c->young = 2;
	wy = ack_win(&r, ack_of(4000, 60001, 65535), t + 42 * ms, NULL);     /* past its last edge */
	CHECK(wy >= (int64_t)(whole / 2 - 1000) && wy <= (int64_t)(whole / 2) + 1460,
	      "two young: half each (%" PRId64 ")", wy);
	rig_free(&r);
}

/* Two flows, weights 1 and 3 (rules by WAN port), plus an idle third
 * connection: the class divides among the flows that send, by weight:
 * windows in the ratio 1:3, the idle one takes nothing. */
static void
test_weights(void)
{
	struct weir_policy_rule_conf rules[2] = { { .class_name = "default", .weight = 1 },
						  { .class_name = "default", .weight = 3 } };
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .mode = WEIR_MODE_IPABR }, { .rate = 0 } },
		.n_rules = 2, .rules = rules,
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), ms = hz / 1000, t0 = hz;
	uint64_t t = t0 + 100 * ms;
	int64_t w1, w3, w1b;
	double opt;

	rules[0].match.port[WEIR_CLS_LAN] = (struct weir_cls_ports){ 4001, 4001 };
	rules[1].match.port[WEIR_CLS_LAN] = (struct weir_cls_ports){ 4003, 4003 };
	if (rig_make_pa(&r, &pc, "ia_wt", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	open_flow(&r, 4001, t0, 40);
	open_flow(&r, 4003, t0, 40);
	open_flow(&r, 4009, t0, 40);    /* idle: its handshake only */
	send_data(&r, 4001, 1, 1000, t);
	send_data(&r, 4003, 1, 1000, t);
	CHECK(ia_of(&r)->dir[0].cls[1].wsum == 4, "active weights 1 + 3 (%u)",
	      ia_of(&r)->dir[0].cls[1].wsum);
	w1 = ack_win(&r, ack_of(4001, 1001, 65535), t + 40 * ms, NULL);
	w3 = ack_win(&r, ack_of(4003, 1001, 65535), t + 40 * ms, NULL);
	/* Wnd_opt of a quarter of 1 MB/s over 40.1 ms, in data bytes. */
	opt = 0.25e6 * 40.1e-3 * (double)((1000u << 16) / 1054) / 65536.0;
	CHECK(w1 >= (int64_t)(opt - 1000) && w1 <= (int64_t)opt + 128 &&
	      w3 >= (int64_t)(3 * opt - 1000) && w3 <= (int64_t)(3 * opt) + 128,
	      "1:3 (%" PRId64 ", %" PRId64 "; opt %.0f)", w1, w3, opt);
	/* Flow 3 stops; after its activity periods pass only flow 1 counts. */
	t += 1000 * ms;
	send_data(&r, 4001, 1001, 1000, t);
	t += 1000 * ms;
	send_data(&r, 4001, 2001, 1000, t);
	w1b = ack_win(&r, ack_of(4001, 3001, 65535), t + 40 * ms, NULL);
	CHECK(w1b >= 3 * w1, "the stopped flow's share goes to the one still sending (%" PRId64 ")", w1b);
	/* Flow 3 sends again, then resets: its weight goes at once, not a
	 * period later (a finished download shared the class with the next). */
	send_data(&r, 4003, 1001, 1000, t + 50 * ms);
	CHECK(ia_of(&r)->dir[0].cls[1].wsum == 4, "both active again (%u)", ia_of(&r)->dir[0].cls[1].wsum);
	feed(&r, tcp_frame(0, 1, 4003, 1, 80, RST | ACK, 2001, 0), 0, t + 51 * ms);
	drain_out(&r, t + 51 * ms);
	CHECK(ia_of(&r)->dir[0].cls[1].wsum == 1, "the reset flow's weight is gone (%u)",
	      ia_of(&r)->dir[0].cls[1].wsum);
	rig_free(&r);
}

/* Flow 4001 sends 1800 bytes every 2 ms (7.2 Mbit/s); flow 4003 100 bytes
 * every 100 ms, or as 4001 (`bulk2`); from `from` to `to` ms after t0. */
static void
bulk_and_light(struct rig *r, uint64_t t0, unsigned int from, unsigned int to, bool bulk2,
	       uint32_t *s1, uint32_t *s3)
{
	const uint64_t ms = rte_get_tsc_hz() / 1000;

	for (unsigned int t = from; t < to; t += 2) {
		send_data(r, 4001, *s1, 1800, t0 + t * ms);
		*s1 += 1800;
		if (bulk2 || (t - from) % 100 == 0) {
			uint16_t len = bulk2 ? 1800 : 100;

			send_data(r, 4003, *s3, len, t0 + t * ms);
			*s3 += len;
		}
	}
}

/* Max-min allocation (water-filling): a light flow (100 bytes every
 * 100 ms, a 10 Hz ping-pong) beside a bulk one keeps what it uses and the
 * bulk flow is allocated the rest of the class, not half (4.8 of 10
 * Mbit/s on the wire). Once the light flow turns bulk, both are heavy
 * and halve the class within two periods (its use over the first whole
 * period after the turn is known when the next starts). Its window
 * follows the same unit meanwhile: it is never cut below the bulk one's. */
static void
test_light_flow(void)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .mode = WEIR_MODE_IPABR }, { .rate = 0 } },
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), t0 = hz;
	const struct weir_ipabr_class *cs;
	uint32_t s1 = 1, s3 = 1;

	if (rig_make_pa(&r, &pc, "ia_light", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	open_flow(&r, 4001, t0, 40);
	open_flow(&r, 4003, t0, 40);
	bulk_and_light(&r, t0, 100, 900, false, &s1, &s3);
	cs = &ia_of(&r)->dir[0].cls[1];
	CHECK(cs->wsum == 2 && cs->wheavy == 1 && cs->unit_bpt >= cs->avail_bpt * 99 / 100,
	      "beside a light flow the bulk one is allocated the class (wsum %u, heavy %u, %.3f)",
	      cs->wsum, cs->wheavy, (double)cs->unit_bpt / (double)cs->avail_bpt);
	bulk_and_light(&r, t0, 900, 1300, true, &s1, &s3);
	CHECK(cs->wsum == 2 && cs->wheavy == 2 && cs->unit_bpt <= cs->avail_bpt * 55 / 100,
	      "the light flow turned bulk: half each within two periods (heavy %u, %.3f)",
	      cs->wheavy, (double)cs->unit_bpt / (double)cs->avail_bpt);
	rig_free(&r);
}

/* Eq. 4.3 in the class tree: a prio-0 class's measured traffic cuts the
 * prio-1 ipabr class's available bandwidth (not below its own rate), and a
 * link rate changed at run time is followed at the next look. */
static void
test_available(void)
{
	const struct weir_policy_class_conf out[] = {
		{ .name = "voice", .rate = 4000000, .prio = 0 },
		{ .name = "bulk", .rate = 1000000, .ceil = 8000000, .prio = 1, .mode = WEIR_MODE_IPABR },
	};
	struct weir_policy_rule_conf rules[1] = { { .class_name = "voice" } };
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .n_classes = 2, .classes = out, .default_class = "bulk" },
			  { .rate = 0 } },
		.n_rules = 1, .rules = rules,
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), ms = hz / 1000, t0 = hz;
	const uint16_t BULK = 2;
	uint64_t t = t0 + 100 * ms;
	const struct weir_ipabr_class *cs;
	double mbs;

	rules[0].match.port[WEIR_CLS_WAN] = (struct weir_cls_ports){ 5060, 5060 };
	if (rig_make_pa(&r, &pc, "ia_avail", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	cs = &ia_of(&r)->dir[0].cls[BULK];
	open_flow(&r, 4000, t0, 40);
	send_data(&r, 4000, 1, 1000, t);
	ack_win(&r, ack_of(4000, 1001, 65535), t + 40 * ms, NULL);
	mbs = avail_mbs(cs);
	CHECK(mbs > 0.99 && mbs < 1.01, "nothing of higher priority: the link, 1 MB/s (%.3f)", mbs);
	/* Voice sends 2 Mbit/s (250 kB/s: a 1054-byte frame each 4.216 ms)
	 * for 1 s. */
	for (uint64_t k = 0; k < 240; k++) {
		uint64_t tv = t + 100 * ms + k * 4216 * ms / 1000;

		feed(&r, tcp_frame(0, 2, 6000, 1, 5060, ACK, (uint32_t)(1 + 1000 * k), 1000), 0, tv);
		drain_out(&r, tv);
		if (k % 24 == 0)        /* the mode looks at the tree from its own hooks */
			ack_win(&r, ack_of(4000, 1001, 65535), tv, NULL);
	}
	t += 1100 * ms;
	ack_win(&r, ack_of(4000, 1001, 65535), t, NULL);
	mbs = avail_mbs(cs);
	CHECK(mbs > 0.73 && mbs < 0.77, "prio 0 at 250 kB/s leaves 750 kB/s (%.3f)", mbs);
	/* It stops: the cut fades (a quarter per look), it does not vanish at once. */
	ack_win(&r, ack_of(4000, 1001, 65535), t + 250 * ms, NULL);
	mbs = avail_mbs(cs);
	CHECK(mbs > 0.79 && mbs < 0.85, "a quarter of the cut back after one quiet look (%.3f)", mbs);
	/* The link set to 800 kbit/s at run time (REST/Lua do it through the
	 * share box's weir_cbq_set_rate): followed at the next looks, and
	 * above the class's own rate (1 Mbit/s) nothing is available. */
	weir_cbq_set_rate(r.w->svc.shaper[0], 0, 800000, 800000);
	for (int i = 0; i < 12; i++)
		ack_win(&r, ack_of(4000, 1001, 65535), t + (uint64_t)(500 + 250 * i) * ms, NULL);
	mbs = avail_mbs(cs);
	CHECK(mbs > 0.099 && mbs < 0.101, "the link rate changed at run time: 100 kB/s (%.3f)", mbs);
	weir_cbq_set_rate(r.w->svc.shaper[0], 0, 16000000, 16000000);
	ack_win(&r, ack_of(4000, 1001, 65535), t + 4000 * ms, NULL);
	mbs = avail_mbs(cs);
	CHECK(mbs > 0.99 && mbs < 1.01, "raised to 16 Mbit/s: the class's ceiling, 1 MB/s (%.3f)", mbs);
	rig_emitted_free(&r);
	rig_free(&r);
}

/* A sibling of the same priority: what it uses of its part of the link
 * (the link x its rate / the priority's rates) is not available to the
 * ipabr leaf; what it leaves unused is. */
static void
test_siblings(void)
{
	const struct weir_policy_class_conf out[] = {
		{ .name = "web", .rate = 4000000, .prio = 1 },
		{ .name = "bulk", .rate = 4000000, .prio = 1, .mode = WEIR_MODE_IPABR },
	};
	struct weir_policy_rule_conf rules[1] = { { .class_name = "web" } };
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .n_classes = 2, .classes = out, .default_class = "bulk" },
			  { .rate = 0 } },
		.n_rules = 1, .rules = rules,
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), ms = hz / 1000, t0 = hz;
	const uint16_t BULK = 2;
	uint64_t t = t0 + 100 * ms;
	const struct weir_ipabr_class *cs;
	double mbs;

	rules[0].match.port[WEIR_CLS_WAN] = (struct weir_cls_ports){ 8080, 8080 };
	if (rig_make_pa(&r, &pc, "ia_sib", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	cs = &ia_of(&r)->dir[0].cls[BULK];
	open_flow(&r, 4000, t0, 40);
	send_data(&r, 4000, 1, 1000, t);
	ack_win(&r, ack_of(4000, 1001, 65535), t + 40 * ms, NULL);
	mbs = avail_mbs(cs);
	CHECK(mbs > 0.99 && mbs < 1.01, "the sibling quiet: the whole link, 1 MB/s (%.3f)", mbs);
	/* web sends 800 kB/s for 1 s, past its part (500 kB/s): bulk keeps its part. */
	for (uint64_t k = 0; k < 760; k++) {
		uint64_t tv = t + 100 * ms + k * 1318 * ms / 1000;

		feed(&r, tcp_frame(0, 2, 6000, 1, 8080, ACK, (uint32_t)(1 + 1000 * k), 1000), 0, tv);
		drain_out(&r, tv);
		if (k % 76 == 0)
			ack_win(&r, ack_of(4000, 1001, 65535), tv, NULL);
	}
	t += 1100 * ms;
	ack_win(&r, ack_of(4000, 1001, 65535), t, NULL);
	mbs = avail_mbs(cs);
	CHECK(mbs > 0.49 && mbs < 0.51, "web at 800 kB/s: bulk has its part, 500 kB/s (%.3f)", mbs);
	/* web at 200 kB/s: what it leaves of its part is bulk's too. */
	for (uint64_t k = 0; k < 400; k++) {
		uint64_t tv = t + k * 5270 * ms / 1000;

		feed(&r, tcp_frame(0, 2, 6000, 1, 8080, ACK, (uint32_t)(760001 + 1000 * k), 1000), 0, tv);
		drain_out(&r, tv);
		if (k % 40 == 0)
			ack_win(&r, ack_of(4000, 1001, 65535), tv, NULL);
	}
	t += 2110 * ms;
	ack_win(&r, ack_of(4000, 1001, 65535), t, NULL);
	mbs = avail_mbs(cs);
	CHECK(mbs > 0.76 && mbs < 0.82, "web at 200 kB/s: bulk 800 kB/s (%.3f)", mbs);
	rig_emitted_free(&r);
	rig_free(&r);
}

/* Below one segment per RTT (8 kbit/s, 40 ms: Wnd_opt 38 bytes): the
 * window is one segment and the ACKs are paced, one per segment at the
 * allocation (1000 B/s: about a second apart), held in the ACK store. */
static void
test_sub_mss(void)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000, .mode = WEIR_MODE_IPABR }, { .rate = 0 } },
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), ms = hz / 1000, t0 = hz;
	uint64_t t = t0 + 10000 * ms;
	int64_t w;
	unsigned int n;

	if (rig_make_pa(&r, &pc, "ia_sub", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	/* 8 kbit/s drains a frame per second: give the handshake time. */
	feed(&r, syn_opts(0, 4000, SYN, 1460, 7), 0, t0);
	drain_out(&r, t0 + 1000 * ms);
	feed(&r, syn_opts(1, 4000, SYN | ACK, 1460, 7), 1, t0 + 1040 * ms);
	feed(&r, tcp_frame(0, 1, 4000, 1, 80, ACK, 1, 0), 0, t0 + 1041 * ms);
	drain_out(&r, t0 + 3000 * ms);
	send_data(&r, 4000, 1, 1000, t);
	w = ack_win(&r, ack_of(4000, 1001, 65535), t + 40 * ms, NULL);
	CHECK(w >= 1000 && w < 1000 + 128, "one segment of window (%" PRId64 ")", w);
	CHECK(ack_win(&r, ack_of(4000, 1101, 65535), t + 50 * ms, NULL) == -1 &&
	      weir_postack_len(r.w->svc.pa, 0, 0) == 1, "the next ACK waits");
	CHECK(ia_of(&r)->st.sub_mss == 2, "counted (%" PRIu64 ")", ia_of(&r)->st.sub_mss);
	n = rig_watchdog(&r, t + 500 * ms);
	CHECK(n == 0, "not before a segment's time at 1000 B/s");
	n = rig_watchdog(&r, t + 1200 * ms);
	CHECK(n == 1 && r.n_emitted == 1 && rig_tag(r.emitted[0]) == 7 && cksum4_ok(r.emitted[0]),
	      "then released, one segment's time after the last (%u)", n);
	rig_emitted_free(&r);
	/* An ACK for two segments' worth (a window rounded up to the scale
	 * unit, filled with a second, smaller segment): the next release
	 * waits two segments' time, not one. Released at 1.2 s, the next
	 * was due at ~2.25 s; this one is held and moves it to ~3.3 s. */
	CHECK(ack_win(&r, ack_of(4000, 3101, 65535), t + 1300 * ms, NULL) == -1, "held");
	n = rig_watchdog(&r, t + 2400 * ms);
	CHECK(n == 0, "not after one segment's time: it acknowledged two (%u)", n);
	n = rig_watchdog(&r, t + 3400 * ms);
	CHECK(n == 1, "after two (%u)", n);
	rig_emitted_free(&r);
	rig_free(&r);
}

/* Bad input, each a stated fallback, counted, never a stall: no round
 * trip known (handshake not seen: midstream), weight 0 (the config refuses
 * it; a policy carrying one anyway), ACKs never seen (asymmetric routing). */
static void
test_fallbacks(void)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .mode = WEIR_MODE_IPABR }, { .rate = 0 } },
	};
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), ms = hz / 1000, t0 = hz;
	struct rte_mbuf *m;
	int64_t w;

	if (rig_make_pa(&r, &pc, "ia_fb", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	/* Midstream: data and an ACK with no handshake seen. */
	send_data(&r, 4000, 1, 1000, t0);
	m = ack_of(4000, 1001, 65535);
	CHECK(rig_process(&r, &m, 1, WEIR_PORT_WAN, t0 + 40 * ms) == 1 && win_of(m) == 65535 &&
	      ia_of(&r)->st.unknown == 1, "handshake not seen: untouched, counted");
	rte_pktmbuf_free(m);
	/* Weight 0 in the flow's target. */
	open_flow(&r, 4001, t0, 40);
	send_data(&r, 4001, 1, 1000, t0 + 100 * ms);
	r.p->targets[0].weight = 0;
	w = ack_win(&r, ack_of(4001, 1001, 65535), t0 + 140 * ms, NULL);
	r.p->targets[0].weight = 1;
	CHECK(w == 65535 * 128 && ia_of(&r)->st.bad_weight == 1, "weight 0: untouched, counted");
	/* Asymmetric: 64 segments and no ACK ever seen: counted once. */
	open_flow(&r, 4002, t0, 40);
	for (uint32_t k = 0; k < 70; k++)
		send_data(&r, 4002, 1 + 1000 * k, 1000, t0 + (200 + k) * ms);
	CHECK(ia_of(&r)->st.no_ack == 1, "a flow whose ACKs are never seen, counted once (%" PRIu64 ")",
	      ia_of(&r)->st.no_ack);
	rig_free(&r);
}

/* A policy switch (a reload with a new link rate: the link-rate experiment
 * does one every 20 s) keeps an ipabr class's state by name: its active
 * weights stay, so the first windows after it are the new rate's share,
 * not the whole link for every flow. */
static void
test_switch_keeps_state(void)
{
	const struct weir_policy_class_conf cls[] = {
		{ .name = "bulk", .rate = 1000000, .ceil = 8000000, .mode = WEIR_MODE_IPABR },
	};
	struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .n_classes = 1, .classes = cls, .default_class = "bulk" },
			  { .rate = 0 } },
	};
	struct weir_policy_switch sw = { 0 };
	struct weir_policy_err e;
	struct weir_policy *np;
	struct rig r;
	const uint64_t hz = rte_get_tsc_hz(), ms = hz / 1000, t0 = hz;
	uint64_t t = t0 + 100 * ms;
	int64_t w;
	double opt;

	if (rig_make_pa(&r, &pc, "ia_sw", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	for (uint16_t k = 0; k < 4; k++) {
		open_flow(&r, (uint16_t)(4000 + k), t0, 40);
		send_data(&r, (uint16_t)(4000 + k), 1, 1000, t + k * 2 * ms);
	}
	CHECK(ia_of(&r)->dir[0].cls[1].wsum == 4, "four active (%u, class %d)",
	      ia_of(&r)->dir[0].cls[1].wsum, weir_policy_class_find(r.p, 0, "bulk"));
	pc.tree[0].rate = 4000000;
	np = weir_policy_build(&pc, 2, &e);
	if (np == NULL) {
		CHECK(0, "policy: %s", e.msg);
		rig_free(&r);
		return;
	}
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		struct weir_cbq_class_conf cc[WEIR_CBQ_MAX_CLASSES];
		struct weir_cbq_conf conf = {
			.socket_id = SOCKET_ID_ANY, .tsc_hz = hz, .classes = cc,
			.n_queues = CAP + 1 + WEIR_POLICY_QUEUES_EXTRA(np), .flow_limit = 16,
		};

		conf.n_classes = weir_policy_cbq_classes(np, d, 1, 1, cc);
		sw.shaper[d] = conf.n_classes ? weir_cbq_create(&conf) : NULL;
		sw.cls_ctr[d] = conf.n_classes ?
			rte_zmalloc(NULL, np->tree[d].n_classes * sizeof(*sw.cls_ctr[d]), 0) : NULL;
	}
	sw.policy = np;
	if (weir_worker_policy_post(r.w, &sw) != 0 || weir_worker_policy_take(r.w) != 1) {
		CHECK(0, "switch");
		weir_policy_free(np);
		rig_free(&r);
		return;
	}
	weir_policy_free(r.p);
	r.p = np;
	w = ack_win(&r, ack_of(4000, 1001, 65535), t + 40 * ms, NULL);
	opt = 0.125e6 * 40.1e-3 * (double)((1000u << 16) / 1054) / 65536.0;
	CHECK(ia_of(&r)->dir[0].cls[1].wsum == 4 && w >= (int64_t)(opt - 1000) &&
	      w <= (int64_t)opt + 128, "after the switch: a quarter of the new 4 Mbit/s "
	      "(%" PRId64 ", opt %.0f, wsum %u)", w, opt, ia_of(&r)->dir[0].cls[1].wsum);
	rig_emitted_free(&r);
	rig_free(&r);
}

int
main(int argc, char **argv)
{
	RTE_SET_USED(argc);
	unit_eal_init(argv[0], "ipabr", "256");
	rig_mempool("ia_mp");
	test_filter();
	test_window();
	test_window_no_credit();
	test_rtt();
	test_left();
	test_left_queued();
	test_left_unseen();
	test_young();
	test_weights();
	test_light_flow();
	test_available();
	test_siblings();
	test_sub_mss();
	test_fallbacks();
	test_switch_keeps_state();
	CHECK(rte_mempool_in_use_count(mp) == 0, "no mbuf leaked (%u in use)",
	      rte_mempool_in_use_count(mp));
	return unit_report();
}
