/* SPDX-License-Identifier: BSD-3-Clause
 * weir: PostACK — shape a TCP flow by holding its ACKs, not its data.
 *
 * The scalable PostACK of the paper (Sec. 6, Fig. 13-14): a flow's data
 * waits in its per-flow queue (PFQ) inside its leaf class, served by DRR;
 * its pure ACKs, travelling the other way, wait in the flow's ACK queue
 * (PFAQ). Nothing runs on a timer: ACKs are released when the class tree
 * dequeues the flow's data, by the rule
 *     qlen > 1  (data left in its queue after this packet): hold;
 *     qlen <= 1: release one ACK with the data packet.
 * A released ACK lets the sender send about one more segment, so the data
 * queue stays a packet or two deep and the rest of the sender's window
 * waits at the gateway as ACKs (~64 bytes each) instead of as data.
 *
 * This module holds the ACK queues of one worker, for both data
 * directions: queue [d][slot] holds ACKs travelling opposite to data
 * direction d of flow-table slot `slot`. It is a service, not a mode
 * (lib/modes/ackstore.c): it stores, orders and releases, times the
 * handshake and keeps the window edges; the modes built on it decide what
 * to hold and when it goes: postack (lib/modes/postack_mode.c), postack-paced
 * (lib/modes/postack_paced.c), tcr, ipabr and pep.
 *
 * Compact storage: a held ACK is copied into a 128-byte record from a
 * fixed per-worker pool and its mbuf is freed at once, so thousands of
 * held ACKs cost kilobytes of records, not megabytes of mbufs, and can
 * never starve reception of mbufs. The first `mbuf_cap` held at once keep
 * their mbufs instead (linked from a record, no copy): copying costs
 * cycles, and a few thousand mbufs out of a large pool cost nothing. Release allocates a fresh mbuf and
 * copies the bytes back, bit-exact. Frames that do not fit (long option
 * lists over IPv6 with extension headers) or are chained are kept as
 * mbufs in the record. When the pool is empty the caller does not hold
 * (the ACK goes on unheld, counted): a defined overflow, never a drop.
 *
 * Nothing is held forever: a flow whose data queue stays empty while ACKs
 * are held for longer than a released ACK needs to bring data back (two
 * round trips to the data sender, measured on the handshake, plus
 * `idle_us`), has them all released by weir_postack_watchdog(): the sender
 * stopped (end of transfer, application- or window-limited). The same walk
 * paces out the ACKs of a flow whose data queue ran empty while its sender
 * is still sending (a starving download: Appendix A), one per MSS at the
 * flow's fair share; the mode's tick says how many. The worker calls the
 * watchdog each loop; it looks at the flows holding ACKs in round-robin
 * order, a bounded number per call, O(1) each. Flow end, eviction and
 * policy changes flush explicitly.
 */
#ifndef WEIR_ACKSTORE_H
#define WEIR_ACKSTORE_H

#include <stdbool.h>
#include <stdint.h>
#include <rte_common.h>
#include <rte_mbuf.h>

#define WEIR_POSTACK_REC_BYTES 120      /* frame bytes a record holds inline */
#define WEIR_POSTACK_NONE UINT32_MAX
#define WEIR_POSTACK_WATCH_MAX 64       /* flows one watchdog call looks at, at most */

struct weir_postack_conf {
	uint32_t n_flows;       /* flow-table slots */
	uint32_t n_acks;        /* records in the pool: ACKs held at once, all flows */
	uint16_t ack_limit;     /* ACKs one flow may hold; beyond, the oldest is released.
				 * Also the window clamp: held ACKs advertise at most
				 * ack_limit segments past the flow's share of the
				 * ceil x its round trip (postack_hold_window) */
	uint32_t idle_us;       /* data idle this long past 2 x its round trip: release the flow's ACKs */
	uint32_t rtt_unknown_us;        /* round trip assumed when no handshake was seen; 0 = 200 ms */
	/* postack's share clamp (postack_mode.c, weir_postack_share_window): every
	 * ACK of a flow advertises at most its share x the path's round trip
	 * x (1 + margin) plus a target of max(2 MSS, share x clamp_target_us);
	 * a young flow at least its young budget over the active flows
	 * (weir_postack_young_window). false: only ack_limit bounds the window. */
	bool share_clamp;
	uint32_t clamp_target_us;
	/* The margin over share x RTT, a fraction of it << 16 (0.5: 32768):
	 * a window of (1 + m) x BDP that a loss cuts by cubic's 0.7 (Reno's
	 * 0.5) stays at the BDP when (1 + m) x beta >= 1. */
	uint32_t clamp_margin16;
	/* ACKs that may stay in their own mbufs at once (no copy either way:
	 * the fast path while the mempool has plenty); past it, records. */
	uint32_t mbuf_cap;
	uint64_t tsc_hz;
	int socket_id;
	struct rte_mempool *mp; /* where released ACKs get their mbufs */
};

