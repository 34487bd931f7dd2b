/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the ipabr mode, IP-ABR (seed 000). See ipabr.h and docs/ipabr.md.
 */
#include <string.h>
#include <netinet/in.h>

#include <rte_malloc.h>

#include "ipabr.h"
#include "mbuf_meta.h"
#include "mode.h"
#include "ackstore_int.h"
#include "tcpwin.h"
#include "mode_svc.h"

static inline struct weir_ipabr *
ipabr_of(const struct weir_mode_svc *w)
{
	return w->mode_state[WEIR_MODE_IPABR];
}

static int
ipabr_init(struct weir_mode_svc *w, uint32_t n_flows, int socket_id)
{
	struct weir_ipabr *ia = rte_zmalloc_socket("weir_ipabr", sizeof(*ia), RTE_CACHE_LINE_SIZE,
						   socket_id);

	if (ia == NULL)
		return -ENOMEM;
	ia->n_flows = n_flows;
	ia->socket_id = socket_id;
	w->mode_state[WEIR_MODE_IPABR] = ia;
	return 0;
}

/* The per-flow records (128 bytes a flow) come with the first policy that
 * has an ipabr class, and stay. f[1] is published before f[0]: a worker
 * that sees f[0] sees both, and they are all zero (a reset flow). */
static int
ipabr_prepare(struct weir_mode_svc *w, const struct weir_policy *p)
{
	struct weir_ipabr *ia = ipabr_of(w);
	struct weir_ipabr_flow *f[2];

	if (ia == NULL || ia->f[0] != NULL || !weir_policy_uses_mode(p, WEIR_MODE_IPABR))
		return 0;       /* ia->f is written only here: this lcore's own read */
	for (int d = 0; d < 2; d++)
		f[d] = rte_zmalloc_socket("weir_ipabr_flows", (size_t)ia->n_flows * sizeof(*f[d]),
					  RTE_CACHE_LINE_SIZE, ia->socket_id);
	if (f[0] == NULL || f[1] == NULL) {
		rte_free(f[0]);
		rte_free(f[1]);
		return -ENOMEM;
	}
	__atomic_store_n(&ia->f[1], f[1], __ATOMIC_RELEASE);
	__atomic_store_n(&ia->f[0], f[0], __ATOMIC_RELEASE);
	return 0;
}

static void
ipabr_fini(struct weir_mode_svc *w)
{
	struct weir_ipabr *ia = ipabr_of(w);

	if (ia == NULL)
		return;
	rte_free(ia->f[0]);
	rte_free(ia->f[1]);
	rte_free(ia);
	w->mode_state[WEIR_MODE_IPABR] = NULL;
}

/* Only the records that exist (no policy had an ipabr class: none). Every
 * other hook runs for a flow of an ipabr class, so after the switch that
 * brought one, when they do. */
static void
ipabr_reset(struct weir_mode_svc *w, uint32_t slot)
{
	struct weir_ipabr *ia = ipabr_of(w);

	if (ia == NULL || __atomic_load_n(&ia->f[0], __ATOMIC_ACQUIRE) == NULL)
		return;
	ia->f[0][slot] = (struct weir_ipabr_flow){ 0 };
	ia->f[1][slot] = (struct weir_ipabr_flow){ 0 };
}

/* bit/s as bytes per TSC tick << 32. */
static inline uint64_t
bpt(const struct weir_mode_svc *w, uint64_t bps)
{
	return (uint64_t)(((unsigned __int128)bps << 32) / (8 * w->tsc_hz));
}

/*
 * The allocation per unit of weight, water-filled (max-min, as the
 * worker's per-flow share: lib/worker/worker_active.c): the light flows keep
 * what they use, the heavy ones divide the rest by weight; never less
 * than avail / wsum. A 10 Hz ping-pong beside a bulk download counted
 * as a whole flow and cut the download to half the class (4.8 of 10
 * Mbit/s on the wire). Every flow's window follows the same unit, a
 * light one's too, so one that turns bulk can use it at once.
 */
static inline void
class_unit(struct weir_ipabr_class *cs)
{
	const uint64_t fair = cs->avail_bpt / RTE_MAX(cs->wsum, 1u);
	const uint64_t light = cs->light_len == 0 ? 0 :
		(uint64_t)(((unsigned __int128)cs->light << 32) / cs->light_len);
	const uint64_t rest = cs->avail_bpt > light ? cs->avail_bpt - light : 0;

	cs->unit_bpt = RTE_MAX(rest / RTE_MAX(RTE_MIN(cs->wheavy, cs->wsum), 1u), fair);
}

