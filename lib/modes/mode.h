/* SPDX-License-Identifier: BSD-3-Clause
 * weir: leaf modes, one interface.
 *
 * A leaf class has a mode (enum weir_shape_mode, lib/classify/policy.h) that decides
 * what happens to its flows' packets beyond "queue the data per flow, serve
 * the queues by DRR, send what the class tree lets go". The worker calls a
 * mode at fixed moments of its loop and never decides anything a mode owns:
 *
 *   prepare   management lcore: a policy using the mode comes (allocate)
 *   reset     a new flow took a flow-table slot (forget the last one)
 *   ack       a pure ACK travelling a, answering data direction d = a ^ 1
 *             of a flow whose direction-d leaf has this mode, `held` ACKs
 *             of it held already: PASS (it goes on), TAKEN (the mode keeps
 *             it). Any other TCP packet first releases what its flow holds
 *             (the worker does that: order)
 *   enqueue   a frame of direction d is about to enter its leaf: PASS
 *             (queue it), TAKEN (the mode keeps or sends it), DROP
 *   queued    it entered its flow's queue
 *   sent      it left the class tree (dequeue or cut-through), qlen of its
 *             queue still waiting
 *   dropped   the tree refused it (queue full)
 *   tick      the watchdog's look at a flow holding ACKs: how many go now
 *   end       the flow leaves the table (idle, ended, evicted): give back
 *             everything kept for it, to the out-array (sent on), never
 *             freed silently. A policy switch re-classifies flows lazily
 *             (flow->class_gen): a mode keeping per-flow state checks it
 *   leave / uncut   see below
 *
 * and per worker, whatever its classes:
 *
 *   init/fini the worker is created / freed: per-worker state in
 *             w->mode_state[its enum]
 *   poll      each loop turn, for the modes that have it (the worker lists
 *             them at create: the others cost the loop nothing): timers
 *   drain_begin / owed / give_up_all   the worker stops: a mode that owes
 *             a receiver data keeps the worker forwarding until it is
 *             delivered or the drain's deadline ends it
 *   flush     shutdown: what the mode keeps, back to its pool
 *
 * One mode's per-flow state may outlive its class (weir_mode_keeper, pep):
 * its flows carry WEIR_FSH_PEP and the worker hands every TCP packet of
 * them to its kept_packet hook, and their end to kept_end, whatever their
 * class is now. Only flagged flows pay for it.
 *
 * Every hook is optional (NULL: the worker's default, which is plain
 * per-flow queueing). The worker reaches a mode only through these hooks
 * and the table below; it includes no mode's header.
 *
 * Services modes use, none of them a mode: the ACK store (lib/modes/ackstore.h,
 * its layout lib/modes/ackstore_int.h: holds, orders and releases ACKs, times
 * the handshake, keeps the window edges), the pacing state and its clocks
 * (lib/modes/pace_state.h, lib/modes/pace.h), and the worker as a mode sees it,
 * lib/modes/mode_svc.h: struct weir_mode_svc (flows, trees, policy, class
 * counters, clock, counters) and the worker's functions (weir_worker_out in
 * lib/worker/worker.c; release, hold, young and data_qlen in
 * lib/worker/worker_ack.c). Every hook gets that view, never the worker:
 * no mode includes a worker header. The worker makes, resets and frees the
 * store and the pacing state; a mode's own state is made by its init and
 * freed by fini.
 *
 * Frames a mode releases or creates never leave from inside it: it hands
 * them to the worker's out-array (weir_worker_out / weir_mode_release),
 * the one place frames are sent from, in the order they were handed over.
 * A mode's per-flow state is its own (indexed by flow slot and data
 * direction); the management side sees it only through lib/worker/worker_view.h.
 *
 * Ordering is the worker's, not the modes': before a frame of a flow goes
 * on (forwarded, queued, passed), every ACK the flow holds in that
 * direction is released ahead of it, so no mode can reorder a flow.
 *
 * Adding a mode: a value in enum weir_shape_mode (lib/classify/policy.h), one file
 * with a `const struct weir_mode_ops` declared below, one line in
 * weir_modes[] (lib/modes/mode.c). Its name is the ops' `name`: the config, Lua
 * and the API look names up in the table (weir_shape_mode_name), nowhere
 * else. docs/modes.md.
 */
#ifndef WEIR_MODE_H
#define WEIR_MODE_H

#include <stdbool.h>
#include <stdint.h>
#include <rte_mbuf.h>

#include "flow.h"
#include "policy.h"
#include "mode_svc.h"
#include "ackstore.h"


/* Mode properties the worker needs without calling anything. */
#define WEIR_MODEF_SHARED_QUEUE 0x01    /* one queue per leaf, not per flow (fifo) */
#define WEIR_MODEF_ACKS         0x02    /* uses the ACK store: needs postack queues */
#define WEIR_MODEF_NO_CUT       0x04    /* frames always queue (no cut-through) */
#define WEIR_MODEF_WINDOW       0x08    /* sizes its flows' windows to their share: they do not queue */

