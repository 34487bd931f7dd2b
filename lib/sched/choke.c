/* SPDX-License-Identifier: BSD-3-Clause
 * weir: CHOKe (Pan, Prabhakar, Psounis 2000) on a fifo leaf. Once RED's
 * average is above min_th, an arrival is compared with a frame drawn at
 * random from the queue: of the same flow, both are dropped (a flow's
 * share of the buffer is its chance of being hit); else RED decides.
 *
 * The leaf's queue is a linked list, so a random member is not at hand;
 * a ring of (frame, flow key) in queue order is kept beside it, pushed at
 * enqueue and popped when the head leaves. The matched queued frame is
 * not unlinked from the middle of the list: it is marked and dropped when
 * it reaches the head (the caller frees it instead of sending it, before
 * it costs any link time), and the marked ones are left out of the queue
 * length RED sees. Frames the ring had no room for (a policy switch
 * re-queues past the limit) are simply not candidates. The arrival's key
 * is hashed once and kept for its queued call only (reset at every
 * arrival: an mbuf pointer is not a frame's identity once it was freed).
 */
#include <rte_malloc.h>

#include "qm_int.h"

int
weir_choke_init(struct weir_qm *q, uint32_t limit, int socket_id)
{
	struct weir_choke *c = &q->choke;
	uint32_t size = rte_align32pow2(RTE_MAX(limit ? limit : 1024u, 16u));

	c->ring = rte_zmalloc_socket("weir_choke", (size_t)size * sizeof(*c->ring),
				     RTE_CACHE_LINE_SIZE, socket_id);
	if (c->ring == NULL)
		return -1;
	c->mask = size - 1;
	q->bytes += (uint64_t)size * sizeof(*c->ring);
	return 0;
}

void
weir_choke_fini(struct weir_qm *q)
{
	rte_free(q->choke.ring);
	q->choke.ring = NULL;
}

enum weir_qm_verdict
weir_choke_arrive(struct weir_qm *q, struct rte_mbuf *m, uint32_t qlen, uint64_t now)
{
	struct weir_choke *c = &q->choke;
	struct weir_choke_slot *v;
	uint32_t key;

	/* The key kept for weir_choke_queued is this arrival's or none. A
	 * refused arrival never gets its queued call, and its mbuf comes
	 * straight back from the pool (per-lcore caches are LIFO) as a later
	 * frame of another flow: keeping its key past this call would queue
	 * that frame under the wrong flow, for CHOKe to match and drop. */
	c->last_m = NULL;
	weir_red_average(q, qlen, now);
	if (q->red.avg < q->red.min_th || c->n == 0) {
		q->red.count = -1;
		return WEIR_QM_ADMIT;
	}
	key = weir_qm_flow_key(m);
	c->last_m = m;          /* weir_choke_queued reuses it: one hash per frame */
	c->last_key = key;
	v = &c->ring[(c->head + (uint32_t)(weir_qm_uniform(q) * c->n)) & c->mask];
	if (!v->doomed && v->key == key) {
		v->doomed = 1;
		c->doomed++;
		q->st.drops_victim++;
		return WEIR_QM_DROP_CHOKE;
	}
	return weir_red_decide(q);
}

void
weir_choke_queued(struct weir_qm *q, struct rte_mbuf *m)
{
	struct weir_choke *c = &q->choke;
	struct weir_choke_slot *s;

	if (c->n > c->mask)
		return;         /* no room: this frame is never drawn */
	s = &c->ring[(c->head + c->n) & c->mask];
	s->m = m;
	s->key = c->last_m == m ? c->last_key : weir_qm_flow_key(m);
	c->last_m = NULL;
	s->doomed = 0;
	c->n++;
}

bool
weir_choke_left(struct weir_qm *q, struct rte_mbuf *m)
{
	struct weir_choke *c = &q->choke;
	struct weir_choke_slot *s = &c->ring[c->head & c->mask];
	bool doomed;

	if (c->n == 0 || s->m != m)
		return false;   /* a frame the ring never held */
	doomed = s->doomed != 0;
	c->doomed -= doomed;
	c->head = (c->head + 1) & c->mask;
	c->n--;
	return doomed;
}
