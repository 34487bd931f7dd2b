/* SPDX-License-Identifier: BSD-3-Clause
 * weir-bench-marker: the cost of DiffServ marking (lib/sched/marker.h) per packet.
 *
 * One worker, one fifo leaf far above what a core can push, 64-byte TCP
 * frames of 1000 flows through weir_worker_process + dequeue + tx, as
 * weir-bench's "+pfq" does: once with no marker (the baseline), then with
 * each marker. Two contracts: "in" (100 Gbit/s, every frame green: the
 * meter's own cost and the DSCP rewrite) and "over" (1 Gbit/s against
 * several Gbit/s offered: most frames red, TBQ's queue full, each arrival
 * pushing its head out). Rounds alternate the variants so a machine that
 * changes speed hits them alike; the table gives medians and the ratio to
 * the fifo leaf of the same round. Each round's figure is the median burst's
 * cycles over BURST: on this shared VM a preempted burst costs millions of
 * cycles, and a mean would measure the neighbours.
 *
 * Usage: weir-bench-marker [EAL args] -- [--packets N] [--rounds R] [--json]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>

#include "harness.h"
#include "flow.h"
#include "marker.h"
#include "mbuf_meta.h"
#include "worker.h"

#define BURST 32
#define FRAME_LEN 64
#define N_FLOWS 1000
#define MAX_ROUNDS 31

struct variant {
	const char *name;
	uint8_t type;
	uint64_t cir;
};

static const struct variant variants[] = {
	{ "fifo", WEIR_MARK_NONE, 0 },
	{ "tb-in", WEIR_MARK_TB, 100000000000ull },
	{ "srtcm-in", WEIR_MARK_SRTCM, 100000000000ull },
	{ "trtcm-in", WEIR_MARK_TRTCM, 100000000000ull },
	{ "tbq-in", WEIR_MARK_TBQ, 100000000000ull },
	{ "carm-in", WEIR_MARK_CARM, 100000000000ull },
	{ "tb-over", WEIR_MARK_TB, 1000000000ull },
	{ "tbq-over", WEIR_MARK_TBQ, 1000000000ull },
	{ "carm-over", WEIR_MARK_CARM, 1000000000ull },
};
#define N_VAR (sizeof(variants) / sizeof(variants[0]))

static void
sink(void *arg, enum weir_port_role to, struct rte_mbuf **pkts, uint16_t n)
{
	RTE_SET_USED(to);
	*(uint64_t *)arg += n;
	rte_pktmbuf_free_bulk(pkts, n);
}

static void
write_frame(uint8_t *f, uint32_t flow)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_tcp_hdr *tcp = (struct rte_tcp_hdr *)(ip + 1);

	memset(f, 0, FRAME_LEN);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16(FRAME_LEN - sizeof(*eth));
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_TCP;
	ip->src_addr = rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 0) | flow);
	ip->dst_addr = rte_cpu_to_be_32(RTE_IPV4(172, 16, 0, 1));
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	tcp->src_port = rte_cpu_to_be_16((uint16_t)(1024 + flow));
	tcp->dst_port = rte_cpu_to_be_16(443);
	tcp->data_off = 0x50;
	tcp->tcp_flags = RTE_TCP_ACK_FLAG;
	tcp->rx_win = rte_cpu_to_be_16(65535);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double
run(const struct variant *v, struct rte_mempool *mp, uint64_t n_pkts)
{
	static uint64_t burst_cyc[(1u << 22) / BURST];
	uint64_t n_b = 0;
	struct weir_policy_class_conf cls = { .name = "m", .rate = 300000000000ull,
					      .mode = WEIR_MODE_FIFO };
	struct weir_policy_conf pc = {
		.tree = { { .rate = 300000000000ull, .n_classes = 1, .classes = &cls,
			    .default_class = "m", .no_aqm = 1 },
			  { .rate = 300000000000ull, .no_aqm = 1 } },
	};
	struct weir_flow_table_conf fc = {
		.name = "bm_flows", .capacity = 4096, .socket_id = (int)rte_socket_id(),
		.tsc_hz = rte_get_tsc_hz(), .timeouts = { 3600, 3600, 3600, 3600, 3600, 3600 },
	};
	uint64_t emitted = 0, cycles = 0, done = 0;
	struct weir_worker_conf wc = { .burst = BURST, .emit = sink, .emit_arg = &emitted };
	struct weir_cbq *sh[WEIR_PORT__COUNT] = { NULL, NULL };
	struct weir_policy_err pe;
	struct weir_policy *p;
	struct weir_flow_table *ft;
	struct weir_worker *w;
	struct rte_mbuf *pkts[BURST];
	uint32_t flow = 0;

	weir_marker_conf_init(&cls.marker);
	cls.marker.type = v->type;
	cls.marker.cir = v->cir;
	cls.marker.pir = v->type == WEIR_MARK_TRTCM ? v->cir : 0;
	if (v->type == WEIR_MARK_TBQ)
		cls.marker.queue = 64;
	p = weir_policy_build(&pc, 1, &pe);
	if (p == NULL)
		rte_exit(EXIT_FAILURE, "policy: %s\n", pe.msg);
	ft = weir_flow_table_create(&fc);
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		struct weir_cbq_class_conf cc[WEIR_CBQ_MAX_CLASSES];
		struct weir_cbq_conf conf = {
			.socket_id = (int)rte_socket_id(), .tsc_hz = rte_get_tsc_hz(), .classes = cc,
			.n_queues = 4096 + 1 + WEIR_POLICY_QUEUES_EXTRA(p), .flow_limit = 64,
		};

		conf.n_classes = weir_policy_cbq_classes(p, d, 1, 1, cc);
		if ((sh[d] = weir_cbq_create(&conf)) == NULL)
			rte_exit(EXIT_FAILURE, "cannot create the shaper (raise -m)\n");
	}
	wc.policy = p;
	w = weir_worker_create(&wc, ft, sh, (int)rte_socket_id());
	if (ft == NULL || w == NULL)
		rte_exit(EXIT_FAILURE, "cannot create the worker\n");
	for (uint64_t warm = 0; done < n_pkts + N_FLOWS; warm++) {
		uint64_t t0, t1;

		if (rte_pktmbuf_alloc_bulk(mp, pkts, BURST) != 0)
			rte_exit(EXIT_FAILURE, "mempool empty\n");
		for (int k = 0; k < BURST; k++) {
			write_frame(rte_pktmbuf_mtod(pkts[k], uint8_t *), flow);
			flow = flow + 1 == N_FLOWS ? 0 : flow + 1;
			pkts[k]->data_len = pkts[k]->pkt_len = FRAME_LEN;
		}
		t0 = rte_rdtsc_precise();
		weir_worker_process(w, pkts, BURST, WEIR_PORT_LAN, rte_rdtsc());
		weir_worker_dequeue(w, WEIR_PORT_LAN, rte_rdtsc(), BURST);
		weir_worker_tx(w);
		t1 = rte_rdtsc_precise();
		/* The first N_FLOWS frames insert the flows: not timed. */
		if (warm * BURST >= N_FLOWS) {
			cycles += t1 - t0;
			if (n_b < RTE_DIM(burst_cyc))
				burst_cyc[n_b++] = t1 - t0;
		}
		done += BURST;
	}
	weir_worker_free(w);
	weir_flow_table_free(ft);
	weir_policy_free(p);
	RTE_SET_USED(cycles);
	qsort(burst_cyc, n_b, sizeof(burst_cyc[0]), cmp_u64);
	return n_b ? (double)burst_cyc[n_b / 2] / BURST : 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "packets", required_argument, NULL, 'n' }, { "rounds", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' }, { NULL, 0, NULL, 0 },
	};
	static double cyc[N_VAR][MAX_ROUNDS], ratio[N_VAR][MAX_ROUNDS];
	uint64_t n_pkts = 2000000;
	unsigned int rounds = 5;
	struct rte_mempool *mp;
	int c, json = 0;

	bench_init(&argc, &argv);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'n': n_pkts = strtoull(optarg, NULL, 0); break;
		case 'r': rounds = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'j': json = 1; break;
		default:
			fprintf(stderr, "usage: weir-bench-marker [EAL] -- [--packets N] [--rounds R] "
				"[--json]\n");
			return 2;
		}
	}
	if (n_pkts > (1u << 22) - 2 * N_FLOWS)
		rte_exit(EXIT_FAILURE, "--packets at most %u\n", (1u << 22) - 2 * N_FLOWS);
	if (rounds < 1 || rounds > MAX_ROUNDS)
		rte_exit(EXIT_FAILURE, "--rounds must be 1..%d\n", MAX_ROUNDS);
	mp = rte_pktmbuf_pool_create("bm_mbufs", 8191, 256, WEIR_MBUF_PRIV_SIZE,
				     RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
	if (mp == NULL)
		rte_exit(EXIT_FAILURE, "cannot create mempool\n");
	for (unsigned int r = 0; r < rounds; r++)
		for (unsigned int v = 0; v < N_VAR; v++) {
			cyc[v][r] = run(&variants[v], mp, n_pkts);
			if (rte_mempool_in_use_count(mp) != 0)
				rte_exit(EXIT_FAILURE, "%s: %u mbufs not returned\n", variants[v].name,
					 rte_mempool_in_use_count(mp));
		}
	for (unsigned int v = 0; v < N_VAR; v++)
		for (unsigned int r = 0; r < rounds; r++)
			ratio[v][r] = cyc[v][r] / cyc[0][r];
	if (json)
		printf("[\n");
	else
		printf("%-10s %12s %10s %16s\n", "marker", "cycles/pkt", "vs fifo", "ratio min-max");
	for (unsigned int v = 0; v < N_VAR; v++) {
		double cs[MAX_ROUNDS], rs[MAX_ROUNDS];

		memcpy(cs, cyc[v], rounds * sizeof(double));
		memcpy(rs, ratio[v], rounds * sizeof(double));
		qsort(cs, rounds, sizeof(double), cmp_double);
		qsort(rs, rounds, sizeof(double), cmp_double);
		if (json)
			printf("  {\"marker\": \"%s\", \"cycles_per_pkt\": %.1f, \"ratio\": %.3f, "
			       "\"ratio_min\": %.3f, \"ratio_max\": %.3f}%s\n", variants[v].name,
			       cs[rounds / 2], rs[rounds / 2], rs[0], rs[rounds - 1],
			       v + 1 == N_VAR ? "" : ",");
		else
			printf("%-10s %12.1f %9.3fx %7.3f-%.3f\n", variants[v].name, cs[rounds / 2],
			       rs[rounds / 2], rs[0], rs[rounds - 1]);
	}
	if (json)
		printf("]\n");
	rte_mempool_free(mp);
	bench_fini();
	return 0;
}
