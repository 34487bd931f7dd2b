/* SPDX-License-Identifier: BSD-3-Clause
 * weir-bench: the in-memory benchmark harness.
 *
 * Feeds synthetic 64-byte TCP frames (mbufs from a real mempool, no NIC) to
 * the worker's processing function and reports TSC cycles per packet and the
 * Mpps one core would sustain, for several active-flow counts, beside a
 * baseline that does everything but weir's work (the same frame rewriting and
 * the same mbuf handling). Run both in one process so the ratio is fair on a
 * noisy shared machine.
 *
 * With --workers N (and N lcores in -l) every mode also runs on N lcores at
 * once, each a whole worker of its own (flow table, class trees, ACK store)
 * fed its own flows, as RSS would feed a multi-queue NIC's workers; it reports
 * the Mpps of all of them together beside one worker's, so what the workers
 * share (mempool, caches, memory bandwidth) shows as scaling below N.
 *
 * Usage: weir-bench [EAL args] -- [--flows 1000,65536,1048576] [--packets N]
 *                   [--workers N] [--plain-drr] [--no-newflows] [--no-codel]
 *                   [--modes M,M] [--esp] [--depth P] [--l3-control] [--tcp-measure] [--tcp-in-order] [--json]
 * (--plain-drr: per-flow queues without the new-flows list and CoDel, the
 *  other two without one of them, to tell their costs apart; --modes:
 *  only these modes and the baseline, e.g. under cachegrind.
 *  --esp: the frames are ESP, one SA per flow, each SA's sequence numbers
 *  in order; only the modes up to +pfq-cut run, the ACK modes need TCP.
 *  scripts/bench_compare.py --a X --b X --b-args --esp gives ESP / TCP.
 *  --depth P: "+pfq" on a congested link: P frames stay queued through
 *  the timed part, so flows stay backlogged and are listed far less often
 *  than once a frame; "+pfq" reports the new-flows list's entries per
 *  frame and the backlog it ended with. Without it every burst empties the
 *  tree, the worst case for the lists.
 *  --l3-control: the workers look for routers' control traffic as the
 *  appliance's do by default (lib/net/l3ctl.h; the frames are ordinary TCP, so
 *  this is the check's cost on every frame).)
 *  --capture other|class: the shaped modes run with a capture of one class
 *  (lib/observe/capture.h): "other", a class no frame is in (the filter's cost on
 *  every frame); "class", the class every frame is in (every frame copied
 *  onto the ring with its verdict; the ring is emptied outside the timed
 *  part, as the management lcore would). Without it the worker's cost of
 *  capture is one branch a frame.)
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdatomic.h>

#include <rte_byteorder.h>
#include <rte_launch.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_ring_elem.h>
#include <rte_tcp.h>

#include "capture.h"
#include "harness.h"
#include "flow.h"
#include "ipabr.h"
#include "mbuf_meta.h"
#include "worker.h"
#include "worker_view.h"

#define BURST 32
#define FRAME_LEN 64

/* The last three send each burst's flows data one way and pure ACKs back,
 * the pattern PostACK acts on: "pfq+ack" queues both per flow, "postack"
 * holds the ACKs while the data waits and releases them as it is sent
 * ("postack-copy": every held ACK copied into a record, none kept in its
 * mbuf). "+pfq-cut" is "+pfq" with the worker's cut-through on: the tree is
 * empty at every burst, so frames go without being queued (a link that is
 * not full), where "+pfq" prices the queueing path itself. */
enum mode { MODE_BASELINE, MODE_PARSE, MODE_FLOWS, MODE_SHAPE, MODE_SHAPE_CUT, MODE_PFQ_ACK,
	    MODE_POSTACK, MODE_POSTACK_COPY, MODE_TCR, MODE_IPABR, MODE__COUNT };
static const char *const mode_name[MODE__COUNT] = { "baseline", "parse", "parse+flow", "+pfq",
						    "+pfq-cut", "pfq+ack", "postack", "postack-copy",
						    "tcr", "ipabr" };

/* "tcr" and "ipabr" rewrite windows, which needs each flow's handshake (MSS
 * and window scale): their flows open with SYN and SYN+ACK before the timed
 * part, and their data advances and is acknowledged (RTT samples). */
static inline int
mode_handshake(enum mode m)
{
	return m == MODE_TCR || m == MODE_IPABR;
}

static inline uint8_t
shape_mode(enum mode m)
{
	return m == MODE_TCR ? WEIR_MODE_TCR : m == MODE_IPABR ? WEIR_MODE_IPABR :
	       m >= MODE_POSTACK ? WEIR_MODE_POSTACK : WEIR_MODE_PFQ;
}

