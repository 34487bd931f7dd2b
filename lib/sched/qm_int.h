/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the queue managers' shared state (lib/sched/qm.h). Internal to qm.c,
 * red.c, choke.c and pqm.c.
 */
#ifndef WEIR_QM_INT_H
#define WEIR_QM_INT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "qm.h"

/* RED's average and its count since the last drop (lib/sched/red.c). */
struct weir_red {
	double avg;             /* EWMA of the queue, packets */
	double wq;
	double min_th, max_th, max_p;
	int32_t count;          /* arrivals since the last drop between the thresholds; -1: below min_th */
	uint64_t last_left;     /* TSC the queue last lost a frame: idle time's start */
	uint64_t pkt_ticks;     /* one pkt_mean frame's time at the leaf's rate */
};

/* One frame of the queue as CHOKe sees it (lib/sched/choke.c): a ring in queue
 * order, so a random queued frame is one index away. */
struct weir_choke_slot {
	const struct rte_mbuf *m;       /* to keep the ring in step with the queue */
	uint32_t key;
	uint32_t doomed;                /* matched: dropped when it reaches the head */
};

struct weir_choke {
	struct weir_choke_slot *ring;
	uint32_t mask;          /* ring size - 1 (a power of two) */
	uint32_t head, n;
	uint32_t doomed;        /* victims still queued */
	uint32_t last_key;      /* the arrival's key, if weir_choke_arrive took it */
	const struct rte_mbuf *last_m;
};

/* A monitored flow (lib/sched/pqm.c). */
struct weir_pqm_flow {
	double rate;            /* Eq. 5.6: bytes per second */
	uint64_t last;          /* TSC of its last counted arrival */
	uint32_t penalized;     /* drops by the fair-rate test since the last sweep */
	uint32_t _pad;
};

struct weir_pqm {
	double price, prob, fair;       /* REM's price, 1 - phi^-price, bytes/s (INFINITY: p = 0) */
	double ln_phi;
	double cap;             /* pkt_mean packets the leaf sends per interval */
	double hz;              /* TSC ticks per second */
	double k_ticks;         /* Eq. 5.6's K */
	uint64_t in_bytes;      /* arrivals offered to REM this interval */
	uint64_t interval;      /* ticks */
	uint64_t next_update;
	uint64_t sweep;         /* ticks between monitored-set sweeps */
	uint64_t next_sweep;
	uint32_t n, size;       /* flows monitored, capacity */
	uint32_t *keys;         /* [size], packed: entry i is flows[i]'s key */
	struct weir_pqm_flow *flows;    /* [size] */
	uint16_t *index;        /* [mask + 1], open addressing: entry + 1, 0 = empty */
	uint32_t index_mask;
	uint32_t index_shift;   /* 32 - log2(mask + 1): a key's home slot from its top bits */
};

struct weir_qm {
	uint8_t kind;
	struct weir_qm_params par;
	uint64_t rng;
	uint64_t tsc_hz;
	uint64_t rate_bps;
	uint64_t bytes;         /* what was allocated (stats) */
	struct weir_qm_stats st;
	struct weir_red red;
	struct weir_choke choke;
	struct weir_pqm pqm;
};

/* xorshift64*: a uniform double in [0, 1). */
static inline double
weir_qm_uniform(struct weir_qm *q)
{
	uint64_t x = q->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	q->rng = x;
	return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

uint32_t weir_qm_flow_key(const struct rte_mbuf *m);

void weir_red_init(struct weir_qm *q, uint32_t limit);
void weir_red_set_rate(struct weir_qm *q);
/* Update the average for an arrival at a queue of qlen packets. */
void weir_red_average(struct weir_qm *q, uint32_t qlen, uint64_t now);
/* RED's verdict from the average (ADMIT, DROP_EARLY or DROP_FORCED). */
enum weir_qm_verdict weir_red_decide(struct weir_qm *q);

int weir_choke_init(struct weir_qm *q, uint32_t limit, int socket_id);
void weir_choke_fini(struct weir_qm *q);
enum weir_qm_verdict weir_choke_arrive(struct weir_qm *q, struct rte_mbuf *m, uint32_t qlen,
				       uint64_t now);
void weir_choke_queued(struct weir_qm *q, struct rte_mbuf *m);
bool weir_choke_left(struct weir_qm *q, struct rte_mbuf *m);

int weir_pqm_init(struct weir_qm *q, int socket_id);
void weir_pqm_fini(struct weir_qm *q);
void weir_pqm_set_rate(struct weir_qm *q);
enum weir_qm_verdict weir_pqm_arrive(struct weir_qm *q, struct rte_mbuf *m, uint64_t qbytes,
				     uint64_t now);

#endif /* WEIR_QM_INT_H */
