/* SPDX-License-Identifier: BSD-3-Clause
 * weir: bidirectional flow table (one per worker, librte_hash).
 *
 * One entry per connection for both directions: the key is canonical (the
 * lower (address, port) endpoint first), so a data segment and the ACK going
 * the other way find the same entry. Each worker owns its table: no locks.
 *
 * Overflow rule: when the table is full, a new flow is not inserted; its
 * packets are forwarded unmanaged and counted in stats.full. Entries expire
 * when idle longer than the timeout of their state; expiry is incremental
 * (a bounded scan per call) so it never stalls the worker.
 */
#ifndef WEIR_FLOW_H
#define WEIR_FLOW_H

#include <stdint.h>
#include <rte_common.h>

#include "parse.h"

/* Direction of a packet through the appliance, from the port it arrived on. */
enum weir_dir {
	WEIR_DIR_OUT = 0,   /* LAN -> WAN (uploads, and the ACKs of downloads) */
	WEIR_DIR_IN = 1,    /* WAN -> LAN */
};

/* Canonical bidirectional key: 48 bytes, no holes (hashed as raw bytes). */
struct weir_flow_key {
	uint8_t  addr_lo[16];   /* IPv4 uses the first 4 bytes, rest zero */
	uint8_t  addr_hi[16];
	uint16_t port_lo;       /* host order; ICMP echo: the identifier on both sides */
	uint16_t port_hi;
	uint16_t vlan;          /* outer VLAN ID (12 bits), 0 when untagged; WEIR_FK_* above */
	uint8_t  proto;
	uint8_t  family;        /* 4 or 6 */
	uint16_t natt_sport;    /* ESP in UDP (WEIR_FK_NATT): its UDP ports, host order; */
	uint16_t natt_dport;    /* else 0 */
	/* Always 0. The ports made the key 44 bytes; rte_hash stores a key in
	 * 16-byte-aligned entries of 8 + key bytes, so 44 and 48 take the same
	 * memory, and 48 is compared with vector loads where 40 and 44 went
	 * through memcmp. */
	uint32_t zero;
};

/* High bits of weir_flow_key.vlan (a VLAN ID is 12 bits). An IPsec SA is
 * one direction (RFC 4301: its receiver chose its SPI; the reverse SA has
 * its own), so its key is directional: addr_lo is its source, addr_hi its
 * destination, and port_lo:port_hi its SPI; the two SAs of a tunnel are
 * two flows. ESP in UDP adds its UDP ports (natt_sport, natt_dport): hosts
 * behind one NAT share its address and differ only in the port the NAT
 * gave them, and each picks its inbound SPI on its own, so two of them can
 * hold SAs with one SPI towards the same address. */
#define WEIR_FK_SA      0x8000  /* an ESP/AH SA (weir_pkt.ipsec != 0) */
#define WEIR_FK_NATT    0x4000  /* of those, ESP in UDP 4500 (proto is UDP) */
#define WEIR_FK_VLAN_ID 0x0fff

static inline uint32_t
weir_flow_key_spi(const struct weir_flow_key *k)
{
	return (uint32_t)k->port_lo << 16 | k->port_hi;
}

enum weir_flow_state {
	WEIR_FS_NONE = 0,       /* non-TCP: no handshake */
	WEIR_FS_SYN_SENT,       /* SYN seen */
	WEIR_FS_SYN_RECV,       /* SYN+ACK seen */
	WEIR_FS_ESTABLISHED,    /* handshake done, or picked up mid-stream */
	WEIR_FS_FIN_WAIT,       /* one side sent FIN */
	WEIR_FS_CLOSING,        /* both sides sent FIN */
	WEIR_FS_CLOSED,         /* RST seen, or both FINs acknowledged */
	WEIR_FS__COUNT
};
const char *weir_flow_state_name(unsigned int state);

/* weir_flow.flags */
/* TCP: the entry was opened by a packet other than a SYN (a SYN+ACK, an ACK,
 * data): this table never saw the connection open. With several workers it
 * marks a flow whose opening went to another worker (flow_split). */