/* --capture: 0 none, 1 a class no frame is in, 2 the frames' class. */
static int capture_mode;
static struct rte_ring *cap_ring;
static struct rte_mempool *cap_pool;

/* The management lcore's part, untimed: the copies leave the ring. */
static void
cap_drain(struct weir_worker *w)
{
	struct weir_cap_rec rec[64];
	unsigned int n;

	if (cap_ring == NULL)
		return;
	(void)w;
	while ((n = rte_ring_sc_dequeue_burst_elem(cap_ring, rec, sizeof(rec[0]), RTE_DIM(rec),
						   NULL)) > 0)
		for (unsigned int i = 0; i < n; i++)
			rte_pktmbuf_free(rec[i].m);
}

struct result {
	double cycles_per_pkt;
	double mpps;
	double state_bpf;       /* DPDK heap the mode's worker took, per flow of the table */
	double new_per_pkt;     /* "+pfq": queues put on the new-flows list, per frame */
	uint32_t backlog;       /* "+pfq": frames its trees held at the end (--depth) */
};

/* Bytes allocated from the DPDK heaps now (every socket). */
static size_t
heap_bytes(void)
{
	size_t b = 0;

	for (unsigned int s = 0; s < rte_socket_count(); s++) {
		struct rte_malloc_socket_stats st;

		if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(s), &st) == 0)
			b += st.heap_allocsz_bytes;
	}
	return b;
}

/* A 64-byte IPv4/TCP frame with 10 bytes of data (or none: a pure ACK);
 * the flow id picks addresses and ports. */
static void
write_frame_ack(uint8_t *f, uint32_t flow, int reverse, int pure_ack)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_tcp_hdr *tcp = (struct rte_tcp_hdr *)(ip + 1);
	uint32_t lan = RTE_IPV4(10, 0, 0, 0) | (flow & 0xffff);
	uint32_t wan = RTE_IPV4(172, 16, 0, 0) | (flow >> 16);
	uint16_t lport = (uint16_t)(1024 + (flow % 50000)), wport = 443;

	memset(f, 0, FRAME_LEN);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	eth->dst_addr.addr_bytes[0] = 0x02;
	eth->src_addr.addr_bytes[0] = 0x02;
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16(FRAME_LEN - sizeof(*eth));
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_TCP;
	ip->src_addr = rte_cpu_to_be_32(reverse ? wan : lan);
	ip->dst_addr = rte_cpu_to_be_32(reverse ? lan : wan);
	tcp->src_port = rte_cpu_to_be_16(reverse ? wport : lport);
	tcp->dst_port = rte_cpu_to_be_16(reverse ? lport : wport);
	tcp->data_off = 5 << 4;
	tcp->tcp_flags = RTE_TCP_ACK_FLAG;
	tcp->sent_seq = rte_cpu_to_be_32(flow);
	tcp->rx_win = rte_cpu_to_be_16(65535);
	if (pure_ack)
		ip->total_length = rte_cpu_to_be_16(sizeof(*ip) + sizeof(*tcp));
}

/* --esp: ESP frames instead, SPI flow + 1, the SA's next sequence number. */
static uint8_t esp_frames;
static uint32_t *esp_seq;

/* --tcp-in-order: each flow's data in sequence (its next segment starts
 * where the one before ended), as a sender's new data is; without it every
 * frame of a flow repeats its first, which a measuring worker counts as a
 * retransmission (the rare path, on every frame). */
static uint8_t tcp_in_order;
static uint32_t *data_seq;

static void
write_frame(uint8_t *f, uint32_t flow, int reverse)
{
	write_frame_ack(f, flow, reverse, 0);
	if (data_seq != NULL) {
		struct rte_tcp_hdr *tcp = (struct rte_tcp_hdr *)(f + sizeof(struct rte_ether_hdr) +
								 sizeof(struct rte_ipv4_hdr));

		tcp->sent_seq = rte_cpu_to_be_32(data_seq[flow]);
		data_seq[flow] += FRAME_LEN - sizeof(struct rte_ether_hdr) -
				  sizeof(struct rte_ipv4_hdr) - sizeof(*tcp);
	}
	if (esp_frames) {
		struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + sizeof(struct rte_ether_hdr));
		uint32_t *esp = (uint32_t *)(ip + 1);

		ip->next_proto_id = IPPROTO_ESP;
		esp[0] = rte_cpu_to_be_32(flow + 1);
		esp[1] = rte_cpu_to_be_32(++esp_seq[flow]);
	}
}

