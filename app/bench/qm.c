/* SPDX-License-Identifier: BSD-3-Clause
 * weir-bench-qm: what a fifo leaf's queue manager (lib/sched/qm.h) costs per packet.
 *
 * One fifo leaf under a root, fed bursts of 32 frames of 1000 bytes from
 * `flows` flows (frames carry IPv4 addresses and ports, so the flow key is
 * hashed as in the worker) plus 4 flood flows that send a third of the
 * frames. The tree's clock is synthetic: each burst advances it by the time
 * the link needs for 2/3 of a burst, so arrivals are 1.5x the link and the
 * queue stands, as in the thesis' Experiment 1: RED's average sits between
 * its thresholds, CHOKe draws and compares, PQM has a price, drops and a
 * monitored set. Timed per burst: 32 weir_cbq_enqueue calls (drops freed),
 * then weir_cbq_dequeue until the link's allowance is spent. The baseline
 * is the same leaf without a queue manager (tail drop at the limit).
 *
 * Reported per manager: cycles per offered packet, the ratio to the plain
 * fifo beside it (interleaved rounds, the median of each), the fraction
 * dropped, and the manager's state in bytes (the monitored set's included).
 *
 * Usage: weir-bench-qm [EAL args] -- [--flows N] [--packets N] [--rounds N]
 *                      [--monitor N] [--json]
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "harness.h"
#include "cbq.h"
#include "mbuf_meta.h"

#define BURST 32
#define FRAME_LEN 1000
#define LINK_BPS 1000000000ull          /* the synthetic clock makes it 1.5x loaded */
#define LIMIT 300

static const enum weir_qm_kind kinds[] = { WEIR_QM_NONE, WEIR_QM_RED, WEIR_QM_CHOKE,
					   WEIR_QM_PQM, WEIR_QM_PQM_PB };
#define N_KINDS RTE_DIM(kinds)

struct result {
	double cycles;          /* per offered packet */
	double dropped;         /* fraction */
	uint64_t state_bytes;
	uint32_t monitored;
};

static void
write_frame(struct rte_mbuf *m, uint32_t flow)
{
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + RTE_ETHER_HDR_LEN);
	struct weir_pkt *p = &weir_mbuf_meta(m)->pkt;

	m->data_len = m->pkt_len = FRAME_LEN;
	ip->src_addr = rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 0) | (flow & 0xffff));
	ip->dst_addr = rte_cpu_to_be_32(RTE_IPV4(172, 16, 0, 0) | (flow >> 16));
	memset(p, 0, sizeof(*p));
	p->l3 = WEIR_L3_IPV4;
	p->l3_off = RTE_ETHER_HDR_LEN;
	p->addr_len = 4;
	p->saddr_off = 12;
	p->l4proto = 6;
	p->sport = (uint16_t)(1024 + flow % 50000);
	p->dport = 443;
	p->flags = WEIR_PF_L4;
}

