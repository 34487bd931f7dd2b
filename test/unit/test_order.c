/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests: no mode reorders a flow's frames, whatever the order of
 * holding, passing and releasing inside one rx burst (issue 17, items 2
 * and 3). Each test looks at the wire order of one port: frames handed on
 * directly (r.emitted) and frames that wait in the class tree (dequeued).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_mbuf.h>

#include "unit.h"
#include "rig.h"
#include "ackstore_int.h"
#include "pace_state.h"
#include "worker_view.h"


/* Outbound leaves in `out_mode`, inbound in `in_mode`, 100 Gbit/s each,
 * the flow opened by an outbound SYN. */
static int
order_rig(struct rig *r, uint8_t out_mode, uint8_t in_mode, const char *name, uint64_t now)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 100000000000ull, .mode = out_mode },
			  { .rate = 100000000000ull, .mode = in_mode } },
	};
	struct rte_mbuf *m;

	if (rig_make_pa(r, &pc, name, 256) != 0)
		return -1;
	feed(r, tcp_frame(0, 1, 4000, 1, 80, SYN, 0, 0), 0, now);
	if (rig_dequeue(r, WEIR_PORT_LAN, now, &m, 1) == 1)
		rte_pktmbuf_free(m);
	return 0;
}

/* Everything that left through the LAN port for the inbound direction, in
 * wire order: what was handed on directly first (it left when the burst's
 * out-array was sent), then the tree's dequeue. True if the tags match. */
static bool
lan_order(struct rig *r, uint64_t now, const uint32_t *want, unsigned int n_want)
{
	struct rte_mbuf *m[16];
	uint32_t got[32];
	unsigned int n = 0;
	uint16_t k;
	bool ok;

	for (unsigned int i = 0; i < r->n_emitted && n < RTE_DIM(got); i++)
		if (r->emitted_to[i] == WEIR_PORT_LAN)
			got[n++] = rig_tag(r->emitted[i]);
	rig_emitted_free(r);
	r->w->next_tsc[WEIR_PORT_WAN] = 0;
	k = rig_dequeue(r, WEIR_PORT_WAN, now, m, RTE_DIM(m));
	for (uint16_t i = 0; i < k && n < RTE_DIM(got); i++)
		got[n++] = rig_tag(m[i]);
	rte_pktmbuf_free_bulk(m, k);
	ok = n == n_want;
	for (unsigned int i = 0; ok && i < n; i++)
		ok = got[i] == want[i];
	if (!ok) {
		printf("  wire order:");
		for (unsigned int i = 0; i < n; i++)
			printf(" %u", got[i]);
		printf("\n");
	}
	rig_emitted_free(r);
	return ok;
}

/* TCR and postack-paced: ACK 1 is due and goes on, ACK 2 of the same burst
 * is held, and a data segment later in the burst releases ACK 2: it must
 * not leave ahead of ACK 1. */
static void
test_paced_burst(uint8_t mode, const char *name)
{
	uint64_t now = rte_get_tsc_hz();
	struct rte_mbuf *b[3];
	struct rig r;

	if (order_rig(&r, mode, WEIR_MODE_PFQ, name, now) != 0) {
		CHECK(0, "rig");
		return;
	}
	b[0] = BACK(1);
	b[1] = BACK(2);
	b[2] = BACK_DATA(3, 100);
	rig_process(&r, b, 3, WEIR_PORT_WAN, now);
	CHECK(lan_order(&r, now, (uint32_t[]){ 1, 2, 3 }, 3), "%s: a burst leaves in order",
	      weir_shape_mode_name(mode));
	rig_free(&r);
}

/* PostACK: a pure ACK after a data segment of its own direction in the
 * same burst is not held (the segment is queued by then), so no release
 * can send it ahead of the segment. */
static void
test_postack_burst(void)
{
	uint64_t now = rte_get_tsc_hz();
	struct rte_mbuf *b[2];
	struct rig r;

	if (order_rig(&r, WEIR_MODE_POSTACK, WEIR_MODE_PFQ, "ord_pa", now) != 0) {
		CHECK(0, "rig");
		return;
	}
	feed(&r, UP(1, 100), 0, now);
	feed(&r, UP(101, 100), 0, now);         /* outbound backlog: ACKs would be held */
	b[0] = BACK_DATA(5, 100);
	b[1] = BACK(6);
	rig_process(&r, b, 2, WEIR_PORT_WAN, now);
	CHECK(weir_postack_len(r.w->svc.pa, 0, 0) == 0, "not held behind its own direction's segment");
	/* The outbound dequeues would release a held one directly. */
	rig_dequeue(&r, WEIR_PORT_LAN, now, b, 2);
	rte_pktmbuf_free_bulk(b, 2);
	CHECK(lan_order(&r, now, (uint32_t[]){ 5, 6 }, 2), "postack: a burst leaves in order");
	rig_free(&r);
}

