/* SPDX-License-Identifier: BSD-3-Clause
 * weir: queue managers of a fifo leaf (seed 004, chapter 5).
 *
 * A fifo leaf holds all its flows' frames in one queue. Without a queue
 * manager it drops at the tail when the class limit is reached, and a flow
 * that ignores congestion (a UDP flood) takes whatever the responsive ones
 * give up. A queue manager decides at each arrival, before the frame
 * enters the queue:
 *
 *   red     RED (Floyd & Jacobson): drop with a probability rising from 0 at
 *           min_th to max_p at max_th of an EWMA of the queue, all above
 *           max_th (lib/sched/red.c);
 *   choke   CHOKe (Pan et al.): above min_th, compare the arrival with a
 *           frame drawn at random from the queue; the same flow: both go,
 *           else RED decides (lib/sched/choke.c);
 *   pqm     PQM, Algorithm 5.3.1 of the thesis: REM's link price from the
 *           backlog and the rate mismatch, byte-mode drops; flows REM drops
 *           from enter a bounded monitored set, whose members' arrival rates
 *           are estimated (Eq. 5.6); a monitored flow whose rate after REM
 *           is above a TCP's fair rate at this price (Eq. 5.1 with an RTT
 *           floor and a packet-size ceiling) is dropped (lib/sched/pqm.c);
 *   pqm-pb  PQM with a penalty box: a dropped frame still counts in its
 *           flow's rate, so a flow that keeps sending above the fair rate
 *           loses everything until it slows down.
 *
 * One object per leaf, allocated with rte_ memory when the tree is made,
 * fixed in size: nothing grows per packet. Single writer (the owning
 * worker); time is an argument (TSC), randomness is a per-object xorshift
 * seeded from the configuration, so the unit tests replay exactly.
 *
 * A flow is told apart by a 32-bit hash of its addresses, protocol and
 * ports (the fifo queue has no per-flow queue id to go by); two flows that
 * collide are treated as one, which with 32 bits and a monitored set of
 * tens of flows happens about never.
 */
#ifndef WEIR_QM_H
#define WEIR_QM_H

#include <stdint.h>
#include <rte_mbuf.h>

enum weir_qm_kind {
	WEIR_QM_NONE = 0,
	WEIR_QM_RED = 1,
	WEIR_QM_CHOKE = 2,
	WEIR_QM_PQM = 3,
	WEIR_QM_PQM_PB = 4,
	WEIR_QM__COUNT
};

/* "none", "red", "choke", "pqm", "pqm-pb"; NULL when out of range. */
const char *weir_qm_name(unsigned int kind);
/* The kind by name, or -1. */
int weir_qm_by_name(const char *name);

/* Parameters; a zero field takes its default (weir_qm_params_defaults). */
struct weir_qm_params {
	/* RED and CHOKe (packets; 0: a third and two thirds of the leaf's limit) */
	uint32_t min_th, max_th;
	double max_p;           /* 0.1 */
	double wq;              /* EWMA weight of the queue, 0.002 */
	/* PQM (REM) */
	double gamma;           /* price step, 0.005 */
	double alpha;           /* weight of the backlog in the price, 0.1 */
	double phi;             /* p = 1 - phi^-price, 1.001 */
	uint32_t target;        /* backlog the price aims at, packets of pkt_mean, 20 */
	uint32_t interval_us;   /* price update period, 2000 */
	uint32_t pkt_mean;      /* bytes: REM's packet unit and byte-mode scale, 1000 */
	uint32_t pkt_max;       /* bytes: the fair rate's packet-size ceiling, 1000 */
	uint32_t rtt_min_us;    /* the fair rate's RTT floor, 30000 */
	uint32_t k_us;          /* Eq. 5.6's averaging constant K, 100000 */
	uint32_t monitor;       /* monitored-set size (flows), 64; at most WEIR_QM_MONITOR_MAX */
	uint32_t seed;          /* random source; 0 = a fixed one */
};

#define WEIR_QM_MONITOR_MAX 1024

/* Fill every zero field of p with its default. */
void weir_qm_params_defaults(struct weir_qm_params *p);
/* NULL, or why p cannot be used (a threshold order, a probability out of
 * range...): a message for the configuration's error. limit is the leaf's
 * packet limit (0: not known yet). */
const char *weir_qm_params_check(const struct weir_qm_params *p, uint32_t limit);

/* Counters of one leaf's queue manager (single writer). */
struct weir_qm_stats {
	uint64_t drops_early;   /* RED's probabilistic drop / REM's byte-mode drop */
	uint64_t drops_forced;  /* RED/CHOKe: the average above max_th */
	uint64_t drops_choke;   /* CHOKe: arrivals matched with a queued frame of their flow */
	uint64_t drops_victim;  /* CHOKe: the queued frames they matched (dropped at the head) */
	uint64_t drops_penalty; /* PQM: a monitored flow above the fair rate */
	uint64_t monitor_added; /* PQM: flows that entered the monitored set */
	uint64_t monitor_full;  /* PQM: a flow to monitor found the set full */
	uint32_t monitored;     /* PQM: flows in the set now */
	uint32_t monitor_size;  /* PQM: the set's capacity */
	double avg;             /* RED/CHOKe: average queue, packets */
	double price;           /* PQM: REM's link price */
	double prob;            /* PQM: REM's drop probability now */
	double fair_bps;        /* PQM: the fair rate now, bit/s (0: no congestion) */
	uint64_t state_bytes;   /* memory of this queue manager (the monitored set's included) */
};

/* Why an arrival was refused (0: admitted). */
enum weir_qm_verdict {
	WEIR_QM_ADMIT = 0,
	WEIR_QM_DROP_EARLY,
	WEIR_QM_DROP_FORCED,
	WEIR_QM_DROP_CHOKE,
	WEIR_QM_DROP_PENALTY,
};

struct weir_qm;

/* One leaf's queue manager of `kind` (not NONE) for a leaf of `rate_bps`
 * holding at most `limit` packets; NULL on bad arguments or no memory. */
struct weir_qm *weir_qm_create(enum weir_qm_kind kind, const struct weir_qm_params *p,
			       uint64_t rate_bps, uint32_t limit, uint64_t tsc_hz, int socket_id);
void weir_qm_free(struct weir_qm *q);

/* Frame m arrives at a leaf holding qlen packets (qbytes wire bytes).
 * WEIR_QM_ADMIT: queue it (then call weir_qm_queued); anything else: the
 * caller drops it (counted here by reason). */
enum weir_qm_verdict weir_qm_arrive(struct weir_qm *q, struct rte_mbuf *m, uint32_t qlen,
				    uint64_t qbytes, uint64_t now);
/* m entered the leaf's queue (its tail). */
void weir_qm_queued(struct weir_qm *q, struct rte_mbuf *m);
/* The head frame m leaves the queue (sent or drained) at `now`. Returns
 * true when it was CHOKe's victim: the caller drops it instead of sending
 * it. */
bool weir_qm_left(struct weir_qm *q, struct rte_mbuf *m, uint64_t now);
/* The leaf's rate changed (a worker's share): REM's capacity. */
void weir_qm_set_rate(struct weir_qm *q, uint64_t rate_bps);
void weir_qm_stats(const struct weir_qm *q, struct weir_qm_stats *out);

#endif /* WEIR_QM_H */
