/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the poll-mode worker.
 *
 * A worker owns RX/TX queue `queue` of both ports and the flow table of the
 * flows that hash to that queue. One turn of its loop: rx burst from each
 * port -> process (parse, flow lookup/insert, classify if new or stale,
 * the leaf's mode acts: lib/modes/mode.h) -> enqueue in the class tree -> dequeue
 * what the tree allows now (the mode hears what was sent) -> the ACK
 * store's watchdog -> policy switch, hook commands, rate shares -> a short
 * expiry scan -> tx: every frame leaves from the one out-array per port,
 * in the order it was decided. When nothing arrives for a while it backs
 * off with growing sleeps so a 2-core test machine keeps a core for the
 * TCP stacks (a production box sets idle_sleep_us = 0 to poll flat out).
 */
#ifndef WEIR_WORKER_H
#define WEIR_WORKER_H

#include <stdbool.h>
#include <stdint.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "cbq.h"
#include "counters.h"
#include "flow.h"
#include "mode_svc.h"
#include "policy.h"
#include "ackstore.h"
#include "sa_seq.h"
#include "share.h"

struct weir_tcr;        /* the pacing state, lib/modes/pace_state.h */

#define WEIR_BURST_MAX 64
/* Frames one port's out-array holds before it is sent early: a loop's
 * receive bursts, dequeues and released ACKs fit several times over. */
#define WEIR_OUT_MAX 512

/* A token bucket of one second's worth: `tokens` << 20 may go now. */
struct weir_tbucket {
	uint64_t tokens;
	uint64_t tsc;
};

/* Frames decided to leave through one port, in the order decided. */
struct weir_out {
	uint16_t n;
	struct rte_mbuf *pkts[WEIR_OUT_MAX];
};

/*
 * Flow events for the management lcore's policy hooks: a worker with an
 * event ring posts one when it classifies a new flow and one when a flow
 * ends (expires or is evicted), rate-limited and never blocking: a full
 * ring or an exhausted budget drops the event, counted. Addresses are
 * network order, LAN and WAN side apart; IPv4 in the first 4 bytes.
 */
enum weir_flow_event_type { WEIR_FEV_NEW = 1, WEIR_FEV_END = 2 };

struct weir_flow_event {
	uint8_t type;
	uint8_t init_dir;       /* enum weir_dir: who opened the flow */
	uint8_t proto;
	uint8_t family;         /* 4 or 6 */
	uint8_t dscp;
	uint8_t state;          /* enum weir_flow_state (end events): how it ended */
	uint16_t vlan;
	uint16_t lan_port, wan_port;
	uint32_t slot;          /* with first_tsc: which flow (slots are reused) */
	uint16_t target;        /* the policy target it was classified to */
	uint16_t _pad2;
	uint32_t epoch;         /* of that policy */
	uint8_t lan[16], wan[16];
	uint64_t first_tsc;
	uint64_t last_tsc;
	uint64_t bytes[2];      /* by enum weir_dir (end events) */
	uint32_t pkts[2];
};

/* The management lcore's answer to a new-flow event: put the flow in
 * `target` of policy `epoch` (ignored if the policy changed since or the
 * slot holds another flow by now). */
struct weir_flow_cmd {
	uint32_t slot;
	uint16_t target;
	uint16_t _pad;
	uint32_t epoch;
	uint32_t _pad2;
	uint64_t first_tsc;
};

struct weir_worker_conf {
	uint16_t port_id[WEIR_PORT__COUNT];   /* DPDK port ids of LAN and WAN */
	uint16_t queue;                        /* RX and TX queue index on both ports */
	uint16_t burst;                        /* <= WEIR_BURST_MAX */
	uint32_t idle_sleep_us;                /* longest back-off sleep; 0 = never sleep */
	uint32_t expire_budget;                /* flow slots examined per expiry step */
	/* A frame arriving at an empty class tree whose class path has tokens
	 * is sent at once instead of being queued and dequeued in the same
	 * loop (same order, same charges; not for postack-paced leaves). */
	bool cut_through;
	/* Several workers share the traffic: count frames of TCP flows this
	 * worker's table picked up without their SYN (flow_split). */
	bool count_split;
	/* Needed with shapers: maps a flow to its leaf in each direction. The
	 * worker does not own it (one policy serves every worker). */
	const struct weir_policy *policy;
	/* ACK queues for leaves in PostACK mode (NULL: none held, every leaf
	 * behaves as pfq). Owned by the worker from creation on. */
	struct weir_postack *postack;
	/* Where weir_worker_tx() sends the out-arrays: NULL = the ports' tx
	 * queues. Tests and the benchmark catch the frames here. */
	void (*emit)(void *arg, enum weir_port_role to, struct rte_mbuf **pkts, uint16_t n);
	void *emit_arg;
	/* With several workers: where the management lcore posts this
	 * worker's share of each class's rate (lib/worker/share.h). NULL = keep the
	 * rates the trees were created with. */
	const struct weir_share_box *share_box;
	/* Policy hooks (NULL: none): events out (elements of struct
	 * weir_flow_event, single producer: this worker), commands in (struct
	 * weir_flow_cmd, single consumer). new_flow_events: post new-flow
	 * events (there is an on_flow hook); events_per_s caps them. */
	struct rte_ring *events;
	struct rte_ring *cmds;
	/* Run-time class changes (struct weir_class_cmd, lib/worker/class_cmd.h):
	 * single producer, the management lcore; NULL = none. */
	struct rte_ring *class_cmds;
	bool new_flow_events;
	bool end_flow_events;
	uint32_t events_per_s;
	/* Malformed frames this worker lets into its class trees a second (a
	 * token bucket of one second's worth, full at start); more are dropped,
	 * counted. 0 = no limit. An unshaped direction passes them all. */
	uint32_t malformed_pps;
	/* Routers' link-local control (lib/net/l3ctl.h: OSPF, BGP, BFD, VRRP...)
	 * crosses ahead of shaping, untracked; l3_control_pps bounds it a
	 * second in a shaped direction (a token bucket as malformed_pps; more
	 * is dropped, counted; 0 = no limit). false: such frames are ordinary
	 * traffic. Read at start: a flow never changes path mid-stream. */
	bool l3_control;
	uint32_t l3_control_pps;
	/* ipabr: write Eq. 4.6's window to the octet and let the sender round
	 * it down to whole segments, without Eq. 5.4-5.6's silly-window credit
	 * (the thesis' first implementation; shaping.ipabr.sws_credit = false,
	 * for the utilisation sweep of docs/results/ipabr). false = credit on. */
	bool ipabr_no_sws_credit;
	/* ipabr: time added to a flow's round trip in Eq. 4.6 (lib/modes/ipabr.c):
	 * a window of exactly rate x min RTT loses throughput to any jitter. */
	uint32_t ipabr_headroom_us;
	/* pep's copies this worker may hold (0: an eighth of the pool, for
	 * tests and benches; the app sets shaping.pep.copies, reserved). */
	uint32_t pep_copies;
	/* pep's watermark from R's measured delivery rate (shaping.pep.watermark
	 * = "measured") instead of only the class's share (lib/modes/pep_int.h). */
	bool pep_wm_measured;
	/* At stop, how long the worker keeps forwarding and recovering while
	 * a mode owes a receiver data its sender was told arrived (pep); then
	 * both ends are reset. */
	uint32_t stop_drain_us;
	/* Passive TCP measurement of every flow (lib/worker/tcpmeas.h): round trips
	 * each side, retransmissions, holes, duplicate ACKs. Needs flows. */
	bool tcp_measure;
	/* Packet capture (lib/observe/capture.h; NULL: none): the ring this worker
	 * puts copies on (single producer: this worker, elements of struct
	 * weir_cap_rec) and the pool the copies come from (shared by the
	 * workers). Without both, a posted tap is ignored. */
	struct rte_ring *cap_ring;
	struct rte_mempool *cap_pool;
	/* TSC ticks a second (0: the TSC's own, rte_get_tsc_hz()): tests on a
	 * fake clock run at other rates (a 3 GHz TSC: 2 s is over 2^32). */
	uint64_t tsc_hz;
};

/*
 * A new policy for a running worker, posted by the management lcore with
 * weir_worker_policy_post(): the compiled policy and, for each direction
 * the worker shapes, a class tree built for this worker from it and its
 * class counters (zeroed). Between bursts the worker releases every held
 * ACK, moves every queued packet into the new trees in order (each flow
 * with packets waiting is re-classified under the new policy on the spot,
 * the rest on their next packet), frees the old trees and counters, and
 * stores the new policy's epoch in policy_acked. Nothing is dropped or
 * reordered; the old policy is the caller's to free once acked.
 */
struct weir_policy_switch {
	const struct weir_policy *policy;
	struct weir_cbq *shaper[WEIR_PORT__COUNT];
	struct weir_class_counters *cls_ctr[WEIR_PORT__COUNT];
};

/* struct weir_class_counters: lib/modes/mode_svc.h (the modes read it). */

/* The worker itself is lib/'s own (worker_int.h): app/ holds a pointer
 * and goes through the functions here and in worker_view.h. */
struct weir_worker;

/* Create a worker (allocated on `socket_id`); flows may be NULL (bridge
 * only). shaper[] may hold a class tree per direction built from
 * conf->policy's tree of that direction (needs flows, a policy, and
 * n_queues = flow capacity + 1); the worker owns and frees them. */
struct weir_worker *weir_worker_create(const struct weir_worker_conf *conf,
				       struct weir_flow_table *flows,
				       struct weir_cbq *const shaper[WEIR_PORT__COUNT], int socket_id);
void weir_worker_free(struct weir_worker *w);

/*
 * Process n frames received on port role `from` at time `now` (TSC): parse
 * into each mbuf's meta-data, find their flows, account, and let their
 * leaves' modes act. Frames that go on now (unshaped direction, or, with
 * conf.cut_through, frames the empty tree lets go at once) are handed to
 * the out-array of the other port, in order with anything a mode released
 * meanwhile; with a shaper the rest are queued (or dropped and counted) and
 * leave via weir_worker_dequeue. Returns how many of pkts[] went on now.
 * Nothing is sent here: weir_worker_tx() sends. A pure function of its
 * inputs apart from the flow table, counters and the out-arrays: the
 * in-memory benchmark and the tests call it directly.
 */
uint16_t weir_worker_process(struct weir_worker *w, struct rte_mbuf **pkts, uint16_t n,
			     enum weir_port_role from, uint64_t now);

/* Hand what direction `dir`'s shaper lets go at `now` (at most `max`) to
 * the out-array of port dir ^ 1; returns the count. Records when to try
 * again in next_tsc[dir]. */
uint16_t weir_worker_dequeue(struct weir_worker *w, enum weir_port_role dir, uint64_t now,
			     uint16_t max);

/* The transmit point: send both out-arrays (through conf.emit when set);
 * returns frames handed on. */
uint16_t weir_worker_tx(struct weir_worker *w);

/* Tests and benchmarks: take the oldest frames waiting to leave through
 * port `to` instead of sending them. */
uint16_t weir_worker_out_take(struct weir_worker *w, enum weir_port_role to,
			      struct rte_mbuf **pkts, uint16_t max);

/* Management lcore: hand the worker a new policy (see struct
 * weir_policy_switch). -EBUSY while an earlier one is not taken yet;
 * -EINVAL when the switch changes which directions are shaped. The
 * worker owns sw's trees and counters from then on; sw itself may be
 * freed by the caller once policy_acked == sw->policy->epoch. */
int weir_worker_policy_post(struct weir_worker *w, struct weir_policy_switch *sw);
/* Management lcore: the per-flow state policy p's modes need on w,
 * allocated now if w lacks it (0, or -ENOMEM: p cannot go to w). Posting
 * does it too; a caller switching several workers calls it for each first
 * so that no post can fail half-way. */
int weir_worker_policy_prepare(struct weir_worker *w, const struct weir_policy *p);
/* Worker side (its loop calls it): take a posted switch. 1 if one was applied. */
int weir_worker_policy_take(struct weir_worker *w);

/* Expire idle flows (at most `budget` slots looked at): their queues and
 * held ACKs go on, their end events are posted. The loop calls it. */
unsigned int weir_worker_expire(struct weir_worker *w, uint64_t now, unsigned int budget);

/* Take hook commands (struct weir_flow_cmd) from conf.cmds and apply them;
 * the loop calls it. Returns commands taken. */
unsigned int weir_worker_cmds(struct weir_worker *w);

/* Take class commands (lib/worker/class_cmd.h) from conf.class_cmds and apply them
 * to this worker's trees; the loop calls it. Returns commands taken. */
unsigned int weir_worker_class_cmds(struct weir_worker *w);
struct weir_class_cmd_stats;
void weir_worker_class_cmd_stats(const struct weir_worker *w, struct weir_class_cmd_stats *out);

/* Apply new class rates from the share box if the management lcore
 * posted any (called by the loop; returns classes changed). */
unsigned int weir_worker_share_apply(struct weir_worker *w);

/* The ACK store's watchdog: each mode's tick for a few flows holding ACKs
 * (release when idle, pacing); the loop calls it every turn. Returns frames
 * released to the out-arrays. */
unsigned int weir_worker_postack_idle(struct weir_worker *w, uint64_t now);

/* Free every frame still queued, held by the ACK store or waiting in the
 * out-arrays (shutdown), counted as dropped; returns how many. */
unsigned int weir_worker_flush_queues(struct weir_worker *w);

/* The loop was asked to stop (weir_worker_stop): true when it may end now. Until
 * then it keeps running: for up to conf.stop_drain_us while a mode owes a
 * receiver data its sender was told arrived, after which both ends of such
 * flows are reset (counted, frames sent). */
bool weir_worker_stopping(struct weir_worker *w, uint64_t now);

/* The lcore loop (rte_eal_remote_launch entry point); returns when stopped
 * and weir_worker_stopping says so. */
int weir_worker_main(void *arg);

#endif /* WEIR_WORKER_H */