/* A fifo leaf the other way: the flow's frames wait in the leaf's shared
 * queue, not in a queue of the flow's own (issue 17 item 3). */
static void
test_fifo_other_way(void)
{
	uint64_t now = rte_get_tsc_hz();
	struct rte_mbuf *b[2];
	struct rig r;

	if (order_rig(&r, WEIR_MODE_POSTACK, WEIR_MODE_FIFO, "ord_fifo", now) != 0) {
		CHECK(0, "rig");
		return;
	}
	feed(&r, UP(1, 100), 0, now);
	feed(&r, UP(101, 100), 0, now);
	feed(&r, BACK_DATA(5, 100), 1, now);    /* waits in the inbound fifo */
	feed(&r, BACK(6), 1, now);
	CHECK(weir_postack_len(r.w->svc.pa, 0, 0) == 0, "not held while the flow's frame is in the fifo");
	rig_dequeue(&r, WEIR_PORT_LAN, now, b, 2);
	rte_pktmbuf_free_bulk(b, 2);
	CHECK(lan_order(&r, now, (uint32_t[]){ 5, 6 }, 2), "fifo: the ACK stays behind the segment");
	rig_free(&r);
}

static void
emit_free(void *arg, enum weir_port_role to, struct rte_mbuf **pkts, uint16_t n)
{
	RTE_SET_USED(arg);
	RTE_SET_USED(to);
	rte_pktmbuf_free_bulk(pkts, n);
}

/* flow_split (several workers): frames of a TCP flow whose entry was not
 * opened by a SYN are counted on the port they came in on, every frame of
 * it; a flow seen from its SYN is not, and one worker counts nothing. */
static void
test_flow_split_count(void)
{
	for (int split = 0; split < 2; split++) {
		struct weir_flow_table_conf fc = {
			.name = split ? "ord_fs1" : "ord_fs0", .capacity = 64,
			.socket_id = SOCKET_ID_ANY, .tsc_hz = rte_get_tsc_hz(),
			.timeouts = { 30, 600, 30, 5, 60, 30 },
		};
		struct weir_flow_table *ft = weir_flow_table_create(&fc);
		struct weir_worker_conf wc = { .burst = 32, .emit = emit_free, .count_split = split };
		struct weir_worker *w = ft ? weir_worker_create(&wc, ft, NULL, SOCKET_ID_ANY) : NULL;
		uint64_t now = rte_get_tsc_hz();
		struct weir_worker_counters c;
		struct rte_mbuf *b[3];

		if (w == NULL) {
			CHECK(0, "worker");
			weir_flow_table_free(ft);
			return;
		}
		/* Flow A opened here by its SYN; flow B's SYN went to another worker. */
		b[0] = tcp_frame(0, 1, 4000, 1, 80, SYN, 1, 0);
		weir_worker_process(w, b, 1, WEIR_PORT_LAN, now);
		b[0] = tcp_frame(1, 1, 4000, 1, 80, SYN | ACK, 1, 0);
		b[1] = tcp_frame(1, 2, 4001, 1, 80, SYN | ACK, 1, 0);
		b[2] = tcp_frame(1, 2, 4001, 1, 80, ACK, 2, 100);
		weir_worker_process(w, b, 3, WEIR_PORT_WAN, now);
		b[0] = tcp_frame(0, 2, 4001, 1, 80, ACK, 5, 0);
		b[1] = tcp_frame(0, 1, 4000, 1, 80, ACK, 2, 0);
		weir_worker_process(w, b, 2, WEIR_PORT_LAN, now);
		weir_worker_tx(w);
		weir_worker_port_counters(w, &c);
		CHECK(c.port[WEIR_PORT_WAN].flow_split == (split ? 2u : 0u) &&
		      c.port[WEIR_PORT_LAN].flow_split == (split ? 1u : 0u),
		      "flow_split %d: wan %" PRIu64 " lan %" PRIu64, split,
		      c.port[WEIR_PORT_WAN].flow_split, c.port[WEIR_PORT_LAN].flow_split);
		weir_worker_free(w);
		weir_flow_table_free(ft);
	}
}

int
main(int argc, char **argv)
{
	RTE_SET_USED(argc);
	unit_eal_init(argv[0], "order", "256");
	rig_mempool("ord_mp");
	test_paced_burst(WEIR_MODE_TCR, "ord_tcr");
	test_paced_burst(WEIR_MODE_PACED, "ord_paced");
	test_postack_burst();
	test_fifo_other_way();
	test_flow_split_count();
	CHECK(rte_mempool_in_use_count(mp) == 0, "no mbuf leaked (%u in use)",
	      rte_mempool_in_use_count(mp));
	return unit_report();
}
