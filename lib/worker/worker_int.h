/* SPDX-License-Identifier: BSD-3-Clause
 * weir: what lib/worker/worker.c shares with the files beside it (worker_policy.c:
 * policy switches and hook commands; worker_active.c: rate shares;
 * worker_ack.c: the ACK modes' calls; worker_classify.c: classification and
 * admission; worker_view.c: the copies): the worker's own, not an
 * interface. Modes see only struct weir_mode_svc (lib/modes/mode_svc.h),
 * embedded here as `svc`. Tests may include it.
 */
#ifndef WEIR_WORKER_INT_H
#define WEIR_WORKER_INT_H

#include <stddef.h>

#include "capture.h"
#include "mode.h"
#include "tcpmeas.h"
#include "worker.h"
#include "class_cmd.h"

struct weir_worker {
	struct weir_worker_conf conf;
	/* What the modes see (lib/modes/mode_svc.h: flows, trees, policy,
	 * class counters, the ACK store, the clock, counters): hooks get &svc. */
	struct weir_mode_svc svc;
	uint32_t unmanaged_qid;                /* = flow table capacity */
	uint16_t epoch16;                      /* the policy's epoch as flows store it */
	struct weir_sa_table *sa;              /* IPsec SAs' sequence tracking (lib/flow/sa_seq.h) */
	struct weir_tcpm_table *tcpm;          /* TCP measurement (lib/worker/tcpmeas.h); NULL: off */
	struct weir_tcpm_stats tcpm_st;
	uint64_t tcpm_now;                     /* the TSC of the burst or dequeue under way */
	/* The modes with a poll hook, called each loop turn (only those: the
	 * loop pays nothing for the others). */
	const struct weir_mode_ops *polled[WEIR_MODE__COUNT];
	uint8_t n_polled;
	bool prefetch_state;                    /* flow table too large for the caches */
	uint64_t next_tsc[WEIR_PORT__COUNT];   /* a blocked shaper's next chance */
	volatile bool stop;                    /* set by the management lcore */
	uint64_t stop_at;                      /* the stop drain's deadline (0: not begun) */
	unsigned int lcore_id;
	uint32_t share_seq;                    /* the share box's seq last applied */
	/* Policy switches: posted by the management lcore, taken between bursts. */
	struct weir_policy_switch *pending;
	uint32_t policy_acked;                 /* epoch of the policy in force */
	uint64_t policy_switches;
	uint64_t requeued;                     /* packets moved into new trees by switches */
	/* Flow events and hook commands. */
	struct weir_tbucket ev_bucket;         /* conf.events_per_s */
	struct weir_tbucket mal_bucket;        /* conf.malformed_pps */
	struct weir_tbucket l3c_bucket;        /* conf.l3_control_pps */
	uint64_t events_sent;
	uint64_t events_dropped;               /* ring full or over events_per_s */
	uint64_t cmds_applied;
	struct weir_class_cmd_stats class_cmd_st;      /* lib/worker/worker_classcmd.c */
	uint64_t cmds_stale;                   /* the flow or the policy had changed */
	/* DiffServ markers per direction (lib/sched/marker.h; NULL: no class marks),
	 * where frames leave the class tree. */
	struct weir_markers *markers[WEIR_PORT__COUNT];
	struct weir_markers_out mk_out[WEIR_PORT__COUNT];
	uint64_t marker_fail;                  /* switches whose markers could not be built */
	/* Capture (lib/worker/worker_capture.c): the tap in force (NULL: none, and
	 * the loop's only cost is a branch a frame) and the one the
	 * management lcore posted; the worker takes a posted tap at the start
	 * of a burst, and the poster frees a replaced one once `cap` shows it
	 * taken (a burst that used it has ended). */
	const struct weir_cap_tap *cap;
	const struct weir_cap_tap *cap_post;
	struct weir_cap_counters cap_ctr;
	/* Per port role: what leaves through it next (weir_worker_tx). */
	struct weir_out out[WEIR_PORT__COUNT];
} __rte_cache_aligned;

/* The worker behind the view its modes got (the services of
 * lib/modes/mode_svc.h are the worker's functions). */
static inline struct weir_worker *
weir_wk_of(struct weir_mode_svc *s)
{
	return (struct weir_worker *)(void *)((char *)s - offsetof(struct weir_worker, svc));
}
static inline const struct weir_worker *
weir_wk_of_c(const struct weir_mode_svc *s)
{
	return (const struct weir_worker *)(const void *)((const char *)s -
							  offsetof(struct weir_worker, svc));
}

/* Bits per second the light flows of a class used in their last period
 * (bytes per period): the worker's max-min shares, and the rebalancer. */
static inline uint64_t
weir_class_light_bps(const struct weir_worker *w, const struct weir_class_counters *c)
{
	if (c->period_len == 0 || c->light_bytes == 0)
		return 0;
	return (uint64_t)(((unsigned __int128)c->light_bytes * 8 * w->svc.tsc_hz) / c->period_len);
}

uint16_t weir_wk_epoch16(uint32_t epoch);
bool weir_wk_classify_flow(struct weir_worker *w, struct weir_flow *f, const uint8_t *frame,
			   const struct weir_pkt *p, enum weir_dir dir);
/* The queue a frame of flow f (NULL: without a flow) waits in, in target
 * t's leaf of direction d: its flow's, the shared one of frames without a
 * flow, or a fifo leaf's one queue (past the flow slots). */
