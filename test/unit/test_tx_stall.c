/* SPDX-License-Identifier: BSD-3-Clause
 * Faults on real PMD rings (issue 16.10): a worker running weir_worker_main
 * on its own lcore between two net_ring ports, fed and read by this lcore.
 *
 * - A TX ring that stays full (a peer that stopped reading), unshaped and
 *   shaped: what the ring will not take after the retries is freed and
 *   counted tx_full, nothing is held forever, the other direction keeps
 *   flowing meanwhile, and once the peer reads again every frame goes
 *   through, in order. The counters add up by kind and by fate
 *   (lib/net/counters.h) and every mbuf comes back.
 * - A mempool that runs dry while PostACK holds an ACK as bytes: the
 *   release finds no mbuf, counts nombuf and keeps the ACK; once mbufs are
 *   back the same ACK goes, byte for byte.
 */
#include <string.h>
#include <unistd.h>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include "ackstore.h"
#include "rig.h"
#include "unit.h"

#define STALL_RING 64           /* the stalled peer's TX ring: holds 63 */
#define FLOWS 8

struct port_rings {
	struct rte_ring *rx, *tx;
	uint16_t port;
};

static int
make_port(const char *name, struct port_rings *p, unsigned int tx_size)
{
	char rn[64];
	struct rte_eth_conf conf;
	int pid;

	snprintf(rn, sizeof(rn), "%s_rx", name);
	p->rx = rte_ring_create(rn, 1024, SOCKET_ID_ANY, 0);
	snprintf(rn, sizeof(rn), "%s_tx", name);
	p->tx = rte_ring_create(rn, tx_size, SOCKET_ID_ANY, 0);
	if (p->rx == NULL || p->tx == NULL)
		return -1;
	pid = rte_eth_from_rings(name, &p->rx, 1, &p->tx, 1, SOCKET_ID_ANY);
	if (pid < 0)
		return -1;
	p->port = (uint16_t)pid;
	memset(&conf, 0, sizeof(conf));
	if (rte_eth_dev_configure(p->port, 1, 1, &conf) != 0 ||
	    rte_eth_rx_queue_setup(p->port, 0, 1024, SOCKET_ID_ANY, NULL, mp) != 0 ||
	    rte_eth_tx_queue_setup(p->port, 0, tx_size, SOCKET_ID_ANY, NULL) != 0 ||
	    rte_eth_dev_start(p->port) != 0)
		return -1;
	return 0;
}

static void
drain_free(struct rte_ring *r)
{
	void *m;

	while (rte_ring_dequeue(r, &m) == 0)
		rte_pktmbuf_free(m);
}

/* Frame i of the LAN->WAN data (in) or WAN->LAN data (!in) of FLOWS flows;
 * the sequence number is the frame's tag. */
static struct rte_mbuf *
frame(int in, uint32_t i)
{
	return tcp_frame(in, 1, (uint16_t)(4000 + i % FLOWS), 1, 80, ACK, i, 100);
}

static uint64_t
fates(const struct weir_port_counters *c)
{
	return c->forwarded + c->tx_full + c->dropped + c->refused + c->malformed_dropped;
}

static uint64_t
kinds(const struct weir_port_counters *c)
{
	return c->managed + c->flow_full + c->non_ip + c->l2_control + c->fragments + c->malformed;
}

/* Until the worker has received `rx` frames on `port` and each has a fate
 * (nothing queued), or 5 s. */
static int
settle(const struct weir_worker *w, int port, uint64_t rx)
{
	const volatile struct weir_port_counters *c = &w->svc.ctr.port[port];

	for (int i = 0; i < 5000; i++) {
		if (c->rx_pkts == rx && fates((const struct weir_port_counters *)c) == rx)
			return 0;
		usleep(1000);
	}
	return -1;
}