/* The flow's SYN (or, reverse, SYN+ACK) with MSS 1460 and window scale 7. */
static void
write_syn(uint8_t *f, uint32_t flow, int reverse)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + sizeof(struct rte_ether_hdr));
	struct rte_tcp_hdr *tcp = (struct rte_tcp_hdr *)(ip + 1);
	static const uint8_t opts[8] = { 2, 4, 1460 >> 8, 1460 & 0xff, 1, 3, 3, 7 };

	write_frame_ack(f, flow, reverse, 1);
	ip->total_length = rte_cpu_to_be_16(sizeof(*ip) + sizeof(*tcp) + sizeof(opts));
	tcp->data_off = 7 << 4;
	tcp->tcp_flags = reverse ? RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG : RTE_TCP_SYN_FLAG;
	memcpy(tcp + 1, opts, sizeof(opts));
}

/* Data of seq..seq+10 (ack: its cumulative ACK, seq + 10). */
static void
set_seq_ack(uint8_t *f, uint32_t seq, uint32_t ack)
{
	struct rte_tcp_hdr *tcp = (struct rte_tcp_hdr *)(f + sizeof(struct rte_ether_hdr) +
							 sizeof(struct rte_ipv4_hdr));

	tcp->sent_seq = rte_cpu_to_be_32(seq);
	tcp->recv_ack = rte_cpu_to_be_32(ack);
}

/* What the worker's transmit point hands on (forwarded frames and released
 * ACKs alike): the real worker sends them; here they wait in `gone` and are
 * freed after the timed part, as a NIC frees them after sending. */
struct bench_sink {
	uint64_t emitted;
	unsigned int n;
	struct rte_mbuf *gone[4 * WEIR_OUT_MAX];
};

static void
bench_emit(void *arg, enum weir_port_role to, struct rte_mbuf **pkts, uint16_t n)
{
	struct bench_sink *s = arg;

	RTE_SET_USED(to);
	s->emitted += n;
	if (s->n + n > RTE_DIM(s->gone)) {
		rte_pktmbuf_free_bulk(pkts, n);
		return;
	}
	memcpy(s->gone + s->n, pkts, n * sizeof(*pkts));
	s->n += n;
}

static void
bench_sink_free(struct bench_sink *s)
{
	rte_pktmbuf_free_bulk(s->gone, s->n);
	s->n = 0;
}

/* --plain-drr: per-flow queues as before RFC 8290's new-flows list and
 * CoDel (the cost of both, measured against this); --no-newflows and
 * --no-codel: without one of them. */
static uint8_t plain_list, no_codel;

/* --l3-control: weir_worker_conf.l3_control (the appliance's default). */
static bool l3_control;
/* --tcp-measure: every worker measures its TCP flows (lib/worker/tcpmeas.h). */
static int tcp_measure;

/* --depth: frames left standing in "+pfq"'s trees (half each way). */
static uint32_t depth;

/* Workers of a --workers run set up their tables apart, then start the timed
 * part together, so they overlap for (nearly) all of it. */
static atomic_uint ready, n_running = 1;

static void
start_together(void)
{
	atomic_fetch_add(&ready, 1);
	while (atomic_load(&ready) < atomic_load(&n_running))
		rte_pause();
}

/* Queues put on the new-flows list in the leaves of both trees (with
 * --no-newflows: none, every queue goes to the old list). */
static uint64_t
leaf_new_flows(struct weir_cbq *const shaper[WEIR_PORT__COUNT])
{
	uint64_t n = 0;

	for (int d = 0; d < WEIR_PORT__COUNT; d++)
		for (uint16_t k = 0; shaper[d] != NULL && k < 2; k++) {
			struct weir_cbq_stats st;

			if (weir_cbq_is_leaf(shaper[d], k) && weir_cbq_stats(shaper[d], k, &st) == 0)
				n += st.new_flows;
		}
	return n;
}

/* Visit flows in a scattered order (multiplicative stepping) so a large table
 * is walked the way real traffic walks it: mostly cache misses. */
static inline uint32_t
next_flow(uint64_t *state, uint32_t n_flows)
{
	*state += 0x9e3779b97f4a7c15ULL;
	return (uint32_t)((*state >> 32) % n_flows);
}

