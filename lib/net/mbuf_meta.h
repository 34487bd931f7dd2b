/* SPDX-License-Identifier: BSD-3-Clause
 * weir: where a packet's parse result lives while weir owns the mbuf.
 *
 * The meta-data sits in the mbuf's private area (the mempool is created with
 * WEIR_MBUF_PRIV_SIZE), not in a dynfield: the record is 48 bytes and later
 * stages will add to it, more than the dynfield space DPDK guarantees.
 */
#ifndef WEIR_MBUF_META_H
#define WEIR_MBUF_META_H

#include <rte_mbuf.h>

#include "parse.h"

struct weir_mbuf_meta {
	struct weir_pkt pkt;
	/* Next packet in the same per-flow queue (lib/sched/drr.c). The queue chains
	 * mbufs through their private area instead of using a ring per flow:
	 * no per-flow storage beyond head/tail, O(1) enqueue/dequeue, and the
	 * line is already touched for the parse record. m->next is not used:
	 * it chains the segments of one packet. 48 + 8 bytes keeps the record
	 * within one cache line. */
	struct rte_mbuf *qnext;
	/* TSC it entered its class tree (CoDel's sojourn time). 64 bytes in
	 * all: still one cache line. */
	uint64_t ts;
};

#define WEIR_MBUF_PRIV_SIZE RTE_ALIGN(sizeof(struct weir_mbuf_meta), RTE_MBUF_PRIV_ALIGN)

static inline struct weir_mbuf_meta *
weir_mbuf_meta(struct rte_mbuf *m)
{
	return (struct weir_mbuf_meta *)rte_mbuf_to_priv(m);
}

#endif /* WEIR_MBUF_META_H */