/* Count flow tf (weight counted) heavy or light in the class's period,
 * from what the worker measured it to send in its last period (true:
 * heavy). Light: below half its allocation over that period, and never
 * held back by weir's window since its last count. A flow that sent up to
 * the edge weir's cut ACKs gave it sends what weir allows, not what it wants:
 * on a long path with data queued at weir its rate is its window over a
 * round trip the queue lengthens, below half its allocation, and counted
 * light every flow's unit grew to the class (all 32 of the satellite
 * case light: windows of the whole class each, seconds of queue). */
static inline bool
class_count_use(struct weir_mode_svc *w, struct weir_ipabr_class *cs, struct weir_ipabr_flow *tf,
		int d, uint32_t slot, uint32_t leaf)
{
	const struct weir_postack_q *q = &w->pa->q[d][slot];
	const uint64_t len = w->cls_ctr[d][leaf].period_len;
	const bool full = tf->flags & WEIR_IPABR_FULL;

	tf->flags &= (uint8_t)~WEIR_IPABR_FULL;
	if (!full && (q->flags & WEIR_PAQ_USE_VALID) &&
	    q->use < (uint64_t)(((unsigned __int128)cs->unit_bpt * tf->weight * len) >> 33)) {
		tf->flags |= WEIR_IPABR_LIGHT;
		cs->light_cur += q->use;
		cs->light_len = len;
		return false;
	}
	tf->flags &= (uint8_t)~WEIR_IPABR_LIGHT;
	cs->wheavy_cur += tf->weight;
	return true;
}

