/* SPDX-License-Identifier: BSD-3-Clause
 * weir-bench-pep: what the pep mode costs per data segment and per ACK.
 *
 * N flows open with a whole handshake (MSS, window scale, SACK, timestamps),
 * then, burst after burst, 16 flows each send one full-size data segment
 * (1514-byte frames: a copy costs its memcpy) that is queued and dequeued,
 * and their receivers' ACKs for it come back. The data bursts and the ACK
 * bursts are timed apart. The same frames run through a pfq leaf in the
 * same process, side by side, for the ratio (this machine is shared and
 * runs at two speeds: absolute cycles mean little, ratios do).
 *
 * pep per data segment: parse, flow, copy (mbuf + memcpy), queue, p-ACK made
 * (checksums), dequeue. Per ACK: SACK/TS read, purge (free the copy), drop.
 *
 * Usage: weir-bench-pep [EAL args] -- [--flows 16,1000] [--rounds N]
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
#include <rte_tcp.h>

#include "harness.h"
#include "flow.h"
#include "mbuf_meta.h"
#include "pep.h"
#include "worker.h"
#include "worker_view.h"

#define HALF 16
#define DATA_LEN 1448

static struct rte_mempool *mp;

struct sink {
	unsigned int n;
	struct rte_mbuf *gone[4 * WEIR_OUT_MAX];
};

static void
emit(void *arg, enum weir_port_role to, struct rte_mbuf **pkts, uint16_t n)
{
	struct sink *s = arg;

	RTE_SET_USED(to);
	if (s->n + n > RTE_DIM(s->gone)) {
		rte_pktmbuf_free_bulk(pkts, n);
		return;
	}
	memcpy(s->gone + s->n, pkts, n * sizeof(*pkts));
	s->n += n;
}

/* One IPv4/TCP frame of flow f: from its LAN sender (rev 0) or its WAN
 * receiver (rev 1), with timestamps, and with the SYN options when syn. */
static struct rte_mbuf *
frame(uint32_t f, int rev, uint8_t flags, uint32_t seq, uint32_t ack, uint16_t len, int syn)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
	static const uint8_t so[] = { 2, 4, 0x05, 0xb4, 4, 2, 1, 3, 3, 7 };
	uint16_t ol = (uint16_t)(syn ? 24 : 12), tl = (uint16_t)(20 + ol);
	uint16_t total = (uint16_t)(14 + 20 + tl + len);
	uint8_t *p, *o;
	struct rte_ipv4_hdr *ip;
	struct rte_tcp_hdr *t;
	uint32_t lan = RTE_IPV4(10, 0, 0, 0) | (f & 0xffff), wan = RTE_IPV4(172, 16, 0, 1);

	if (m == NULL)
		rte_exit(EXIT_FAILURE, "mempool empty\n");
	p = (uint8_t *)rte_pktmbuf_append(m, total);
	memset(p, 0, 14 + 20 + tl);
	p[12] = 0x08;
	p[0] = rev ? 2 : 4;
	p[6] = rev ? 4 : 2;
	ip = (struct rte_ipv4_hdr *)(p + 14);
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(total - 14));
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_TCP;
	ip->src_addr = rte_cpu_to_be_32(rev ? wan : lan);
	ip->dst_addr = rte_cpu_to_be_32(rev ? lan : wan);
	t = (struct rte_tcp_hdr *)(ip + 1);
	t->src_port = rte_cpu_to_be_16(rev ? 443 : (uint16_t)(1024 + f));
	t->dst_port = rte_cpu_to_be_16(rev ? (uint16_t)(1024 + f) : 443);
	t->sent_seq = rte_cpu_to_be_32(seq);
	t->recv_ack = rte_cpu_to_be_32(ack);
	t->data_off = (uint8_t)((tl / 4) << 4);
	t->tcp_flags = flags;
	t->rx_win = rte_cpu_to_be_16(syn ? 65535 : 4000);
	o = (uint8_t *)(t + 1);
	if (syn) {
		memcpy(o, so, sizeof(so));
		o += 12;
	}
	o[0] = 1;
	o[1] = 1;
	o[2] = 8;
	o[3] = 10;
	o[7] = 1;       /* TSval 1 */
	return m;
}