static struct result
run(enum mode mode, struct rte_mempool *mp, uint32_t n_flows, uint64_t n_pkts)
{
	char name[32];
	static struct bench_sink sink_out;
	/* Every mode hands its frames to the sink: without it the worker
	 * would send to port 0, which is not started (and free them inside
	 * the timed part). */
	struct weir_worker_conf wc = { .burst = BURST, .expire_budget = 0,
				       .cut_through = mode == MODE_SHAPE_CUT,
				       .l3_control = l3_control,
				       .tcp_measure = tcp_measure != 0,
				       .emit = bench_emit, .emit_arg = &sink_out };
	struct weir_flow_table *ft = NULL;
	struct weir_worker *w;
	struct rte_mbuf *pkts[BURST];
	uint64_t state = 1, cycles = 0, done = 0, sink = 0;

	struct weir_cbq *shaper[WEIR_PORT__COUNT] = { NULL, NULL };
	struct weir_policy *policy = NULL;
	static struct weir_cap_tap tap;

	sink_out.n = 0;
	sink_out.emitted = 0;
	const size_t heap0 = heap_bytes();

	if (mode >= MODE_FLOWS) {
		snprintf(name, sizeof(name), "bench_flows%u", rte_lcore_id());
		struct weir_flow_table_conf fc = {
			.name = name, .capacity = n_flows, .socket_id = (int)rte_socket_id(),
			.tsc_hz = rte_get_tsc_hz(),
			.timeouts = { 3600, 3600, 3600, 3600, 3600, 3600 },
		};
		ft = weir_flow_table_create(&fc);
		if (ft == NULL)
			rte_exit(EXIT_FAILURE, "cannot create a table of %u flows (raise -m)\n", n_flows);
	}
	if (mode >= MODE_SHAPE) {
		/* Per-flow DRR queues in one default class under a root far above
		 * what one core can push, so every frame is queued and dequeued
		 * but none waits: the cost of the queueing path itself. */
		const uint8_t sm = shape_mode(mode);
		const struct weir_policy_conf pc = {
			.tree = { { .rate = WEIR_CBQ_RATE_MAX, .mode = sm, .no_aqm = no_codel },
				  { .rate = WEIR_CBQ_RATE_MAX, .mode = sm, .no_aqm = no_codel } },
		};
		struct weir_cbq_class_conf cls[2];
		struct weir_cbq_conf cc = {
			.socket_id = (int)rte_socket_id(), .tsc_hz = rte_get_tsc_hz(), .n_classes = 2,
			.classes = cls, .n_queues = n_flows + 1, .flow_limit = 64, .overhead = 24,
		};
		struct weir_policy_err pe;

		policy = weir_policy_build(&pc, 1, &pe);
		if (policy == NULL)
			rte_exit(EXIT_FAILURE, "policy: %s\n", pe.msg);
		wc.policy = policy;
		if (mode >= MODE_POSTACK) {
			/* As weir runs it (an eighth of the mempool may stay in
			 * mbufs), and with every held ACK copied into a record. */
			const struct weir_postack_conf pac = {
				.n_flows = n_flows, .n_acks = 65536, .ack_limit = 1024, .idle_us = 20000,
				.mbuf_cap = mode != MODE_POSTACK_COPY ? rte_mempool_avail_count(mp) / 8 : 0,
				.tsc_hz = rte_get_tsc_hz(), .socket_id = (int)rte_socket_id(), .mp = mp,
			};

			if ((wc.postack = weir_postack_create(&pac)) == NULL)
				rte_exit(EXIT_FAILURE, "cannot create the ACK store (raise -m)\n");
		}
		for (int d = 0; d < WEIR_PORT__COUNT; d++) {
			cc.n_classes = weir_policy_cbq_classes(policy, d, 1, 1, cls);
			for (uint16_t k = 0; k < cc.n_classes; k++)
				cls[k].plain = plain_list;
			if ((shaper[d] = weir_cbq_create(&cc)) == NULL)
				rte_exit(EXIT_FAILURE, "cannot create the shaper (raise -m)\n");
		}
	}
	if (capture_mode != 0 && mode >= MODE_SHAPE) {
		wc.cap_ring = cap_ring;
		wc.cap_pool = cap_pool;
	}
	w = weir_worker_create(&wc, ft, shaper, (int)rte_socket_id());
	if (w == NULL)
		rte_exit(EXIT_FAILURE, "cannot create worker\n");
	if (wc.cap_ring != NULL) {
		/* One capture of one class, as POST /api/v1/captures makes it. */
		tap = (struct weir_cap_tap){ .gen = 1, .n = 1, .snap = 256 };
		tap.filter[0].match = WEIR_CAPF_CLASS;
		for (int d = 0; d < WEIR_PORT__COUNT; d++)
			tap.filter[0].cls[d] = capture_mode == 2 ? policy->tree[d].default_leaf : 0x7fff;
		weir_worker_cap_post(w, &tap);
	}
	/* Everything the worker of this mode holds per flow: table, hash,
	 * queues, ACK store, the modes' own state (the mempool is apart). */
	const double state_bpf = (double)(heap_bytes() - heap0) / n_flows;
	if (esp_frames) {
		rte_free(esp_seq);
		esp_seq = rte_zmalloc("bench_esp_seq", (size_t)n_flows * sizeof(*esp_seq), 0);
		if (esp_seq == NULL)
			rte_exit(EXIT_FAILURE, "cannot allocate ESP sequence numbers\n");
	}
	if (tcp_in_order) {
		rte_free(data_seq);
		data_seq = rte_zmalloc("bench_data_seq", (size_t)n_flows * sizeof(*data_seq), 0);
		if (data_seq == NULL)
			rte_exit(EXIT_FAILURE, "cannot allocate TCP sequence numbers\n");
	}

	/* Handshakes first where the mode needs them (both SYNs of each flow). */
	for (uint32_t i = 0; mode_handshake(mode) && i < n_flows; i += BURST / 2) {
		uint16_t k, n = (uint16_t)RTE_MIN((uint32_t)BURST / 2, n_flows - i);

		for (int rev = 0; rev < 2; rev++) {
			if (rte_pktmbuf_alloc_bulk(mp, pkts, n) != 0)
				rte_exit(EXIT_FAILURE, "mempool empty\n");
			for (k = 0; k < n; k++) {
				write_syn(rte_pktmbuf_mtod(pkts[k], uint8_t *), i + k, rev);
				pkts[k]->data_len = pkts[k]->pkt_len = FRAME_LEN;
			}
			weir_worker_process(w, pkts, n, rev ? WEIR_PORT_WAN : WEIR_PORT_LAN, rte_rdtsc());
			weir_worker_dequeue(w, rev ? WEIR_PORT_WAN : WEIR_PORT_LAN, rte_rdtsc(), BURST);
			weir_worker_tx(w);
			bench_sink_free(&sink_out);
		}
	}
	/* Warm up: insert every flow once so the timed part measures lookups of
	 * active flows, not inserts. */
	for (uint64_t warm = (mode >= MODE_FLOWS ? n_flows : 0) + 4 * BURST, i = 0; i < warm; i += BURST) {
		if (rte_pktmbuf_alloc_bulk(mp, pkts, BURST) != 0)
			rte_exit(EXIT_FAILURE, "mempool empty\n");
		for (int k = 0; k < BURST; k++) {
			write_frame(rte_pktmbuf_mtod(pkts[k], uint8_t *), (uint32_t)((i + k) % n_flows), 0);
			pkts[k]->data_len = pkts[k]->pkt_len = FRAME_LEN;
		}
		if (mode == MODE_BASELINE) {
			rte_pktmbuf_free_bulk(pkts, BURST);
			continue;
		}
		weir_worker_process(w, pkts, BURST, WEIR_PORT_LAN, rte_rdtsc());
		if (mode >= MODE_SHAPE)
			weir_worker_dequeue(w, WEIR_PORT_LAN, rte_rdtsc(), BURST);
		weir_worker_tx(w);
		bench_sink_free(&sink_out);
	}

	/* --depth: a standing backlog, both ways, that the timed part keeps
	 * (a burst in, a burst out). */
	for (uint32_t i = 0; mode == MODE_SHAPE && i < depth; i += BURST) {
		enum weir_port_role dir = (enum weir_port_role)((i / BURST) & 1);

		if (rte_pktmbuf_alloc_bulk(mp, pkts, BURST) != 0)
			rte_exit(EXIT_FAILURE, "mempool empty\n");
		for (int k = 0; k < BURST; k++) {
			uint32_t f = next_flow(&state, n_flows);

			write_frame(rte_pktmbuf_mtod(pkts[k], uint8_t *), f, (int)dir);
			pkts[k]->data_len = pkts[k]->pkt_len = FRAME_LEN;
		}
		weir_worker_process(w, pkts, BURST, dir, rte_rdtsc());
	}
	const uint64_t new0 = mode == MODE_SHAPE ? leaf_new_flows(shaper) : 0;

	start_together();
	while (done < n_pkts && mode >= MODE_PFQ_ACK) {
		/* Half a burst of data out, then the ACKs of the same flows back. */
		struct rte_mbuf *acks[BURST / 2];
		uint32_t fl[BURST / 2];
		uint64_t t0, t1;

		if (rte_pktmbuf_alloc_bulk(mp, pkts, BURST / 2) != 0 ||
		    rte_pktmbuf_alloc_bulk(mp, acks, BURST / 2) != 0)
			rte_exit(EXIT_FAILURE, "mempool empty\n");
		for (int k = 0; k < BURST / 2; k++) {
			fl[k] = next_flow(&state, n_flows);
			write_frame_ack(rte_pktmbuf_mtod(pkts[k], uint8_t *), fl[k], 0, 0);
			write_frame_ack(rte_pktmbuf_mtod(acks[k], uint8_t *), fl[k], 1, 1);
			if (mode_handshake(mode)) {
				/* New data each time, and its ACK. */
				uint32_t seq = 1 + (uint32_t)(done / BURST) * 10;

				set_seq_ack(rte_pktmbuf_mtod(pkts[k], uint8_t *), seq, 1);
				set_seq_ack(rte_pktmbuf_mtod(acks[k], uint8_t *), 1, seq + 10);
			}
			pkts[k]->data_len = pkts[k]->pkt_len = FRAME_LEN;
			acks[k]->data_len = acks[k]->pkt_len = FRAME_LEN;
		}
		t0 = rte_rdtsc_precise();
		weir_worker_process(w, pkts, BURST / 2, WEIR_PORT_LAN, rte_rdtsc());
		sink += weir_worker_process(w, acks, BURST / 2, WEIR_PORT_WAN, rte_rdtsc());
		weir_worker_dequeue(w, WEIR_PORT_LAN, rte_rdtsc(), BURST / 2);
		weir_worker_dequeue(w, WEIR_PORT_WAN, rte_rdtsc(), BURST / 2);
		weir_worker_tx(w);
		t1 = rte_rdtsc_precise();
		cycles += t1 - t0;
		bench_sink_free(&sink_out);
		cap_drain(w);
		done += BURST;
	}
	while (done < n_pkts) {
		uint64_t t0, t1;

		if (rte_pktmbuf_alloc_bulk(mp, pkts, BURST) != 0)
			rte_exit(EXIT_FAILURE, "mempool empty\n");
		for (int k = 0; k < BURST; k++) {
			uint32_t f = next_flow(&state, n_flows);
			write_frame(rte_pktmbuf_mtod(pkts[k], uint8_t *), f, (int)(f & 1));
			pkts[k]->data_len = pkts[k]->pkt_len = FRAME_LEN;
		}
		/* Only the processing is timed; frame synthesis is not weir's work. */
		t0 = rte_rdtsc_precise();
		if (mode == MODE_BASELINE) {
			/* A forwarder touches each frame's header and hands it on. */
			for (int k = 0; k < BURST; k++)
				sink += *rte_pktmbuf_mtod(pkts[k], uint8_t *) + pkts[k]->pkt_len;
		} else {
			enum weir_port_role dir = (enum weir_port_role)((done / BURST) & 1);

			sink += weir_worker_process(w, pkts, BURST, dir, rte_rdtsc());
			if (mode == MODE_SHAPE || mode == MODE_SHAPE_CUT)
				weir_worker_dequeue(w, dir, rte_rdtsc(), BURST);
			weir_worker_tx(w);
		}
		t1 = rte_rdtsc_precise();
		cycles += t1 - t0;
		if (mode == MODE_BASELINE)
			rte_pktmbuf_free_bulk(pkts, BURST);
		bench_sink_free(&sink_out);
		cap_drain(w);
		done += BURST;
	}
	if (sink + sink_out.emitted == 42)
		printf(" ");  /* keep the baseline's reads from being optimised away */

	struct result r = {
		.cycles_per_pkt = (double)cycles / (double)done,
		.state_bpf = state_bpf,
	};
	if (mode == MODE_SHAPE) {
		r.new_per_pkt = (double)(leaf_new_flows(shaper) - new0) / (double)done;
		r.backlog = weir_cbq_backlog(shaper[0]) + weir_cbq_backlog(shaper[1]);
	}
	r.mpps = (double)rte_get_tsc_hz() / r.cycles_per_pkt / 1e6;
	struct weir_postack_stats pst;

	weir_worker_postack_stats(w, &pst);     /* zeros without an ACK store */
	if (wc.cap_ring != NULL) {
		struct weir_cap_counters cc;

		weir_worker_cap_counters(w, &cc);
		if (capture_mode == 2 && cc.copied < done / 2)
			rte_exit(EXIT_FAILURE, "the capture copied only %" PRIu64 " frames\n", cc.copied);
		if (capture_mode == 1 && cc.copied != 0)
			rte_exit(EXIT_FAILURE, "a capture of no frame's class copied some\n");
		cap_drain(w);
	}
	if ((mode == MODE_POSTACK || mode == MODE_POSTACK_COPY) && pst.held < done / 4)
		rte_exit(EXIT_FAILURE, "postack mode held only %" PRIu64 " ACKs\n", pst.held);
	weir_worker_free(w);    /* frees what the shapers still hold, then them */
	weir_policy_free(policy);
	if (ft != NULL)
		weir_flow_table_free(ft);
	return r;
}