struct weir_postack_stats {
	uint64_t held;          /* ACKs taken into a queue */
	uint64_t released;      /* released by the rule (with data) */
	uint64_t flushed;       /* released by flow events (data the other way, FIN/RST, end, policy) */
	uint64_t idle_released; /* released by the idle watchdog */
	uint64_t paced;         /* released by TCR's ACK pacing */
	uint64_t caught_up;     /* postack-paced ACKs let go off the clocks: the class would run dry */
	uint64_t evicted;       /* released because the flow's queue was at ack_limit */
	uint64_t pool_full;     /* ACKs not held: no record free */
	uint64_t as_mbuf;       /* held as an mbuf (did not fit a record) */
	uint64_t kept_mbuf;     /* held in its own mbuf, under mbuf_cap */
	uint64_t nombuf;        /* a release found no mbuf: the ACK stayed held */
	uint64_t clamp_unknown; /* ACKs the share clamp left alone: round trip or window scale unknown */
	uint32_t in_use;        /* records holding an ACK now */
	uint32_t peak;          /* most records in use at once */
	uint32_t mbufs;         /* held ACKs in mbufs now (kept or as_mbuf) */
};

/* Opaque outside the data plane: its layout is lib/modes/ackstore_int.h's, which
 * only the worker and the modes include. */
struct weir_postack;

struct weir_postack *weir_postack_create(const struct weir_postack_conf *conf);
/* Frees the pool; ACKs still held are dropped (shutdown). */
void weir_postack_free(struct weir_postack *pa);

/*
 * Hold ACK m (a frame travelling opposite to data direction d) at the
 * tail of slot's queue. Returns 1: held, m now belongs to the pool (it may
 * already be freed); 0: not held (pool full), caller keeps m. When the
 * queue is at ack_limit the oldest ACK is released into *out (one mbuf,
 * *n_out set to 0 or 1) first, so the limit bounds memory, not order.
 */
int weir_postack_hold(struct weir_postack *pa, int d, uint32_t slot, struct rte_mbuf *m,
		      uint64_t now, struct rte_mbuf **out, unsigned int *n_out);

/* Release up to max held ACKs of (d, slot), oldest first, into out[];
 * `why` picks the counter. */
enum weir_postack_why { WEIR_PA_RULE = 0, WEIR_PA_FLUSH = 1, WEIR_PA_IDLE = 2, WEIR_PA_PACED = 3 };
unsigned int weir_postack_release(struct weir_postack *pa, int d, uint32_t slot,
				  struct rte_mbuf **out, unsigned int max, enum weir_postack_why why);

/* A byte clock over the ACKs held for (d, slot), oldest first: the first is
 * due at *clock and each one moves it on by weir_postack_charge(its
 * advance). Returns how many are due by `now` (at most max) and leaves
 * *clock where the next one would be due. */
unsigned int weir_postack_due(const struct weir_postack *pa, int d, uint32_t slot, uint64_t *clock,
			      uint64_t now, uint64_t gap, uint64_t tpb16, uint32_t seg,
			      unsigned int max);

/* Ticks an ACK asking for adv bytes takes of a pacing clock of tpb16 / 2^16
 * ticks a byte, `gap` ticks a segment of seg bytes: at least one gap (a
 * duplicate ACK brings a retransmission). No division per ACK: only when
 * the gap was capped below its rate's (a share of a few bit/s, where
 * adv x tpb16 could also overflow) is it scaled by adv / seg instead. */
static inline uint64_t
weir_postack_charge(uint64_t gap, uint64_t tpb16, uint32_t adv, uint32_t seg)
{
	if (adv <= seg)
		return gap;
	if (unlikely(((uint64_t)seg * tpb16) >> 16 > gap))
		return gap * adv / seg;
	return RTE_MAX(((uint64_t)adv * tpb16) >> 16, gap);
}


/*
 * Look at up to `budget` flows holding ACKs, in ring order, and ask
 * `decide` how many of each one's held ACKs to release now (and why); they
 * go into out[] (up to max in all). Returns how many; dir_of[i] is each
 * one's data direction (it leaves through that direction's rx port).
 * Flows still holding ACKs stay on the ring. PostACK's decision is
 * each mode's tick (lib/modes/mode.h).
 */
typedef uint32_t (*weir_postack_decide_fn)(void *arg, int d, uint32_t slot, uint64_t now,
					   uint32_t held, enum weir_postack_why *why);
