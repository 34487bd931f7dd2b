/* SPDX-License-Identifier: BSD-3-Clause
 * weir-bench-sched: weir's class scheduler beside DPDK's librte_sched.
 *
 * Both are fed the same packets in the same order (a fixed pseudo-random
 * sequence of flows, each flow in class flow % classes) and, per burst of
 * 32, enqueue the burst and dequeue up to 32. Rates are far above what one
 * core can push, so neither shapes: this is the cost of the scheduling path.
 *
 *   weir          weir_cbq_enqueue(leaf of the flow, queue = the flow), then
 *                 weir_cbq_dequeue: a DRR queue per flow under a CBQ tree of
 *                 `classes` leaves below the root.
 *   librte_sched  rte_sched_port_pkt_write(subport 0, pipe = class, best-effort
 *                 TC, queue = hash of the flow onto the 4 BE queues), then
 *                 rte_sched_port_enqueue / rte_sched_port_dequeue: one port,
 *                 one subport, one pipe per class. Flows sharing a BE queue
 *                 share a FIFO: librte_sched has no per-flow queues.
 *
 * "enq+deq" rows get each packet's class from the harness (computed outside
 * the timed part); "lookup+enq+deq" rows read it from a per-flow array inside
 * the timed part, as the worker reads it from the flow's table entry after
 * the first packet (the hash lookup of the flow table itself is not included:
 * weir-bench measures it).
 *
 * Every packet carries (flow, per-flow sequence number) in an mbuf dynfield;
 * every dequeued packet is checked against the next number expected of its
 * flow, and each run must give back every packet it took. Any loss or
 * reordering makes the program exit non-zero.
 *
 * --backlog N first queues N packets without dequeuing, so both schedulers
 * then run with a standing queue of N (librte_sched is built for deep queues
 * over many pipes; the default, 0, is an inline shaper that keeps up).
 *
 * Usage: weir-bench-sched [EAL args] -- [--flows N,N] [--classes N,N] [--packets N]
 *                         [--backlog N] [--json]
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_prefetch.h>
#include <rte_sched.h>
#include <rte_tcp.h>

#include "harness.h"
#include "cbq.h"
#include "drr.h"
#include "mbuf_meta.h"

#define BURST 32
#define FRAME_LEN 64
#define OVERHEAD 24                     /* preamble+SFD+IFG+FCS, charged by both */
#define POOL_SIZE 16384                 /* the most packets in flight at once */
#define LINE_BPS 100000000000ull        /* 100 Gbit/s: ~140 Mpps of 64-byte frames */
#define SCHED_QSIZE 1024                /* packets per librte_sched queue */
#define MAX_LIST 16
/* Cycles are summed per chunk of this many packets and the median chunk is
 * reported: on a shared machine a preempted chunk is an outlier, not a
 * shift of the mean. */
#define CHUNK (1024 * BURST)
#define MAX_CHUNKS 4096

enum kind { K_RTE, K_WEIR, K_RTE_LOOKUP, K_WEIR_LOOKUP, K__COUNT };
static const char *const kind_sched[K__COUNT] = { "librte_sched", "weir", "librte_sched", "weir" };
static const char *const kind_work[K__COUNT] = { "enq+deq", "enq+deq", "lookup+enq+deq",
						 "lookup+enq+deq" };

struct result {
	double cycles_per_pkt;  /* median over chunks of CHUNK packets */
	double mean;            /* all timed cycles (drain included) / packets */
	double mpps;            /* from the median */
	size_t mem;             /* heap bytes the scheduler allocated */
	unsigned int backlog;   /* most packets queued after a burst */
};

/* Harness state shared by both schedulers. */
static struct rte_mbuf *stack[POOL_SIZE];   /* free packets, LIFO like a mempool cache */
static unsigned int n_free;
static int tag_off;                         /* dynfield: flow << 32 | sequence number */
static uint32_t *next_seq, *expect;         /* per flow: next number to give, to see */
static uint32_t *flow_class;                /* per flow: class, as a flow entry holds it */
static uint64_t order_errors;