static void
take(struct rte_ring *r, uint32_t *seen, uint32_t *last_tag, unsigned int *misordered)
{
	void *m;

	while (rte_ring_dequeue(r, &m) == 0) {
		uint32_t tag = rig_tag(m), f = tag % FLOWS;

		/* Per flow, tags only grow (first frame: any tag). */
		if (last_tag[f] != UINT32_MAX && tag <= last_tag[f])
			(*misordered)++;
		last_tag[f] = tag;
		(*seen)++;
		rte_pktmbuf_free(m);
	}
}

/* Put n frames (tags first..first+n-1) into `port`'s rx ring r, 8 at a time,
 * 1 ms apart: about 7 Mbit/s, a pace the shaped case's class can take. With
 * drain_to (a peer that reads), each batch is waited for until it has left
 * and then read, so the peer keeps up however the two lcores are scheduled. */
static void
feed_ring(struct weir_worker *w, int port, struct rte_ring *r, int in, uint32_t first, uint32_t n,
	  struct rte_ring *drain_to, uint32_t *seen, uint32_t *last_tag, unsigned int *misordered)
{
	uint64_t rx0 = w->svc.ctr.port[port].rx_pkts;

	for (uint32_t i = 0; i < n; i += 8) {
		uint32_t k;

		for (k = i; k < n && k < i + 8; k++) {
			struct rte_mbuf *m = frame(in, first + k);

			while (rte_ring_enqueue(r, m) != 0)
				usleep(100);
		}
		usleep(1000);
		if (drain_to != NULL) {
			if (settle(w, port, rx0 + k) != 0)
				return;         /* the caller's count check fails */
			take(drain_to, seen, last_tag, misordered);
		}
	}
}

static void
drain_check(struct rte_ring *r, uint32_t *seen, uint32_t *last_tag, unsigned int *misordered)
{
	for (int i = 0; i < 50; i++) {
		take(r, seen, last_tag, misordered);
		usleep(2000);
	}
}

