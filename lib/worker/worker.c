/* SPDX-License-Identifier: BSD-3-Clause */
#include <assert.h>
#include <errno.h>
#include <sys/prctl.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>

#include "l3ctl.h"
#include "mbuf_meta.h"
#include "mode.h"
#include "ackstore_int.h"
#include "worker.h"
#include "worker_int.h"

/* Empty polls before the first back-off sleep: long enough that a busy link
 * never sleeps between bursts, short enough to give the core away quickly. */
#define IDLE_SPINS 512
/* Times a partly sent tx burst is retried before the rest counts as tx_full. */
#define TX_RETRIES 16

/* The LAN port's frames travel out towards the WAN, and the other way round. */
static_assert((int)WEIR_PORT_LAN == (int)WEIR_DIR_OUT && (int)WEIR_PORT_WAN == (int)WEIR_DIR_IN,
	      "port role doubles as the packet's direction");

/* Policy epochs as flows store them: 16 bits, never 0 (0 = unclassified). */
uint16_t
weir_wk_epoch16(uint32_t epoch)
{
	return (uint16_t)(epoch % 0xffff + 1);
}

/* Count a frame that is not manageable by kind; returns true for an IP
 * fragment, which is keyed to its host pair's pseudo-flow (its addresses,
 * VLAN and protocol, ports 0: weir_flow_key_make with the ports the
 * parser left 0), so a datagram's fragments keep their order in one queue
 * and one host's fragments cannot starve another's. */
static bool
count_unmanaged(const struct weir_worker *w, struct weir_port_counters *pc, const uint8_t *frame,
		struct weir_pkt *p)
{
	if (p->malformed != WEIR_MAL_NONE) {
		pc->malformed++;
		pc->malformed_by[p->malformed]++;
		return false;
	}
	if (p->flags & WEIR_PF_FRAGMENT) {
		pc->fragments++;
		return true;
	}
	if (p->flags & WEIR_PF_L2_CONTROL) {
		pc->l2_control++;
	} else if (w->conf.l3_control && p->l3 == WEIR_L3_OTHER && weir_l3_control_l2(frame)) {
		p->l3_control = 1;      /* IS-IS: over LLC, not IP */
		pc->l3_control++;
	} else {
		pc->non_ip++;
	}
	return false;
}

/* ---- the out-arrays: the one place frames leave from ---- */

/* Send n frames out of port role `to`; what the ring will not take after a
 * few retries is freed and counted against the receiving port's tx_full. */
static void
send_burst(struct weir_worker *w, enum weir_port_role to, struct rte_mbuf **pkts, uint16_t n)
{
	struct weir_port_counters *out = &w->svc.ctr.port[to];
	uint16_t sent = 0;
	uint64_t bytes = 0;

	for (unsigned int tries = 0; sent < n && tries <= TX_RETRIES; tries++)
		sent += rte_eth_tx_burst(w->conf.port_id[to], w->conf.queue, pkts + sent, n - sent);
	for (uint16_t i = 0; i < sent; i++)
		bytes += pkts[i]->pkt_len;
	out->tx_pkts += sent;
	out->tx_bytes += bytes;
	if (unlikely(sent < n)) {
		struct weir_port_counters *in = &w->svc.ctr.port[to ^ 1];

		in->tx_full += n - sent;
		in->forwarded -= n - sent;
		rte_pktmbuf_free_bulk(pkts + sent, n - sent);
	}
}

static uint16_t
tx_port(struct weir_worker *w, enum weir_port_role to)
{
	struct weir_out *o = &w->out[to];
	uint16_t n = o->n;

	if (n == 0)
		return 0;
	o->n = 0;
	if (w->conf.emit != NULL)
		w->conf.emit(w->conf.emit_arg, to, o->pkts, n);
	else
		send_burst(w, to, o->pkts, n);
	return n;
}

uint16_t
weir_worker_tx(struct weir_worker *w)
{
	return (uint16_t)(tx_port(w, WEIR_PORT_LAN) + tx_port(w, WEIR_PORT_WAN));
}

/* Everything that leaves goes through here, in the order decided: frames
 * that go on, frames the tree lets go, ACKs a mode releases. A full array
 * is sent early (in order) rather than grown: it holds several bursts. */
static inline void
out_push(struct weir_worker *w, int to, struct rte_mbuf *m)
{
	struct weir_out *o = &w->out[to];

	if (unlikely(o->n == WEIR_OUT_MAX))
		tx_port(w, (enum weir_port_role)to);
	o->pkts[o->n++] = m;
}

void
weir_worker_out(struct weir_mode_svc *s, int to, struct rte_mbuf *m)
{
	struct weir_worker *w = weir_wk_of(s);

	out_push(w, to, m);
	w->svc.ctr.port[to ^ 1].forwarded++;
}

/* Shaping state of a managed packet's flow after tracking it: classify
 * when new, retry admission when refused, release the flow's admission
 * slot when the connection has ended. Returns false to drop the packet. */
