/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the worker's side of packet capture: which frames a capture wants
 * (a filter) and the bounded copy ring a worker hands their copies to.
 *
 * The management lcore publishes a tap (up to WEIR_CAP_MAX filters) to a
 * worker; while a worker has none its loop pays one branch per frame. With
 * one, each frame is matched against the filters and copied (up to the
 * tap's snap length, into a small dedicated mempool) as it arrives, before
 * weir decides its fate; once decided, a class filter is checked again (a
 * new flow has its class only then) and the copy goes on the worker's ring
 * with its verdict. Nothing waits: a frame that finds the pool empty or
 * the ring full is not copied, and counted lost for each capture that
 * wanted it.
 */
#ifndef WEIR_CAPTURE_H
#define WEIR_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "parse.h"

struct rte_bpf;

/* Captures running at once (a tap's filters; mask bits of a record). */
#define WEIR_CAP_MAX 4

/* What became of a captured frame (the packet comment's first word). */
enum weir_cap_verdict {
	WEIR_CAPV_FORWARDED = 1,        /* sent on now (unshaped, cut through, L2 control) */
	WEIR_CAPV_QUEUED,               /* queued in its class (leaves when the class may send) */
	WEIR_CAPV_HELD,                 /* an ACK its mode holds (released as data is sent) */
	WEIR_CAPV_TAKEN,                /* kept by its mode (pep's copies, a marker's queue) */
	WEIR_CAPV_DROP_QUEUE,           /* dropped: its class's queue or its mode refused it */
	WEIR_CAPV_DROP_ADMISSION,       /* dropped: its class refused the flow admission */
	WEIR_CAPV_DROP_MALFORMED,       /* dropped: over the malformed-frame rate limit */
	WEIR_CAPV_DROP_L3CTL,           /* dropped: routers' control traffic over its rate limit */
	WEIR_CAPV__COUNT
};
const char *weir_cap_verdict_name(enum weir_cap_verdict v);

/* weir_cap_filter.match: which fields must match (all that are set). */
#define WEIR_CAPF_CLASS  0x01   /* the frame's leaf in its direction is cls[dir] */
#define WEIR_CAPF_HOST   0x02   /* one end's address in host/host_len */
#define WEIR_CAPF_PEER   0x04   /* and the other end's in peer/peer_len */
#define WEIR_CAPF_PROTO  0x08
#define WEIR_CAPF_PORT   0x10   /* the host end's port (either end's without HOST) */
#define WEIR_CAPF_PPORT  0x20   /* the peer end's port */
#define WEIR_CAPF_BPF    0x40   /* a pcap filter expression, run by rte_bpf */
#define WEIR_CAPF_DIR    0x80   /* only frames that arrive on port `dir` */

/* One capture's filter. Addresses network order, IPv4 in the first 4
 * bytes; a frame that is not IP matches only a filter without addresses,
 * ports or protocol. Both ends are tried either way round, so one filter
 * catches both directions of a connection. */
struct weir_cap_filter {
	uint32_t match;
	uint32_t cls[2];        /* leaf class by direction; WEIR_CBQ_NONE: none there */
	uint8_t family;         /* 4 or 6, with HOST or PEER */
	uint8_t host_len, peer_len;     /* prefix lengths */
	uint8_t proto;
	uint8_t dir;            /* enum weir_port_role, with DIR */
	uint16_t port, pport;
	uint8_t host[16], peer[16];
	/* With BPF: the loaded program (ctx: the mbuf), and its JIT if any. */
	const struct rte_bpf *bpf;
	uint64_t (*bpf_jit)(void *ctx);
};

/* The set a worker applies: built and freed by the management lcore, never
 * written once posted. gen tells records of one tap from another's (a
 * capture slot's bit means its filter in the tap of that generation). */
struct weir_cap_tap {
	uint16_t gen;
	uint8_t n;              /* filters[0..n-1]; slot[i] is the record bit of filter i */
	uint8_t slot[WEIR_CAP_MAX];
	uint32_t snap;          /* bytes copied of each frame (the largest capture's) */
	struct weir_cap_filter filter[WEIR_CAP_MAX];
};

/* One copy on a worker's ring (element of size sizeof(struct weir_cap_rec)). */
struct weir_cap_rec {
	struct rte_mbuf *m;     /* the copy, from the capture pool */
	uint64_t tsc;           /* when the frame was decided */
	uint32_t orig_len;      /* the frame's length on the wire */
	uint16_t target;        /* the policy target it was in (0: default, or none) */
	uint16_t gen;           /* the tap's */
	uint32_t cls;           /* its leaf class in its direction; WEIR_CBQ_NONE: none */
	uint8_t mask;           /* capture slots (bits) it is for */
	uint8_t verdict;        /* enum weir_cap_verdict */
	uint8_t dir;            /* the port role it arrived on */
	uint8_t _pad[7];
};

/* Per worker, single writer. */
struct weir_cap_counters {
	uint64_t copied;                /* records put on the ring */
	uint64_t lost_nombuf;           /* capture pool empty */
	uint64_t lost_ring;             /* ring full */
	uint64_t lost[WEIR_CAP_MAX];    /* by capture slot: either reason */
};

/* A class not known yet (a flow not classified under the policy in force):
 * a class filter lets the frame through until its fate is decided. */
#define WEIR_CAP_CLS_ANY (UINT32_MAX - 1)

/* Does frame m (parsed: p) arriving on port `dir`, in leaf cls (WEIR_CBQ_NONE
 * when it has none, WEIR_CAP_CLS_ANY when not known yet), match filter f? */
bool weir_cap_filter_match(const struct weir_cap_filter *f, struct rte_mbuf *m,
			   const struct weir_pkt *p, int dir, uint32_t cls);

/* Which of tap t's capture slots want frame m (a mask, 0: none). */
uint8_t weir_cap_tap_match(const struct weir_cap_tap *t, struct rte_mbuf *m,
			   const struct weir_pkt *p, int dir, uint32_t cls);

/* Of the slots in mask, those whose class filter (if any) takes leaf cls. */
uint8_t weir_cap_tap_class(const struct weir_cap_tap *t, uint8_t mask, int dir, uint32_t cls);

/* A copy of frame m (snap bytes at most) from pool mp, or NULL counted
 * lost for the slots in mask (the pool is empty). */
struct rte_mbuf *weir_cap_copy(const struct weir_cap_tap *t, struct rte_mempool *mp,
			       struct weir_cap_counters *c, struct rte_mbuf *m, uint8_t mask);

/* Put the copy on ring r with its verdict, or free it counted lost (the
 * ring is full): never waits. */
void weir_cap_push(struct rte_ring *r, struct weir_cap_counters *c,
		   const struct weir_cap_rec *rec);

/* ---- building a filter (the management lcore; cold) ---- */

/* Set one field of f from its text, as the REST API names them: "host"
 * and "peer" (an IPv4 or IPv6 address, or prefix ADDR/LEN; both of one
 * family), "proto" (tcp, udp, icmp, icmpv6, sctp, esp, ah, gre or a
 * number), "port" and "peer_port" (1-65535), "direction" (lan or wan: the
 * port the frame arrives on) and "bpf" (a pcap filter expression, compiled
 * with libpcap and converted for rte_bpf: needs EAL). 0, or -1 with err. */
int weir_cap_filter_set(struct weir_cap_filter *f, const char *key, const char *val, char *err,
			size_t errlen);
/* Free what the filter holds (its BPF program); f is empty after. */
void weir_cap_filter_free(struct weir_cap_filter *f);

#endif /* WEIR_CAPTURE_H */