static void
test_tx_stall(const char *name, bool shaped, unsigned int lcore)
{
	struct weir_policy_conf pc = {
		/* 20 Mbit/s out (LAN->WAN), unshaped back. */
		.tree = { { .rate = 20000000 }, { .rate = 0 } },
	};
	char pn[32];
	struct port_rings lan, wan;
	struct weir_worker *w;
	struct weir_flow_table *ft = NULL;
	struct rig r;
	uint32_t last_tag[FLOWS], seen = 0, seen_back = 0;
	unsigned int misordered = 0;
	const struct weir_port_counters *cl, *cw;
	uint64_t loops;

	snprintf(pn, sizeof(pn), "%s_lan", name);
	CHECK(make_port(pn, &lan, 1024) == 0, "lan port");
	snprintf(pn, sizeof(pn), "%s_wan", name);
	CHECK(make_port(pn, &wan, STALL_RING) == 0, "wan port");
	if (shaped) {
		if (rig_make(&r, &pc, name) != 0) {
			CHECK(0, "rig");
			return;
		}
		w = r.w;
		w->conf.emit = NULL;    /* to the ports, not the rig */
	} else {
		struct weir_flow_table_conf fc = {
			.name = name, .capacity = CAP, .socket_id = SOCKET_ID_ANY,
			.tsc_hz = rte_get_tsc_hz(), .timeouts = { 5, 100, 10, 2, 30, 15 },
		};
		struct weir_worker_conf wc = { .burst = 32 };

		ft = weir_flow_table_create(&fc);
		w = ft ? weir_worker_create(&wc, ft, NULL, SOCKET_ID_ANY) : NULL;
		if (w == NULL) {
			CHECK(0, "worker");
			return;
		}
	}
	w->conf.port_id[WEIR_PORT_LAN] = lan.port;
	w->conf.port_id[WEIR_PORT_WAN] = wan.port;
	w->conf.queue = 0;
	w->conf.idle_sleep_us = 50;
	cl = &w->svc.ctr.port[WEIR_PORT_LAN];
	cw = &w->svc.ctr.port[WEIR_PORT_WAN];
	rte_eal_remote_launch(weir_worker_main, w, lcore);

	/* 1. The WAN peer reads nothing: its ring fills with 63 frames. Data
	 * the other way goes on meanwhile. */
	memset(last_tag, 0xff, sizeof(last_tag));
	feed_ring(w, WEIR_PORT_LAN, lan.rx, 0, 0, 600, NULL, NULL, NULL, NULL);
	CHECK(settle(w, WEIR_PORT_LAN, 600) == 0, "%s: 600 frames each got a fate: rx %lu, "
	      "fates %lu", name, (unsigned long)cl->rx_pkts, (unsigned long)fates(cl));
	CHECK(cl->forwarded == rte_ring_count(wan.tx), "%s: forwarded %lu = %u in the ring", name,
	      (unsigned long)cl->forwarded, rte_ring_count(wan.tx));
	CHECK(rte_ring_count(wan.tx) == STALL_RING - 1, "%s: the ring is full (%u)", name,
	      rte_ring_count(wan.tx));
	CHECK(cl->tx_full >= 600 - (STALL_RING - 1) - cl->dropped && cl->tx_full > 400,
	      "%s: tx_full %lu dropped %lu", name, (unsigned long)cl->tx_full,
	      (unsigned long)cl->dropped);
	feed_ring(w, WEIR_PORT_WAN, wan.rx, 1, 0, 200, lan.tx, &seen_back, last_tag, &misordered);
	CHECK(settle(w, WEIR_PORT_WAN, 200) == 0, "%s: the other direction", name);
	drain_check(lan.tx, &seen_back, last_tag, &misordered);
	CHECK(seen_back == 200 && cw->tx_full == 0, "%s: %u of 200 went the other way while the "
	      "WAN ring was full (tx_full %lu)", name, seen_back, (unsigned long)cw->tx_full);
	loops = w->svc.ctr.loops;
	for (int i = 0; i < 2000 && *(volatile uint64_t *)&w->svc.ctr.loops == loops; i++)
		usleep(1000);
	CHECK(w->svc.ctr.loops > loops, "%s: the worker still polls", name);

	/* 2. The peer reads again: every frame goes through, in order. */
	drain_free(wan.tx);
	uint64_t tx_full0 = cl->tx_full, dropped0 = cl->dropped;

	memset(last_tag, 0xff, sizeof(last_tag));
	misordered = 0;
	feed_ring(w, WEIR_PORT_LAN, lan.rx, 0, 1000, 400, wan.tx, &seen, last_tag, &misordered);
	CHECK(settle(w, WEIR_PORT_LAN, 1000) == 0, "%s: settled after the stall", name);
	drain_check(wan.tx, &seen, last_tag, &misordered);
	CHECK(seen == 400 && cl->tx_full == tx_full0 && cl->dropped == dropped0,
	      "%s: %u of 400 after the stall (tx_full +%lu, dropped +%lu)", name, seen,
	      (unsigned long)(cl->tx_full - tx_full0), (unsigned long)(cl->dropped - dropped0));
	CHECK(misordered == 0, "%s: %u frames out of order", name, misordered);

	w->stop = true;
	rte_eal_wait_lcore(lcore);
	weir_worker_flush_queues(w);
	for (int p = 0; p < WEIR_PORT__COUNT; p++) {
		const struct weir_port_counters *c = &w->svc.ctr.port[p];

		CHECK(kinds(c) == c->rx_pkts && fates(c) == c->rx_pkts, "%s: port %d rx %lu kinds %lu "
		      "fates %lu", name, p, (unsigned long)c->rx_pkts, (unsigned long)kinds(c),
		      (unsigned long)fates(c));
	}
	CHECK(cl->tx_pkts == 0 || cw->tx_pkts == cl->forwarded, "%s: wan tx %lu = lan forwarded %lu",
	      name, (unsigned long)cw->tx_pkts, (unsigned long)cl->forwarded);
	printf("%s: 600 frames into a stalled peer: %lu sent, %lu tx_full, %lu dropped; then "
	       "400 of 400 in order\n", name, (unsigned long)(cl->forwarded - 400),
	       (unsigned long)tx_full0, (unsigned long)dropped0);
	for (struct port_rings *p = &lan; p != NULL; p = p == &lan ? &wan : NULL) {
		rte_eth_dev_stop(p->port);
		rte_eth_dev_close(p->port);
		drain_free(p->rx);
		drain_free(p->tx);
		rte_ring_free(p->rx);
		rte_ring_free(p->tx);
	}
	if (shaped) {
		rig_free(&r);
	} else {
		weir_worker_free(w);
		weir_flow_table_free(ft);
	}
}