static inline bool
shape_flow(struct weir_worker *w, struct weir_flow *f, struct rte_mbuf *m, enum weir_dir dir)
{
	bool ok = true;

	if (unlikely(f->policy_epoch != w->epoch16))
		ok = weir_wk_classify_flow(w, f, rte_pktmbuf_mtod(m, const uint8_t *),
				   &weir_mbuf_meta(m)->pkt, dir);
	else if (unlikely(f->shape & WEIR_FSH_REFUSED))
		ok = weir_wk_admit_flow(w, f, f->class_id);
	if (unlikely(f->state == WEIR_FS_CLOSED))
		weir_wk_flow_uncount(w, f);     /* RST or both FINs acked: room for a new flow */
	return ok;
}

/* The mode that acts on frame m in a leaf of mode `mode`. An IPsec SA's
 * bytes past the IP header are covered by its integrity check, and its
 * TCP (if any) is out of reach; a TCP-MD5/AO connection's signature covers
 * its window and ACK, and a segment weir rewrote or made (pep's p-ACKs and
 * RSTs) is dropped by the host: only pfq and fifo, which never rewrite or
 * hold a frame, may act on either. Any other mode is replaced here, where
 * the mode is chosen, by pfq (per-flow DRR), and the frame counted (a
 * signed one when it arrived). */
static inline const struct weir_mode_ops *
frame_mode(struct weir_worker *w, uint8_t mode, struct rte_mbuf *m, enum weir_port_role from,
	   bool count)
{
	const struct weir_mode_ops *ops = weir_mode(mode);

	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;

	if (unlikely(p->ipsec != WEIR_IPSEC_NONE || p->plain || p->tcp_signed) &&
	    ops != &weir_mode_pfq && ops != &weir_mode_fifo) {
		if (count && p->ipsec != WEIR_IPSEC_NONE)
			w->svc.ctr.port[from].ipsec_plain++;
		else if (count && !p->tcp_signed)
			w->svc.ctr.port[from].lm_exempt++;
		return &weir_mode_pfq;
	}
	return ops;
}

/* Frame m of queue qid in leaf `leaf` of direction dir left the tree, qlen
 * of its queue still waiting: its mode hears of it (PostACK's release
 * rule, TCR's round-trip sample). */
static inline void
on_sent(struct weir_worker *w, enum weir_port_role dir, struct rte_mbuf *m, uint32_t leaf,
	uint32_t qid, uint32_t qlen, uint64_t now)
{
	const struct weir_mode_ops *ops;

	if (w->svc.pa == NULL || qid >= w->unmanaged_qid)
		return;
	ops = frame_mode(w, w->svc.policy->tree[dir].classes[leaf].mode, m, dir, false);
	if (ops->sent != NULL)
		ops->sent(&w->svc, m, dir, qid, leaf, qlen, now);
}

/* Frame m left leaf `leaf` of direction dir's class tree: to the
 * out-array, through the leaf's marker if the tree has any. */
static inline void
tree_out(struct weir_worker *w, enum weir_port_role dir, uint32_t leaf, struct rte_mbuf *m,
	 uint64_t now)
{
	if (likely(w->markers[dir] == NULL)) {
		out_push(w, dir ^ 1, m);
		w->svc.ctr.port[dir].forwarded++;
		return;
	}
	weir_markers_pass(w->markers[dir], leaf, m, now, &w->mk_out[dir]);
}

/* Frame m (of flow f, NULL for none) goes on in direction `from`: into its
 * flow's queue in its leaf of the class tree (frames without a flow share
 * one queue in the default class), or, with cut_through, to the out-array
 * at once when the empty tree lets it go. A full queue drops it, counted.
 * Called for each frame at the moment it is decided, so a later frame of
 * the burst sees this one queued: nothing decided later can pass it. */
static enum weir_cap_verdict
enqueue_one(struct weir_worker *w, enum weir_port_role from, struct rte_mbuf *m,
	    struct weir_flow *f, uint64_t now)
{
	struct weir_cbq *sh = w->svc.shaper[from];
	const struct weir_policy_target *t = &w->svc.policy->targets[f ? f->class_id : 0];
	const struct weir_mode_ops *ops;
	uint32_t qid = weir_wk_shaped_qid(w, t, from, f);
	uint32_t leaf = t->leaf[from];  /* targets[0]: the default class */