struct job {
	enum mode mode;
	struct rte_mempool *mp;
	uint32_t n_flows;
	uint64_t n_pkts;
	struct result r;
};

static int
job_run(void *arg)
{
	struct job *j = arg;

	j->r = run(j->mode, j->mp, j->n_flows, j->n_pkts);
	return 0;
}

/* The same mode on every enabled lcore at once: Mpps of them all together. */
static double
run_parallel(enum mode mode, struct rte_mempool *mp, uint32_t n_flows, uint64_t n_pkts,
	     unsigned int n_workers)
{
	static struct job jobs[RTE_MAX_LCORE];
	unsigned int lc;
	double mpps = 0;

	atomic_store(&ready, 0);
	atomic_store(&n_running, n_workers);
	RTE_LCORE_FOREACH(lc)
		jobs[lc] = (struct job){ .mode = mode, .mp = mp, .n_flows = n_flows, .n_pkts = n_pkts };
	RTE_LCORE_FOREACH_WORKER(lc)
		rte_eal_remote_launch(job_run, &jobs[lc], lc);
	job_run(&jobs[rte_get_main_lcore()]);
	rte_eal_mp_wait_lcore();
	RTE_LCORE_FOREACH(lc)
		mpps += jobs[lc].r.mpps;
	atomic_store(&n_running, 1);
	atomic_store(&ready, 0);
	return mpps;
}

