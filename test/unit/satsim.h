/* SPDX-License-Identifier: BSD-3-Clause
 * A long path on a fake clock around a rig worker (rig.h): N model TCP
 * senders on the LAN side, weir's outbound class as the bottleneck, a fixed
 * one-way delay to one receiver and back, in 1 ms steps. The senders are
 * window-limited bulk senders (slow start from IW10, additive increase,
 * halving on three duplicate ACKs, go-back-N after a loss or a 3 s
 * timeout); the receiver takes in-order data only and ACKs every segment
 * with a window of 8 MB (scale 7; 64 KB at scale 0). Every frame is a whole Ethernet/IPv4/TCP
 * frame through weir_worker_process, so weir's mode sees what it would see
 * in the testbed, minus the hosts' jitter. The senders' smoothed round trip
 * (RFC 6298's 1/8 gain, one sample per ACK that advances) is what iperf3
 * reports as the senders' RTT.
 */
#ifndef WEIR_TEST_SATSIM_H
#define WEIR_TEST_SATSIM_H

#include "rig.h"
#include "tcpwin.h"

#define SIM_SEG 1448u                   /* payload of a data frame (no TCP options) */
#define SIM_MAXF 64
#define SIM_LINE 16384u                 /* frames a delay line holds */
#define SIM_RX_WIN 65535u               /* the receiver's raw window, scale 7: 8 MB */
#define SIM_SYNACK_WIN 64240u           /* its SYN+ACK's (not scaled) */
#define SIM_WPORT 5201

/* The receiver's window scale (its SYN+ACK's option): 7 unless a test sets
 * it (0: windows in bytes, the thesis' NS-2 receivers). */
static uint8_t sim_rx_ws = 7;

struct sim_line {
	struct rte_mbuf *m[SIM_LINE];
	uint64_t due[SIM_LINE];
	uint32_t head, tail;
};

struct sim_flow {
	uint64_t start;                 /* when its SYN leaves the sender */
	uint64_t last_progress;         /* the sender's: the last ACK that advanced */
	uint64_t srtt;                  /* the sender's smoothed RTT, ticks; 0 none */
	uint64_t acked;                 /* bytes acknowledged */
	uint32_t una, nxt, edge, max;   /* sender; max: highest sequence sent */
	uint32_t cwnd, ssthresh, dup;
	uint32_t rcv_nxt;               /* receiver */
	uint64_t sent_tsc[256];         /* when segment k (mod 256) was last sent */
	uint8_t resent[256];            /* segment k was sent more than once */
	uint16_t lport;
	uint8_t lan;
	uint8_t state;                  /* 0 idle, 1 SYN sent, 2 established */
};

struct sim {
	struct rig r;
	uint64_t hz, ms, now, lan_d, wan_d;
	unsigned int n;
	struct sim_flow f[SIM_MAXF];
	struct sim_line up, fwd, back, down;    /* sender->weir, weir->rx, rx->weir, weir->sender */
	uint64_t retx;                  /* segments sent again */
};

static inline void
sim_push(struct sim_line *l, struct rte_mbuf *m, uint64_t due)
{
	if (l->tail - l->head == SIM_LINE) {
		rte_pktmbuf_free(m);    /* never in these runs; a loss if it were */
		return;
	}
	l->m[l->tail % SIM_LINE] = m;
	l->due[l->tail % SIM_LINE] = due;
	l->tail++;
}

static inline struct rte_mbuf *
sim_pop(struct sim_line *l, uint64_t now)
{
	struct rte_mbuf *m;

	if (l->head == l->tail || l->due[l->head % SIM_LINE] > now)
		return NULL;
	m = l->m[l->head % SIM_LINE];
	l->head++;
	return m;
}

static inline void
sim_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint32_t
sim_rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A frame of flow fl: `in` from the receiver. SYNs carry MSS and window
 * scale 7 (the receiver's window scale is what weir writes in). */
static inline struct rte_mbuf *
sim_frame(const struct sim_flow *fl, int in, uint8_t flags, uint32_t seq, uint32_t ack,
	  uint16_t win, uint16_t payload)
{
	struct rte_mbuf *m = tcp_frame(in, fl->lan, fl->lport, 1, SIM_WPORT, flags, seq, payload);
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);

	sim_be32(f + 42, ack);
	f[48] = (uint8_t)(win >> 8);
	f[49] = (uint8_t)win;
	if (flags & SYN) {
		const uint8_t opts[8] = { 2, 4, SIM_SEG >> 8, SIM_SEG & 0xff, 1, 3, 3,
					  in ? sim_rx_ws : 7 };

		memcpy(rte_pktmbuf_append(m, 8), opts, 8);
		f = rte_pktmbuf_mtod(m, uint8_t *);
		f[46] = 0x70;
		f[17] = (uint8_t)(f[17] + 8);
	}
	return m;
}