struct res {
	double data, ack;       /* cycles per frame */
	uint64_t packed, dropped;
};

static struct res
run(uint8_t mode, uint32_t n_flows, uint32_t rounds)
{
	const struct weir_policy_conf pc = {
		.tree = { { .rate = WEIR_CBQ_RATE_MAX, .mode = mode },
			  { .rate = WEIR_CBQ_RATE_MAX, .mode = mode } },
	};
	struct weir_flow_table_conf fc = {
		.name = mode == WEIR_MODE_PEP ? "bp_pep" : "bp_pfq", .capacity = n_flows,
		.socket_id = (int)rte_socket_id(), .tsc_hz = rte_get_tsc_hz(),
		.timeouts = { 3600, 3600, 3600, 3600, 3600, 3600 },
	};
	const struct weir_postack_conf pac = {
		.n_flows = n_flows, .n_acks = 4096, .ack_limit = 1024, .idle_us = 20000,
		.mbuf_cap = 2048, .tsc_hz = rte_get_tsc_hz(), .socket_id = (int)rte_socket_id(),
		.mp = mp,
	};
	static struct sink sk;
	struct weir_worker_conf wc = { .burst = 32, .emit = emit, .emit_arg = &sk };
	struct weir_cbq *sh[2];
	struct weir_cbq_class_conf cls[2];
	struct weir_cbq_conf cc = {
		.socket_id = (int)rte_socket_id(), .tsc_hz = rte_get_tsc_hz(), .classes = cls,
		.n_queues = n_flows + 2, .flow_limit = 64, .overhead = 24,
	};
	struct weir_policy_err pe;
	struct weir_policy *pol = weir_policy_build(&pc, 1, &pe);
	struct weir_flow_table *ft = weir_flow_table_create(&fc);
	struct weir_worker *w;
	struct rte_mbuf *b[HALF];
	uint64_t cd = 0, ca = 0, nd = 0, na = 0;
	uint32_t *next = calloc(n_flows, sizeof(uint32_t));
	struct res r = { 0 };

	if (pol == NULL || ft == NULL || next == NULL)
		rte_exit(EXIT_FAILURE, "setup (raise -m)\n");
	wc.policy = pol;
	wc.postack = weir_postack_create(&pac);
	for (int d = 0; d < 2; d++) {
		cc.n_classes = weir_policy_cbq_classes(pol, d, 1, 1, cls);
		sh[d] = weir_cbq_create(&cc);
	}
	w = weir_worker_create(&wc, ft, sh, (int)rte_socket_id());
	if (w == NULL || wc.postack == NULL)
		rte_exit(EXIT_FAILURE, "worker (raise -m)\n");
	for (uint32_t f = 0; f < n_flows; f++) {
		struct rte_mbuf *m;
		uint64_t now = rte_rdtsc();

		m = frame(f, 0, RTE_TCP_SYN_FLAG, 999, 0, 0, 1);
		weir_worker_process(w, &m, 1, WEIR_PORT_LAN, now);
		m = frame(f, 1, RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG, 4999, 1000, 0, 1);
		weir_worker_process(w, &m, 1, WEIR_PORT_WAN, now + 1000);
		m = frame(f, 0, RTE_TCP_ACK_FLAG, 1000, 5000, 0, 0);
		weir_worker_process(w, &m, 1, WEIR_PORT_LAN, now + 2000);
		m = frame(f, 1, RTE_TCP_ACK_FLAG, 5000, 1000, 0, 0);
		weir_worker_process(w, &m, 1, WEIR_PORT_WAN, now + 3000);
		weir_worker_dequeue(w, WEIR_PORT_LAN, rte_rdtsc(), 32);
		weir_worker_dequeue(w, WEIR_PORT_WAN, rte_rdtsc(), 32);
		weir_worker_tx(w);
		rte_pktmbuf_free_bulk(sk.gone, sk.n);
		sk.n = 0;
		next[f] = 1000;
	}
	for (uint32_t i = 0; i < rounds; i++) {
		uint32_t fl[HALF];
		uint64_t t0, t1, t2;

		for (int k = 0; k < HALF; k++) {
			fl[k] = (uint32_t)((i * HALF + (uint32_t)k) % n_flows);
			b[k] = frame(fl[k], 0, RTE_TCP_ACK_FLAG, next[fl[k]], 5000, DATA_LEN, 0);
		}
		t0 = rte_rdtsc_precise();
		weir_worker_process(w, b, HALF, WEIR_PORT_LAN, rte_rdtsc());
		weir_worker_dequeue(w, WEIR_PORT_LAN, rte_rdtsc(), 32);
		weir_worker_tx(w);
		t1 = rte_rdtsc_precise();
		for (int k = 0; k < HALF; k++) {
			next[fl[k]] += DATA_LEN;
			b[k] = frame(fl[k], 1, RTE_TCP_ACK_FLAG, 5000, next[fl[k]], 0, 0);
		}
		t2 = rte_rdtsc_precise();
		weir_worker_process(w, b, HALF, WEIR_PORT_WAN, rte_rdtsc());
		weir_worker_dequeue(w, WEIR_PORT_WAN, rte_rdtsc(), 32);   /* pfq forwards them */
		weir_worker_tx(w);
		ca += rte_rdtsc_precise() - t2;
		cd += t1 - t0;
		nd += HALF;
		na += HALF;
		rte_pktmbuf_free_bulk(sk.gone, sk.n);
		sk.n = 0;
	}
	r.data = (double)cd / (double)nd;
	r.ack = (double)ca / (double)na;
	struct weir_pep_stats ps;

	if (weir_pep_stats_copy(weir_worker_modes_view(w), &ps)) {
		r.packed = ps.packed;
		r.dropped = ps.real_dropped;
	}
	weir_worker_free(w);
	rte_pktmbuf_free_bulk(sk.gone, sk.n);
	sk.n = 0;
	weir_flow_table_free(ft);
	weir_policy_free(pol);
	free(next);
	return r;
}

