/* SPDX-License-Identifier: BSD-3-Clause */
#include <assert.h>
#include <sys/prctl.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>

#include "mbuf_meta.h"
#include "worker.h"

/* Empty polls before the first back-off sleep: long enough that a busy link
 * never sleeps between bursts, short enough to give the core away quickly. */
#define IDLE_SPINS 512
/* Times a partly sent tx burst is retried before the rest counts as tx_full. */
#define TX_RETRIES 16

/* The LAN port's frames travel out towards the WAN, and the other way round. */
static_assert((int)WEIR_PORT_LAN == (int)WEIR_DIR_OUT && (int)WEIR_PORT_WAN == (int)WEIR_DIR_IN,
	      "port role doubles as the packet's direction");

struct weir_worker *
weir_worker_create(const struct weir_worker_conf *conf, struct weir_flow_table *flows, int socket_id)
{
	struct weir_worker *w;

	if (conf->burst == 0 || conf->burst > WEIR_BURST_MAX)
		return NULL;
	w = rte_zmalloc_socket("weir_worker", sizeof(*w), RTE_CACHE_LINE_SIZE, socket_id);
	if (w == NULL)
		return NULL;
	w->conf = *conf;
	w->flows = flows;
	w->tsc_hz = rte_get_tsc_hz();
	return w;
}

void
weir_worker_free(struct weir_worker *w)
{
	rte_free(w);
}

/* Count why a frame is bridged unmanaged; returns true if it is manageable. */
static inline bool
classify_unmanaged(struct weir_port_counters *pc, const struct weir_pkt *p)
{
	if (likely(weir_pkt_manageable(p)))
		return true;
	if (p->malformed != WEIR_MAL_NONE) {
		pc->malformed++;
		pc->malformed_by[p->malformed]++;
	} else if (p->flags & WEIR_PF_FRAGMENT) {
		pc->fragments++;
	} else {
		pc->non_ip++;
	}
	return false;
}

uint16_t
weir_worker_process(struct weir_worker *w, struct rte_mbuf **pkts, uint16_t n,
		    enum weir_port_role from, uint64_t now)
{
	struct weir_port_counters *pc = &w->ctr.port[from];
	struct weir_flow_key keys[WEIR_BURST_MAX];
	struct weir_flow *flows[WEIR_BURST_MAX];
	uint16_t managed_idx[WEIR_BURST_MAX];
	uint16_t n_managed = 0;
	uint64_t bytes = 0;

	for (uint16_t i = 0; i < n && i < 4; i++)
		rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void *));

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;
		const uint8_t *frame = rte_pktmbuf_mtod(m, const uint8_t *);

		if (i + 4 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 4], void *));
		bytes += m->pkt_len;
		/* Headers are parsed in the first segment only: a frame whose
		 * headers straddle segments reads as truncated (unmanaged). */
		weir_parse(frame, m->data_len, p);
		if (classify_unmanaged(pc, p) && w->flows != NULL) {
			weir_flow_key_make(frame, p, &keys[n_managed]);
			managed_idx[n_managed++] = i;
		}
	}
	pc->rx_pkts += n;
	pc->rx_bytes += bytes;

	if (n_managed > 0) {
		weir_flow_lookup_bulk(w->flows, keys, n_managed, now, flows);
		for (uint16_t k = 0; k < n_managed; k++) {
			struct rte_mbuf *m = pkts[managed_idx[k]];

			if (unlikely(flows[k] == NULL)) {
				pc->flow_full++;
				continue;
			}
			weir_flow_track(flows[k], &weir_mbuf_meta(m)->pkt, (enum weir_dir)from,
					m->pkt_len, now);
			pc->managed++;
		}
	}
	/* The bridge forwards everything it receives; shaping stages will hold
	 * or drop here and compact pkts[]. */
	pc->forwarded += n;
	return n;
}

/* Send n frames out of port role `to`; what the ring will not take after a
 * few retries is freed and counted against the receiving port's tx_full. */
static inline void
send_burst(struct weir_worker *w, enum weir_port_role to, struct rte_mbuf **pkts, uint16_t n)
{
	struct weir_port_counters *out = &w->ctr.port[to];
	uint16_t sent = 0;
	uint64_t bytes = 0;

	for (unsigned int tries = 0; sent < n && tries <= TX_RETRIES; tries++)
		sent += rte_eth_tx_burst(w->conf.port_id[to], w->conf.queue, pkts + sent, n - sent);
	for (uint16_t i = 0; i < sent; i++)
		bytes += pkts[i]->pkt_len;
	out->tx_pkts += sent;
	out->tx_bytes += bytes;
	if (unlikely(sent < n)) {
		struct weir_port_counters *in = &w->ctr.port[to ^ 1];

		in->tx_full += n - sent;
		in->forwarded -= n - sent;
		rte_pktmbuf_free_bulk(pkts + sent, n - sent);
	}
}

static inline uint16_t
poll_port(struct weir_worker *w, enum weir_port_role from, uint64_t now)
{
	struct rte_mbuf *pkts[WEIR_BURST_MAX];
	uint16_t n, fwd;

	n = rte_eth_rx_burst(w->conf.port_id[from], w->conf.queue, pkts, w->conf.burst);
	if (n == 0)
		return 0;
	fwd = weir_worker_process(w, pkts, n, from, now);
	if (fwd > 0)
		send_burst(w, (enum weir_port_role)(from ^ 1), pkts, fwd);
	return n;
}

/* Grow the idle sleep 1, 2, 4 ... idle_sleep_us microseconds: the first
 * packet after a pause waits at most one sleep, and a long-idle worker
 * wakes only a few thousand times a second. */
static inline void
idle_backoff(struct weir_worker *w, uint32_t *idle, uint32_t *sleep_us)
{
	if (w->conf.idle_sleep_us == 0 || ++*idle < IDLE_SPINS) {
		rte_pause();
		return;
	}
	rte_delay_us_sleep(*sleep_us);
	w->ctr.sleeps++;
	if (*sleep_us < w->conf.idle_sleep_us)
		*sleep_us = RTE_MIN(*sleep_us * 2, w->conf.idle_sleep_us);
}

int
weir_worker_main(void *arg)
{
	struct weir_worker *w = arg;
	uint32_t idle = 0, sleep_us = 1;

	w->lcore_id = rte_lcore_id();
	/* Linux's default 50 us timer slack would make every short back-off
	 * sleep 50 us longer than asked; ask for precise wake-ups instead. */
	prctl(PR_SET_TIMERSLACK, 1UL);

	while (!w->stop) {
		uint64_t now = rte_rdtsc();
		uint16_t got;

		got = poll_port(w, WEIR_PORT_LAN, now);
		got += poll_port(w, WEIR_PORT_WAN, now);
		w->ctr.loops++;
		if (got > 0) {
			idle = 0;
			sleep_us = 1;
			w->ctr.busy_tsc += rte_rdtsc() - now;
			/* Bounded expiry work rides along with traffic, so a
			 * busy worker still reclaims idle flows. */
			if (w->flows != NULL && (w->ctr.loops & 63) == 0)
				weir_flow_expire(w->flows, now, w->conf.expire_budget, NULL, NULL);
			continue;
		}
		w->ctr.idle_loops++;
		if (w->flows != NULL)
			weir_flow_expire(w->flows, now, w->conf.expire_budget, NULL, NULL);
		idle_backoff(w, &idle, &sleep_us);
	}
	return 0;
}