static inline uint64_t *
tag(struct rte_mbuf *m)
{
	return RTE_MBUF_DYNFIELD(m, tag_off, uint64_t *);
}

/* Same stepping as weir-bench: flows visited in a scattered order, so a large
 * table is walked the way real traffic walks it. */
static inline uint32_t
next_flow(uint64_t *state, uint32_t n_flows)
{
	*state += 0x9e3779b97f4a7c15ULL;
	return (uint32_t)((*state >> 32) % n_flows);
}

/* librte_sched puts a pipe's best-effort traffic on 4 queues: a flow gets one
 * of them by hash, so per-flow order holds but flows share FIFOs. */
static inline uint32_t
be_queue(uint32_t flow)
{
	return (flow * 2654435761u) >> 30;
}

/* A 64-byte IPv4/TCP frame of the flow (neither scheduler reads it; it is
 * there so the mbufs are the packets a worker would hold). */
static void
write_frame(struct rte_mbuf *m, uint32_t flow)
{
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_tcp_hdr *tcp = (struct rte_tcp_hdr *)(ip + 1);

	memset(f, 0, FRAME_LEN);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16(FRAME_LEN - sizeof(*eth));
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_TCP;
	ip->src_addr = rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 0) | (flow & 0xffff));
	ip->dst_addr = rte_cpu_to_be_32(RTE_IPV4(172, 16, 0, 0) | (flow >> 16));
	tcp->src_port = rte_cpu_to_be_16((uint16_t)(1024 + flow % 50000));
	tcp->dst_port = rte_cpu_to_be_16(443);
	tcp->data_off = 5 << 4;
	tcp->tcp_flags = RTE_TCP_ACK_FLAG;
	m->data_len = FRAME_LEN;
	m->pkt_len = FRAME_LEN;
}

/* Untimed: the next burst's packets, flows and (harness-computed) classes. */
static void
prepare(struct rte_mbuf **pkts, uint32_t *fl, uint32_t *cl, uint64_t *state, uint32_t n_flows,
	uint32_t n_classes)
{
	if (n_free < BURST)
		rte_exit(EXIT_FAILURE, "backlog reached %u packets: the scheduler falls behind\n",
			 POOL_SIZE - n_free);
	for (int k = 0; k < BURST; k++) {
		struct rte_mbuf *m = stack[--n_free];
		uint32_t f = next_flow(state, n_flows);

		write_frame(m, f);
		*tag(m) = (uint64_t)f << 32 | next_seq[f]++;
		pkts[k] = m;
		fl[k] = f;
		cl[k] = f % n_classes;
	}
}

/* Untimed: per-flow order of what came out; the packets go back to the stack. */
static void
collect(struct rte_mbuf **out, unsigned int n)
{
	for (unsigned int k = 0; k < n; k++) {
		uint64_t t = *tag(out[k]);
		uint32_t f = (uint32_t)(t >> 32), seq = (uint32_t)t;

		if (seq != expect[f])
			order_errors++;
		expect[f] = seq + 1;
		stack[n_free++] = out[k];
	}
}

/* ---- weir ---- */

static struct weir_cbq *
weir_side_create(uint32_t n_flows, uint32_t n_classes)
{
	struct weir_cbq_class_conf *cls = calloc(n_classes + 1, sizeof(*cls));
	struct weir_cbq *c;
	struct weir_cbq_conf cc = {
		.socket_id = (int)rte_socket_id(), .tsc_hz = rte_get_tsc_hz(),
		.n_classes = n_classes + 1, .classes = cls,
		.n_queues = n_flows + 1, .flow_limit = 64, .overhead = OVERHEAD,
	};

	/* Each leaf is guaranteed an even share of the line and may borrow up
	 * to all of it; the traffic is spread evenly, so every leaf stays
	 * green (no borrowing path) and nothing waits for tokens. */
	if (cls == NULL)
		return NULL;
	cls[0].rate = cls[0].ceil = LINE_BPS;
	for (uint32_t i = 1; i <= n_classes; i++) {
		cls[i].parent = 0;
		cls[i].rate = RTE_MAX(LINE_BPS / n_classes, WEIR_CBQ_RATE_MIN);
		cls[i].ceil = LINE_BPS;
	}
	c = weir_cbq_create(&cc);
	free(cls);
	return c;
}