static struct result
run(struct rte_mempool *mp, enum weir_qm_kind kind, uint32_t n_flows, uint64_t n_pkts,
    uint32_t monitor)
{
	const uint64_t hz = rte_get_tsc_hz();
	struct weir_qm_params par = { .monitor = monitor };
	struct weir_cbq_class_conf cls[2] = {
		{ .rate = LINK_BPS },
		{ .parent = 0, .rate = LINK_BPS, .limit = LIMIT, .fifo = 1, .qm = (uint8_t)kind },
	};
	struct weir_cbq_conf conf = {
		.socket_id = (int)rte_socket_id(), .tsc_hz = hz, .n_classes = 2, .classes = cls,
		.n_queues = 2, .flow_limit = 64, .qm_params = &par,
	};
	struct weir_cbq *c = weir_cbq_create(&conf);
	/* 2/3 of a burst of wire bytes at the link's rate: 1.5x offered. */
	const uint64_t step = (uint64_t)((double)BURST * 2 / 3 * FRAME_LEN * 8 * hz / LINK_BPS);
	struct rte_mbuf *pkts[BURST];
	struct weir_cbq_deq d;
	uint64_t now = hz, state = 1, cycles = 0, done = 0, drops = 0;
	struct weir_qm_stats qs = { 0 };
	struct result r;

	if (c == NULL)
		rte_exit(EXIT_FAILURE, "cannot create the tree\n");
	while (done < n_pkts) {
		uint64_t t0, t1;
		struct rte_mbuf *m;

		if (rte_pktmbuf_alloc_bulk(mp, pkts, BURST) != 0)
			rte_exit(EXIT_FAILURE, "mempool empty\n");
		for (int k = 0; k < BURST; k++) {
			uint32_t fl;

			state += 0x9e3779b97f4a7c15ULL;
			/* A third of the frames are the 4 floods' (flows 0-3). */
			fl = (state >> 60) < 5 ? (uint32_t)((state >> 8) & 3) :
				4 + (uint32_t)((state >> 20) % n_flows);
			write_frame(pkts[k], fl);
		}
		now += step;
		t0 = rte_rdtsc_precise();
		for (int k = 0; k < BURST; k++)
			if (weir_cbq_enqueue(c, 1, 0, pkts[k], now) != 0) {
				rte_pktmbuf_free(pkts[k]);
				drops++;
			}
		while ((m = weir_cbq_dequeue(c, now, &d)) != NULL || d.n_dropped) {
			for (uint16_t j = 0; j < d.n_dropped; j++) {
				rte_pktmbuf_free(d.dropped[j]);
				drops++;
			}
			if (m == NULL)
				break;
			rte_pktmbuf_free(m);
		}
		t1 = rte_rdtsc_precise();
		cycles += t1 - t0;
		done += BURST;
	}
	if (weir_cbq_qm_stats(c, 1, &qs) != 0)
		qs.state_bytes = 0;
	r = (struct result){ .cycles = (double)cycles / (double)done,
			     .dropped = (double)drops / (double)done,
			     .state_bytes = qs.state_bytes, .monitored = qs.monitored };
	{
		struct rte_mbuf *out[64];
		unsigned int n;

		while ((n = weir_cbq_drain(c, 1, 0, out, RTE_DIM(out))) > 0)
			rte_pktmbuf_free_bulk(out, n);
	}
	weir_cbq_free(c);
	return r;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	uint32_t n_flows = 1000, monitor = 64;
	uint64_t n_pkts = 2000000;
	unsigned int rounds = 5;
	int json = 0, c;
	struct rte_mempool *mp;
	static const struct option opts[] = {
		{ "flows", required_argument, NULL, 'f' },
		{ "packets", required_argument, NULL, 'n' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "monitor", required_argument, NULL, 'm' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	double cyc[N_KINDS][64], ratio[N_KINDS][64];
	struct result last[N_KINDS];

	bench_init(&argc, &argv);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'f': n_flows = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'n': n_pkts = strtoull(optarg, NULL, 0); break;
		case 'r': rounds = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'm': monitor = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'j': json = 1; break;
		default:
			fprintf(stderr, "usage: weir-bench-qm [EAL] -- [--flows N] [--packets N] "
					"[--rounds N] [--monitor N] [--json]\n");
			return 2;
		}
	}
	if (n_flows == 0 || rounds == 0 || rounds > 64 || monitor == 0 ||
	    monitor > WEIR_QM_MONITOR_MAX)
		rte_exit(EXIT_FAILURE, "bad arguments\n");
	mp = rte_pktmbuf_pool_create("bench_qm", 4095, 256, WEIR_MBUF_PRIV_SIZE,
				     RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
	if (mp == NULL)
		rte_exit(EXIT_FAILURE, "cannot create mempool\n");
	/* Interleaved rounds: every manager and the plain fifo see the same
	 * machine (it runs at two speeds, NOTES.md); ratios are per round. */
	for (unsigned int r = 0; r < rounds; r++)
		for (unsigned int k = 0; k < N_KINDS; k++) {
			last[k] = run(mp, kinds[k], n_flows, n_pkts, monitor);
			cyc[k][r] = last[k].cycles;
		}
	for (unsigned int k = 0; k < N_KINDS; k++)
		for (unsigned int r = 0; r < rounds; r++)
			ratio[k][r] = cyc[k][r] / cyc[0][r];
	if (json)
		printf("[\n");
	else
		printf("%-8s %12s %10s %10s %9s %12s %10s\n", "qm", "cycles/pkt", "vs fifo",
		       "(min-max)", "dropped", "state bytes", "monitored");
	for (unsigned int k = 0; k < N_KINDS; k++) {
		double med_c, med_r, lo, hi;

		qsort(cyc[k], rounds, sizeof(double), cmp_double);
		qsort(ratio[k], rounds, sizeof(double), cmp_double);
		med_c = cyc[k][rounds / 2];
		med_r = ratio[k][rounds / 2];
		lo = ratio[k][0];
		hi = ratio[k][rounds - 1];
		if (json)
			printf("  {\"qm\": \"%s\", \"cycles_per_pkt\": %.1f, \"ratio\": %.3f, "
			       "\"ratio_min\": %.3f, \"ratio_max\": %.3f, \"dropped\": %.3f, "
			       "\"state_bytes\": %" PRIu64 ", \"monitored\": %u, \"flows\": %u}%s\n",
			       weir_qm_name(kinds[k]), med_c, med_r, lo, hi, last[k].dropped,
			       last[k].state_bytes, last[k].monitored, n_flows,
			       k + 1 == N_KINDS ? "" : ",");
		else
			printf("%-8s %12.1f %9.2fx %4.2f-%4.2f %8.1f%% %12" PRIu64 " %10u\n",
			       weir_qm_name(kinds[k]), med_c, med_r, lo, hi, 100 * last[k].dropped,
			       last[k].state_bytes, last[k].monitored);
	}
	if (json)
		printf("]\n");
	rte_mempool_free(mp);
	bench_fini();
	return 0;
}