static uint32_t
name_hash(const char *s)
{
	uint32_t h = 2166136261u;       /* FNV-1a */

	while (*s != '\0')
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

/*
 * A new policy (a reload, a REST or Lua change): class indices may mean
 * other classes now. A class of the same name keeps its state (active
 * weights, period, the flows' marks stay valid): starting it from zero
 * gave every flow the whole class for a period, a burst of windows the
 * size of the link at each reload (the link-rate experiment reloads every
 * 20 s). The measured higher-priority rates are kept by priority.
 */
static void
policy_switched(struct weir_mode_svc *w, struct weir_ipabr *ia, int d)
{
	struct weir_ipabr_dir *ds = &ia->dir[d];
	const struct weir_policy_tree *t = &w->policy->tree[d];
	const uint16_t n_old = ds->policy != NULL ? ds->n_cls : 0;

	memcpy(ia->old, ds->cls, n_old * sizeof(ia->old[0]));
	memset(ds->cls, 0, sizeof(ds->cls));
	for (uint16_t c = 1; c < t->n_classes; c++) {
		uint32_t h = name_hash(t->classes[c].name);

		ds->cls[c].name_hash = h;
		if (!t->classes[c].is_leaf || t->classes[c].mode != WEIR_MODE_IPABR)
			continue;
		for (uint16_t o = 1; o < n_old; o++)
			if (ia->old[o].name_hash == h) {
				ds->cls[c] = ia->old[o];
				break;
			}
	}
	ds->n_cls = t->n_classes;
	ds->policy = w->policy;
	ds->next_tsc = 0;
}

/*
 * Measure direction d's tree (every WEIR_IPABR_LOOK_MS, from the mode's own
 * hooks): what each leaf sent since the last look, and from it each ipabr
 * leaf's available bandwidth (Eq. 4.3): the link as set now (a REST/Lua
 * change is seen at the next look), less what leaves of a higher priority
 * (a lower prio number) sent, less what its siblings of the same priority
 * use of their part of the rest (each sibling's part is the rest x its
 * rate / the rates of that priority: what the tree's round robin gives it
 * when all send; what a sibling leaves unused is available); at least the
 * leaf's own guaranteed rate (the tree gives it that whatever they send)
 * and at most every ceiling on its path. A rising rate counts at once, a
 * falling one is smoothed (a quarter per look): a burst of higher-priority
 * traffic cuts the windows now, its pause does not open them for one look.
 */
static void
ipabr_look(struct weir_mode_svc *w, struct weir_ipabr *ia, int d, uint64_t now)
{
	struct weir_ipabr_dir *ds = &ia->dir[d];
	const struct weir_policy_tree *t = &w->policy->tree[d];
	struct weir_cbq *sh = w->shaper[d];
	/* Per priority: configured rates (bit/s), what is left of the link
	 * for it, and what its leaves use of their parts of that. */
	uint64_t prio_rate[WEIR_CBQ_NUM_PRIO] = { 0 }, pool[WEIR_CBQ_NUM_PRIO];
	uint64_t used[WEIR_CBQ_NUM_PRIO] = { 0 }, hp = 0, link;
	const bool fresh = ds->policy != (const void *)w->policy;
	struct weir_cbq_stats st;

	if (fresh)
		policy_switched(w, ia, d);
	else
		memset(ds->prio_bpt, 0, sizeof(ds->prio_bpt));
	/* A switch renumbers the leaves: their rates start over, and the
	 * priorities' measured rates are kept for this look. */
	for (uint16_t c = 1; c < t->n_classes; c++) {
		const unsigned int p = t->classes[c].cbq.prio % WEIR_CBQ_NUM_PRIO;

		if (!t->classes[c].is_leaf || weir_cbq_stats(sh, c, &st) != 0)
			continue;
		if (fresh || now <= ds->last_tsc) {
			ds->leaf_bpt[c] = 0;
		} else {
			uint64_t r = (uint64_t)(((unsigned __int128)(st.bytes - ds->leaf_bytes[c]) << 32) /
						(now - ds->last_tsc));

			if (r >= ds->leaf_bpt[c])
				ds->leaf_bpt[c] = r;
			else
				ds->leaf_bpt[c] -= (ds->leaf_bpt[c] - r) >> 2;
			ds->prio_bpt[p] += ds->leaf_bpt[c];
		}
		ds->leaf_bytes[c] = st.bytes;
		prio_rate[p] += t->classes[c].cbq.rate;
	}
	ds->last_tsc = now;
	ds->next_tsc = now + w->tsc_hz / 1000 * WEIR_IPABR_LOOK_MS;
	link = bpt(w, weir_cbq_rate(sh, 0));
	for (int p = 0; p < WEIR_CBQ_NUM_PRIO; p++) {
		pool[p] = link > hp ? link - hp : 0;
		hp += ds->prio_bpt[p];
	}
	for (uint16_t c = 1; c < t->n_classes; c++) {
		const unsigned int p = t->classes[c].cbq.prio % WEIR_CBQ_NUM_PRIO;

		if (t->classes[c].is_leaf && prio_rate[p] != 0)
			used[p] += RTE_MIN(ds->leaf_bpt[c], (uint64_t)((unsigned __int128)pool[p] *
						t->classes[c].cbq.rate / prio_rate[p]));
	}
	for (uint16_t c = 1; c < t->n_classes; c++) {
		const struct weir_policy_class *k = &t->classes[c];
		const unsigned int p = k->cbq.prio % WEIR_CBQ_NUM_PRIO;
		struct weir_ipabr_class *cs = &ds->cls[c];
		uint64_t avail, own, others;

		if (!k->is_leaf || k->mode != WEIR_MODE_IPABR)
			continue;
		own = prio_rate[p] != 0 ? RTE_MIN(ds->leaf_bpt[c], (uint64_t)((unsigned __int128)
			pool[p] * k->cbq.rate / prio_rate[p])) : 0;
		others = used[p] - own;
		avail = pool[p] > others ? pool[p] - others : 0;
		if (weir_cbq_stats(sh, c, &st) == 0)
			avail = RTE_MAX(avail, bpt(w, st.rate_bps));
		for (uint16_t a = c; a != 0; a = t->classes[a].cbq.parent)
			if (weir_cbq_stats(sh, a, &st) == 0)
				avail = RTE_MIN(avail, bpt(w, st.ceil_bps));
		avail = RTE_MIN(avail, link);   /* no class gets more than the link */
		cs->avail_bpt = RTE_MAX(avail, 1u);
		class_unit(cs);
	}
}

static inline struct weir_ipabr_class *
class_of(struct weir_mode_svc *w, struct weir_ipabr *ia, int d, uint32_t leaf, uint64_t now)
{
	struct weir_ipabr_dir *ds = &ia->dir[d];

	if (unlikely(ds->policy != (const void *)w->policy || now >= ds->next_tsc))
		ipabr_look(w, ia, d, now);
	return &ds->cls[leaf];
}

/*
 * Which flows the class divides among: those that sent data in it within
 * its last activity period or the current one, each counted with its
 * rule's weight. As the worker's own active count (lib/worker/worker.c), but the
 * period is at least 1.25 round trips of the class's flows (200 ms to 4 s):
 * a window-limited flow 900 ms away sends a burst per round trip and would
 * drop out of a 200 ms period between bursts.
 */
static inline void
class_roll(struct weir_mode_svc *w, struct weir_ipabr_class *cs, uint64_t now)
{
	uint64_t len;
	bool quiet;

	if (likely(now < cs->period_end))
		return;
	len = RTE_MIN(RTE_MAX(cs->rtt_max + cs->rtt_max / 4, w->tsc_hz / 5), 4 * w->tsc_hz);
	quiet = now >= cs->period_end + len;    /* quiet a whole period */
	cs->wsum = quiet ? 0 : cs->wsum_cur;
	cs->wheavy = quiet ? 0 : cs->wheavy_cur;
	cs->light = quiet ? 0 : cs->light_cur;
	cs->wsum_cur = 0;
	cs->wheavy_cur = 0;
	cs->light_cur = 0;
	cs->period = (uint8_t)(cs->period >= UINT8_MAX ? 1 : cs->period + 1);
	cs->period_end = now + len;
	cs->rtt_max = 0;
	class_unit(cs);         /* the light flows' use moves every period */
}

/* The flow's segment: what it sends, or what its receiver said it takes. */
static inline uint32_t
flow_seg(const struct weir_ipabr_flow *tf, const struct weir_flow *f, int a)
{
	return tf->seg ? tf->seg : f->mss[a] ? f->mss[a] : 1460;
}

/* A segment's data bytes per wire byte, << 16 (Eq. 4.6's data_size/MTU):
 * measured on the flow's largest segment, else Ethernet + IPv4 + TCP. */
static inline uint32_t
flow_ratio16(const struct weir_ipabr_flow *tf, uint32_t seg)
{
	return tf->ratio16 ? tf->ratio16 : weir_win_ratio16(seg);
}

/* Ticks between ACKs of a flow allocated less than a segment per round
 * trip: one segment at its allocation (data bytes), at most 4 s. */
static inline uint64_t
sub_gap(const struct weir_mode_svc *w, uint64_t alloc_bpt, uint32_t seg, uint32_t ratio16)
{
	uint64_t data_bpt = (alloc_bpt * ratio16) >> 16;

	return RTE_MIN(((uint64_t)seg << 32) / RTE_MAX(data_bpt, 1u), 4 * w->tsc_hz);
}

/*
 * IP-ABR for a pure ACK travelling a (data direction d = a ^ 1):
 *  - it may end the receiver side's round-trip sample (Fig. 4.1; Eq. 4.7);
 *  - its window is cut to Wnd_opt = alloc x data_size/MTU x RTT (Eq. 4.6),
 *    RTT = RTT_left + RTT_right (Eq. 4.8), plus the silly-window credit
 *    (Eq. 5.4-5.6): the window is a whole number of segments and what is
 *    rounded off is carried to the next ACK, so it alternates between W
 *    and W + MSS. Never raised: cut_window only lowers, and never moves
 *    the right edge left (RFC 7323 2.4);
 *  - below one segment per round trip (Eq. 4.6 does not hold, the thesis
 *    gives no rule) the window is one segment and the flow's ACKs are
 *    paced one per segment at its allocation, in the ACK store;
 *  - the handshake not seen (its window scale is unknown: a window cannot
 *    be written) or no round trip known yet, or weight 0: passed
 *    untouched, counted (the flow is shaped as pfq).
 */
static enum weir_verdict
ipabr_ack(struct weir_mode_svc *w, struct weir_flow *f, struct rte_mbuf *m, const struct weir_pkt *p,
	  int a, uint32_t slot, uint32_t leaf, uint32_t held, uint64_t now)
{
	const int d = a ^ 1;
	struct weir_ipabr *ia = ipabr_of(w);
	struct weir_ipabr_flow *tf = &ia->f[d][slot];
	struct weir_ipabr_class *cs = class_of(w, ia, d, leaf, now);
	const struct weir_postack_q *q = &w->pa->q[d][slot];
	const bool had_edge = q->flags & WEIR_PAQ_RE_VALID;
	/* The furthest edge the sender has seen: the cut ACKs' or one an
	 * uncut packet (the request, a SYN+ACK) showed it. */
	const uint32_t old_edge = (q->flags & WEIR_PAQ_SEEN_VALID) && weir_seq_lt(q->re_max, q->seen_max) ?
				  q->seen_max : q->re_max;
	const uint8_t weight = w->policy->targets[f->class_id].weight;
	uint32_t seg = 0, ratio16 = 0;     /* set before use: the fallback is never paced */
	/* How far it moves the flow's cumulative ACK (the ACK store's record of
	 * a held ACK then reads 0: ipabr paces by this, not by the record). */
	const uint32_t adv = weir_postack_ack_adv(w->pa, d, slot, p->ack);
	uint64_t rtt, alloc = 0, opt, extra;

	class_roll(w, cs, now);
	/* Its first ACK: did it start beside grown-up flows, the young ones
	 * in the class no more than the grown-up? Not where flows start
	 * about together: the first few pass the budget in the seconds they
	 * have the class to themselves, and the others, young for the 45 s
	 * their share takes to send it, are not short transfers. */
	if (!(tf->flags & WEIR_IPABR_ACK_SEEN) && weir_mode_young(w, f, d, leaf) &&
	    2 * w->cls_ctr[d][leaf].young <= w->cls_ctr[d][leaf].active)
		tf->flags |= WEIR_IPABR_LATE;
	tf->flags |= WEIR_IPABR_ACK_SEEN;
	/* The handshake's halves (lib/modes/ackstore.c) start the averages. */
	if (tf->rtt_right == 0)
		tf->rtt_right = w->pa->q[a][slot].rtt;
	if (tf->rtt_left == 0)
		tf->rtt_left = q->rtt;
	if (tf->sample_tsc != 0 && !weir_seq_lt(p->ack, tf->sample_seq)) {
		weir_ipabr_filter(&tf->rtt_right, now - tf->sample_tsc);
		tf->sample_tsc = 0;
		ia->st.rtt_right++;
	}
	if (unlikely(tf->rtt_right == 0 || weight == 0 || weir_ack_wscale(f, a) < 0)) {
		if (weight == 0)
			ia->st.bad_weight++;
		else
			ia->st.unknown++;
		weir_postack_note_edge(w->pa, f, p, a, slot);
		tf->flags &= (uint8_t)~(WEIR_IPABR_SUB_MSS | WEIR_IPABR_CUT);
		goto order;
	}
	seg = flow_seg(tf, f, a);
	ratio16 = flow_ratio16(tf, seg);
	rtt = tf->rtt_right + tf->rtt_left;
	cs->rtt_max = RTE_MAX(cs->rtt_max, rtt);
	alloc = cs->unit_bpt * weight;
	/* A flow that started beside grown-up ones is served from the
	 * new-flows list while young (lib/sched/drr.h): the list, not its weight,
	 * sets its rate then, up to n / (n + 1) of the leaf (new_quanta n)
	 * for the young flows together. Its window covers the whole class
	 * over its round trip (divided among the young flows) so that its
	 * own bursts and the old flows' packets between its own do not leave
	 * the list idle; what the list does not serve at once waits here, at
	 * most 1 / (n + 1) of it. A short transfer beside bulk flows. Flows
	 * that started together (young beside young) keep Eq. 4.6. */
	if ((tf->flags & WEIR_IPABR_LATE) && weir_mode_young(w, f, d, leaf)) {
		const uint64_t young = cs->avail_bpt / RTE_MAX(w->cls_ctr[d][leaf].young, 1u);

		if (young > alloc) {
			alloc = young;
			ia->st.young++;
		}
	}
	opt = weir_win_bdp(alloc, rtt + (uint64_t)w->conf.ipabr_headroom_us * w->tsc_per_us, ratio16);
	ia->st.windows++;
	if (opt < seg) {
		tf->flags |= WEIR_IPABR_SUB_MSS;
		tf->credit = 0;
		opt = seg;
		ia->st.sub_mss++;
	} else if (w->conf.ipabr_no_sws_credit) {
		/* Eq. 4.6 to the octet: the sender rounds it down (Sec. 5.3) */
		tf->flags &= (uint8_t)~WEIR_IPABR_SUB_MSS;
		tf->credit = 0;
	} else {
		uint64_t wnd = tf->credit + opt;

		tf->flags &= (uint8_t)~WEIR_IPABR_SUB_MSS;
		tf->credit = (uint32_t)(wnd % seg);
		opt = wnd - tf->credit;
	}
	if (weir_postack_cut_window(w->pa, f, m, p, a, slot, (uint32_t)RTE_MIN(opt, (uint64_t)INT32_MAX))) {
		ia->st.cut++;
		w->ctr.port[a].win_clamped++;
		tf->flags |= WEIR_IPABR_CUT;
	} else {
		tf->flags &= (uint8_t)~WEIR_IPABR_CUT;  /* the receiver's own window holds it */
	}
	/* The ACK clock: this ACK moved the edge the sender sees past
	 * old_edge; the first data beyond old_edge is the sender's answer to
	 * it (or to a later ACK: the sample errs long, the filter skims it). */
	if (tf->left_tsc == 0 && had_edge && weir_seq_lt(old_edge, q->re_max)) {
		tf->left_tsc = now;
		tf->left_seq = old_edge;
	}
order:
	if (weir_mode_data_qlen(w, f, a, slot) != 0)
		return WEIR_V_PASS;     /* behind a frame of its own direction: keep order */
	if (!(tf->flags & WEIR_IPABR_SUB_MSS)) {
		if (held > 0)   /* paced before: what waits goes first */
			weir_mode_release(w, d, slot, UINT32_MAX, WEIR_PA_FLUSH);
		return WEIR_V_PASS;
	}
	/* An ACK for more than a segment spaces the next one by its bytes: a
	 * one-segment window rounded up to the receiver's scale unit (1448 ->
	 * 2048 at scale 10) was filled with a 1448- and a 600-byte segment, one
	 * delayed ACK covered both, and pacing one segment per ACK gave the
	 * weight-1 flows of 1:2:4:8 1.35 x their allocation. */
	extra = adv > seg ? sub_gap(w, alloc, adv - seg, ratio16) : 0;
	if (held == 0 && now >= tf->next_release) {
		tf->next_release = now + sub_gap(w, alloc, seg, ratio16) + extra;
		return WEIR_V_PASS;
	}
	tf->next_release += extra;      /* held: its extra bytes wait before it */
	return weir_mode_hold(w, f, d, slot, m, now);
}

/*
 * TCP data of direction d ending at `end` came from the sender: the sender
 * side's answer to the ACK clock (the first data past the edge an ACK
 * opened ends the sample), and a check that it sent within what weir saw.
 * Called when the data reaches weir, not when it leaves: the time it then
 * waits in weir's queue is no part of the sender's half of the round trip.
 * Ended at the dequeue, a flow whose window had grown past its share's
 * pipe (a first sample while data stood at weir) timed its own queue
 * there, kept its window and so its queue: a runaway flow. A frame cut
 * through arrives and leaves at once (the `sent` hook calls this too; a
 * sample ended at arrival is not ended again).
 */
static void
left_answer(struct weir_mode_svc *w, struct weir_ipabr *ia, struct weir_ipabr_flow *tf, int d,
	    uint32_t slot, uint32_t end, uint64_t now)
{
	/* Data past every edge weir saw: the sender was shown one it did not
	 * see (the handshake's window, say), and may send up to it without
	 * waiting for an ACK. The running sample is no answer; no sample
	 * starts below it (seen_max). */
	if (tf->flags & WEIR_IPABR_ACK_SEEN) {
		struct weir_postack_q *q = &w->pa->q[d][slot];

		if ((q->flags & WEIR_PAQ_RE_VALID) && weir_seq_lt(q->re_max, end) &&
		    (!(q->flags & WEIR_PAQ_SEEN_VALID) || weir_seq_lt(q->seen_max, end))) {
			q->seen_max = end;
			q->flags |= WEIR_PAQ_SEEN_VALID;
			if (tf->left_tsc != 0) {
				tf->left_tsc = 0;
				ia->st.left_unseen++;
			}
		}
	}
	if (tf->left_tsc != 0 && weir_seq_lt(tf->left_seq, end)) {
		weir_ipabr_filter(&tf->rtt_left, now - tf->left_tsc);
		tf->left_tsc = 0;
		ia->st.rtt_left++;
	}
}

/*
 * A frame of direction d left the tree (dequeued or cut through). It makes
 * its flow active in the class (its weight counted for the period), and a
 * TCP data segment is timed to its ACK (the receiver side) or ends the
 * sender side's sample (it is beyond the edge an ACK opened). A segment
 * starting below the highest sequence sent is a retransmission: it times
 * nothing, and abandons a sample it may be a copy of (Sec. 4.2.1, Karn).
 */
static void
ipabr_sent(struct weir_mode_svc *w, struct rte_mbuf *m, int d, uint32_t slot, uint32_t leaf,
	   uint32_t qlen, uint64_t now)
{
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
	struct weir_ipabr *ia = ipabr_of(w);
	struct weir_ipabr_flow *tf = &ia->f[d][slot];
	struct weir_ipabr_class *cs;
	uint32_t end;

	RTE_SET_USED(qlen);
	if (p->l4proto == IPPROTO_TCP && p->payload_len == 0)
		return;
	cs = class_of(w, ia, d, leaf, now);
	class_roll(w, cs, now);
	if (unlikely(tf->mark != cs->period)) {
		const struct weir_flow *f = weir_flow_by_slot(w->flows, slot);
		bool grew = false;

		tf->mark = cs->period;
		tf->weight = w->policy->targets[f->class_id].weight;
		cs->wsum_cur += tf->weight;
		if (cs->wsum_cur > cs->wsum) {
			cs->wsum = cs->wsum_cur;
			grew = true;
		}
		if (class_count_use(w, cs, tf, d, slot, leaf) && cs->wheavy_cur > cs->wheavy) {
			cs->wheavy = cs->wheavy_cur;
			grew = true;
		}
		if (grew)
			class_unit(cs);
	}
	if (p->l4proto != IPPROTO_TCP)
		return;
	end = p->seq + p->payload_len;
	if (p->payload_len > tf->seg) {
		tf->seg = p->payload_len;
		tf->ratio16 = (uint16_t)RTE_MIN(((uint64_t)p->payload_len << 16) / rte_pktmbuf_pkt_len(m),
						(uint64_t)UINT16_MAX);
	}
	if (!(tf->flags & WEIR_IPABR_ACK_SEEN) && !(tf->flags & WEIR_IPABR_NOACK) &&
	    ++tf->noack >= WEIR_IPABR_NOACK_SEGS) {
		tf->flags |= WEIR_IPABR_NOACK;  /* asymmetric routing: it stays pfq */
		ia->st.no_ack++;
	}
	/* Up to the edge weir's cut gave it (within a segment): held back by
	 * weir, not by its receiver or its application. */
	if ((tf->flags & WEIR_IPABR_CUT) && (w->pa->q[d][slot].flags & WEIR_PAQ_RE_VALID) &&
	    !weir_seq_lt(end + tf->seg, w->pa->q[d][slot].re_max))
		tf->flags |= WEIR_IPABR_FULL;
	if (!(tf->flags & WEIR_IPABR_SND_VALID)) {
		tf->flags |= WEIR_IPABR_SND_VALID;
		tf->snd_max = end;
	} else if (weir_seq_lt(p->seq, tf->snd_max)) {
		if (tf->sample_tsc != 0 && weir_seq_lt(p->seq, tf->sample_seq)) {
			tf->sample_tsc = 0;
			ia->st.karn++;
		}
		if (weir_seq_lt(tf->snd_max, end))
			tf->snd_max = end;
		return;
	} else {
		tf->snd_max = end;
	}
	left_answer(w, ia, tf, d, slot, end, now);
	if (tf->sample_tsc == 0) {
		tf->sample_tsc = now;
		tf->sample_seq = end;
	}
}

/* A frame of direction d reached weir and is about to queue in `leaf`:
 * new TCP data answers the ACK clock now (left_answer). A retransmission
 * (below the highest sequence sent) answers nothing. */
static enum weir_verdict
ipabr_enqueue(struct weir_mode_svc *w, struct weir_flow *f, struct rte_mbuf *m, int d,
	      uint32_t leaf, uint64_t now)
{
	const struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
	struct weir_ipabr *ia = ipabr_of(w);
	const uint32_t slot = weir_flow_slot(w->flows, f);
	struct weir_ipabr_flow *tf;

	RTE_SET_USED(leaf);
	if (p->l4proto != IPPROTO_TCP || p->payload_len == 0)
		return WEIR_V_PASS;
	tf = &ia->f[d][slot];
	if ((tf->flags & WEIR_IPABR_SND_VALID) && weir_seq_lt(p->seq, tf->snd_max))
		return WEIR_V_PASS;
	left_answer(w, ia, tf, d, slot, p->seq + p->payload_len, now);
	return WEIR_V_PASS;
}

/* The watchdog's look at a paced flow's held ACKs: one per segment at its
 * allocation; all of them once it is no longer below a segment per RTT. */
static uint32_t
ipabr_tick(struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t slot, uint32_t leaf,
	   uint64_t now, uint32_t held, enum weir_postack_why *why)
{
	struct weir_ipabr *ia = ipabr_of(w);
	struct weir_ipabr_flow *tf = &ia->f[d][slot];
	const struct weir_ipabr_class *cs = class_of(w, ia, d, leaf, now);
	uint32_t seg = flow_seg(tf, f, d ^ 1);

	*why = WEIR_PA_PACED;
	if (!(tf->flags & WEIR_IPABR_SUB_MSS))
		return held;
	if (now < tf->next_release)
		return 0;
	tf->next_release = now + sub_gap(w, cs->unit_bpt * RTE_MAX(tf->weight, 1u), seg,
					 flow_ratio16(tf, seg));
	return 1;
}

/* A flow that ends or leaves the class gives its weight back at once, as
 * the worker's own count does (weir_wk_active_forget): a 1 MB download
 * fetched right after a 100 KB one over 10 ms shared the class with the
 * finished one for a period and took 888 ms against pfq's 452. */
static void
ipabr_leave(struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t slot,
	    uint32_t leaf)
{
	struct weir_ipabr *ia = ipabr_of(w);
	struct weir_ipabr_flow *tf;
	struct weir_ipabr_class *cs;
	uint8_t prev;
	uint32_t wsum, wheavy;

	RTE_SET_USED(f);
	if (ia == NULL || ia->dir[d].policy != (const void *)w->policy)
		return;         /* no state of this policy to correct */
	tf = &ia->f[d][slot];
	cs = &ia->dir[d].cls[leaf];
	prev = cs->period == 1 ? UINT8_MAX : (uint8_t)(cs->period - 1);
	if (tf->mark == 0 || (tf->mark != cs->period && tf->mark != prev))
		return;
	wheavy = cs->wheavy;
	if (tf->mark == cs->period)
		cs->wsum_cur -= RTE_MIN(cs->wsum_cur, (uint32_t)tf->weight);
	wsum = RTE_MAX(cs->wsum - RTE_MIN(cs->wsum, (uint32_t)tf->weight), cs->wsum_cur);
	/* a light flow's bytes count until the period after next */
	if (!(tf->flags & WEIR_IPABR_LIGHT)) {
		if (tf->mark == cs->period)
			cs->wheavy_cur -= RTE_MIN(cs->wheavy_cur, (uint32_t)tf->weight);
		wheavy = RTE_MAX(cs->wheavy - RTE_MIN(cs->wheavy, (uint32_t)tf->weight), cs->wheavy_cur);
	}
	tf->mark = 0;
	if (wsum != cs->wsum || wheavy != cs->wheavy) {
		cs->wsum = wsum;
		cs->wheavy = wheavy;
		class_unit(cs);
	}
}

/* A window the ACKs' cut never saw reaches the sender: the ACK clock must
 * not take data sent up to it for an answer to a later ACK. */
static void
ipabr_uncut(struct weir_mode_svc *w, const struct weir_flow *f, const struct weir_pkt *p, int a,
	    uint32_t slot)
{
	weir_postack_note_seen(w->pa, f, p, a, slot);
}

void
weir_ipabr_stats_copy(const struct weir_mode_svc *w, struct weir_ipabr_stats *out)
{
	const struct weir_ipabr *ia = w->mode_state[WEIR_MODE_IPABR];

	if (ia == NULL)
		memset(out, 0, sizeof(*out));
	else
		*out = ia->st;
}

const struct weir_mode_ops weir_mode_ipabr = {
	.name = "ipabr",
	.flags = WEIR_MODEF_ACKS | WEIR_MODEF_WINDOW,
	.init = ipabr_init,
	.fini = ipabr_fini,
	.prepare = ipabr_prepare,
	.reset = ipabr_reset,
	.ack = ipabr_ack,
	.enqueue = ipabr_enqueue,
	.sent = ipabr_sent,
	.tick = ipabr_tick,
	.leave = ipabr_leave,
	.uncut = ipabr_uncut,
};