	/* A last mile's exempt flow: out of the class's per-flow share, and
	 * no mode but pfq/fifo acts on it (lib/worker/lastmile.h). */
	if (unlikely(t->lm_flags & WEIR_LM_EXEMPT) && f != NULL)
		weir_mbuf_meta(m)->pkt.plain = 1;
	else if (f != NULL && weir_mbuf_meta(m)->pkt.payload_len > 0)
		weir_wk_note_active(w, f, from, leaf, now);
	ops = frame_mode(w, t->mode[from], m, from, true);
	/* Once one frame is queued the tree is not empty, so every later
	 * frame queues behind it: no flow is reordered. */
	if (w->conf.cut_through && !(ops->flags & WEIR_MODEF_NO_CUT) &&
	    weir_cbq_cut_through(sh, leaf, rte_pktmbuf_pkt_len(m), now)) {
		if (w->tcpm != NULL)
			weir_wk_tcpm_departed(w, m, qid, from, now);
		on_sent(w, from, m, leaf, qid, 0, now);
		tree_out(w, from, leaf, m, now);
		return WEIR_CAPV_FORWARDED;
	}
	if (ops->enqueue != NULL && f != NULL) {
		enum weir_verdict v = ops->enqueue(&w->svc, f, m, from, leaf, now);

		if (v == WEIR_V_TAKEN)
			return WEIR_CAPV_TAKEN;
		if (v == WEIR_V_DROP) {
			rte_pktmbuf_free(m);
			w->svc.ctr.port[from].dropped++;
			return WEIR_CAPV_DROP_QUEUE;
		}
	}
	w->next_tsc[from] = 0;  /* new backlog: ask the tree on the next turn */
	/* A flow whose ACKs its mode holds, or whose window it sizes to its
	 * share (ipabr: 16 window-sized downloads woke their queues at every
	 * packet and a young 100 KB reply shared the new list with them, 320
	 * ms against 68), is clocked by weir: not sparse when its queue wakes
	 * (lib/sched/drr.c). Flags in registers and the frame's own meta line. */
	weir_mbuf_meta(m)->pkt.clocked = f != NULL && (ops->flags & WEIR_MODEF_ACKS) &&
		((ops->flags & WEIR_MODEF_WINDOW) || (f->shape & WEIR_FSH_HELD(from)));
	/* The flow's bytes so far in this direction, this frame's included:
	 * its place in the leaf's young-flow budget. A full leaf may drop
	 * another flow's packet (its longest queue's head) to take this one. */
	struct rte_mbuf *evicted;
	uint32_t evicted_qid;
	int rc = weir_cbq_enqueue_evict(sh, leaf, qid, m, now,
					f != NULL ? f->bytes[from] : UINT64_MAX, &evicted, &evicted_qid);

	if (unlikely(evicted != NULL)) {
		if (w->svc.pa != NULL && evicted_qid < w->unmanaged_qid && ops->dropped != NULL)
			ops->dropped(&w->svc, weir_flow_by_slot(w->svc.flows, evicted_qid), evicted, from);
		rte_pktmbuf_free(evicted);
		w->svc.ctr.port[from].dropped++;
	}
	if (unlikely(rc != 0)) {
		if (w->svc.pa != NULL && f != NULL && ops->dropped != NULL)
			ops->dropped(&w->svc, f, m, from);
		rte_pktmbuf_free(m);
		w->svc.ctr.port[from].dropped++;
		return WEIR_CAPV_DROP_QUEUE;
	}
	if (ops->queued != NULL && f != NULL && w->svc.pa != NULL)
		ops->queued(&w->svc, f, m, from, qid);
	return WEIR_CAPV_QUEUED;
}

/* What becomes of a frame that is not manageable (counted by kind already). */
enum um_fate {
	UM_ON,          /* on as any frame: queued (f, or the unmanaged queue) or sent */
	UM_SENT,        /* handed to the out-array: went on now */
	UM_REFUSED,     /* dropped, counted: its flow was refused admission */
	UM_MALFORMED,   /* dropped, counted: over the malformed-frame limit */
	UM_L3_OVER,     /* dropped, counted: routers' control traffic over its limit */
};

/* Off the IP path:
 * - L2 control is the link's own signalling (ARP resolution, LACP, STP):
 *   it goes ahead of shaping, never queued or dropped by weir; it is a
 *   few frames a second, and queued behind bulk data it timed out (16.3);
 * - L3 control (lib/net/l3ctl.h: routers' hellos, BFD, BGP) goes ahead too,
 *   within the worker's l3_control_pps in a shaped direction: what a local
 *   host might dress up as control cannot take the link, and what is over
 *   is dropped rather than queued (queued, a BGP segment would fall behind
 *   the next one that passes: its flow reordered);
 * - an IP fragment with a pseudo-flow is tracked (bytes, packets, last
 *   seen: no TCP state, no ACK control, there is no TCP header) and
 *   classified by its addresses like any flow;
 * - a malformed frame bound for a class tree takes a token of the worker's
 *   malformed_pps bucket, or is dropped: garbage cannot fill the default
 *   class at any rate. An unshaped direction stays transparent. */
static enum um_fate
unmanaged_one(struct weir_worker *w, struct rte_mbuf *m, struct weir_flow *f,
	      enum weir_port_role from, uint64_t now)
{
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
	struct weir_port_counters *pc = &w->svc.ctr.port[from];

	if (p->flags & WEIR_PF_FRAGMENT) {
		if (f == NULL)
			return UM_ON;
		weir_flow_touch(f, (enum weir_dir)from, m->pkt_len, now);
		if (w->svc.policy != NULL && !shape_flow(w, f, m, (enum weir_dir)from)) {
			rte_pktmbuf_free(m);
			pc->refused++;
			return UM_REFUSED;
		}
		return UM_ON;
	}
	if (p->flags & WEIR_PF_L2_CONTROL) {
		weir_worker_out(&w->svc, from ^ 1, m);
		return UM_SENT;
	}
	if (p->l3_control) {
		if (w->svc.shaper[from] != NULL &&
		    !weir_wk_tbucket_take(&w->l3c_bucket, w->conf.l3_control_pps, w->svc.tsc_hz, now)) {
			rte_pktmbuf_free(m);
			pc->l3_control_dropped++;
			return UM_L3_OVER;
		}
		weir_worker_out(&w->svc, from ^ 1, m);
		return UM_SENT;
	}
	if (p->malformed != WEIR_MAL_NONE && w->svc.shaper[from] != NULL &&
	    !weir_wk_tbucket_take(&w->mal_bucket, w->conf.malformed_pps, w->svc.tsc_hz, now)) {
		rte_pktmbuf_free(m);
		pc->malformed_dropped++;
		return UM_MALFORMED;
	}
	return UM_ON;
}