/* Timed: one burst in, then (if deq) up to one burst out. Returns packets
 * dequeued; refused ones are counted in *drops and go back to the stack. */
static inline unsigned int
weir_burst(struct weir_cbq *c, struct rte_mbuf **pkts, const uint32_t *fl, const uint32_t *cl,
	   int lookup, int deq, struct rte_mbuf **out, uint64_t *drops)
{
	const struct weir_drr_qtab *qt = weir_cbq_qtab(c);
	uint64_t now = rte_rdtsc();
	unsigned int n = 0;

	/* As the worker does (prefetch_flow_state): the burst's flow queue
	 * entries asked for before the first is needed; the class comes from
	 * the flow's table entry, which the worker's lookup brought in. */
	for (int k = 0; k < BURST; k++) {
		rte_prefetch0(&qt->q[fl[k]]);
		if (lookup)
			rte_prefetch0(&flow_class[fl[k]]);
	}
	for (int k = 0; k < BURST; k++) {
		uint32_t leaf = 1 + (lookup ? flow_class[fl[k]] : cl[k]);

		if (unlikely(weir_cbq_enqueue(c, leaf, fl[k], pkts[k], now) != WEIR_CBQ_OK)) {
			(*drops)++;
			stack[n_free++] = pkts[k];
		}
	}
	while (deq && n < BURST) {
		struct weir_cbq_deq d;
		struct rte_mbuf *m = weir_cbq_dequeue(c, now, &d);

		if (m == NULL)
			break;
		out[n++] = m;
	}
	return n;
}

/* ---- librte_sched ---- */

static struct rte_sched_port *
rte_side_create(uint32_t n_classes)
{
	/* librte_sched wants a power-of-two number of pipes per subport. */
	uint32_t n_pipes = rte_align32pow2(n_classes);
	uint64_t rate = LINE_BPS / 8;           /* librte_sched counts bytes/s */
	struct rte_sched_subport_profile_params spp = {
		.tb_rate = rate, .tb_size = 1000000, .tc_period = 10,
	};
	struct rte_sched_port_params pp = {
		.name = "bench_sched", .socket = (int)rte_socket_id(), .rate = rate,
		.mtu = 1518, .frame_overhead = OVERHEAD, .n_subports_per_port = 1,
		.subport_profiles = &spp, .n_subport_profiles = 1, .n_max_subport_profiles = 1,
		.n_pipes_per_subport = n_pipes,
	};
	struct rte_sched_pipe_params pipe = {
		.tb_rate = rate, .tb_size = 1000000, .tc_period = 10, .tc_ov_weight = 1,
		.wrr_weights = { 1, 1, 1, 1 },
	};
	struct rte_sched_subport_params sp = {
		.n_pipes_per_subport_enabled = n_pipes, .pipe_profiles = &pipe,
		.n_pipe_profiles = 1, .n_max_pipe_profiles = 1, .cman_params = NULL,
	};
	struct rte_sched_port *port;

	/* The subport must have a rate for every TC; a pipe only for the TCs
	 * with queues. Only best effort has queues: all traffic is in it. */
	for (int i = 0; i < RTE_SCHED_TRAFFIC_CLASSES_PER_PIPE; i++)
		spp.tc_rate[i] = rate;
	pipe.tc_rate[RTE_SCHED_TRAFFIC_CLASS_BE] = rate;
	/* Past 16K pipes its queue memory (4 x qsize mbuf pointers a pipe and
	 * more) no longer fits a few GB: shorter queues there, still far
	 * above the standing queue of these runs (--backlog 0). */
	sp.qsize[RTE_SCHED_TRAFFIC_CLASS_BE] = n_pipes > 16384 ? 64 : SCHED_QSIZE;

	port = rte_sched_port_config(&pp);
	if (port == NULL)
		return NULL;
	if (rte_sched_subport_config(port, 0, &sp, 0) != 0)
		goto fail;
	for (uint32_t p = 0; p < n_pipes; p++)
		if (rte_sched_pipe_config(port, 0, p, 0) != 0)
			goto fail;
	return port;
fail:
	rte_sched_port_free(port);
	return NULL;
}

