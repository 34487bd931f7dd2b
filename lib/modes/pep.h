/* SPDX-License-Identifier: BSD-3-Clause
 * weir: pep — premature ACKs with a dynamic watermark (seed 003, Dutta &
 * Zhang; docs/pep.md).
 *
 * A leaf mode that acknowledges a TCP sender's data on the receiver's
 * behalf while the segment is still on its way ("p-ACK"), keeps a copy of
 * every segment it acknowledged until the receiver's own ACK covers it,
 * drops the receiver's ACKs for data already p-acked, and recovers losses
 * beyond the gateway itself from its copies. A per-flow watermark (the
 * class's per-flow share x the measured round trip beyond the gateway, in
 * bytes) decides how far ahead of the receiver the gateway may acknowledge;
 * withheld p-ACKs are released as real ACKs free space.
 *
 * Its state outlives its class: a flow whose data was p-acked still needs
 * its copies and its recovery when a policy reload takes the mode away.
 * Such a flow carries WEIR_FSH_PEP and pep is the modes' keeper
 * (lib/modes/mode.h, weir_mode_keeper): the worker hands every TCP packet of it
 * to weir_pep_packet() (the kept_packet hook) whatever its class, and its
 * end to weir_pep_end() (kept_end); the poll hook is weir_pep_poll() (the
 * per-flow retransmission timers), the stop drain's hooks are below, and
 * flush is weir_pep_flush().
 */
#ifndef WEIR_PEP_H
#define WEIR_PEP_H

#include <stdbool.h>
#include <stdint.h>
#include <rte_mbuf.h>

struct weir_mode_svc;
struct weir_flow;
struct weir_pkt;

/* Per-worker limits (docs/pep.md, "Limits"). */
#define WEIR_PEP_MAX_FLOWS 4096         /* flow directions with pep state at once (a connection
					 * in a class pep both ways takes two); beyond: plain forwarding */
#define WEIR_PEP_RETRIES 6              /* timeouts of one segment without progress before giving up */
#define WEIR_PEP_RTO_MIN_US 200000
#define WEIR_PEP_RTO_MAX_US 2000000

struct weir_pep_stats {
	uint64_t flows;         /* flows that became eligible (handshake seen under pep) */
	uint64_t flows_full;    /* eligible flows refused: WEIR_PEP_MAX_FLOWS reached */
	uint64_t copied;        /* data segments copied */
	uint64_t packed;        /* segments p-acked */
	uint64_t pack_sent;     /* p-ACK frames sent (one may cover several segments) */
	uint64_t withheld;      /* segments stored without a p-ACK (buffer over the watermark) */
	uint64_t win_updates;   /* p-ACKs sent only to carry a receiver's window change */
	uint64_t ece_sent;      /* p-ACKs sent only to carry R's congestion echo (ECE) to S */
	uint64_t real_dropped;  /* receiver ACKs dropped: they covered p-acked data only */
	uint64_t real_passed;   /* receiver ACKs passed to the sender */
	uint64_t purged;        /* copies freed by a cumulative ACK */
	uint64_t sacked;        /* copies freed by a SACK block */
	uint64_t fast_retx;     /* retransmissions from a copy on duplicate ACKs or a SACK hole */
	uint64_t rto_retx;      /* retransmissions from a copy on the flow's timeout */
	uint64_t retx_again;    /* of fast_retx: a resend lost too, found a round trip later */
	uint64_t give_ups;      /* flows ended with RSTs to both sides: R silent, or the flow
				 * left the table, with p-acked data outstanding */
	uint64_t r_resets;      /* R's in-window RSTs while S was owed data: S reset too */
	uint64_t rst_sent;      /* RST frames made */
	uint64_t rst_ignored;   /* RSTs outside the window of the end they were sent to: passed,
				 * the state kept (the endpoint ignores them, RFC 5961) */
	uint64_t rst_held;      /* S's RSTs held back until R had the data S was told of */
	uint64_t flow_cap;      /* segments passed uncopied: the flow's copy cap */
	uint64_t pool_cap;      /* segments passed uncopied: the worker's copy cap or records */
	uint64_t buf_full;      /* segments passed uncopied: buffer at its maximum */
	uint64_t not_packable;  /* segments passed uncopied: FIN, URG, out of order, past the window */
	uint64_t nombuf;        /* a copy or a made frame found no mbuf */
	uint64_t class_dropped; /* copies given up: the class dropped the original before a p-ACK */
	uint64_t lost_resent;   /* copies resent at once: the class dropped a p-acked original */
	uint64_t ended_copies;  /* copies dropped because the flow ended (idle, evicted) */
	uint64_t flushed;       /* copies dropped at shutdown */
	uint64_t drain_resets;  /* flows reset at stop (RSTs to both sides): R still lacked
				 * p-acked data at the deadline */
	uint64_t flushed_owed;  /* flows whose p-acked data was dropped without a reset (no drain ran) */
	uint32_t copies;        /* mbufs held now */
	uint32_t copy_cap;      /* the worker's cap */
	uint32_t active;        /* flows with pep state now */
	uint32_t peak_copies;
};

/* Every TCP packet (travelling a) of a flow flagged WEIR_FSH_PEP, before
 * any mode sees it. True: pep took it (a receiver's ACK for p-acked data,
 * freed and counted). */
bool weir_pep_packet(struct weir_mode_svc *w, struct weir_flow *f, struct rte_mbuf *m,
		     const struct weir_pkt *p, int a, uint32_t slot, uint64_t now);
/* The flow leaves the table: copies freed, RSTs if the sender was told
 * data was delivered that the receiver never acknowledged. */
void weir_pep_end(struct weir_mode_svc *w, struct weir_flow *f, uint32_t slot);
/* Retransmission timers of a few flows (round robin); returns frames
 * handed out. *wake is lowered to when the next call is wanted. */
unsigned int weir_pep_poll(struct weir_mode_svc *w, uint64_t now, uint64_t *wake);
/*
 * Stopping (lib/worker/worker_life.c, weir_worker_stopping): no data S was told
 * of is dropped silently. drain_begin stops new copies and p-ACKs; while
 * the worker still forwards and recovers, owed says whether R still lacks
 * p-acked data; at the drain's deadline give_up_all resets both ends of
 * every flow that does (drain_resets). flush then frees what is left.
 */
void weir_pep_drain_begin(struct weir_mode_svc *w);
bool weir_pep_owed(const struct weir_mode_svc *w);
unsigned int weir_pep_give_up_all(struct weir_mode_svc *w);
/* Shutdown: every copy back to its pool; returns how many. */
unsigned int weir_pep_flush(struct weir_mode_svc *w);

/* Copy w's counters into *out; false (out untouched) when pep has no
 * state on w. The worker writes them meanwhile: counters a packet apart
 * at worst. */
bool weir_pep_stats_copy(const struct weir_mode_svc *w, struct weir_pep_stats *out);
/* Bytes of per-flow state and per-copy record (the copy's mbuf aside). */
size_t weir_pep_bytes_per_flow(void);
size_t weir_pep_bytes_per_copy(void);
/* Views for tests: watermark and buffered bytes of (d, slot); 0 if none. */
uint32_t weir_pep_watermark(const struct weir_mode_svc *w, int d, uint32_t slot);
/* R's delivery rate in bits/s once the pipe is full (shaping.pep.watermark
 * = "measured"), else 0. */
uint64_t weir_pep_delivery_bps(const struct weir_mode_svc *w, int d, uint32_t slot);
uint32_t weir_pep_buffered(const struct weir_mode_svc *w, int d, uint32_t slot);

#endif /* WEIR_PEP_H */