/* An IPsec SA's packet: its sequence number against the SA's record
 * (loss upstream, reordering), summed per port for the counters. */
static void
sa_account(struct weir_worker *w, const struct weir_flow *f, const struct weir_pkt *p,
	   struct weir_port_counters *pc)
{
	struct weir_sa_seq *s = weir_sa_table_get(w->sa, weir_flow_slot(w->svc.flows, f));
	uint64_t gaps;

	pc->ipsec++;
	if (unlikely(s == NULL)) {
		pc->ipsec_untracked++;  /* every record taken: forwarded, not tracked */
		return;
	}
	gaps = s->owner == f->first_tsc ? s->gaps : 0;
	switch (weir_sa_seq_track(s, f->first_tsc, p->seq)) {
	case WEIR_SA_GAP:
		pc->ipsec_gaps += s->gaps - gaps;
		break;
	case WEIR_SA_LATE:
		pc->ipsec_late++;
		break;
	case WEIR_SA_DUP:
		pc->ipsec_dup++;
		break;
	case WEIR_SA_OLD:
		pc->ipsec_old++;
		break;
	case WEIR_SA_RESYNC:
		pc->ipsec_resync++;
		break;
	default:
		break;
	}
}

/* A TCP segment of flow f arrived travelling `from` (lib/worker/tcpmeas.h). */
static inline void
tcp_measure(struct weir_worker *w, const struct weir_flow *f, struct rte_mbuf *m,
	    enum weir_port_role from, uint64_t now)
{
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;

	weir_tcpm_segment(w->tcpm, weir_flow_slot(w->svc.flows, f), f->first_tsc, p,
			  rte_pktmbuf_mtod(m, const uint8_t *) + p->l4_off, from, now, &w->tcpm_st);
}

/* Frame m of queue qid left weir travelling `dir` at now after weir held
 * it: a probe it carries starts now (lib/worker/tcpmeas.h). */
void
weir_wk_tcpm_departed(struct weir_worker *w, struct rte_mbuf *m, uint32_t qid, int dir,
		      uint64_t now)
{
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;

	if (qid >= w->unmanaged_qid || p->l4proto != IPPROTO_TCP || p->ipsec != WEIR_IPSEC_NONE)
		return;
	weir_tcpm_departed(weir_tcpm_hot(w->tcpm, qid), p,
			   rte_pktmbuf_mtod(m, const uint8_t *) + p->l4_off, dir, now);
}

/* With a large table a flow's queue entry is a cache miss for every frame
 * (its own direction's for data, the other's and the ACK store's for a pure
 * ACK). Frames are decided one at a time (order), a few hundred
 * instructions apart, so the core cannot overlap those misses by itself:
 * ask for them for the whole burst before the first is needed. */
static inline void
prefetch_flow_state(const struct weir_worker *w, struct rte_mbuf **pkts, const uint16_t *idx,
		    struct weir_flow *const *flows, uint16_t n, enum weir_port_role from)
{
	const int d = from ^ 1;
	/* An empty tree with cut-through on will most likely send the data
	 * on without looking at its queue. */
	const struct weir_drr_qtab *own = w->svc.shaper[from] != NULL &&
		!(w->conf.cut_through && weir_cbq_empty(w->svc.shaper[from])) ?
		weir_cbq_qtab(w->svc.shaper[from]) : NULL;
	const struct weir_drr_qtab *qt = w->svc.shaper[d] != NULL ? weir_cbq_qtab(w->svc.shaper[d]) : NULL;

	for (uint16_t k = 0; k < n; k++) {
		const struct weir_pkt *p = &weir_mbuf_meta(pkts[idx[k]])->pkt;
		uint32_t slot;

		if (flows[k] == NULL)
			continue;
		slot = weir_flow_slot(w->svc.flows, flows[k]);
		if (own != NULL)
			rte_prefetch0(&own->q[slot]);
		if (w->svc.pa == NULL || p->l4proto != IPPROTO_TCP || p->payload_len != 0)
			continue;
		rte_prefetch0(&w->svc.pa->q[d][slot]);
		if (qt != NULL)
			rte_prefetch0(&qt->q[slot]);
	}
}

/* Frame m's fate (f: its flow, NULL for none; managed: it was looked up;
 * slow: not manageable by kind, counted already): handed to the out-array
 * (*sent or *unshaped counts it), queued, held or dropped, counted. */