static inline struct sim_flow *
sim_flow_of(struct sim *s, const uint8_t *f)
{
	uint16_t lport = (uint16_t)(f[26] == 10 ? (f[34] << 8 | f[35]) : (f[36] << 8 | f[37]));

	for (unsigned int i = 0; i < s->n; i++)
		if (s->f[i].lport == lport)
			return &s->f[i];
	return NULL;
}

/* The caller sets the policy; flows i get LAN port base + i, alternate LAN
 * hosts (as the testbed's two) and start at start(i). */
static inline int
sim_init(struct sim *s, const struct weir_policy_conf *pc, const char *name, unsigned int n,
	 uint16_t base, uint32_t wan_ms)
{
	memset(s, 0, sizeof(*s));
	s->hz = rte_get_tsc_hz();
	s->ms = s->hz / 1000;
	s->now = s->hz;
	s->lan_d = s->ms / 20;          /* 50 us each way */
	s->wan_d = wan_ms * s->ms;
	s->n = n;
	for (unsigned int i = 0; i < n; i++) {
		s->f[i].lport = (uint16_t)(base + i);
		s->f[i].lan = (uint8_t)(1 + (i & 1));
		s->f[i].start = s->now;
	}
	return rig_make_pa(&s->r, pc, name, 4096);
}

static inline void
sim_sender_send(struct sim *s, struct sim_flow *fl)
{
	while (weir_seq_lt(fl->nxt + SIM_SEG - 1, fl->una + fl->cwnd) &&
	       !weir_seq_lt(fl->edge, fl->nxt + SIM_SEG)) {
		uint32_t k = (fl->nxt - 1) / SIM_SEG % 256;

		if (weir_seq_lt(fl->nxt, fl->max)) {
			fl->resent[k] = 1;
			s->retx++;
		} else {
			fl->resent[k] = 0;
		}
		fl->sent_tsc[k] = s->now;
		sim_push(&s->up, sim_frame(fl, 0, ACK, fl->nxt, 1, 65535, SIM_SEG), s->now + s->lan_d);
		fl->nxt += SIM_SEG;
		if (weir_seq_lt(fl->max, fl->nxt))
			fl->max = fl->nxt;
	}
}

/* A frame from weir reaches the sender. */
static inline void
sim_sender_rx(struct sim *s, struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	struct sim_flow *fl = sim_flow_of(s, f);
	const uint32_t ack = sim_rd32(f + 42);
	const uint32_t win = (uint32_t)(f[48] << 8 | f[49]);

	if (fl == NULL)
		goto out;
	if ((f[47] & (SYN | ACK)) == (SYN | ACK)) {
		if (fl->state != 1)
			goto out;
		fl->state = 2;
		fl->una = fl->nxt = fl->max = 1;
		fl->edge = 1 + win;
		fl->cwnd = 10 * SIM_SEG;
		fl->ssthresh = UINT32_MAX / 2;
		fl->last_progress = s->now;
		sim_push(&s->up, sim_frame(fl, 0, ACK, 1, 1, 65535, 0), s->now + s->lan_d);
		sim_sender_send(s, fl);
		goto out;
	}
	if (fl->state != 2)
		goto out;
	if (weir_seq_lt(fl->una, ack)) {
		uint32_t k = (ack - 1 - 1) / SIM_SEG % 256;

		if (!fl->resent[k]) {
			uint64_t rtt = s->now - fl->sent_tsc[k];

			fl->srtt = fl->srtt == 0 ? rtt : fl->srtt - fl->srtt / 8 + rtt / 8;
		}
		fl->acked += ack - fl->una;
		fl->cwnd += fl->cwnd < fl->ssthresh ? ack - fl->una :
			    RTE_MAX(1u, (uint32_t)((uint64_t)SIM_SEG * SIM_SEG / fl->cwnd));
		fl->cwnd = RTE_MIN(fl->cwnd, 4000u * SIM_SEG);
		fl->una = ack;
		if (weir_seq_lt(fl->nxt, ack))
			fl->nxt = ack;
		fl->dup = 0;
		fl->last_progress = s->now;
	} else if (ack == fl->una && fl->una != fl->max && ++fl->dup == 3) {
		fl->ssthresh = RTE_MAX((fl->max - fl->una) / 2, 2 * SIM_SEG);
		fl->cwnd = fl->ssthresh;
		fl->nxt = fl->una;      /* go back N */
	}
	fl->edge = ack + (win << sim_rx_ws);
	sim_sender_send(s, fl);
out:
	rte_pktmbuf_free(m);
}