unsigned int weir_postack_watchdog(struct weir_postack *pa, uint64_t now, unsigned int budget,
				   weir_postack_decide_fn decide, void *arg,
				   struct rte_mbuf **out, uint8_t *dir_of, unsigned int max);

/* Has the flow in slot stopped, its last packet (either way) at `last`:
 * nothing for idle_us plus two round trips of direction d's sender (a
 * released ACK would have brought data back by then)? */
int weir_postack_idle(const struct weir_postack *pa, int d, uint32_t slot, uint64_t now,
		      uint64_t last);

struct weir_flow;
struct weir_pkt;

/* Time the handshake of the flow in slot (a TCP packet travelling a): the
 * round trip to each direction's data sender. Every TCP packet, cheap for
 * all but handshake packets. */
void weir_postack_track(struct weir_postack *pa, const struct weir_flow *f,
			const struct weir_pkt *p, int a, uint32_t slot, uint64_t now);
/* Remember the furthest right edge the data sender of direction a ^ 1 has
 * been shown by ACK p (travelling a) that goes on: no rewrite may move the
 * window's right edge left of it (RFC 7323 sec. 2.4). */
void weir_postack_note_edge(struct weir_postack *pa, const struct weir_flow *f,
			    const struct weir_pkt *p, int a, uint32_t slot);
/* Packet p travelling a carries an ACK and a window no mode sees or cuts
 * (a SYN+ACK, whose window is never scaled, or data, or a FIN): remember
 * the edge it shows the data sender of direction a ^ 1 (seen_max), which
 * the sender may send up to whatever the cut ACKs say. */
void weir_postack_note_seen(struct weir_postack *pa, const struct weir_flow *f,
			    const struct weir_pkt *p, int a, uint32_t slot);

/* Cut ACK m's window to `limit` bytes past its cumulative ACK, never left
 * of an edge already shown, never above the window on the frame (an
 * earlier cut's); see ackstore.c. True when rewritten. */
bool weir_postack_cut_window(struct weir_postack *pa, const struct weir_flow *f,
			     struct rte_mbuf *m, const struct weir_pkt *p, int a, uint32_t slot,
			     uint32_t limit);
/* The same cut without noting the edge: for a cut another may follow on
 * the same ACK (a last mile's, before its mode's), which must not be held
 * above this ACK's own first cut. Whoever makes it notes the edge the ACK
 * leaves with once every cut is made (weir_postack_note_edge). */
bool weir_postack_cut_unnoted(struct weir_postack *pa, const struct weir_flow *f,
			      struct rte_mbuf *m, const struct weir_pkt *p, int a, uint32_t slot,
			      uint32_t limit);

/* The share clamp's window in data bytes: share_bpt (frame bytes per TSC
 * tick << 32) x rtt (ticks) x (1 + margin16 / 65536), plus max(2 seg,
 * share x target ticks), all in data bytes of seg-byte segments (Eq. 4.6's
 * computation); at most INT32_MAX. */
uint32_t weir_postack_share_window(uint64_t share_bpt, uint64_t rtt, uint64_t target,
				   uint32_t seg, uint32_t margin16);

/* The window the share clamp gives a young flow (attained < young bytes):
 * the larger of the clamp's window and the leaf's young budget divided
 * among its `active` flows (the budget scaled to the share, as the share
 * is the rate scaled). A lone flow keeps its whole head start; many flows
 * starting together (the satellite case) hold at most `young` bytes of
 * window between them, not `young` each. */
uint32_t weir_postack_young_window(uint32_t clamp_window, uint32_t young, uint32_t active);

/* Drop every ACK held for data direction d (shutdown): mbufs go back to
 * the pool, records to the free list. Returns how many were dropped. */
unsigned int weir_postack_drop_all(struct weir_postack *pa, int d);

/* Call fn for every (d, slot) holding ACKs now (fn may release them). */
void weir_postack_for_each_holder(struct weir_postack *pa,
				  void (*fn)(void *arg, int d, uint32_t slot), void *arg);

const struct weir_postack_stats *weir_postack_stats(const struct weir_postack *pa);
/* Bytes one held ACK costs (its record). */
size_t weir_postack_bytes_per_ack(void);

/* Held ACKs of (d, slot) and the round trip the handshake measured to
 * data direction d's sender (ticks, 0 = not seen): for views and tests.
 * The data plane's inline forms are in ackstore_int.h. */
uint32_t weir_postack_held(const struct weir_postack *pa, int d, uint32_t slot);
uint32_t weir_postack_measured_rtt(const struct weir_postack *pa, int d, uint32_t slot);

#endif /* WEIR_ACKSTORE_H */