static inline enum weir_cap_verdict
frame_one(struct weir_worker *w, struct rte_mbuf *m, struct weir_flow *f, bool managed,
	  bool slow, enum weir_port_role from, uint64_t now, uint16_t *sent, uint16_t *unshaped)
{
	struct weir_port_counters *pc = &w->svc.ctr.port[from];

	if (unlikely(slow)) {
		switch (unmanaged_one(w, m, f, from, now)) {
		case UM_SENT:
			(*sent)++;
			return WEIR_CAPV_FORWARDED;
		case UM_REFUSED:
			return WEIR_CAPV_DROP_ADMISSION;
		case UM_MALFORMED:
			return WEIR_CAPV_DROP_MALFORMED;
		case UM_L3_OVER:
			return WEIR_CAPV_DROP_L3CTL;
		case UM_ON:
			break;
		}
	} else if (managed) {
		if (unlikely(f == NULL)) {
			pc->flow_full++;
		} else {
			weir_flow_track(f, &weir_mbuf_meta(m)->pkt, (enum weir_dir)from,
					m->pkt_len, now);
			pc->managed++;
			/* A signed connection's segments are left as they came
			 * (frame_mode, weir_wk_ack_control): counted here, once. */
			if (weir_mbuf_meta(m)->pkt.l4proto == IPPROTO_TCP &&
			    unlikely(f->flags & WEIR_FF_TCP_SIGNED)) {
				weir_mbuf_meta(m)->pkt.tcp_signed = 1;
				pc->tcp_signed++;
			}
			if (unlikely(weir_mbuf_meta(m)->pkt.ipsec != WEIR_IPSEC_NONE))
				sa_account(w, f, &weir_mbuf_meta(m)->pkt, pc);
			else if (w->tcpm != NULL &&
				 weir_mbuf_meta(m)->pkt.l4proto == IPPROTO_TCP)
				tcp_measure(w, f, m, from, now);
			/* A flag already in the flow's cache line: no cost
			 * unless the flow is split. */
			if (unlikely(f->flags & WEIR_FF_MIDSTREAM) && w->conf.count_split)
				pc->flow_split++;
			if (w->svc.policy != NULL && !shape_flow(w, f, m, (enum weir_dir)from)) {
				rte_pktmbuf_free(m);
				pc->refused++;
				return WEIR_CAPV_DROP_ADMISSION;
			}
			if (w->svc.pa != NULL && weir_mbuf_meta(m)->pkt.l4proto == IPPROTO_TCP &&
			    weir_wk_ack_control(w, f, m, (enum weir_dir)from, now))
				return WEIR_CAPV_HELD;
		}
	}
	if (w->svc.shaper[from] != NULL) {
		uint16_t before = w->out[from ^ 1].n;
		enum weir_cap_verdict v = enqueue_one(w, from, m, f, now);

		*sent += w->out[from ^ 1].n != before;
		return v;
	}
	out_push(w, from ^ 1, m);
	(*unshaped)++;
	return WEIR_CAPV_FORWARDED;
}

/* frame_one with a capture running: the frame is matched and copied as it
 * came, then its fate decided, then the copy handed on with the verdict. */
static __rte_noinline void
frame_captured(struct weir_worker *w, struct rte_mbuf *m, struct weir_flow *f, bool managed,
	       bool slow, enum weir_port_role from, uint64_t now, uint16_t *sent,
	       uint16_t *unshaped)
{
	const uint32_t len = rte_pktmbuf_pkt_len(m);
	uint8_t mask = 0;
	struct rte_mbuf *cp = weir_wk_cap_pre(w, m, f, from, &mask);
	enum weir_cap_verdict v = frame_one(w, m, f, managed, slow, from, now, sent, unshaped);

	if (cp != NULL)
		weir_wk_cap_post(w, cp, mask, len, f, from, v, now);
}

uint16_t
weir_worker_process(struct weir_worker *w, struct rte_mbuf **pkts, uint16_t n,
		    enum weir_port_role from, uint64_t now)
{
	struct weir_port_counters *pc = &w->svc.ctr.port[from];
	struct weir_flow_key keys[WEIR_BURST_MAX];
	struct weir_flow *flows[WEIR_BURST_MAX];
	uint16_t managed_idx[WEIR_BURST_MAX];
	uint16_t n_managed = 0, sent = 0, unshaped = 0;
	uint64_t bytes = 0;
	uint64_t slow = 0;      /* bit i: pkts[i] is not manageable (WEIR_BURST_MAX <= 64) */
	unsigned int sas = 0;   /* IPsec frames among them */