static size_t
bytes_per_flow(uint32_t n_flows)
{
	struct weir_flow_table_conf fc = {
		.name = "bench_mem", .capacity = n_flows, .socket_id = (int)rte_socket_id(),
		.tsc_hz = rte_get_tsc_hz(), .timeouts = { 1, 1, 1, 1, 1, 1 },
	};
	struct weir_flow_table *ft = weir_flow_table_create(&fc);
	size_t b = ft ? weir_flow_table_bytes_per_flow(ft) : 0;

	weir_flow_table_free(ft);
	return b;
}

int
main(int argc, char **argv)
{
	uint32_t flows[16] = { 1000, 65536, 1048576 };
	unsigned int n_flows = 3;
	uint64_t n_pkts = 4000000;
	int json = 0, c;
	unsigned int n_workers = 1, n_out = 0;
	uint32_t want = (1u << MODE__COUNT) - 1;   /* --modes; the baseline always runs */
	struct rte_mempool *mp;
	static const struct option opts[] = {
		{ "flows", required_argument, NULL, 'f' },
		{ "packets", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "workers", required_argument, NULL, 'w' },
		{ "plain-drr", no_argument, NULL, 'p' },
		{ "no-newflows", no_argument, NULL, 'N' },
		{ "no-codel", no_argument, NULL, 'C' },
		{ "modes", required_argument, NULL, 'm' },
		{ "esp", no_argument, NULL, 'e' },
		{ "depth", required_argument, NULL, 'd' },
		{ "l3-control", no_argument, NULL, 'L' },
		{ "tcp-measure", no_argument, NULL, 't' },
		{ "tcp-in-order", no_argument, NULL, 'O' },
		{ "capture", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};

	bench_init(&argc, &argv);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'f': n_flows = bench_list(optarg, flows, RTE_DIM(flows)); break;
		case 'n': n_pkts = strtoull(optarg, NULL, 0); break;
		case 'j': json = 1; break;
		case 'w': n_workers = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'p': plain_list = no_codel = 1; break;
		case 'N': plain_list = 1; break;
		case 'C': no_codel = 1; break;
		case 't': tcp_measure = 1; break;
		case 'O': tcp_in_order = 1; break;
		case 'm': {
			/* A subset of modes, e.g. under valgrind --tool=cachegrind,
			 * where each run costs minutes. */
			char *s = optarg, *tok;

			want = 1u << MODE_BASELINE;
			while ((tok = strsep(&s, ",")) != NULL) {
				int m;

				for (m = 0; m < MODE__COUNT && strcmp(tok, mode_name[m]) != 0; m++)
					;
				if (m == MODE__COUNT) {
					fprintf(stderr, "weir-bench: --modes: no mode '%s'\n", tok);
					return 2;
				}
				want |= 1u << m;
			}
			break;
		}
		case 'e': esp_frames = 1; break;
		case 'L': l3_control = true; break;
		case 'c':
			capture_mode = strcmp(optarg, "other") == 0 ? 1 : strcmp(optarg, "class") == 0 ? 2 :
				       strcmp(optarg, "none") == 0 ? 0 : -1;
			if (capture_mode < 0) {
				fprintf(stderr, "weir-bench: --capture none|other|class\n");
				return 2;
			}
			break;
		case 'd': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 0);

			if (*optarg == '\0' || *end != '\0' || v > (1u << 20)) {
				fprintf(stderr, "weir-bench: --depth '%s': a frame count, at most %u\n",
					optarg, 1u << 20);
				return 2;
			}
			depth = (uint32_t)v;
			break;
		}
		default:
			fprintf(stderr, "usage: weir-bench [EAL] -- [--flows N,N] [--packets N] "
					"[--workers N] [--plain-drr] [--no-newflows] [--no-codel] [--modes M,M] [--esp] "
					"[--depth P] [--l3-control] [--tcp-measure] [--tcp-in-order] "
					"[--capture none|other|class] [--json]\n");
			return 2;
		}
	}
	if (esp_frames && n_workers > 1)
		rte_exit(EXIT_FAILURE, "--esp runs one worker\n");
	if (esp_frames)
		want &= (1u << MODE_PFQ_ACK) - 1;       /* the ACK modes need TCP */
	if (n_workers < 1 || n_workers != rte_lcore_count())
		rte_exit(EXIT_FAILURE, "--workers %u needs exactly %u lcores in -l (has %u)\n",
			 n_workers, n_workers, rte_lcore_count());
	depth = RTE_ALIGN_CEIL(depth, 2 * BURST);
	mp = rte_pktmbuf_pool_create("bench_mbufs", (4096 + depth) * n_workers - 1, 256, WEIR_MBUF_PRIV_SIZE,
				     RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
	if (mp == NULL)
		rte_exit(EXIT_FAILURE, "cannot create mempool\n");
	if (capture_mode != 0) {
		if (n_workers > 1)
			rte_exit(EXIT_FAILURE, "--capture runs one worker\n");
		cap_ring = rte_ring_create_elem("bench_cap", sizeof(struct weir_cap_rec), 1024,
						(int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
		cap_pool = rte_pktmbuf_pool_create("bench_cap_copies", 2047, 32, 0,
						   RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
		if (cap_ring == NULL || cap_pool == NULL)
			rte_exit(EXIT_FAILURE, "cannot create the capture ring and pool\n");
	}

	if (json)
		printf("[\n");
	else
		printf("%-10s %-11s %12s %10s %10s %14s %12s%s\n", "flows", "mode", "cycles/pkt",
		       "Mpps/core", "vs base", "bytes/flow", "state B/flow",
		       n_workers > 1 ? " Mpps(all)  scaling" : "");
	for (unsigned int i = 0; i < n_flows; i++) {
		struct result r[MODE__COUNT];
		double par[MODE__COUNT] = { 0 };
		size_t bpf = bytes_per_flow(flows[i]);

		/* One worker then N, mode by mode, so both see the same machine. */
		for (int m = 0; m < MODE__COUNT; m++) {
			if (!(want & (1u << m)))
				continue;
			r[m] = run((enum mode)m, mp, flows[i], n_pkts);
			if (n_workers > 1)
				par[m] = run_parallel((enum mode)m, mp, flows[i], n_pkts, n_workers);
		}
		for (int m = 0; m < MODE__COUNT; m++) {
			double ratio = r[m].cycles_per_pkt / r[MODE_BASELINE].cycles_per_pkt;
			char more[160] = "";

			if (!(want & (1u << m)))
				continue;
			if (m == MODE_SHAPE && json)
				snprintf(more, sizeof(more), ", \"new_per_pkt\": %.4f", r[m].new_per_pkt);
			if (m == MODE_SHAPE && json && depth != 0)
				snprintf(more + strlen(more), sizeof(more) - strlen(more),
					 ", \"depth\": %u, \"backlog\": %u", depth, r[m].backlog);
			else if (m == MODE_SHAPE && depth != 0)
				snprintf(more, sizeof(more),
					 "  depth %u: new-list entries/pkt %.4f, backlog at end %u",
					 depth, r[m].new_per_pkt, r[m].backlog);
			if (json) {
				if (n_workers > 1)
					snprintf(more + strlen(more), sizeof(more) - strlen(more),
						 ", \"workers\": %u, \"mpps_all\": %.2f, "
						 "\"scaling\": %.2f", n_workers, par[m], par[m] / r[m].mpps);
				printf("%s  {\"flows\": %u, \"mode\": \"%s\", \"cycles_per_pkt\": %.1f, "
				       "\"mpps\": %.2f, \"cost_ratio\": %.2f, \"bytes_per_flow\": %zu, "
				       "\"state_bytes_per_flow\": %.0f%s}",
				       n_out++ ? ",\n" : "", flows[i], mode_name[m], r[m].cycles_per_pkt,
				       r[m].mpps, ratio, bpf, r[m].state_bpf, more);
			} else {
				if (n_workers > 1)
					snprintf(more + strlen(more), sizeof(more) - strlen(more),
						 " %9.2f %6.2fx", par[m], par[m] / r[m].mpps);
				printf("%-10u %-11s %12.1f %10.2f %9.2fx %14zu %12.0f%s\n", flows[i],
				       mode_name[m], r[m].cycles_per_pkt, r[m].mpps, ratio, bpf,
				       r[m].state_bpf, more);
			}
		}
	}
	if (json)
		printf("\n]\n");
	else
		printf("ipabr's own state: %zu bytes per flow (both directions; beside the flow "
		       "table's and the ACK store's, which postack and tcr use too)\n",
		       weir_ipabr_bytes_per_flow());
	rte_mempool_free(mp);
	bench_fini();
	return 0;
}