#define WEIR_FF_MIDSTREAM       0x01
#define WEIR_FF_SEEN_OUT        0x02  /* a packet was seen in WEIR_DIR_OUT */
#define WEIR_FF_SEEN_IN         0x04  /* a packet was seen in WEIR_DIR_IN */
#define WEIR_FF_FIN_OUT         0x08  /* FIN sent by the LAN side */
#define WEIR_FF_FIN_IN          0x10  /* FIN sent by the WAN side */
#define WEIR_FF_REPLIED         0x20  /* non-TCP: traffic seen both ways */
/* TCP (the same bit as REPLIED, which is for non-TCP only: the entry's
 * line has no byte to spare): a segment of the connection, either way,
 * carried TCP-MD5 or TCP-AO (WEIR_PF_TCP_SIGNED). Sticky until the entry
 * is reused; the worker then leaves every segment of it as it came. */
#define WEIR_FF_TCP_SIGNED      0x20
#define WEIR_FF_FIN_OUT_ACKED   0x40  /* the LAN side's FIN was acknowledged */
#define WEIR_FF_FIN_IN_ACKED    0x80  /* the WAN side's FIN was acknowledged */

/* One cache line per flow; shaping state added by later stages lives beside it. */
struct weir_flow {
	uint64_t first_tsc;
	uint64_t last_tsc;
	uint64_t bytes[2];      /* by enum weir_dir, wire bytes */
	uint32_t pkts[2];
	uint32_t fin_seq[2];    /* seq just past each side's FIN, to see it ACKed */
	uint16_t class_id;      /* policy target (lib/classify/policy.h), set by classification */
	uint16_t policy_epoch;  /* low 16 bits of the policy it was classified under; 0 = not yet */
	uint8_t  state;         /* enum weir_flow_state */
	uint8_t  flags;         /* WEIR_FF_* */
	uint8_t  wscale[2];     /* window scale announced by each direction's sender */
	uint16_t mss[2];
	uint8_t  shape;         /* WEIR_FSH_*: shaping state, owned by the worker */
	uint8_t  class_gen;     /* the worker's policy generation class_id is of; 0 = none */
	/* Per direction: the class's activity period (8 bits of it) in which
	 * this flow last sent data; the worker's, for per-flow shares. */
	uint8_t  active_mark[2];
} __rte_cache_aligned;

/* weir_flow.shape */
#define WEIR_FSH_COUNTED        0x01  /* counted in its classes' flow counts (admission) */
#define WEIR_FSH_REFUSED        0x02  /* admission refused: its packets are dropped */
#define WEIR_FSH_INIT_IN        0x04  /* opened by a WAN host (for re-classification) */
#define WEIR_FSH_LAN_HI         0x20  /* the LAN endpoint is the key's addr_hi (flow events) */
#define WEIR_FSH_HOOKED         0x40  /* a policy hook moved it: ask again after a policy switch */
#define WEIR_FSH_HELD(d)        (0x08 << (d))  /* ACKs of data direction d may be held
						* (set on hold, cleared when seen empty) */
#define WEIR_FSH_PEP            0x80  /* pep keeps state (copies) for it, whatever its class
				       * now: its TCP packets go to the keeper's kept_packet
				       * (lib/modes/mode.h, weir_mode_keeper) */

/* Idle timeouts in seconds, by state family. */
struct weir_flow_timeouts {
	uint32_t tcp_syn;       /* SYN_SENT, SYN_RECV */
	uint32_t tcp_established;
	uint32_t tcp_closing;   /* FIN_WAIT, CLOSING */
	uint32_t tcp_closed;    /* CLOSED: short, lets late segments find the entry */
	uint32_t udp;
	uint32_t other;         /* ICMP and other IP protocols */
};

struct weir_flow_table_conf {
	const char *name;       /* unique per process (rte_hash names are global) */
	uint32_t capacity;      /* exact: the table holds this many flows */
	int socket_id;
	uint64_t tsc_hz;
	struct weir_flow_timeouts timeouts;
};

struct weir_flow_stats {
	uint64_t inserted;
	uint64_t expired;       /* removed for idleness (all states) */
	uint64_t full;          /* packets of new flows not inserted: table full */
	uint64_t lookups;
	uint32_t active;
};

struct weir_flow_table;

struct weir_flow_table *weir_flow_table_create(const struct weir_flow_table_conf *conf);
void weir_flow_table_free(struct weir_flow_table *t);

