/* SPDX-License-Identifier: BSD-3-Clause
 * A worker under test: a policy, a flow table, class trees and (optionally)
 * PostACK queues around one struct weir_worker, fed whole Ethernet/IPv4/TCP
 * frames through weir_worker_process. Frames the worker sends on its own
 * (released ACKs) are caught in rig.emitted[] instead of going to a port.
 */
#ifndef WEIR_TEST_RIG_H
#define WEIR_TEST_RIG_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include "mbuf_meta.h"
#include "policy.h"
#include "worker.h"
#include "worker_int.h"

static struct rte_mempool *mp;

static inline void
rig_mempool(const char *name)
{
	mp = rte_pktmbuf_pool_create(name, 4096, 0, WEIR_MBUF_PRIV_SIZE, 2048, SOCKET_ID_ANY);
	if (mp == NULL) {
		printf("no mempool\n");
		exit(2);
	}
}

#define CAP 64

/* A whole Ethernet/IPv4/TCP frame from 10.0.0.<lan> (LAN side) to
 * 192.0.2.<wan> (WAN side), or back when `in`. */
static inline struct rte_mbuf *
tcp_frame(int in, uint8_t lan, uint16_t lport, uint8_t wan, uint16_t wport, uint8_t flags,
	  uint32_t seq, uint16_t payload)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
	uint16_t len = (uint16_t)(14 + 20 + 20 + payload);
	uint8_t *f;
	uint8_t a_lan[4] = { 10, 0, 0, lan }, a_wan[4] = { 192, 0, 2, wan };
	uint16_t sp = in ? wport : lport, dp = in ? lport : wport;

	if (m == NULL) {
		printf("mempool exhausted\n");
		exit(2);
	}
	f = (uint8_t *)rte_pktmbuf_append(m, len);
	memset(f, 0, len);
	f[12] = 0x08;                   /* IPv4 */
	f[14] = 0x45;
	f[16] = (uint8_t)((len - 14) >> 8);
	f[17] = (uint8_t)(len - 14);
	f[22] = 64;
	f[23] = IPPROTO_TCP;
	memcpy(f + 26, in ? a_wan : a_lan, 4);
	memcpy(f + 30, in ? a_lan : a_wan, 4);
	f[34] = (uint8_t)(sp >> 8);
	f[35] = (uint8_t)sp;
	f[36] = (uint8_t)(dp >> 8);
	f[37] = (uint8_t)dp;
	f[38] = (uint8_t)(seq >> 24);
	f[39] = (uint8_t)(seq >> 16);
	f[40] = (uint8_t)(seq >> 8);
	f[41] = (uint8_t)seq;
	f[46] = 0x50;                   /* data offset 5 */
	f[47] = flags;
	f[48] = 0xff;                   /* window */
	return m;
}

/* The one flow of the PostACK tests: data out (UP), ACKs and data back. */
#define UP(seq, len) tcp_frame(0, 1, 4000, 1, 80, ACK, (seq), (len))
#define BACK(tag) tcp_frame(1, 1, 4000, 1, 80, ACK, (tag), 0)
#define BACK_DATA(tag, len) tcp_frame(1, 1, 4000, 1, 80, ACK, (tag), (len))

/* A frame's tag: its TCP sequence number (tcp_frame's seq). */
static inline uint32_t
rig_tag(struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);

	return (uint32_t)f[38] << 24 | (uint32_t)f[39] << 16 | (uint32_t)f[40] << 8 | f[41];
}

#define SYN 0x02
#define ACK 0x10
#define RST 0x04
#define FIN 0x01

#define RIG_EMIT_MAX 256

struct rig {
	struct weir_policy *p;
	struct weir_flow_table *ft;
	struct weir_worker *w;
	struct rte_mbuf *emitted[RIG_EMIT_MAX];        /* released frames, in order */
	uint8_t emitted_to[RIG_EMIT_MAX];              /* the port each went out of */
	unsigned int n_emitted;
};