int
main(int argc, char **argv)
{
	uint32_t flows[8] = { 16, 1000 }, n_fl = 2, rounds = 100000;
	static const struct option opts[] = {
		{ "flows", required_argument, NULL, 'f' },
		{ "rounds", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	bench_init(&argc, &argv);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'f') {
			n_fl = bench_list(optarg, flows, RTE_DIM(flows));
		} else if (c == 'r') {
			rounds = (uint32_t)strtoul(optarg, NULL, 0);
		} else {
			fprintf(stderr, "usage: weir-bench-pep [EAL] -- [--flows N,N] [--rounds N]\n");
			return 2;
		}
	}
	mp = rte_pktmbuf_pool_create("bp_mbufs", 8191, 256, WEIR_MBUF_PRIV_SIZE,
				     RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
	if (mp == NULL)
		rte_exit(EXIT_FAILURE, "cannot create mempool\n");
	printf("%-7s %-5s %12s %12s %10s %10s\n", "flows", "mode", "data cyc", "ack cyc", "p-acked",
	       "acks drop");
	for (uint32_t i = 0; i < n_fl; i++) {
		if (flows[i] > WEIR_PEP_MAX_FLOWS)
			rte_exit(EXIT_FAILURE, "at most %u pep flows per worker\n", WEIR_PEP_MAX_FLOWS);
		/* Interleaved, three times each: the machine's speed drifts. */
		for (int rep = 0; rep < 3; rep++) {
			struct res a = run(WEIR_MODE_PFQ, flows[i], rounds);
			struct res p = run(WEIR_MODE_PEP, flows[i], rounds);

			printf("%-7u %-5s %12.1f %12.1f %10s %10s\n", flows[i], "pfq", a.data, a.ack, "-", "-");
			printf("%-7u %-5s %12.1f %12.1f %10" PRIu64 " %10" PRIu64 "   pep/pfq: data %.2fx, "
			       "ack %.2fx\n", flows[i], "pep", p.data, p.ack, p.packed, p.dropped,
			       p.data / a.data, p.ack / a.ack);
		}
	}
	printf("mbufs in use at the end: %u\n", rte_mempool_in_use_count(mp));
	rte_mempool_free(mp);
	return 0;
}
