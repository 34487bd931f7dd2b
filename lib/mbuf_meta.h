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
};

#define WEIR_MBUF_PRIV_SIZE RTE_ALIGN(sizeof(struct weir_mbuf_meta), RTE_MBUF_PRIV_ALIGN)

static inline struct weir_mbuf_meta *
weir_mbuf_meta(struct rte_mbuf *m)
{
	return (struct weir_mbuf_meta *)rte_mbuf_to_priv(m);
}

#endif /* WEIR_MBUF_META_H */