static inline uint32_t
weir_wk_shaped_qid(const struct weir_worker *w, const struct weir_policy_target *t, int d,
		   const struct weir_flow *f)
{
	if (unlikely(weir_mode(t->mode[d])->flags & WEIR_MODEF_SHARED_QUEUE))
		return w->unmanaged_qid + 1 + t->leaf[d];
	return f != NULL ? weir_flow_slot(w->svc.flows, f) : w->unmanaged_qid;
}
/* The flow's leaf in direction d; WEIR_CBQ_NONE when it was classified
 * under an earlier policy (its packets were moved at the switch, and the
 * flow is re-classified on its next packet). */
static inline uint32_t
weir_wk_flow_leaf(const struct weir_worker *w, const struct weir_flow *f, int d)
{
	if (unlikely(f->class_gen != w->svc.gen8 || f->class_id >= w->svc.policy->n_targets))
		return WEIR_CBQ_NONE;
	return w->svc.policy->targets[f->class_id].leaf[d];
}

void weir_wk_flow_uncount(struct weir_worker *w, struct weir_flow *f);
bool weir_wk_admit_flow(struct weir_worker *w, struct weir_flow *f, uint16_t target);
void weir_wk_share_update(struct weir_worker *w, int d, uint32_t leaf);

/* lib/worker/worker_active.c: the flows a class's per-flow share divides among
 * (those that sent data in the last activity period or the one before,
 * not every connection). */
#define WEIR_ACTIVE_PERIOD_MS 200
/* Periods count 1..127; a flow's mark with this bit: one frame seen in the period. */
#define WEIR_ACTIVE_ONCE 0x80
void weir_wk_period_roll(struct weir_worker *w, struct weir_class_counters *c, int d,
			 uint32_t leaf, uint64_t now);
void weir_wk_active_mark(struct weir_worker *w, struct weir_class_counters *c,
			 struct weir_flow *f, int d, uint32_t leaf);
void weir_wk_active_forget(struct weir_worker *w, struct weir_flow *f, int d, uint32_t leaf);

/* A data frame of flow f in leaf `leaf` of direction d: one compare per
 * frame, the period rolled on the first frame after it ends. */
static inline void
weir_wk_note_active(struct weir_worker *w, struct weir_flow *f, int d, uint32_t leaf,
		    uint64_t now)
{
	struct weir_class_counters *c = &w->svc.cls_ctr[d][leaf];

	if (unlikely(now >= c->period_end))
		weir_wk_period_roll(w, c, d, leaf, now);
	if (likely(f->active_mark[d] == c->period))
		return;
	weir_wk_active_mark(w, c, f, d, leaf);
}
/* lib/worker/worker_ack.c: a TCP packet of flow f travelling a, to its ACK mode
 * (true: the mode took it); the watchdog's look at a flow holding ACKs (how
 * many go, and why); flow f ends (held ACKs go, modes give back what they
 * kept). */
bool weir_wk_ack_control(struct weir_worker *w, struct weir_flow *f, struct rte_mbuf *m,
			 enum weir_dir a, uint64_t now);
uint32_t weir_wk_ring_decide(void *arg, int d, uint32_t slot, uint64_t now, uint32_t held,
			     enum weir_postack_why *why);
void weir_wk_mode_end(struct weir_worker *w, struct weir_flow *f);

/* lib/worker/worker.c: frame m of queue qid leaves weir travelling dir after
 * weir held it (measurement on): the probe it carries starts now. */
void weir_wk_tcpm_departed(struct weir_worker *w, struct rte_mbuf *m, uint32_t qid, int dir,
			   uint64_t now);

/* lib/worker/worker_marker.c: the markers of the policy in force (0 or -errno);
 * release what they hold to the out-arrays and free them (policy switch);
 * free them and what they hold, counted dropped (shutdown). */
int weir_wk_markers_build(struct weir_worker *w, int socket_id);
void weir_wk_markers_release(struct weir_worker *w);
unsigned int weir_wk_markers_drop(struct weir_worker *w);

/* lib/worker/worker_capture.c: a captured frame before weir decides its fate
 * (the slots that want it and its copy, NULL: none or lost) and once
 * decided (its verdict): the copy goes on the ring or is freed. */
struct rte_mbuf *weir_wk_cap_pre(struct weir_worker *w, struct rte_mbuf *m, struct weir_flow *f,
				 enum weir_port_role from, uint8_t *mask);
void weir_wk_cap_post(struct weir_worker *w, struct rte_mbuf *cp, uint8_t mask,
		      uint32_t orig_len, struct weir_flow *f, enum weir_port_role from,
		      enum weir_cap_verdict v, uint64_t now);
/* The tap posted, taken at a burst's start (one compare when none is). */
static inline void
weir_wk_cap_take(struct weir_worker *w)
{
	const struct weir_cap_tap *t = __atomic_load_n(&w->cap_post, __ATOMIC_ACQUIRE);

	if (unlikely(t != w->cap))
		__atomic_store_n(&w->cap, w->conf.cap_ring != NULL && w->conf.cap_pool != NULL ?
				 t : NULL, __ATOMIC_RELEASE);
}

/* lib/worker/worker_events.c: flow events for the hooks, and their token bucket. */
bool weir_wk_tbucket_take(struct weir_tbucket *b, uint32_t per_s, uint64_t hz, uint64_t now);
void weir_wk_event_new(struct weir_worker *w, struct weir_flow *f, const struct weir_cls_tuple *t,
		       const uint8_t *frame, const struct weir_pkt *p);
void weir_wk_event_end(struct weir_worker *w, struct weir_flow *f, const struct weir_flow_key *key);

#endif /* WEIR_WORKER_INT_H */