/*
 * Build the canonical key for a manageable packet (weir_pkt_manageable()),
 * or an SA's directional one (WEIR_FK_SA) for an IPsec packet.
 * Returns 1 if the packet's source is the addr_lo side, 0 otherwise.
 */
int weir_flow_key_make(const uint8_t *frame, const struct weir_pkt *p, struct weir_flow_key *key);

#define WEIR_FLOW_BULK_MAX 64

/*
 * Find or insert the flows of n packets (n <= WEIR_FLOW_BULK_MAX); all must be
 * manageable. out[i] is the flow entry, or NULL when the table is full (counted).
 * Uses rte_hash bulk lookup, inserting only the misses.
 */
void weir_flow_lookup_bulk(struct weir_flow_table *t, const struct weir_flow_key *keys,
			   unsigned int n, uint64_t now, struct weir_flow *out[]);

/* Account a packet of `wire_len` bytes in direction `dir` and advance TCP state. */
void weir_flow_track(struct weir_flow *f, const struct weir_pkt *p, enum weir_dir dir,
		     uint32_t wire_len, uint64_t now);

/* Account a packet without a transport header to read (an IP fragment of
 * a host pair's pseudo-flow): bytes, packets, directions seen, last seen;
 * no TCP state. */
static inline void
weir_flow_touch(struct weir_flow *f, enum weir_dir dir, uint32_t wire_len, uint64_t now)
{
	f->bytes[dir] += wire_len;
	f->pkts[dir]++;
	f->flags |= dir == WEIR_DIR_OUT ? WEIR_FF_SEEN_OUT : WEIR_FF_SEEN_IN;
	f->last_tsc = now;
}

/* Called for each flow just before it is removed (to drain its queues later on). */
typedef void (*weir_flow_evict_cb)(struct weir_flow *f, const struct weir_flow_key *key, void *arg);

/*
 * Examine at most `budget` slots from where the last call stopped and remove
 * the flows idle longer than their state's timeout. Returns flows removed.
 */
unsigned int weir_flow_expire(struct weir_flow_table *t, uint64_t now, unsigned int budget,
			      weir_flow_evict_cb cb, void *arg);

/* Walk every live flow (management snapshots, tests). Stops when fn returns non-zero. */
typedef int (*weir_flow_walk_fn)(const struct weir_flow *f, const struct weir_flow_key *key, void *arg);
int weir_flow_walk(const struct weir_flow_table *t, weir_flow_walk_fn fn, void *arg);

/*
 * Another lcore's read of a table the worker is writing (management
 * listings): copy the first live flow in a slot >= from into *f and its
 * key into *key and return its slot, or the capacity when there is none.
 * Cost: the slots skipped (8 bytes each) plus a key check per live one,
 * so a walk in slot order from 0 is linear in the capacity however it is
 * cut into pages.
 * Torn-entry rule: the copy is taken word by word (each 8-byte field whole)
 * and kept only when the slot was live and held the same flow (the same
 * first_tsc) before and after it; a slot taken by another flow meanwhile
 * is skipped. Counters within one copy may be a packet apart. Without the
 * hash's RW-concurrency flags the key check may miss a flow the worker is
 * moving between buckets at that moment; it is skipped then, never torn:
 * every array read stays in the table's fixed memory.
 */
uint32_t weir_flow_read_next(const struct weir_flow_table *t, uint32_t from, struct weir_flow *f,
			     struct weir_flow_key *key);

const struct weir_flow_stats *weir_flow_table_stats(const struct weir_flow_table *t);

/* A flow's slot index (0 .. capacity-1): a stable small id for per-flow
 * state kept elsewhere (its shaping queue), valid while the flow lives. */
uint32_t weir_flow_slot(const struct weir_flow_table *t, const struct weir_flow *f);
/* The entry in slot (valid while a flow lives there). */
struct weir_flow *weir_flow_by_slot(struct weir_flow_table *t, uint32_t slot);
uint32_t weir_flow_table_capacity(const struct weir_flow_table *t);

/* Bytes of memory the table uses per flow slot (hash buckets + keys + entries). */
size_t weir_flow_table_bytes_per_flow(const struct weir_flow_table *t);

#endif /* WEIR_FLOW_H */