static void
test_postack_pool_dry(void)
{
	struct rte_mempool *small = rte_pktmbuf_pool_create("dry_mp", 8, 0, WEIR_MBUF_PRIV_SIZE,
							   2048, SOCKET_ID_ANY);
	const struct weir_postack_conf pac = {
		.n_flows = 4, .n_acks = 16, .ack_limit = 8, .idle_us = 20000,
		.mbuf_cap = 0,          /* every held ACK is copied into its record */
		.tsc_hz = rte_get_tsc_hz(), .socket_id = SOCKET_ID_ANY, .mp = small,
	};
	struct weir_postack *pa = small ? weir_postack_create(&pac) : NULL;
	struct rte_mbuf *all[8], *out[2], *ack;
	unsigned int n_out, got = 0;
	uint8_t want[64];

	if (pa == NULL) {
		CHECK(0, "postack");
		return;
	}
	ack = rte_pktmbuf_alloc(small);
	if (ack == NULL) {
		CHECK(0, "ack");
		return;
	}
	memset(rte_pktmbuf_append(ack, sizeof(want)), 0xa5, sizeof(want));
	memcpy(want, rte_pktmbuf_mtod(ack, void *), sizeof(want));
	CHECK(weir_postack_hold(pa, 0, 1, ack, 0, out, &n_out) == 1 && n_out == 0, "held");
	while (got < RTE_DIM(all) && (all[got] = rte_pktmbuf_alloc(small)) != NULL)
		got++;
	CHECK(rte_mempool_avail_count(small) == 0, "the pool is dry (%u left)",
	      rte_mempool_avail_count(small));
	CHECK(weir_postack_release(pa, 0, 1, out, 2, WEIR_PA_RULE) == 0, "no mbuf: nothing goes");
	CHECK(weir_postack_stats(pa)->nombuf == 1 && weir_postack_held(pa, 0, 1) == 1,
	      "nombuf %lu, still held %u", (unsigned long)weir_postack_stats(pa)->nombuf,
	      weir_postack_held(pa, 0, 1));
	rte_pktmbuf_free_bulk(all, got);
	CHECK(weir_postack_release(pa, 0, 1, out, 2, WEIR_PA_RULE) == 1, "released once mbufs are back");
	CHECK(out[0]->data_len == sizeof(want) && memcmp(rte_pktmbuf_mtod(out[0], void *), want,
							  sizeof(want)) == 0, "the same ACK");
	rte_pktmbuf_free(out[0]);
	weir_postack_free(pa);
	CHECK(rte_mempool_in_use_count(small) == 0, "every mbuf back (%u)",
	      rte_mempool_in_use_count(small));
	rte_mempool_free(small);
}

int
main(int argc, char **argv)
{
	unsigned int lcore;

	RTE_SET_USED(argc);
	unit_eal_init(argv[0], "tx_stall", "256");
	rig_mempool("stall_mp");
	test_postack_pool_dry();
	lcore = rte_get_next_lcore(-1, 1, 0);
	if (lcore >= RTE_MAX_LCORE) {
		/* One CPU: no second lcore to run the worker on. */
		printf("SKIP tx stall: one lcore only\n");
	} else {
		test_tx_stall("unshaped", false, lcore);
		test_tx_stall("shaped", true, lcore);
	}
	CHECK(rte_mempool_in_use_count(mp) == 0, "no mbuf leaked (%u in use)",
	      rte_mempool_in_use_count(mp));
	return unit_report();
}