	weir_wk_cap_take(w);
	for (uint16_t i = 0; i < n && i < 4; i++)
		rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void *));

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
		const uint8_t *frame = rte_pktmbuf_mtod(m, const uint8_t *);

		if (i + 4 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 4], void *));
		bytes += m->pkt_len;
		/* Headers are parsed in the first segment only: a frame whose
		 * headers straddle segments reads as truncated (unmanaged). */
		weir_parse(frame, m->data_len, p);
		if (unlikely(!weir_pkt_manageable(p))) {
			slow |= 1ull << i;
			if (!count_unmanaged(w, pc, frame, p))
				continue;
		} else if (w->conf.l3_control && unlikely(weir_l3_control(frame, p))) {
			p->l3_control = 1;      /* untracked: no flow, sent ahead */
			pc->l3_control++;
			slow |= 1ull << i;
			continue;
		}
		if (w->svc.flows != NULL) {
			weir_flow_key_make(frame, p, &keys[n_managed]);
			managed_idx[n_managed++] = i;
			sas += p->ipsec != WEIR_IPSEC_NONE;
		}
	}
	pc->rx_pkts += n;
	pc->rx_bytes += bytes;
	w->tcpm_now = now;

	if (n_managed > 0) {
		weir_flow_lookup_bulk(w->svc.flows, keys, n_managed, now, flows);
		if (w->prefetch_state)
			prefetch_flow_state(w, pkts, managed_idx, flows, n_managed, from);
		/* A TCP flow's measurement record: its hot line, apart from
		 * the flow (the cold one is for the rare paths). */
		for (uint16_t k = 0; w->tcpm != NULL && k < n_managed; k++)
			if (flows[k] != NULL &&
			    weir_mbuf_meta(pkts[managed_idx[k]])->pkt.l4proto == IPPROTO_TCP)
				rte_prefetch0(weir_tcpm_hot(w->tcpm,
							    weir_flow_slot(w->svc.flows, flows[k])));
		/* An SA's sequence record is a cache line apart from its flow. */
		for (uint16_t k = 0; unlikely(sas != 0) && k < n_managed; k++)
			if (unlikely(weir_mbuf_meta(pkts[managed_idx[k]])->pkt.ipsec != WEIR_IPSEC_NONE) &&
			    flows[k] != NULL)
				rte_prefetch0(&w->sa->idx[weir_flow_slot(w->svc.flows, flows[k])]);
	}
	/* Each frame in arrival order, decided and handed on (queued, sent,
	 * held) before the next is looked at. */
	for (uint16_t i = 0, k = 0; i < n; i++) {
		struct weir_flow *f = NULL;
		bool managed = false;

		if (k < n_managed && managed_idx[k] == i) {
			f = flows[k++];         /* NULL: table full (a fragment: no pseudo-flow) */
			managed = true;
		}
		if (likely(w->cap == NULL))
			frame_one(w, pkts[i], f, managed, slow & (1ull << i), from, now, &sent,
				  &unshaped);
		else
			frame_captured(w, pkts[i], f, managed, slow & (1ull << i), from, now, &sent,
				       &unshaped);
	}
	pc->forwarded += unshaped;      /* once a burst, not per frame */
	return sent + unshaped;
}

/* Packets CoDel dropped at the head of their flows' queues: counted as
 * dropped, and their modes hear of it as of a drop at enqueue. */
static void
aqm_dropped(struct weir_worker *w, enum weir_port_role dir, const struct weir_cbq_deq *d)
{
	for (uint16_t i = 0; i < d->n_dropped; i++) {
		struct rte_mbuf *m = d->dropped[i];
		uint32_t qid = d->dropped_qid[i];

		if (w->svc.pa != NULL && qid < w->unmanaged_qid) {
			const struct weir_mode_ops *ops = frame_mode(w,
				w->svc.policy->tree[dir].classes[d->dropped_leaf[i]].mode, m, dir, false);

			if (ops->dropped != NULL)
				ops->dropped(&w->svc, weir_flow_by_slot(w->svc.flows, qid), m, dir);
		}
		rte_pktmbuf_free(m);
	}
	w->svc.ctr.port[dir].dropped += d->n_dropped;
}

uint16_t
weir_worker_dequeue(struct weir_worker *w, enum weir_port_role dir, uint64_t now, uint16_t max)
{
	struct weir_cbq *sh = w->svc.shaper[dir];
	struct weir_cbq_deq d;
	uint16_t n = 0, released = 0;

	w->tcpm_now = now;
	/* A marker's held frames go as their tokens accrue, whatever the tree. */
	if (unlikely(w->markers[dir] != NULL))
		released = (uint16_t)weir_markers_tick(w->markers[dir], now, &w->mk_out[dir]);
	/* Clocked by dequeue: nothing is asked of the tree before the time it
	 * said something could go, or after it said it is empty. */
	if (sh == NULL || now < w->next_tsc[dir])
		return released;
	while (n < max) {
		struct rte_mbuf *m = weir_cbq_dequeue(sh, now, &d);

		if (unlikely(d.n_dropped > 0))
			aqm_dropped(w, dir, &d);
		if (m == NULL) {
			w->next_tsc[dir] = d.next_tsc;
			break;
		}
		n++;
		if (w->tcpm != NULL)
			weir_wk_tcpm_departed(w, m, d.queue_id, dir, now);
		on_sent(w, dir, m, d.leaf, d.queue_id, d.qlen, now);
		tree_out(w, dir, d.leaf, m, now);
	}
	return (uint16_t)(n + released);
}

uint16_t
weir_worker_out_take(struct weir_worker *w, enum weir_port_role to, struct rte_mbuf **pkts,
		     uint16_t max)
{
	struct weir_out *o = &w->out[to];
	uint16_t n = RTE_MIN(max, o->n);

	memcpy(pkts, o->pkts, n * sizeof(*pkts));
	memmove(o->pkts, o->pkts + n, (o->n - n) * sizeof(*pkts));
	o->n = (uint16_t)(o->n - n);
	return n;
}

static inline uint16_t
poll_port(struct weir_worker *w, enum weir_port_role from, uint64_t now)
{
	struct rte_mbuf *pkts[WEIR_BURST_MAX];
	uint16_t n;

	n = rte_eth_rx_burst(w->conf.port_id[from], w->conf.queue, pkts, w->conf.burst);
	if (n > 0)
		weir_worker_process(w, pkts, n, from, now);
	return n;
}