static inline unsigned int
rte_burst(struct rte_sched_port *port, struct rte_mbuf **pkts, const uint32_t *fl,
	  const uint32_t *cl, int lookup, int deq, struct rte_mbuf **out, uint64_t *drops)
{
	int in;

	if (lookup)
		for (int k = 0; k < BURST; k++)
			rte_prefetch0(&flow_class[fl[k]]);
	for (int k = 0; k < BURST; k++)
		rte_sched_port_pkt_write(port, pkts[k], 0, lookup ? flow_class[fl[k]] : cl[k],
					 RTE_SCHED_TRAFFIC_CLASS_BE, be_queue(fl[k]),
					 RTE_COLOR_GREEN);
	/* librte_sched frees what it refuses: those packets are lost to the
	 * stack, and the run fails on the count. */
	in = rte_sched_port_enqueue(port, pkts, BURST);
	*drops += (uint64_t)(BURST - in);
	return deq ? (unsigned int)rte_sched_port_dequeue(port, out, BURST) : 0;
}

/* ---- the run ---- */

static size_t
heap_bytes(void)
{
	struct rte_malloc_socket_stats s;

	rte_malloc_get_socket_stats((int)rte_socket_id(), &s);
	return s.heap_allocsz_bytes;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static struct result
run(enum kind kd, uint32_t n_flows, uint32_t n_classes, uint64_t n_pkts, uint64_t prefill)
{
	const int is_weir = kd == K_WEIR || kd == K_WEIR_LOOKUP;
	const int lookup = kd == K_RTE_LOOKUP || kd == K_WEIR_LOOKUP;
	struct weir_cbq *cbq = NULL;
	struct rte_sched_port *port = NULL;
	struct rte_mbuf *pkts[BURST], *out[BURST];
	uint32_t fl[BURST];
	uint32_t cl[BURST];
	uint64_t state = 1, cycles = 0, drops = 0, in = 0, outn = 0, t0, t1;
	uint64_t warm = RTE_ALIGN_CEIL((uint64_t)n_flows + 8 * CHUNK + prefill, BURST);
	size_t before = heap_bytes();
	struct result r = { .backlog = 0 };
	static uint64_t chunk[MAX_CHUNKS];
	unsigned int idle, n_chunks;

	n_pkts = RTE_ALIGN_CEIL(RTE_MAX(n_pkts, (uint64_t)CHUNK), CHUNK);
	n_chunks = (unsigned int)RTE_MIN(n_pkts / CHUNK, (uint64_t)MAX_CHUNKS);
	n_pkts = (uint64_t)n_chunks * CHUNK;
	memset(chunk, 0, sizeof(chunk));
	if (is_weir)
		cbq = weir_side_create(n_flows, n_classes);
	else
		port = rte_side_create(n_classes);
	if (cbq == NULL && port == NULL)
		rte_exit(EXIT_FAILURE, "cannot create %s for %u flows, %u classes (raise -m)\n",
			 kind_sched[kd], n_flows, n_classes);
	r.mem = heap_bytes() - before;

	memset(next_seq, 0, n_flows * sizeof(*next_seq));
	memset(expect, 0, n_flows * sizeof(*expect));
	for (uint32_t f = 0; f < n_flows; f++)
		flow_class[f] = f % n_classes;
	order_errors = 0;

	/* Warm up with as many packets as flows (and some) untimed, so every
	 * flow's state has been touched once and the timed part is steady. */
	for (uint64_t i = 0; i < warm + n_pkts; i += BURST) {
		unsigned int n;

		prepare(pkts, fl, cl, &state, n_flows, n_classes);
		t0 = rte_rdtsc_precise();
		if (is_weir)
			n = weir_burst(cbq, pkts, fl, cl, lookup, i >= prefill, out, &drops);
		else
			n = rte_burst(port, pkts, fl, cl, lookup, i >= prefill, out, &drops);
		t1 = rte_rdtsc_precise();
		if (i >= warm) {
			cycles += t1 - t0;
			chunk[(i - warm) / CHUNK] += t1 - t0;
		}
		in += BURST;
		outn += n;
		collect(out, n);
		r.backlog = RTE_MAX(r.backlog, POOL_SIZE - n_free);
	}
	/* Whatever is still queued is part of the work: drain it timed. */
	t0 = rte_rdtsc_precise();
	for (idle = 0; outn + drops < in && idle < 1000;) {
		unsigned int n = 0;

		if (is_weir) {
			struct weir_cbq_deq d;
			struct rte_mbuf *m;

			while (n < BURST && (m = weir_cbq_dequeue(cbq, rte_rdtsc(), &d)) != NULL)
				out[n++] = m;
		} else {
			n = (unsigned int)rte_sched_port_dequeue(port, out, BURST);
		}
		idle = n == 0 ? idle + 1 : 0;
		outn += n;
		collect(out, n);
	}
	t1 = rte_rdtsc_precise();
	cycles += t1 - t0;

	if (drops != 0 || outn + drops != in || order_errors != 0)
		rte_exit(EXIT_FAILURE, "%s, %u flows, %u classes: %" PRIu64 " in, %" PRIu64
			 " out, %" PRIu64 " refused, %" PRIu64 " out of per-flow order\n",
			 kind_sched[kd], n_flows, n_classes, in, outn, drops, order_errors);
	if (n_free != POOL_SIZE)
		rte_exit(EXIT_FAILURE, "%u packets missing after the run\n", POOL_SIZE - n_free);

	weir_cbq_free(cbq);
	rte_sched_port_free(port);
	qsort(chunk, n_chunks, sizeof(chunk[0]), cmp_u64);
	r.cycles_per_pkt = (double)chunk[n_chunks / 2] / CHUNK;
	r.mean = (double)cycles / (double)n_pkts;
	r.mpps = (double)rte_get_tsc_hz() / r.cycles_per_pkt / 1e6;
	return r;
}

int
main(int argc, char **argv)
{
	uint32_t flows[MAX_LIST] = { 1000, 65536, 1048576 }, classes[MAX_LIST] = { 1, 16, 256 };
	unsigned int n_flows = 3, n_classes = 3, first = 1;
	uint32_t max_flows = 0;
	uint64_t n_pkts = 4000000, backlog = 0;
	int json = 0, c;
	struct rte_mempool *mp;
	static const struct rte_mbuf_dynfield tag_desc = {
		.name = "weir_bench_sched_tag", .size = sizeof(uint64_t),
		.align = __alignof__(uint64_t),
	};
	static const struct option opts[] = {
		{ "flows", required_argument, NULL, 'f' },
		{ "classes", required_argument, NULL, 'c' },
		{ "packets", required_argument, NULL, 'n' },
		{ "backlog", required_argument, NULL, 'b' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};

	bench_init(&argc, &argv);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'f': n_flows = bench_list(optarg, flows, MAX_LIST); break;
		case 'c': n_classes = bench_list(optarg, classes, MAX_LIST); break;
		case 'n': n_pkts = strtoull(optarg, NULL, 0); break;
		case 'b': backlog = RTE_ALIGN_CEIL(strtoull(optarg, NULL, 0), BURST); break;
		case 'j': json = 1; break;
		default:
			fprintf(stderr, "usage: weir-bench-sched [EAL] -- [--flows N,N] "
				"[--classes N,N] [--packets N] [--backlog N] [--json]\n");
			return 2;
		}
	}
	if (backlog > POOL_SIZE / 2)
		rte_exit(EXIT_FAILURE, "--backlog: at most %d\n", POOL_SIZE / 2);
	for (unsigned int i = 0; i < n_flows; i++) {
		if (flows[i] == 0 || flows[i] > UINT32_MAX - 1)
			rte_exit(EXIT_FAILURE, "bad flow count\n");
		max_flows = RTE_MAX(max_flows, flows[i]);
	}
	for (unsigned int i = 0; i < n_classes; i++)
		if (classes[i] == 0 || classes[i] >= WEIR_CBQ_CAPACITY_MAX)
			rte_exit(EXIT_FAILURE, "classes must be 1..%u\n", WEIR_CBQ_CAPACITY_MAX - 1);

	tag_off = rte_mbuf_dynfield_register(&tag_desc);
	if (tag_off < 0)
		rte_exit(EXIT_FAILURE, "cannot register the mbuf tag\n");
	/* Small data rooms: the frames are 64 bytes and memory is tight without
	 * hugepages. The private area is weir's (it chains its flow queues). */
	mp = rte_pktmbuf_pool_create("sched_mbufs", POOL_SIZE, 0, WEIR_MBUF_PRIV_SIZE,
				     RTE_PKTMBUF_HEADROOM + 128, (int)rte_socket_id());
	if (mp == NULL || rte_pktmbuf_alloc_bulk(mp, stack, POOL_SIZE) != 0)
		rte_exit(EXIT_FAILURE, "cannot create mempool\n");
	n_free = POOL_SIZE;
	next_seq = calloc(max_flows, sizeof(*next_seq));
	expect = calloc(max_flows, sizeof(*expect));
	flow_class = calloc(max_flows, sizeof(*flow_class));
	if (next_seq == NULL || expect == NULL || flow_class == NULL)
		rte_exit(EXIT_FAILURE, "out of memory\n");

	if (json)
		printf("[\n");
	else
		printf("%-7s %-7s %-12s %-14s %10s %9s %8s %8s %7s %10s\n", "flows", "classes",
		       "scheduler", "timed", "cycles/pkt", "Mpps/core", "weir/rte", "mean", "backlog",
		       "heap bytes");
	for (unsigned int i = 0; i < n_flows; i++) {
		for (unsigned int j = 0; j < n_classes; j++) {
			struct result r[K__COUNT];

			/* librte_sched first, then weir, for each of the two
			 * amounts of work: each ratio compares runs made close
			 * together on this shared machine. */
			for (int k = 0; k < K__COUNT; k++)
				r[k] = run((enum kind)k, flows[i], classes[j], n_pkts,
					   backlog);
			for (int k = 0; k < K__COUNT; k++) {
				int w = k == K_WEIR || k == K_WEIR_LOOKUP;
				double ratio = w ? r[k].cycles_per_pkt / r[k - 1].cycles_per_pkt : 1.0;

				if (json) {
					printf("%s  {\"flows\": %u, \"classes\": %u, \"scheduler\": \"%s\", "
					       "\"timed\": \"%s\", \"cycles_per_pkt\": %.1f, "
					       "\"mpps\": %.2f, \"ratio_vs_rte_sched\": %.2f, "
					       "\"mean_cycles_per_pkt\": %.1f, \"max_backlog\": %u, "
					       "\"heap_bytes\": %zu}",
					       first ? "" : ",\n", flows[i], classes[j], kind_sched[k],
					       kind_work[k], r[k].cycles_per_pkt, r[k].mpps, ratio,
					       r[k].mean, r[k].backlog, r[k].mem);
					first = 0;
				} else {
					printf("%-7u %-7u %-12s %-14s %10.1f %9.2f ", flows[i],
					       classes[j], kind_sched[k], kind_work[k],
					       r[k].cycles_per_pkt, r[k].mpps);
					if (w)
						printf("%7.2fx", ratio);
					else
						printf("%8s", "");
					printf(" %8.1f %7u %10zu\n", r[k].mean, r[k].backlog, r[k].mem);
				}
				fflush(stdout);
			}
		}
	}
	if (json)
		printf("\n]\n");
	rte_pktmbuf_free_bulk(stack, n_free);
	rte_mempool_free(mp);
	free(next_seq);
	free(expect);
	free(flow_class);
	bench_fini();
	return 0;
}