static inline void
rig_emit(void *arg, enum weir_port_role to, struct rte_mbuf **pkts, uint16_t n)
{
	struct rig *r = arg;

	for (uint16_t i = 0; i < n; i++) {
		if (r->n_emitted == RIG_EMIT_MAX) {
			rte_pktmbuf_free(pkts[i]);
			continue;
		}
		r->emitted_to[r->n_emitted] = (uint8_t)to;
		r->emitted[r->n_emitted++] = pkts[i];
	}
}

static inline void
rig_emitted_free(struct rig *r)
{
	for (unsigned int i = 0; i < r->n_emitted; i++)
		rte_pktmbuf_free(r->emitted[i]);
	r->n_emitted = 0;
}

/* Workers made while this is set send frames an empty tree lets go at once
 * (weir_worker_conf.cut_through); the tests that want it set and clear it. */
static bool rig_cut_through;
/* ACKs the ACK store keeps as mbufs before it copies them (the app keeps
 * thousands; 0, the default here, copies every one). */
static uint32_t rig_pa_mbuf_cap;
static bool rig_pa_share_clamp;        /* postack's share clamp (off: the tests before it) */
static uint32_t rig_pa_clamp_margin16;  /* its margin, << 16 */
/* weir_worker_conf.malformed_pps of workers made while set (0: no limit). */
static uint32_t rig_malformed_pps;
/* Class ids each tree of workers made while set can hold (0: its classes). */
static uint32_t rig_class_capacity;
/* weir_worker_conf.l3_control and l3_control_pps of workers made while set. */
static bool rig_l3_control;
static uint32_t rig_l3_control_pps;
/* The fake clock's ticks a second for workers made while set (0: the TSC's). */
static uint64_t rig_tsc_hz;
/* weir_worker_conf.pep_wm_measured of workers made while set. */
static bool rig_pep_wm_measured;
/* Packets a flow's queue holds in workers made while set (0: 16; weir's default is 128). */
static uint16_t rig_flow_limit;

static inline uint64_t
rig_hz(void)
{
	return rig_tsc_hz ? rig_tsc_hz : rte_get_tsc_hz();
}

/* postack_acks: 0 = no PostACK queues. */
static inline int
rig_make_pa(struct rig *r, const struct weir_policy_conf *pc, const char *name, uint32_t postack_acks)
{
	struct weir_policy_err e;
	struct weir_flow_table_conf fc = {
		.name = name, .capacity = CAP, .socket_id = SOCKET_ID_ANY, .tsc_hz = rig_hz(),
		.timeouts = { 5, 100, 10, 2, 30, 15 },
	};
	struct weir_cbq *sh[WEIR_PORT__COUNT] = { NULL, NULL };
	struct weir_worker_conf wc = { .burst = 32, .cut_through = rig_cut_through,
				       .malformed_pps = rig_malformed_pps, .tsc_hz = rig_tsc_hz,
				       .l3_control = rig_l3_control,
				       .l3_control_pps = rig_l3_control_pps,
				       .pep_wm_measured = rig_pep_wm_measured };

	memset(r, 0, sizeof(*r));
	r->p = weir_policy_build(pc, 1, &e);
	r->ft = weir_flow_table_create(&fc);
	if (r->p == NULL || r->ft == NULL) {
		printf("rig: %s\n", e.msg);
		return -1;
	}
	wc.policy = r->p;
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		struct weir_cbq_class_conf cc[WEIR_CBQ_MAX_CLASSES];
		struct weir_cbq_conf conf = {
			.socket_id = SOCKET_ID_ANY, .tsc_hz = rig_hz(), .classes = cc,
			.n_queues = CAP + 1 + WEIR_POLICY_QUEUES_EXTRA(r->p),
			.flow_limit = rig_flow_limit ? rig_flow_limit : 16,
		};

		conf.n_classes = weir_policy_cbq_classes(r->p, d, 1, 1, cc);
		conf.capacity = RTE_MAX(rig_class_capacity, conf.n_classes);
		if (conf.n_classes && (sh[d] = weir_cbq_create(&conf)) == NULL)
			return -1;
	}
	if (postack_acks > 0) {
		const struct weir_postack_conf pac = {
			.n_flows = CAP, .n_acks = postack_acks, .ack_limit = 64, .idle_us = 20000,
			.mbuf_cap = rig_pa_mbuf_cap, .share_clamp = rig_pa_share_clamp,
			.clamp_target_us = 5000, .clamp_margin16 = rig_pa_clamp_margin16,
			.tsc_hz = rig_hz(), .socket_id = SOCKET_ID_ANY, .mp = mp,
		};

		wc.postack = weir_postack_create(&pac);
	}
	wc.emit = rig_emit;
	wc.emit_arg = r;
	r->w = weir_worker_create(&wc, r->ft, sh, SOCKET_ID_ANY);
	return r->w ? 0 : -1;
}