/* Empty flow f's queue (f NULL: the queue of frames without a flow) in both
 * directions' shapers, in order: the frames are sent on (forward) or freed
 * and counted as dropped. Returns how many. */
static unsigned int
drain_queue(struct weir_worker *w, const struct weir_flow *f, bool forward)
{
	struct rte_mbuf *pkts[WEIR_BURST_MAX];
	unsigned int n, total = 0;
	uint32_t qid = f != NULL ? weir_flow_slot(w->svc.flows, f) : w->unmanaged_qid;

	for (int dir = 0; dir < WEIR_PORT__COUNT; dir++) {
		uint32_t leaf;

		if (w->svc.shaper[dir] == NULL)
			continue;
		leaf = f != NULL ? weir_wk_flow_leaf(w, f, dir) : w->svc.policy->tree[dir].default_leaf;
		if (leaf == WEIR_CBQ_NONE)
			continue;       /* classified under an earlier policy: nothing queued */
		while ((n = weir_cbq_drain(w->svc.shaper[dir], leaf, qid, pkts, WEIR_BURST_MAX)) > 0) {
			total += n;
			if (forward) {
				for (unsigned int i = 0; i < n; i++)
					weir_worker_out(&w->svc, dir ^ 1, pkts[i]);
			} else {
				w->svc.ctr.port[dir].dropped += n;
				rte_pktmbuf_free_bulk(pkts, n);
			}
		}
	}
	return total;
}

/* Expiry hands over a flow before its slot is reused: whatever it still has
 * queued leaves now (a queue never outlives its flow, and nothing is held
 * forever), ahead of the shaper, in order. */
static void
evict_flow(struct weir_flow *f, const struct weir_flow_key *key, void *arg)
{
	struct weir_worker *w = arg;

	if (w->sa != NULL)
		weir_sa_table_put(w->sa, weir_flow_slot(w->svc.flows, f));
	if (w->svc.policy == NULL)
		return;
	weir_wk_mode_end(w, f);
	drain_queue(w, f, true);
	weir_wk_flow_uncount(w, f);
	if (w->conf.end_flow_events && f->policy_epoch != 0)
		weir_wk_event_end(w, f, key);
	f->first_tsc = 0;       /* a late hook command for this slot must not match */
}

unsigned int
weir_worker_expire(struct weir_worker *w, uint64_t now, unsigned int budget)
{
	return weir_flow_expire(w->svc.flows, now, budget, evict_flow, w);
}

unsigned int
weir_worker_flush_queues(struct weir_worker *w)
{
	uint64_t before = w->svc.ctr.port[0].dropped + w->svc.ctr.port[1].dropped;

	/* Frames handed to the out-array and never sent. */
	for (int to = 0; to < WEIR_PORT__COUNT; to++) {
		w->svc.ctr.port[to ^ 1].forwarded -= w->out[to].n;
		w->svc.ctr.port[to ^ 1].dropped += w->out[to].n;
		rte_pktmbuf_free_bulk(w->out[to].pkts, w->out[to].n);
		w->out[to].n = 0;
	}
	weir_wk_markers_drop(w);
	if (w->svc.shaper[0] == NULL && w->svc.shaper[1] == NULL)
		return (unsigned int)(w->svc.ctr.port[0].dropped + w->svc.ctr.port[1].dropped - before);
	/* Held ACKs: the app checks the pool right after this,
	 * before weir_worker_free would give them back, so postack-paced,
	 * which holds ACKs nearly all the time, exited 3. An ACK of data
	 * direction d came in through the other port. */
	for (int d = 0; d < WEIR_PORT__COUNT; d++)
		w->svc.ctr.port[d ^ 1].dropped += weir_postack_drop_all(w->svc.pa, d);
	/* Every queue of every leaf, each taken from the head of its DRR list:
	 * O(1) a queue. Walking the flow table instead unlinked queues in slot
	 * order, a walk of the list each: quadratic, and a million backlogged
	 * flows never finished tearing down. */
	for (unsigned int m = 0; m < WEIR_MODE__COUNT; m++)
		if (weir_modes[m]->flush != NULL)
			weir_modes[m]->flush(&w->svc);    /* what modes keep (counted in their stats) */
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		struct rte_mbuf *pkts[WEIR_BURST_MAX];
		uint32_t leaf = 0;
		uint32_t qid;
		unsigned int n;

		while (w->svc.shaper[d] != NULL &&
		       (n = weir_cbq_drain_next(w->svc.shaper[d], &leaf, &qid, pkts, WEIR_BURST_MAX)) > 0) {
			w->svc.ctr.port[d].dropped += n;
			rte_pktmbuf_free_bulk(pkts, n);
		}
	}
	return (unsigned int)(w->svc.ctr.port[0].dropped + w->svc.ctr.port[1].dropped - before);
}