struct weir_mode_ops {
	const char *name;
	uint32_t flags;
	/* Per-worker state (0 or -errno), and its end. */
	int (*init)(struct weir_mode_svc *w, uint32_t n_flows, int socket_id);
	void (*fini)(struct weir_mode_svc *w);
	/* Management lcore, before policy p goes to w (and at create, for
	 * the first): allocate the per-flow state p's classes of this mode
	 * need and w lacks, published before the switch is (0 or -errno: the
	 * switch is refused). Per-flow state no policy asked for is never
	 * allocated: it costs a table's worth of memory on every worker. */
	int (*prepare)(struct weir_mode_svc *w, const struct weir_policy *p);
	void (*reset)(struct weir_mode_svc *w, uint32_t slot);
	enum weir_verdict (*ack)(struct weir_mode_svc *w, struct weir_flow *f, struct rte_mbuf *m,
				 const struct weir_pkt *p, int a, uint32_t slot, uint32_t leaf,
				 uint32_t held, uint64_t now);
	enum weir_verdict (*enqueue)(struct weir_mode_svc *w, struct weir_flow *f, struct rte_mbuf *m,
				     int d, uint32_t leaf, uint64_t now);
	void (*queued)(struct weir_mode_svc *w, const struct weir_flow *f, struct rte_mbuf *m,
		       int d, uint32_t slot);
	void (*sent)(struct weir_mode_svc *w, struct rte_mbuf *m, int d, uint32_t slot,
		     uint32_t leaf, uint32_t qlen, uint64_t now);
	void (*dropped)(struct weir_mode_svc *w, const struct weir_flow *f, struct rte_mbuf *m,
			int d);
	uint32_t (*tick)(struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t slot,
			 uint32_t leaf, uint64_t now, uint32_t held, enum weir_postack_why *why);
	void (*end)(struct weir_mode_svc *w, const struct weir_flow *f, uint32_t slot);
	/* Flow f no longer takes a share of leaf `leaf` of direction d (it
	 * ended, expired, or moved): a mode that divides the class among its
	 * active flows by its own count takes it out now, not a period later. */
	void (*leave)(struct weir_mode_svc *w, const struct weir_flow *f, int d, uint32_t slot,
		      uint32_t leaf);
	/* A packet travelling a carries an ACK that `ack` never sees (data,
	 * a SYN+ACK, a FIN): its window reaches direction d's sender uncut. */
	void (*uncut)(struct weir_mode_svc *w, const struct weir_flow *f, const struct weir_pkt *p,
		      int a, uint32_t slot);

	/* ---- per-flow state that outlives its class (weir_mode_keeper) ---- */
	/* Every TCP packet (travelling a) of a flow flagged WEIR_FSH_PEP,
	 * before any other mode sees it, whatever its class is now. True: the
	 * mode took it (and freed or kept it). */
	bool (*kept_packet)(struct weir_mode_svc *w, struct weir_flow *f, struct rte_mbuf *m,
			    const struct weir_pkt *p, int a, uint32_t slot, uint64_t now);
	/* Such a flow leaves the table: give back what is kept for it. */
	void (*kept_end)(struct weir_mode_svc *w, struct weir_flow *f, uint32_t slot);

	/* ---- per worker: timers, stopping, shutdown ---- */
	/* Each loop turn: the mode's own timers; returns frames handed out
	 * and lowers *wake to when it wants the next call. */
	unsigned int (*poll)(struct weir_mode_svc *w, uint64_t now, uint64_t *wake);
	/* The worker stops (weir_worker_stopping): drain_begin once, then it
	 * forwards while any mode is `owed` (a receiver still lacks data its
	 * sender was told arrived), up to the drain's deadline, when
	 * give_up_all ends what is still owed (returns frames handed out). */
	void (*drain_begin)(struct weir_mode_svc *w);
	bool (*owed)(const struct weir_mode_svc *w);
	unsigned int (*give_up_all)(struct weir_mode_svc *w);
	/* Shutdown (weir_worker_flush_queues): everything the mode keeps back
	 * to its pool, counted by the mode; returns how many. */
	unsigned int (*flush)(struct weir_mode_svc *w);
};

extern const struct weir_mode_ops weir_mode_fifo, weir_mode_pfq, weir_mode_postack,
	weir_mode_paced, weir_mode_tcr, weir_mode_ipabr, weir_mode_pep;

/* Indexed by enum weir_shape_mode. */
extern const struct weir_mode_ops *const weir_modes[WEIR_MODE__COUNT];

static inline const struct weir_mode_ops *
weir_mode(uint8_t mode)
{
	return weir_modes[mode < WEIR_MODE__COUNT ? mode : WEIR_MODE_PFQ];
}

/* The one mode whose per-flow state may outlive its class (a policy
 * reload that takes the mode away cannot take back what it promised a
 * sender): the flows it keeps state for carry WEIR_FSH_PEP (lib/flow/flow.h),
 * and the worker hands them to its kept_packet and kept_end hooks. */
extern const struct weir_mode_ops *const weir_mode_keeper;

/* What the worker offers modes: lib/modes/mode_svc.h. */

#endif /* WEIR_MODE_H */