static inline int
rig_make(struct rig *r, const struct weir_policy_conf *pc, const char *name)
{
	return rig_make_pa(r, pc, name, 0);
}

static inline void
rig_free(struct rig *r)
{
	rig_emitted_free(r);
	weir_worker_free(r->w);
	weir_flow_table_free(r->ft);
	weir_policy_free(r->p);
}

/* Process a burst through the worker, then send its out-arrays: the frames
 * of pkts[] that went on now come back in pkts[] (in the order they left),
 * everything else that left (released ACKs) is caught in r->emitted[].
 * Returns how many of pkts[] went on. */
static inline uint16_t
rig_process(struct rig *r, struct rte_mbuf **pkts, uint16_t n, enum weir_port_role from,
	    uint64_t now)
{
	struct rte_mbuf *in[WEIR_BURST_MAX], *o[WEIR_OUT_MAX];
	uint16_t k = 0, n_o, went;

	memcpy(in, pkts, n * sizeof(*pkts));
	went = weir_worker_process(r->w, pkts, n, from, now);
	n_o = weir_worker_out_take(r->w, (enum weir_port_role)(from ^ 1), o, WEIR_OUT_MAX);
	for (uint16_t i = 0; i < n_o; i++) {
		bool mine = false;

		for (uint16_t j = 0; j < n && !mine; j++)
			mine = o[i] == in[j];
		if (mine)
			pkts[k++] = o[i];
		else
			rig_emit(r, (enum weir_port_role)(from ^ 1), &o[i], 1);
	}
	weir_worker_tx(r->w);
	return went;
}

/* Process one frame; returns 1 when it went on now (it is freed). */
static inline uint16_t
feed(struct rig *r, struct rte_mbuf *m, int in, uint64_t now)
{
	uint16_t n = rig_process(r, &m, 1, in ? WEIR_PORT_WAN : WEIR_PORT_LAN, now);

	if (n)
		rte_pktmbuf_free(m);
	return n;
}

/* Dequeue up to max frames of direction dir into pkts[]; what a mode
 * released meanwhile is caught in r->emitted[]. */
static inline uint16_t
rig_dequeue(struct rig *r, enum weir_port_role dir, uint64_t now, struct rte_mbuf **pkts,
	    uint16_t max)
{
	uint16_t n = weir_worker_dequeue(r->w, dir, now, max);

	weir_worker_out_take(r->w, (enum weir_port_role)(dir ^ 1), pkts, n);
	weir_worker_tx(r->w);
	return n;
}

/* The watchdog, with what it releases caught in r->emitted[]. */
static inline unsigned int
rig_watchdog(struct rig *r, uint64_t now)
{
	unsigned int n = weir_worker_postack_idle(r->w, now);

	weir_worker_tx(r->w);
	return n;
}

static inline uint32_t
qlen(struct rig *r, int d, uint32_t cls)
{
	struct weir_cbq_stats st;

	weir_cbq_stats(r->w->svc.shaper[d], cls, &st);
	return st.qlen;
}


#endif /* WEIR_TEST_RIG_H */