/* A frame weir sent on reaches the receiver. */
static inline void
sim_receiver_rx(struct sim *s, struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	struct sim_flow *fl = sim_flow_of(s, f);
	const uint32_t seq = sim_rd32(f + 38);
	const uint16_t len = (uint16_t)((f[16] << 8 | f[17]) - 20 - (f[46] >> 4) * 4);

	if (fl == NULL)
		goto out;
	if (f[47] & SYN) {
		fl->rcv_nxt = 1;
		sim_push(&s->back, sim_frame(fl, 1, SYN | ACK, 0, 1, SIM_SYNACK_WIN, 0),
			 s->now + s->wan_d);
		goto out;
	}
	if (len == 0)
		goto out;
	if (seq == fl->rcv_nxt)
		fl->rcv_nxt += len;
	sim_push(&s->back, sim_frame(fl, 1, ACK, 1, fl->rcv_nxt, SIM_RX_WIN, 0), s->now + s->wan_d);
out:
	rte_pktmbuf_free(m);
}

/* Frames weir let go on its own (released ACKs): on to their lines. */
static inline void
sim_take_emitted(struct sim *s)
{
	for (unsigned int i = 0; i < s->r.n_emitted; i++) {
		if (s->r.emitted_to[i] == WEIR_PORT_LAN)
			sim_push(&s->down, s->r.emitted[i], s->now + s->lan_d);
		else
			sim_push(&s->fwd, s->r.emitted[i], s->now + s->wan_d);
	}
	s->r.n_emitted = 0;
}

/* One millisecond of the whole path. */
static inline void
sim_step(struct sim *s)
{
	struct rte_mbuf *m, *pk[32];
	uint16_t k;

	s->now += s->ms;
	for (unsigned int i = 0; i < s->n; i++) {
		struct sim_flow *fl = &s->f[i];

		if (fl->state == 0 && s->now >= fl->start) {
			fl->state = 1;
			sim_push(&s->up, sim_frame(fl, 0, SYN, 0, 0, 65535, 0), s->now + s->lan_d);
		} else if (fl->state == 2 && fl->una != fl->nxt &&
			   s->now - fl->last_progress > 3 * s->hz) {
			fl->nxt = fl->una;      /* timeout: go back N */
			fl->ssthresh = RTE_MAX(fl->cwnd / 2, 2 * SIM_SEG);
			fl->cwnd = SIM_SEG;
			fl->last_progress = s->now;
			sim_sender_send(s, fl);
		}
	}
	while ((m = sim_pop(&s->up, s->now)) != NULL)
		if (rig_process(&s->r, &m, 1, WEIR_PORT_LAN, s->now) == 1)
			sim_push(&s->fwd, m, s->now + s->wan_d);
	s->r.w->next_tsc[WEIR_PORT_LAN] = 0;
	while ((k = rig_dequeue(&s->r, WEIR_PORT_LAN, s->now, pk, 32)) > 0) {
		for (uint16_t i = 0; i < k; i++)
			sim_push(&s->fwd, pk[i], s->now + s->wan_d);
		s->r.w->next_tsc[WEIR_PORT_LAN] = 0;
	}
	while ((m = sim_pop(&s->back, s->now)) != NULL)
		if (rig_process(&s->r, &m, 1, WEIR_PORT_WAN, s->now) == 1)
			sim_push(&s->down, m, s->now + s->lan_d);
	rig_watchdog(&s->r, s->now);
	sim_take_emitted(s);
	while ((m = sim_pop(&s->fwd, s->now)) != NULL)
		sim_receiver_rx(s, m);
	while ((m = sim_pop(&s->down, s->now)) != NULL)
		sim_sender_rx(s, m);
}

static inline void
sim_run_until(struct sim *s, uint64_t t)
{
	while (s->now < t)
		sim_step(s);
}

/* Frames weir holds in direction LAN->WAN, class `leaf`. */
static inline uint32_t
sim_qlen(struct sim *s, uint16_t leaf)
{
	return qlen(&s->r, 0, leaf);
}

static inline void
sim_free(struct sim *s)
{
	struct sim_line *l[4] = { &s->up, &s->fwd, &s->back, &s->down };
	struct rte_mbuf *m;

	for (int i = 0; i < 4; i++)
		while ((m = sim_pop(l[i], UINT64_MAX)) != NULL)
			rte_pktmbuf_free(m);
	rig_free(&s->r);
}

#endif /* WEIR_TEST_SATSIM_H */