unsigned int
weir_worker_postack_idle(struct weir_worker *w, uint64_t now)
{
	struct rte_mbuf *out[WEIR_BURST_MAX];
	uint8_t dir_of[WEIR_BURST_MAX];
	unsigned int n;

	if (w->svc.pa == NULL || w->svc.pa->ring_n == 0)
		return 0;
	n = weir_postack_watchdog(w->svc.pa, now, 8, weir_wk_ring_decide, w, out, dir_of, WEIR_BURST_MAX);
	for (unsigned int i = 0; i < n; i++)
		weir_worker_out(&w->svc, dir_of[i], out[i]);  /* data direction d's ACKs: out of port d */
	return n;
}

/* Longest sleep allowed now: the back-off cap, cut short when a shaper has
 * frames that become sendable sooner. */
static inline uint32_t
sleep_cap_us(const struct weir_worker *w, uint64_t now)
{
	uint64_t wake = RTE_MIN(w->svc.shaper[0] ? w->next_tsc[0] : UINT64_MAX,
				w->svc.shaper[1] ? w->next_tsc[1] : UINT64_MAX);

	/* Held ACKs need the watchdog to look now and then. */
	if (w->svc.pa != NULL && w->svc.pa->ring_n > 0)
		wake = RTE_MIN(wake, now + 1000 * w->svc.tsc_per_us);
	/* And the modes' own timers (their poll hooks). */
	if (w->svc.mode_wake != UINT64_MAX)
		wake = RTE_MIN(wake, w->svc.mode_wake);
	/* A TBQ's held frames and the rate controllers have their own times. */
	wake = RTE_MIN(wake, RTE_MIN(weir_markers_next(w->markers[0]),
				     weir_markers_next(w->markers[1])));
	if (wake == UINT64_MAX)
		return w->conf.idle_sleep_us;
	if (wake <= now)
		return 0;
	/* Idle path only: a division here costs nothing that matters. */
	return (uint32_t)RTE_MIN((wake - now) / w->svc.tsc_per_us, (uint64_t)w->conf.idle_sleep_us);
}

/* Grow the idle sleep 1, 2, 4 ... up to `cap` microseconds: the first packet
 * after a pause waits at most one sleep, and a long-idle worker wakes only a
 * few thousand times a second. */
static inline void
idle_backoff(struct weir_worker *w, uint32_t cap, uint32_t *idle, uint32_t *sleep_us)
{
	if (cap == 0 || ++*idle < IDLE_SPINS) {
		rte_pause();
		return;
	}
	rte_delay_us_sleep(RTE_MIN(*sleep_us, cap));
	w->svc.ctr.sleeps++;
	if (*sleep_us < w->conf.idle_sleep_us)
		*sleep_us = RTE_MIN(*sleep_us * 2, w->conf.idle_sleep_us);
}

int
weir_worker_main(void *arg)
{
	struct weir_worker *w = arg;
	uint32_t idle = 0, sleep_us = 1;

	w->lcore_id = rte_lcore_id();
	/* Linux's default 50 us timer slack would make every short back-off
	 * sleep 50 us longer than asked; ask for precise wake-ups instead. */
	prctl(PR_SET_TIMERSLACK, 1UL);

	for (;;) {
		uint64_t now = rte_rdtsc();
		uint16_t got;

		if (unlikely(w->stop) && weir_worker_stopping(w, now))
			break;

		got = poll_port(w, WEIR_PORT_LAN, now);
		got += poll_port(w, WEIR_PORT_WAN, now);
		got += weir_worker_dequeue(w, WEIR_PORT_LAN, now, w->conf.burst);
		got += weir_worker_dequeue(w, WEIR_PORT_WAN, now, w->conf.burst);
		w->svc.mode_wake = UINT64_MAX;
		got += weir_worker_postack_idle(w, now);       /* tcr's next due ACK */
		for (unsigned int i = 0; i < w->n_polled; i++)     /* modes' own timers */
			got += w->polled[i]->poll(&w->svc, now, &w->svc.mode_wake);
		if (unlikely(__atomic_load_n(&w->pending, __ATOMIC_ACQUIRE) != NULL))
			weir_worker_policy_take(w);
		weir_wk_cap_take(w);    /* an idle worker too: the poster frees the old tap */
		if (w->conf.cmds != NULL && !rte_ring_empty(w->conf.cmds))
			got += weir_worker_cmds(w);
		if (w->conf.class_cmds != NULL && !rte_ring_empty(w->conf.class_cmds))
			got += weir_worker_class_cmds(w);
		if (w->conf.share_box != NULL &&
		    __atomic_load_n(&w->conf.share_box->seq, __ATOMIC_ACQUIRE) != w->share_seq)
			weir_worker_share_apply(w);
		w->svc.ctr.loops++;
		/* Bounded expiry work rides along with traffic, so a busy
		 * worker still reclaims idle flows. */
		if (w->svc.flows != NULL && (got == 0 || (w->svc.ctr.loops & 63) == 0))
			weir_worker_expire(w, now, w->conf.expire_budget);
		/* The one transmit point: everything decided above, in order. */
		weir_worker_tx(w);
		if (got > 0) {
			idle = 0;
			sleep_us = 1;
			w->svc.ctr.busy_tsc += rte_rdtsc() - now;
			continue;
		}
		w->svc.ctr.idle_loops++;
		idle_backoff(w, sleep_cap_us(w, now), &idle, &sleep_us);
	}
	return 0;
}
