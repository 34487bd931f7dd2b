/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for the pep mode (lib/modes/pep.c) through a whole worker
 * (test/unit/rig.h) on a fake clock: p-ACKs made for data on its way
 * (checksums, timestamps, window), the watermark and withheld p-ACKs
 * released by real ACKs, real ACKs dropped, SACK purge, recovery from the
 * copies on duplicate ACKs and on the timeout, the give-up RSTs, the
 * limits (FIN, zero window, flows begun before the mode), IPv6, and every
 * copy back in the pool at the end.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>

#include "pep.h"
#include "unit.h"
#include "rig.h"

#define ISN_S 1000u             /* the LAN sender's first sequence number */
#define ISN_R 5000u

/* One TCP frame between 10.0.0.1:4000 (LAN, the data sender S) and
 * 192.0.2.1:80 (WAN, R), or fd00::1 / 2001:db8::1 with v6. */
struct seg {
	int in;                 /* R -> S */
	int v6;
	uint8_t flags;
	uint32_t seq, ack;
	uint16_t win;
	uint16_t len;
	int syn_opts;           /* MSS 1460, SACK permitted, wscale 7 */
	int ts;
	uint32_t tsval, tsecr;
	int n_sack;
	uint32_t sack[8];
	int ext;                /* v6: an 8-byte destination options header before TCP */
};

/* TCP over IPv6 whatever headers sit between: the pseudo header's length
 * is the TCP segment's, its next header TCP (RFC 8200 sec. 8.1). */
static uint16_t
tcp6_cksum(const uint8_t *ip, const uint8_t *tcp, uint32_t l4_len)
{
	uint32_t sum = 0;
	uint16_t ck;

	sum += rte_raw_cksum(ip + 8, 32);
	sum += rte_cpu_to_be_16((uint16_t)(l4_len >> 16)) + rte_cpu_to_be_16((uint16_t)l4_len);
	sum += rte_cpu_to_be_16(IPPROTO_TCP);
	sum = (sum & 0xffff) + (sum >> 16);
	ck = (uint16_t)~__rte_raw_cksum_reduce(sum + __rte_raw_cksum(tcp, l4_len, 0));
	return ck;
}

/* Set: every segment mk() makes carries a TCP-MD5 signature (RFC 2385's
 * option, 18 bytes; the digest is not checked here). */
static int sign_md5;

static struct rte_mbuf *
mk(const struct seg *s)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
	uint8_t opt[80];
	unsigned int ol = 0, ipl = s->v6 ? (s->ext ? 48 : 40) : 20, tl;
	uint8_t *f, *ip, *tcp;
	static const uint8_t lan4[4] = { 10, 0, 0, 1 }, wan4[4] = { 192, 0, 2, 1 };
	static const uint8_t lan6[16] = { 0xfd, 0, [15] = 1 }, wan6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };

	if (s->syn_opts) {
		static const uint8_t so[] = { 2, 4, 0x05, 0xb4, 4, 2, 1, 3, 3, 7 };

		memcpy(opt, so, sizeof(so));
		ol = sizeof(so);
	}
	if (s->ts) {
		opt[ol++] = 1;
		opt[ol++] = 1;
		opt[ol++] = 8;
		opt[ol++] = 10;
		for (int i = 3; i >= 0; i--)
			opt[ol++] = (uint8_t)(s->tsval >> (8 * i));
		for (int i = 3; i >= 0; i--)
			opt[ol++] = (uint8_t)(s->tsecr >> (8 * i));
	}
	if (s->n_sack) {
		opt[ol++] = 1;
		opt[ol++] = 1;
		opt[ol++] = 5;
		opt[ol++] = (uint8_t)(2 + 8 * s->n_sack);
		for (int b = 0; b < 2 * s->n_sack; b++)
			for (int i = 3; i >= 0; i--)
				opt[ol++] = (uint8_t)(s->sack[b] >> (8 * i));
	}
	if (sign_md5) {
		opt[ol++] = 19;
		opt[ol++] = 18;
		for (int i = 0; i < 16; i++)
			opt[ol++] = (uint8_t)(0xa0 + i);
	}
	while (ol % 4)
		opt[ol++] = 1;
	tl = 20 + ol;
	f = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(14 + ipl + tl + s->len));
	memset(f, 0, 14 + ipl + tl + s->len);
	f[0] = s->in ? 0x02 : 0x04;     /* dst MAC: S's 02:.., R's 04:.. */
	f[6] = s->in ? 0x04 : 0x02;
	f[12] = s->v6 ? 0x86 : 0x08;
	f[13] = s->v6 ? 0xdd : 0x00;
	ip = f + 14;
	tcp = ip + ipl;
	if (s->v6) {
		struct rte_ipv6_hdr *h = (struct rte_ipv6_hdr *)ip;

		h->vtc_flow = rte_cpu_to_be_32(6u << 28);
		h->payload_len = rte_cpu_to_be_16((uint16_t)(ipl - 40 + tl + s->len));
		h->proto = s->ext ? 60 : IPPROTO_TCP;
		h->hop_limits = 64;
		memcpy(h->src_addr, s->in ? wan6 : lan6, 16);
		memcpy(h->dst_addr, s->in ? lan6 : wan6, 16);
		if (s->ext) {   /* next header TCP, length 0 (8 bytes), PadN of 4 */
			static const uint8_t dst_opts[8] = { IPPROTO_TCP, 0, 1, 4, 0, 0, 0, 0 };

			memcpy(ip + 40, dst_opts, 8);
		}
	} else {
		struct rte_ipv4_hdr *h = (struct rte_ipv4_hdr *)ip;

		h->version_ihl = 0x45;
		h->total_length = rte_cpu_to_be_16((uint16_t)(ipl + tl + s->len));
		h->time_to_live = 64;
		h->next_proto_id = IPPROTO_TCP;
		memcpy(&h->src_addr, s->in ? wan4 : lan4, 4);
		memcpy(&h->dst_addr, s->in ? lan4 : wan4, 4);
		h->hdr_checksum = rte_ipv4_cksum(h);
	}
	{
		struct rte_tcp_hdr *t = (struct rte_tcp_hdr *)tcp;

		t->src_port = rte_cpu_to_be_16(s->in ? 80 : 4000);
		t->dst_port = rte_cpu_to_be_16(s->in ? 4000 : 80);
		t->sent_seq = rte_cpu_to_be_32(s->seq);
		t->recv_ack = rte_cpu_to_be_32(s->ack);
		t->data_off = (uint8_t)((tl / 4) << 4);
		t->tcp_flags = s->flags;
		t->rx_win = rte_cpu_to_be_16(s->win);
		memcpy(tcp + 20, opt, ol);
		for (unsigned int i = 0; i < s->len; i++)
			tcp[tl + i] = (uint8_t)(s->seq + i);
		t->cksum = s->v6 ? tcp6_cksum(ip, tcp, tl + s->len) :
			   rte_ipv4_udptcp_cksum((struct rte_ipv4_hdr *)ip, t);
	}
	return m;
}

/* What a frame the worker sent says. */
struct seen {
	int v6;
	uint8_t flags;
	uint32_t seq, ack;
	uint16_t win;
	uint16_t sport;
	uint16_t len;           /* payload */
	int ts;
	uint32_t tsval, tsecr;
	int cksum_ok;
};

static struct seen
look(struct rte_mbuf *m)
{
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	struct seen s = { 0 };
	struct weir_pkt p;

	weir_parse(f, m->data_len, &p);
	s.v6 = p.l3 == WEIR_L3_IPV6;
	s.flags = p.tcp_flags;
	s.seq = p.seq;
	s.ack = p.ack;
	s.win = p.win;
	s.sport = p.sport;
	s.len = p.payload_len;
	if (p.flags & WEIR_PF_TCP_TS) {
		const uint8_t *o = f + p.l4_off + p.ts_off;

		s.ts = 1;
		s.tsval = (uint32_t)o[0] << 24 | (uint32_t)o[1] << 16 | (uint32_t)o[2] << 8 | o[3];
		s.tsecr = (uint32_t)o[4] << 24 | (uint32_t)o[5] << 16 | (uint32_t)o[6] << 8 | o[7];
	}
	if (s.v6)
		s.cksum_ok = rte_ipv6_udptcp_cksum_verify(
			(const struct rte_ipv6_hdr *)(f + p.l3_off), f + p.l4_off) == 0;
	else
		s.cksum_ok = rte_ipv4_cksum((const struct rte_ipv4_hdr *)(f + p.l3_off)) == 0 &&
			     rte_ipv4_udptcp_cksum_verify((const struct rte_ipv4_hdr *)(f + p.l3_off),
							  f + p.l4_off) == 0;
	return s;
}

static const uint64_t *hzp;

/* pep's counters as they are now: a copy taken at each call, in one
 * buffer (NULL: pep has no state on w). */
static const struct weir_pep_stats *
pep_now(const struct weir_worker *w)
{
	static struct weir_pep_stats s;

	return weir_pep_stats_copy(&w->svc, &s) ? &s : NULL;
}
/* In the tests below, on their rig r. */
#define ST pep_now(r.w)
#define MS (*hzp / 1000)

/* A pep class of 8 Mbit/s (1 MB/s) for uploads; downloads unshaped. */
static int
make(struct rig *r, const char *name)
{
	static struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .mode = WEIR_MODE_PEP }, { .rate = 0 } },
	};

	return rig_make_pa(r, &pc, name, 64);
}

static uint16_t
feed_seg(struct rig *r, const struct seg *s, uint64_t now)
{
	return feed(r, mk(s), s->in, now);
}

/* Everything queued for the WAN leaves (the class lets it go eventually). */
static unsigned int
drain_up(struct rig *r, uint64_t now)
{
	struct rte_mbuf *o[64];
	unsigned int total = 0;
	uint16_t n;

	for (int k = 0; k < 200; k++) {
		n = rig_dequeue(r, WEIR_PORT_LAN, now + (uint64_t)k * 2 * MS, o, 64);
		rte_pktmbuf_free_bulk(o, n);
		total += n;
	}
	return total;
}

/* The handshake, R 40 ms beyond the gateway, S 1 ms before it. */
static void
handshake(struct rig *r, int v6, int ts, uint64_t t0)
{
	feed_seg(r, &(struct seg){ .v6 = v6, .flags = SYN, .seq = ISN_S - 1, .win = 65535,
				   .syn_opts = 1, .ts = ts, .tsval = 100 }, t0);
	feed_seg(r, &(struct seg){ .in = 1, .v6 = v6, .flags = SYN | ACK, .seq = ISN_R - 1,
				   .ack = ISN_S, .win = 65535, .syn_opts = 1, .ts = ts, .tsval = 7000,
				   .tsecr = 100 }, t0 + 40 * MS);
	feed_seg(r, &(struct seg){ .v6 = v6, .flags = ACK, .seq = ISN_S, .ack = ISN_R, .win = 1000,
				   .ts = ts, .tsval = 101, .tsecr = 7000 }, t0 + 41 * MS);
	drain_up(r, t0 + 41 * MS);
}

/* S's data segment at relative offset off (1000 bytes). */
static struct seg
data(int v6, uint32_t off)
{
	return (struct seg){ .v6 = v6, .flags = ACK, .seq = ISN_S + off, .ack = ISN_R, .win = 1000,
			     .len = 1000, .ts = 1, .tsval = 200 + off / 1000, .tsecr = 7000 };
}

/* R's ACK for relative offset off, window `win` (scaled by 128). */
static struct seg
rack(int v6, uint32_t off, uint16_t win)
{
	return (struct seg){ .in = 1, .v6 = v6, .flags = ACK, .seq = ISN_R, .ack = ISN_S + off,
			     .win = win, .ts = 1, .tsval = 8000 + off / 1000, .tsecr = 200 };
}

/* The handshake, then R opens its window (2000 x 128 bytes). */
static void
opened(struct rig *r, uint64_t t0)
{
	handshake(r, 0, 1, t0);
	feed_seg(r, &(struct seg){ .in = 1, .flags = ACK, .seq = ISN_R, .ack = ISN_S, .win = 2000,
				   .ts = 1, .tsval = 7001, .tsecr = 101 }, t0 + 42 * MS);
}

/* S's first n segments of 1000 bytes, all at `at`. */
static void
send_data(struct rig *r, uint32_t n, uint64_t at)
{
	for (uint32_t i = 0; i < n; i++) {
		struct seg s = data(0, i * 1000);

		feed_seg(r, &s, at);
	}
}

/* The p-ACKs (frames to the LAN, from R's port 80) caught so far. */
static unsigned int
packs(struct rig *r, struct seen *out, unsigned int max)
{
	unsigned int k = 0;

	for (unsigned int i = 0; i < r->n_emitted && k < max; i++) {
		struct seen s = look(r->emitted[i]);

		if (r->emitted_to[i] == WEIR_PORT_LAN && s.sport == 80)
			out[k++] = s;
	}
	return k;
}

static void
test_pack_basic(int v6)
{
	const uint64_t t0 = *hzp;
	struct seen a[8];
	struct rig r;
	uint32_t wm;

	if (make(&r, v6 ? "pep6" : "pep4") != 0) {
		CHECK(0, "rig");
		return;
	}
	handshake(&r, v6, 1, t0);
	CHECK(ST != NULL && ST->flows == 1, "the flow is eligible (its SYN seen under pep)");
	/* One segment: queued, and a p-ACK for it goes back to S at once. */
	CHECK(feed_seg(&r, &(struct seg){ .v6 = v6, .flags = ACK, .seq = ISN_S, .ack = ISN_R,
					  .win = 1000, .len = 1000, .ts = 1, .tsval = 200,
					  .tsecr = 7000 }, t0 + 50 * MS) == 0, "data queued");
	CHECK(packs(&r, a, 8) == 1, "one p-ACK (%u frames out)", r.n_emitted);
	CHECK(a[0].ack == ISN_S + 1000 && a[0].seq == ISN_R && a[0].flags == ACK && a[0].len == 0 &&
	      a[0].v6 == v6 && a[0].cksum_ok,
	      "it acknowledges the segment with valid checksums (ack %u, ok %d)", a[0].ack,
	      a[0].cksum_ok);
	CHECK(a[0].ts && a[0].tsecr == 200 && a[0].tsval == 7000,
	      "echoes S's TSval, carries R's latest (%u %u)", a[0].tsval, a[0].tsecr);
	/* R's window: the SYN+ACK's 65535 unscaled; bounded by the buffer:
	 * wm = 1 MB/s x 40 ms + 1/8 + 2 x 1460 = 47920, max 95840. */
	wm = weir_pep_watermark(&r.w->svc, 0, 0);
	CHECK(wm >= 47800 && wm <= 47920, "watermark: share x RTT beyond (%u)", wm);
	CHECK(ISN_S + 1000 + a[0].win * 128u >= ISN_S + 1000 - 1000 &&
	      a[0].win * 128u <= 65535u + 127, "window within R's own (%u)", a[0].win * 128u);
	rig_emitted_free(&r);
	CHECK(drain_up(&r, t0 + 51 * MS) == 1 && weir_pep_buffered(&r.w->svc, 0, 0) == 1000,
	      "the original goes on, the copy stays");
	/* R's own ACK for it comes: dropped (S knows), the copy freed. */
	CHECK(feed_seg(&r, &(struct seg){ .in = 1, .v6 = v6, .flags = ACK, .seq = ISN_R,
					  .ack = ISN_S + 1000, .win = 500, .ts = 1, .tsval = 7040,
					  .tsecr = 200 }, t0 + 92 * MS) == 0, "R's ACK dropped");
	CHECK(weir_pep_buffered(&r.w->svc, 0, 0) == 0 && ST->real_dropped == 1 && ST->purged == 1 &&
	      ST->copies == 0, "copy purged (%u buffered)", weir_pep_buffered(&r.w->svc, 0, 0));
	rig_free(&r);
}

static void
test_watermark_release(void)
{
	const uint64_t t0 = *hzp;
	struct seen a[128];
	struct rig r;
	unsigned int n;

	if (make(&r, "pep_wm") != 0) {
		CHECK(0, "rig");
		return;
	}
	handshake(&r, 0, 1, t0);
	/* R opens a large window first (its ACK of the handshake's data-less
	 * state: 2000 x 128 = 256000 bytes). */
	feed_seg(&r, &(struct seg){ .in = 1, .flags = ACK, .seq = ISN_R, .ack = ISN_S, .win = 2000,
				   .ts = 1, .tsval = 7001, .tsecr = 101 }, t0 + 42 * MS);
	rig_emitted_free(&r);
	/* 60 segments of 1000 bytes: the first 47 are p-acked (47000 < 47920
	 * and one more would pass it), the rest stored without a p-ACK up to
	 * the maximum: wm + half the flow queue's 16 packets (11680) = 59600,
	 * so the 60th passes uncopied. */
	for (uint32_t i = 0; i < 60; i++) {
		struct seg s = data(0, i * 1000);

		feed_seg(&r, &s, t0 + 50 * MS);
		drain_up(&r, t0 + 50 * MS);
	}
	n = packs(&r, a, 128);
	CHECK(n == 47 && a[n - 1].ack == ISN_S + 47000 && ST->packed == 47 && ST->withheld == 12 &&
	      ST->buf_full == 1, "47 p-acked, 12 withheld, 1 past the maximum (%u p-ACKs, last %u, withheld %" PRIu64 ")", n,
	      n ? a[n - 1].ack - ISN_S : 0, ST->withheld);
	for (unsigned int i = 1; i < n; i++)
		if (a[i].ack <= a[i - 1].ack)
			CHECK(0, "p-ACKs in order");
	CHECK(weir_pep_buffered(&r.w->svc, 0, 0) == 59000, "59 copies held");
	rig_emitted_free(&r);
	/* R acknowledges 10 segments: dropped, 10 copies freed, and 10
	 * withheld ones p-acked with one p-ACK (the real ACK is the clock). */
	{
		struct seg s = rack(0, 10000, 2000);

		CHECK(feed_seg(&r, &s, t0 + 100 * MS) == 0, "real ACK for p-acked data dropped");
	}
	n = packs(&r, a, 128);
	CHECK(n == 1 && a[0].ack == ISN_S + 57000 && ST->packed == 57,
	      "withheld p-ACKs released as space frees (%u, ack %u)", n, n ? a[0].ack - ISN_S : 0);
	CHECK(weir_pep_buffered(&r.w->svc, 0, 0) == 49000, "49 copies left");
	rig_emitted_free(&r);
	/* R acknowledges everything: 60000 is past una (57000), so S must
	 * hear it: R's ACK goes on, the buffer empties. */
	{
		struct seg s = rack(0, 60000, 2000);

		CHECK(feed_seg(&r, &s, t0 + 110 * MS) == 1, "an ACK past what was p-acked goes on");
	}
	CHECK(weir_pep_buffered(&r.w->svc, 0, 0) == 0 && ST->copies == 0, "buffer empty");
	rig_free(&r);
}

/* Count frames to the WAN carrying payload at relative offset off. */
static unsigned int
retx_of(struct rig *r, uint32_t off)
{
	unsigned int k = 0;

	for (unsigned int i = 0; i < r->n_emitted; i++) {
		struct seen s = look(r->emitted[i]);

		if (r->emitted_to[i] == WEIR_PORT_WAN && s.len > 0 && s.seq == ISN_S + off)
			k++;
	}
	return k;
}

static void
test_local_recovery(void)
{
	const uint64_t t0 = *hzp;
	struct rig r;

	if (make(&r, "pep_rec") != 0) {
		CHECK(0, "rig");
		return;
	}
	opened(&r, t0);
	send_data(&r, 10, t0 + 50 * MS);
	drain_up(&r, t0 + 50 * MS);
	rig_emitted_free(&r);
	/* Segment 2 (offset 2000) was lost beyond the gateway: R acks 2000
	 * and SACKs 3000-5000. The gateway retransmits 2000 from its copy at
	 * once and drops the duplicates (it recovers; S never sees them). */
	{
		struct seg s = rack(0, 2000, 2000);

		CHECK(feed_seg(&r, &s, t0 + 100 * MS) == 0, "R's ACK below una dropped");
		s = rack(0, 2000, 2000);
		s.n_sack = 1;
		s.sack[0] = ISN_S + 3000;
		s.sack[1] = ISN_S + 5000;
		CHECK(feed_seg(&r, &s, t0 + 101 * MS) == 0, "duplicate with SACK dropped");
	}
	CHECK(retx_of(&r, 2000) == 1 && ST->fast_retx == 1, "the hole retransmitted from the copy");
	CHECK(ST->sacked == 2 && weir_pep_buffered(&r.w->svc, 0, 0) == 6000,
	      "SACKed copies freed (%" PRIu64 ", %u buffered)", ST->sacked,
	      weir_pep_buffered(&r.w->svc, 0, 0));
	for (unsigned int i = 0; i < r.n_emitted; i++)
		if (r.emitted_to[i] == WEIR_PORT_WAN) {
			struct seen s = look(r.emitted[i]);
			const uint8_t *f = rte_pktmbuf_mtod(r.emitted[i], const uint8_t *);

			CHECK(s.cksum_ok && s.len == 1000 && f[r.emitted[i]->data_len - 1] ==
			      (uint8_t)(ISN_S + 2000 + 999), "the retransmission is the original, bytes and checksum");
			CHECK(s.ts && s.tsval == 202, "with the original's TSval, not S's latest "
			      "(209: originals behind it would fail PAWS at R): %u", s.tsval);
		}
	rig_emitted_free(&r);
	/* Another duplicate SACKing more: no second copy of the same hole. */
	{
		struct seg s = rack(0, 2000, 2000);

		s.n_sack = 1;
		s.sack[0] = ISN_S + 3000;
		s.sack[1] = ISN_S + 6000;
		feed_seg(&r, &s, t0 + 102 * MS);
	}
	CHECK(retx_of(&r, 2000) == 0, "one retransmission per hole per episode");
	rig_emitted_free(&r);
	/* The retransmission arrives: R acks through 6000. */
	{
		struct seg s = rack(0, 6000, 2000);

		feed_seg(&r, &s, t0 + 150 * MS);
	}
	CHECK(weir_pep_buffered(&r.w->svc, 0, 0) == 4000, "up to 6000 purged");
	rig_free(&r);
}

static void
test_rto_give_up(void)
{
	const uint64_t t0 = *hzp;
	struct rig r;
	uint64_t now, wake;
	unsigned int rto = 0, rst_s = 0, rst_r = 0;

	if (make(&r, "pep_rto") != 0) {
		CHECK(0, "rig");
		return;
	}
	opened(&r, t0);
	send_data(&r, 4, t0 + 50 * MS);
	drain_up(&r, t0 + 50 * MS);
	rig_emitted_free(&r);
	/* R vanished. Nothing before the first timeout (>= 200 ms). */
	wake = UINT64_MAX;
	CHECK(weir_pep_poll(&r.w->svc, t0 + 150 * MS, &wake) == 0 && wake != UINT64_MAX,
	      "no retransmission before the timeout, but a wake-up asked");
	for (now = t0 + 150 * MS; now < t0 + 30000 * MS && ST->give_ups == 0; now += 10 * MS) {
		wake = UINT64_MAX;
		weir_pep_poll(&r.w->svc, now, &wake);
		weir_worker_tx(r.w);
		rto += retx_of(&r, 0);
		for (unsigned int i = 0; i < r.n_emitted; i++) {
			struct seen s = look(r.emitted[i]);

			if (s.flags & RST) {
				CHECK(s.cksum_ok && s.len == 0, "RST checksums");
				if (r.emitted_to[i] == WEIR_PORT_LAN && s.sport == 80 && s.seq == ISN_R)
					rst_s++;
				if (r.emitted_to[i] == WEIR_PORT_WAN && s.sport == 4000 && s.seq == ISN_S)
					rst_r++;
			}
		}
		rig_emitted_free(&r);
	}
	CHECK(rto == WEIR_PEP_RETRIES && ST->rto_retx == WEIR_PEP_RETRIES,
	      "the head retransmitted on each timeout (%u)", rto);
	CHECK(ST->give_ups == 1 && rst_s == 1 && rst_r == 1,
	      "then given up: RST to S at its rcv_nxt, RST to R at its (%u %u)", rst_s, rst_r);
	CHECK(now - t0 > 3000 * MS && now - t0 < 15000 * MS, "within 3-15 s (%.1f s)",
	      (double)(now - t0) / (double)*hzp);
	CHECK(ST->copies == 0, "copies freed");
	rig_free(&r);
}

/* R still answers (duplicates: the copies are lost again on a congested
 * path): retried for as long as it does, never reset. */
static void
test_rto_receiver_talks(void)
{
	const uint64_t t0 = *hzp;
	struct rig r;
	uint64_t now, wake;

	if (make(&r, "pep_talk") != 0) {
		CHECK(0, "rig");
		return;
	}
	opened(&r, t0);
	send_data(&r, 4, t0 + 50 * MS);
	drain_up(&r, t0 + 50 * MS);
	for (now = t0 + 150 * MS; now < t0 + 30000 * MS; now += 10 * MS) {
		if ((now - t0) / MS % 500 == 0) {
			struct seg s = rack(0, 0, 2000);

			feed_seg(&r, &s, now);
		}
		wake = UINT64_MAX;
		weir_pep_poll(&r.w->svc, now, &wake);
		weir_worker_tx(r.w);
		rig_emitted_free(&r);
	}
	CHECK(ST->give_ups == 0 && ST->rto_retx > WEIR_PEP_RETRIES && ST->copies == 4,
	      "30 s of timeouts while R answers: retried (%" PRIu64 "), not given up",
	      ST->rto_retx);
	/* Then R falls silent: given up within three longest timeouts and a few. */
	for (; now < t0 + 45000 * MS && ST->give_ups == 0; now += 10 * MS) {
		wake = UINT64_MAX;
		weir_pep_poll(&r.w->svc, now, &wake);
		weir_worker_tx(r.w);
		rig_emitted_free(&r);
	}
	CHECK(ST->give_ups == 1 && now < t0 + 40000 * MS, "given up once silent (%.1f s)",
	      (double)(now - t0) / (double)*hzp);
	rig_free(&r);
}

static void
test_limits(void)
{
	const uint64_t t0 = *hzp;
	struct seen a[8];
	struct rig r;

	if (make(&r, "pep_lim") != 0) {
		CHECK(0, "rig");
		return;
	}
	/* A flow whose SYN was never seen: nothing p-acked, ever. */
	{
		struct seg s = data(0, 0);

		feed_seg(&r, &s, t0);
	}
	CHECK(packs(&r, a, 8) == 0 && ST->flows == 0 && ST->copied == 0,
	      "a flow begun before the mode: not touched");
	rig_free(&r);

	if (make(&r, "pep_lim2") != 0) {
		CHECK(0, "rig");
		return;
	}
	handshake(&r, 0, 1, t0);
	/* R's window closes: data past it is not p-acked. */
	feed_seg(&r, &(struct seg){ .in = 1, .flags = ACK, .seq = ISN_R, .ack = ISN_S, .win = 0,
				   .ts = 1, .tsval = 7001, .tsecr = 101 }, t0 + 42 * MS);
	{
		struct seg s = data(0, 0);

		feed_seg(&r, &s, t0 + 50 * MS);
	}
	CHECK(packs(&r, a, 8) == 0 && ST->copied == 0, "zero window: no p-ACK, no copy (%u %u %" PRIu64 ")",
	      r.n_emitted, packs(&r, a, 8), ST->copied);
	/* It opens again: a FIN and an URG segment pass uncopied. */
	feed_seg(&r, &(struct seg){ .in = 1, .flags = ACK, .seq = ISN_R, .ack = ISN_S, .win = 2000,
				   .ts = 1, .tsval = 7002, .tsecr = 101 }, t0 + 60 * MS);
	rig_emitted_free(&r);
	{
		struct seg s = data(0, 0);

		s.flags = ACK | FIN;
		feed_seg(&r, &s, t0 + 61 * MS);
		s.flags = ACK | 0x20;
		feed_seg(&r, &s, t0 + 61 * MS);
	}
	CHECK(packs(&r, a, 8) == 0 && ST->copied == 0, "FIN and URG data never p-acked");
	drain_up(&r, t0 + 61 * MS);
	rig_free(&r);
}

/* A flow that leaves the table (idle expiry) while S was told of data R
 * never acknowledged: RSTs to both sides, copies freed. */
static void
test_end_with_packed(void)
{
	const uint64_t t0 = *hzp;
	unsigned int rst = 0;
	struct rig r;

	if (make(&r, "pep_end") != 0) {
		CHECK(0, "rig");
		return;
	}
	opened(&r, t0);
	send_data(&r, 3, t0 + 50 * MS);
	drain_up(&r, t0 + 50 * MS);
	rig_emitted_free(&r);
	CHECK(ST->copies == 3 && ST->packed == 3, "three p-acked copies");
	/* Established flows expire after 100 s idle here. */
	weir_worker_expire(r.w, t0 + 200000 * MS, CAP);
	weir_worker_tx(r.w);
	for (unsigned int i = 0; i < r.n_emitted; i++) {
		struct seen s = look(r.emitted[i]);

		rst += (s.flags & RST) && s.cksum_ok;
	}
	CHECK(rst == 2 && ST->give_ups == 1 && ST->copies == 0 && ST->active == 0,
	      "RST to both sides, copies freed (%u RSTs)", rst);
	rig_free(&r);
}

/* A policy switch takes the mode away under traffic: no new copies or
 * p-ACKs, but R's ACKs for what was p-acked are still dropped and the
 * copies still recover; once R has everything the flow's state is gone. */
static void
test_mode_off(void)
{
	static const struct weir_policy_conf nc = {
		.tree = { { .rate = 8000000, .mode = WEIR_MODE_PFQ }, { .rate = 0 } },
	};
	const uint64_t t0 = *hzp;
	struct weir_policy_switch sw = { 0 };
	struct weir_policy_err e;
	struct weir_policy *np;
	struct seen a[8];
	struct rig r;

	if (make(&r, "pep_off") != 0) {
		CHECK(0, "rig");
		return;
	}
	opened(&r, t0);
	send_data(&r, 4, t0 + 50 * MS);
	drain_up(&r, t0 + 50 * MS);
	rig_emitted_free(&r);
	np = weir_policy_build(&nc, 2, &e);
	sw.policy = np;
	for (int d = 0; d < WEIR_PORT__COUNT; d++) {
		struct weir_cbq_class_conf cc[WEIR_CBQ_MAX_CLASSES];
		struct weir_cbq_conf conf = {
			.socket_id = SOCKET_ID_ANY, .tsc_hz = rte_get_tsc_hz(), .classes = cc,
			.n_queues = CAP + 1 + WEIR_POLICY_QUEUES_EXTRA(np), .flow_limit = 16,
		};

		conf.n_classes = weir_policy_cbq_classes(np, d, 1, 1, cc);
		sw.shaper[d] = conf.n_classes ? weir_cbq_create(&conf) : NULL;
		sw.cls_ctr[d] = conf.n_classes ?
			rte_zmalloc(NULL, np->tree[d].n_classes * sizeof(*sw.cls_ctr[d]), 0) : NULL;
	}
	CHECK(weir_worker_policy_post(r.w, &sw) == 0 && weir_worker_policy_take(r.w) == 1,
	      "the switch to pfq is taken");
	weir_policy_free(r.p);
	r.p = np;
	/* New data: not copied, not p-acked. */
	{
		struct seg s = data(0, 4000);

		feed_seg(&r, &s, t0 + 60 * MS);
	}
	drain_up(&r, t0 + 60 * MS);
	CHECK(packs(&r, a, 8) == 0 && ST->copied == 4, "no p-ACK once the mode is gone");
	rig_emitted_free(&r);
	/* R lost segment 1: the copy still recovers it, the duplicates S must
	 * not see are dropped. */
	{
		struct seg s = rack(0, 1000, 2000);

		CHECK(feed_seg(&r, &s, t0 + 100 * MS) == 0, "R's ACK for p-acked data still dropped");
		s.n_sack = 1;
		s.sack[0] = ISN_S + 2000;
		s.sack[1] = ISN_S + 4000;
		feed_seg(&r, &s, t0 + 101 * MS);
	}
	CHECK(retx_of(&r, 1000) == 1, "recovered from the copy after the switch");
	rig_emitted_free(&r);
	/* R has everything: its ACK goes on (past what S was told) and the
	 * flow's pep state is gone. */
	{
		struct seg s = rack(0, 5000, 2000);

		CHECK(feed_seg(&r, &s, t0 + 150 * MS) == 1, "R's ACK past una goes on");
	}
	CHECK(ST->active == 0 && ST->copies == 0, "the flow drained (%u active, %u copies)",
	      ST->active, ST->copies);
	rig_free(&r);
}

/* A satellite path on a 3 GHz TSC (issue 36.1): R 478 ms beyond the
 * gateway, so the first timeout (srtt + 4 rttvar, 1.43 s) is 4.3e9 ticks,
 * over 2^32. Ten round trips of data, each acknowledged by R a round trip
 * after it left: no timeout fires, nothing is retransmitted or given up. */
static void
test_rto_long_path(void)
{
	static uint64_t hz3 = 3000000000ull;
	const uint64_t *saved = hzp;
	uint64_t t0, now, wake;
	struct rig r;
	int ok;

	hzp = &hz3;
	rig_tsc_hz = hz3;
	ok = make(&r, "pep_sat") == 0;
	rig_tsc_hz = 0;
	if (!ok) {
		hzp = saved;
		CHECK(0, "rig");
		return;
	}
	t0 = 1000 * MS;
	feed_seg(&r, &(struct seg){ .flags = SYN, .seq = ISN_S - 1, .win = 65535, .syn_opts = 1,
				   .ts = 1, .tsval = 100 }, t0);
	feed_seg(&r, &(struct seg){ .in = 1, .flags = SYN | ACK, .seq = ISN_R - 1, .ack = ISN_S,
				   .win = 65535, .syn_opts = 1, .ts = 1, .tsval = 7000, .tsecr = 100 },
		 t0 + 478 * MS);
	feed_seg(&r, &(struct seg){ .flags = ACK, .seq = ISN_S, .ack = ISN_R, .win = 1000, .ts = 1,
				   .tsval = 101, .tsecr = 7000 }, t0 + 479 * MS);
	drain_up(&r, t0 + 479 * MS);
	feed_seg(&r, &(struct seg){ .in = 1, .flags = ACK, .seq = ISN_R, .ack = ISN_S, .win = 2000,
				   .ts = 1, .tsval = 7001, .tsecr = 101 }, t0 + 480 * MS);
	for (uint32_t k = 0; k < 10; k++) {
		const uint64_t at = t0 + 500 * MS + k * 480 * MS;

		for (uint32_t i = 0; i < 4; i++) {
			struct seg s = data(0, (4 * k + i) * 1000);

			feed_seg(&r, &s, at);
		}
		drain_up(&r, at);
		for (now = at; now < at + 478 * MS; now += 10 * MS) {
			wake = UINT64_MAX;
			weir_pep_poll(&r.w->svc, now, &wake);
			weir_worker_tx(r.w);
		}
		{
			struct seg s = rack(0, (4 * k + 4) * 1000, 2000);

			feed_seg(&r, &s, at + 478 * MS);
		}
		rig_emitted_free(&r);
	}
	CHECK(ST->packed == 40 && ST->rto_retx == 0 && ST->give_ups == 0 && ST->copies == 0,
	      "478 ms beyond at 3 GHz: 40 p-acked, no timeout fired (%" PRIu64 " retx, %" PRIu64
	      " give-ups)", ST->rto_retx, ST->give_ups);
	rig_free(&r);
	hzp = saved;
}

/* Frames the worker sent or queued towards the WAN with `flags` set: sent
 * now (caught) and whatever the class lets go over the next 400 ms. */
static unsigned int
wan_frames_with(struct rig *r, uint8_t flags, uint64_t now, struct seen *last)
{
	struct rte_mbuf *o[64];
	unsigned int k = 0;

	for (unsigned int i = 0; i < r->n_emitted; i++) {
		struct seen s = look(r->emitted[i]);

		if (r->emitted_to[i] == WEIR_PORT_WAN && (s.flags & flags) == flags) {
			k++;
			*last = s;
		}
	}
	for (int t = 0; t < 200; t++) {
		uint16_t n = rig_dequeue(r, WEIR_PORT_LAN, now + (uint64_t)t * 2 * MS, o, 64);

		for (uint16_t i = 0; i < n; i++) {
			struct seen s = look(o[i]);

			if ((s.flags & flags) == flags) {
				k++;
				*last = s;
			}
		}
		rte_pktmbuf_free_bulk(o, n);
	}
	return k;
}

/* Four segments p-acked, R's window open: the state the RST tests start from. */
static int
four_packed(struct rig *r, const char *name, uint64_t t0)
{
	if (make(r, name) != 0)
		return -1;
	opened(r, t0);
	send_data(r, 4, t0 + 50 * MS);
	drain_up(r, t0 + 50 * MS);
	rig_emitted_free(r);
	return 0;
}

/* Issue 36.2: a RST outside the window of the end it is sent to changes
 * nothing; S's own RST waits until R has what S was told of, then R gets a
 * RST at its next sequence number. */
static void
test_rst_from_sender(void)
{
	const uint64_t t0 = *hzp;
	struct seen last = { 0 };
	struct rig r;

	if (four_packed(&r, "pep_rst_s", t0) != 0) {
		CHECK(0, "rig");
		return;
	}
	CHECK(ST->packed == 4 && ST->copies == 4, "four p-acked copies");
	/* Stale or spoofed: from R far left of S's window, from S far left of R's. */
	feed_seg(&r, &(struct seg){ .in = 1, .flags = RST | ACK, .seq = ISN_R - 70000,
				   .ack = ISN_S }, t0 + 60 * MS);
	feed_seg(&r, &(struct seg){ .flags = RST, .seq = ISN_S - 100000 }, t0 + 61 * MS);
	drain_up(&r, t0 + 61 * MS);
	CHECK(ST->copies == 4 && ST->active == 1 && ST->rst_ignored == 2,
	      "out-of-window RSTs: copies and state kept (%u copies, %u active, %" PRIu64
	      " ignored)", ST->copies, ST->active, ST->rst_ignored);
	rig_emitted_free(&r);
	/* R lost segment 2 beyond the gateway; then S resets (in R's window). */
	{
		struct seg s = rack(0, 2000, 2000);

		feed_seg(&r, &s, t0 + 100 * MS);
	}
	CHECK(feed_seg(&r, &(struct seg){ .flags = RST | ACK, .seq = ISN_S + 4000, .ack = ISN_R },
		       t0 + 101 * MS) == 0 && ST->rst_held == 1, "S's RST held back");
	CHECK(wan_frames_with(&r, RST, t0 + 101 * MS, &last) == 0 && ST->copies == 2,
	      "no RST towards R while it lacks p-acked data (%u copies)", ST->copies);
	rig_emitted_free(&r);
	/* R's duplicates bring the hole back from the copy; R acks all. */
	{
		struct seg s = rack(0, 2000, 2000);

		s.n_sack = 1;
		s.sack[0] = ISN_S + 3000;
		s.sack[1] = ISN_S + 4000;
		feed_seg(&r, &s, t0 + 150 * MS);
	}
	CHECK(retx_of(&r, 2000) == 1, "the hole recovered after S's reset");
	rig_emitted_free(&r);
	{
		struct seg s = rack(0, 4000, 2000);

		feed_seg(&r, &s, t0 + 200 * MS);
	}
	CHECK(wan_frames_with(&r, RST, t0 + 200 * MS, &last) == 1 && last.seq == ISN_S + 4000 &&
	      last.cksum_ok, "then R's RST at its next sequence number (%u)", last.seq - ISN_S);
	CHECK(ST->active == 0 && ST->copies == 0, "state gone");
	rig_free(&r);
}

/* R resets in S's window while S was told of data R never acked: S gets a
 * RST at its own next sequence number too. */
static void
test_rst_from_receiver(void)
{
	const uint64_t t0 = *hzp;
	unsigned int to_s = 0;
	struct rig r;

	if (four_packed(&r, "pep_rst_r", t0) != 0) {
		CHECK(0, "rig");
		return;
	}
	CHECK(feed_seg(&r, &(struct seg){ .in = 1, .flags = RST | ACK, .seq = ISN_R,
					  .ack = ISN_S + 1000 }, t0 + 60 * MS) == 1,
	      "R's RST goes on");
	for (unsigned int i = 0; i < r.n_emitted; i++) {
		struct seen s = look(r.emitted[i]);

		to_s += r.emitted_to[i] == WEIR_PORT_LAN && (s.flags & RST) && s.seq == ISN_R &&
			s.cksum_ok;
	}
	CHECK(to_s == 1 && ST->r_resets == 1 && ST->give_ups == 0 && ST->active == 0 &&
	      ST->copies == 0, "S reset by the gateway too (%u), state gone", to_s);
	rig_free(&r);
}

/* Issue 36.3: a full leaf evicts a p-acked original (the head of the
 * longest queue) to take another flow's frame. S was told it arrived, so
 * the copy goes to R at the next poll, not at the timeout; and the hole
 * does not stop recovery of a later one. */
static void
test_packed_original_dropped(void)
{
	static const struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .mode = WEIR_MODE_PEP, .default_limit = 8 }, { .rate = 0 } },
	};
	const uint64_t t0 = *hzp;
	struct rig r;
	uint64_t wake = UINT64_MAX;

	if (rig_make_pa(&r, &pc, "pep_evict", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	opened(&r, t0);
	send_data(&r, 8, t0 + 50 * MS);
	CHECK(ST->packed == 8 && qlen(&r, 0, 1) == 8, "8 p-acked originals fill the leaf (%u)",
	      qlen(&r, 0, 1));
	rig_emitted_free(&r);
	/* Another flow's frame: the leaf evicts the pep flow's head (offset 0). */
	feed(&r, tcp_frame(0, 2, 4001, 1, 80, ACK, 77, 1000), 0, t0 + 51 * MS);
	CHECK(ST->class_dropped == 0 && ST->copies == 8, "the p-acked copy kept");
	weir_pep_poll(&r.w->svc, t0 + 52 * MS, &wake);
	weir_worker_tx(r.w);
	CHECK(retx_of(&r, 0) == 1 && ST->lost_resent == 1 && ST->rto_retx == 0,
	      "resent from the copy at the next poll (%u, %" PRIu64 ")", retx_of(&r, 0),
	      ST->lost_resent);
	rig_emitted_free(&r);
	drain_up(&r, t0 + 53 * MS);
	/* R got 0 (the resend), lost 3 beyond the gateway: its duplicates
	 * name the hole, recovered at once though 0 never left the class. */
	{
		struct seg s = rack(0, 3000, 2000);

		feed_seg(&r, &s, t0 + 100 * MS);
		s.n_sack = 1;
		s.sack[0] = ISN_S + 4000;
		s.sack[1] = ISN_S + 8000;
		feed_seg(&r, &s, t0 + 101 * MS);
	}
	CHECK(retx_of(&r, 3000) == 1, "the later hole recovered from its copy");
	rig_emitted_free(&r);
	{
		struct seg s = rack(0, 8000, 2000);

		feed_seg(&r, &s, t0 + 150 * MS);
	}
	CHECK(ST->copies == 0 && ST->give_ups == 0, "all delivered (%u copies)", ST->copies);
	rig_free(&r);
}

/* Issue 36.4: asked to stop, the worker keeps delivering what S was told
 * arrived (no new copies or p-ACKs), and stops once R has it all; a flow
 * whose receiver stays silent is reset at both ends at the deadline. */
static void
test_stop_drains(void)
{
	const uint64_t t0 = *hzp;
	unsigned int rst = 0;
	struct rig r;

	if (four_packed(&r, "pep_stop", t0) != 0) {
		CHECK(0, "rig");
		return;
	}
	r.w->conf.stop_drain_us = 2000000;
	{
		struct seg s = rack(0, 2000, 2000);      /* segment 2 lost beyond */

		feed_seg(&r, &s, t0 + 100 * MS);
	}
	CHECK(!weir_worker_stopping(r.w, t0 + 101 * MS), "R lacks p-acked data: the loop goes on");
	{
		struct seg s = data(0, 4000);

		feed_seg(&r, &s, t0 + 102 * MS);
		drain_up(&r, t0 + 102 * MS);
	}
	CHECK(ST->copied == 4, "no copy once stopping (%" PRIu64 ")", ST->copied);
	rig_emitted_free(&r);
	{
		struct seg s = rack(0, 2000, 2000);

		s.n_sack = 1;
		s.sack[0] = ISN_S + 3000;
		s.sack[1] = ISN_S + 5000;
		feed_seg(&r, &s, t0 + 150 * MS);
	}
	CHECK(retx_of(&r, 2000) == 1, "the hole still recovered");
	rig_emitted_free(&r);
	CHECK(!weir_worker_stopping(r.w, t0 + 151 * MS), "still owed");
	{
		struct seg s = rack(0, 5000, 2000);

		feed_seg(&r, &s, t0 + 200 * MS);
	}
	CHECK(weir_worker_stopping(r.w, t0 + 201 * MS) && ST->give_ups == 0 && r.n_emitted == 0,
	      "delivered: the loop ends, nobody reset");
	rig_free(&r);

	/* R silent: reset at the deadline, not dropped silently. */
	if (four_packed(&r, "pep_stop2", t0) != 0) {
		CHECK(0, "rig");
		return;
	}
	r.w->conf.stop_drain_us = 2000000;
	CHECK(!weir_worker_stopping(r.w, t0 + 100 * MS) &&
	      !weir_worker_stopping(r.w, t0 + 2050 * MS), "within the drain time: goes on");
	CHECK(weir_worker_stopping(r.w, t0 + 2101 * MS), "at the deadline: ends");
	for (unsigned int i = 0; i < r.n_emitted; i++) {
		struct seen s = look(r.emitted[i]);

		rst += (s.flags & RST) && s.cksum_ok;
	}
	CHECK(rst == 2 && ST->drain_resets == 1 && ST->give_ups == 0 && ST->copies == 0,
	      "both ends reset (%u RSTs, %" PRIu64 " drain resets)", rst, ST->drain_resets);
	weir_worker_flush_queues(r.w);
	CHECK(ST->flushed_owed == 0, "nothing owed left for the flush");
	rig_free(&r);
}

/* Issue 36.9: R's congestion echo on ACKs pep takes reaches S on p-ACKs
 * until S's CWR. */
static void
test_ece_reaches_sender(void)
{
	const uint64_t t0 = *hzp;
	struct seen a[16];
	struct rig r;
	unsigned int n;

	if (four_packed(&r, "pep_ece", t0) != 0) {
		CHECK(0, "rig");
		return;
	}
	{
		struct seg s = rack(0, 2000, 2000);

		s.flags |= 0x40;        /* ECE */
		CHECK(feed_seg(&r, &s, t0 + 100 * MS) == 0, "R's ACK for p-acked data taken");
	}
	n = packs(&r, a, 16);
	CHECK(n >= 1 && (a[n - 1].flags & 0x40) && a[n - 1].cksum_ok,
	      "a p-ACK carries ECE to S (%u p-ACKs)", n);
	rig_emitted_free(&r);
	{
		struct seg s = data(0, 4000);

		s.flags |= 0x80;        /* CWR: S reacted */
		feed_seg(&r, &s, t0 + 110 * MS);
		drain_up(&r, t0 + 110 * MS);
	}
	n = packs(&r, a, 16);
	CHECK(n >= 1 && !(a[n - 1].flags & 0x40), "after S's CWR, p-ACKs carry no ECE (%u)", n);
	rig_emitted_free(&r);
	rig_free(&r);
}

/* Issue 36.9: a segment with IPv6 extension headers is never copied (a
 * copy's checksum is recomputed from the fixed header), so nothing of it
 * is p-acked; S resends it if lost. */
static void
test_v6_ext_headers_not_copied(void)
{
	const uint64_t t0 = *hzp;
	struct seen a[8];
	struct rig r;

	if (make(&r, "pep_ext") != 0) {
		CHECK(0, "rig");
		return;
	}
	handshake(&r, 1, 1, t0);
	feed_seg(&r, &(struct seg){ .in = 1, .v6 = 1, .flags = ACK, .seq = ISN_R, .ack = ISN_S,
				   .win = 2000, .ts = 1, .tsval = 7001, .tsecr = 101 }, t0 + 42 * MS);
	rig_emitted_free(&r);
	{
		struct seg s = data(1, 0);

		s.ext = 1;
		feed_seg(&r, &s, t0 + 50 * MS);
		s = data(1, 1000);
		feed_seg(&r, &s, t0 + 50 * MS);
	}
	CHECK(ST->copied == 1 && packs(&r, a, 8) == 0,
	      "the segment with a destination options header passes uncopied, the next one "
	      "is not p-acked past it (%" PRIu64 " copied)", ST->copied);
	drain_up(&r, t0 + 50 * MS);
	rig_free(&r);
}

/* A copy's TSval is raised to R's TS.Recent (its TSecr) when that is past
 * the original's, or PAWS at R would discard the copy itself. */
static void
test_retx_tsval_floor(void)
{
	const uint64_t t0 = *hzp;
	struct rig r;
	unsigned int k = 0;

	if (four_packed(&r, "pep_tsf", t0) != 0) {
		CHECK(0, "rig");
		return;
	}
	{
		struct seg s = rack(0, 1000, 2000);

		s.tsecr = 250;          /* S resent something itself, TSval 250 */
		feed_seg(&r, &s, t0 + 100 * MS);
		s.n_sack = 1;
		s.sack[0] = ISN_S + 2000;
		s.sack[1] = ISN_S + 4000;
		feed_seg(&r, &s, t0 + 101 * MS);
	}
	for (unsigned int i = 0; i < r.n_emitted; i++) {
		struct seen s = look(r.emitted[i]);

		if (r.emitted_to[i] == WEIR_PORT_WAN && s.len > 0) {
			k++;
			CHECK(s.seq == ISN_S + 1000 && s.ts && s.tsval == 250 && s.cksum_ok,
			      "the copy carries R's TS.Recent, not the original's 201 (%u)", s.tsval);
		}
	}
	CHECK(k == 1, "one retransmission (%u)", k);
	rig_free(&r);
}

/* The class refuses a segment before its p-ACK (its leaf full): the hole
 * is S's, so R's duplicate ACKs for it reach S (its fast retransmit), not
 * taken as if a copy here would recover it. */
static void
test_class_drop_dups_reach_sender(void)
{
	static const struct weir_policy_conf pc = {
		.tree = { { .rate = 8000000, .mode = WEIR_MODE_PEP, .default_limit = 8 }, { .rate = 0 } },
	};
	const uint64_t t0 = *hzp;
	unsigned int dups = 0;
	struct rig r;

	if (rig_make_pa(&r, &pc, "pep_gone", 64) != 0) {
		CHECK(0, "rig");
		return;
	}
	opened(&r, t0);
	send_data(&r, 10, t0 + 50 * MS);
	CHECK(ST->class_dropped >= 1, "the class refused a segment before its p-ACK (%" PRIu64 ")",
	      ST->class_dropped);
	drain_up(&r, t0 + 50 * MS);
	rig_emitted_free(&r);
	/* R has 0-7000, lacks 8000 (S's), then duplicates as S's later data come. */
	for (int k = 0; k < 4; k++) {
		struct seg s = rack(0, 8000, 2000);

		if (k > 0) {
			s.n_sack = 1;
			s.sack[0] = ISN_S + 9000;
			s.sack[1] = ISN_S + 9000 + 1000 * (uint32_t)k;
		}
		dups += feed_seg(&r, &s, t0 + (100 + (uint64_t)k) * MS);
	}
	CHECK(dups >= 3, "R's duplicates reach S (%u of 4)", dups);
	rig_free(&r);
}

/* Shutdown with copies held: every one back in the pool. */
static void
test_flush(void)
{
	const uint64_t t0 = *hzp;
	struct rig r;

	if (make(&r, "pep_fl") != 0) {
		CHECK(0, "rig");
		return;
	}
	handshake(&r, 1, 0, t0);
	feed_seg(&r, &(struct seg){ .in = 1, .v6 = 1, .flags = ACK, .seq = ISN_R, .ack = ISN_S,
				   .win = 2000 }, t0 + 42 * MS);
	for (uint32_t i = 0; i < 5; i++) {
		struct seg s = data(1, i * 1000);

		s.ts = 0;
		feed_seg(&r, &s, t0 + 50 * MS);
	}
	{
		struct seen a[8];
		unsigned int n = packs(&r, a, 8);

		CHECK(n == 5 && a[4].v6 && a[4].cksum_ok && !a[4].ts && a[4].ack == ISN_S + 5000,
		      "IPv6 without timestamps: p-ACKs (%u)", n);
	}
	CHECK(ST->copies == 5, "five copies");
	weir_worker_flush_queues(r.w);
	CHECK(ST->copies == 0 && ST->flushed == 5,
	      "flushed at shutdown");
	rig_free(&r);
}

/* Issue 36 item 6: a flow whose segments are signed (TCP-MD5; TCP-AO
 * alike) is never taken by pep: the signature covers the window and the
 * ACK, so a p-ACK or RST weir forged, or a window it rewrote, would be
 * dropped by the host (a BGP session across weir dies). Its data goes on
 * unchanged, no copy, no p-ACK; R's ACKs reach S byte for byte. */
static void
test_signed(void)
{
	const uint64_t t0 = *hzp;
	struct seen a[8];
	struct rig r;
	struct rte_mbuf *m, *ref;
	uint16_t went;

	if (make(&r, "pep_md5") != 0) {
		CHECK(0, "rig");
		return;
	}
	sign_md5 = 1;
	handshake(&r, 0, 1, t0);
	CHECK(ST != NULL && ST->flows == 0, "a signed flow is not eligible (%lu)",
	      ST != NULL ? (unsigned long)ST->flows : 0ul);
	CHECK(feed_seg(&r, &(struct seg){ .flags = ACK, .seq = ISN_S, .ack = ISN_R, .win = 1000,
					  .len = 1000, .ts = 1, .tsval = 200, .tsecr = 7000 },
		       t0 + 50 * MS) == 0, "data queued (shaped)");
	CHECK(packs(&r, a, 8) == 0 && ST->copied == 0, "no p-ACK, no copy (%u out)", r.n_emitted);
	CHECK(drain_up(&r, t0 + 51 * MS) == 1, "the data goes on");
	/* R's ACK with a window change: it passes, as R sent it. */
	m = mk(&(struct seg){ .in = 1, .flags = ACK, .seq = ISN_R, .ack = ISN_S + 1000, .win = 3,
			      .ts = 1, .tsval = 7040, .tsecr = 200 });
	ref = mk(&(struct seg){ .in = 1, .flags = ACK, .seq = ISN_R, .ack = ISN_S + 1000, .win = 3,
				.ts = 1, .tsval = 7040, .tsecr = 200 });
	went = rig_process(&r, &m, 1, WEIR_PORT_WAN, t0 + 92 * MS);
	CHECK(went == 1 && m->data_len == ref->data_len &&
	      memcmp(rte_pktmbuf_mtod(m, void *), rte_pktmbuf_mtod(ref, void *), ref->data_len) == 0,
	      "R's ACK went on byte for byte (went %u)", went);
	if (went == 1)
		rte_pktmbuf_free(m);
	rte_pktmbuf_free(ref);
	CHECK(ST->real_dropped == 0 && ST->real_passed == 0, "pep never saw it");
	CHECK(r.w->svc.ctr.port[WEIR_PORT_LAN].tcp_signed > 0 && r.w->svc.ctr.port[WEIR_PORT_WAN].tcp_signed > 0,
	      "counted: %lu out, %lu in", (unsigned long)r.w->svc.ctr.port[WEIR_PORT_LAN].tcp_signed,
	      (unsigned long)r.w->svc.ctr.port[WEIR_PORT_WAN].tcp_signed);
	sign_md5 = 0;
	rig_emitted_free(&r);
	drain_up(&r, t0 + 200 * MS);
	rig_free(&r);
}

/* A burst of losses: R names the first hole with a duplicate, then (a round
 * trip later) a partial ACK while SACK blocks show four more holes. With S
 * stalled on the gateway's full buffer no more duplicates come: the partial
 * ACK must resend the holes it says left room for, not one a round trip. */
static void
test_partial_ack_holes(void)
{
	const uint64_t t0 = *hzp;
	struct rig r;

	if (make(&r, "pep_holes") != 0) {
		CHECK(0, "rig");
		return;
	}
	opened(&r, t0);
	send_data(&r, 20, t0 + 50 * MS);
	drain_up(&r, t0 + 50 * MS);
	rig_emitted_free(&r);
	{
		struct seg s = rack(0, 2000, 2000);

		feed_seg(&r, &s, t0 + 100 * MS);
		s.n_sack = 2;
		s.sack[0] = ISN_S + 3000;
		s.sack[1] = ISN_S + 6000;
		s.sack[2] = ISN_S + 10000;
		s.sack[3] = ISN_S + 20000;
		feed_seg(&r, &s, t0 + 101 * MS);
	}
	CHECK(retx_of(&r, 2000) == 1 && ST->fast_retx == 1, "the first hole at once");
	rig_emitted_free(&r);
	{
		struct seg s = rack(0, 6000, 2000);

		s.n_sack = 1;
		s.sack[0] = ISN_S + 10000;
		s.sack[1] = ISN_S + 20000;
		feed_seg(&r, &s, t0 + 150 * MS);
	}
	CHECK(retx_of(&r, 6000) == 1 && retx_of(&r, 7000) == 1 && retx_of(&r, 8000) == 1 &&
	      retx_of(&r, 9000) == 1 && ST->fast_retx == 5,
	      "the partial ACK resends the four holes below the SACKed data (%" PRIu64 " resent)",
	      ST->fast_retx);
	rig_emitted_free(&r);
	{
		struct seg s = rack(0, 20000, 2000);

		feed_seg(&r, &s, t0 + 200 * MS);
	}
	CHECK(weir_pep_buffered(&r.w->svc, 0, 0) == 0 && ST->copies == 0, "all purged");
	rig_free(&r);
}

/*
 * shaping.pep.watermark = "measured": S always has 60 segments out past what
 * it was shown acknowledged; the path beyond the gateway (20 ms each way)
 * delivers 250 bytes a millisecond for 1.5 s, then 125. The class's share
 * (8 Mbit/s) would set a watermark of ~48 kB; R's delivery rate, once the
 * pipe is full, sets it from 2 Mbit/s, then follows the fall to 1 Mbit/s.
 */
#define BW_SEGS 4000

static uint32_t
pacs_highest(struct rig *r, uint32_t shown)
{
	struct seen a[256];
	unsigned int n = packs(r, a, 256);

	for (unsigned int i = 0; i < n; i++)
		if ((int32_t)(a[i].ack - shown) > 0)
			shown = a[i].ack;
	return shown;
}

/* The originals leave for R now: each is delivered in turn at the path's
 * rate (bytes per ms), and R's ACK for it is back 20 ms later. */
static void
bw_path(struct rig *r, uint64_t t, uint32_t rate, uint64_t *ack_at, uint32_t *out,
	uint64_t *deliv)
{
	struct rte_mbuf *o[64];
	uint16_t n;

	while ((n = rig_dequeue(r, WEIR_PORT_LAN, t, o, 64)) > 0) {
		for (uint16_t i = 0; i < n; i++) {
			struct seen s = look(o[i]);

			if (s.len > 0 && s.seq == ISN_S + *out * 1000 && *out < BW_SEGS) {
				uint64_t at = RTE_MAX(t + 20 * MS, *deliv + 1000 * MS / rate);

				*deliv = at;
				ack_at[(*out)++] = at + 20 * MS;
			}
		}
		rte_pktmbuf_free_bulk(o, n);
	}
}

static void
test_watermark_measured(void)
{
	static uint64_t ack_at[BW_SEGS];
	const uint64_t t0 = *hzp;
	uint32_t sent = 0, out = 0, acked = 0, shown = ISN_S, wm_hi = 0;
	uint64_t deliv = 0, bps_hi = 0, bps_lo;
	struct rig r;
	int rc;

	rig_pep_wm_measured = true;
	rig_flow_limit = 128;
	rc = make(&r, "pep_bw");
	rig_pep_wm_measured = false;
	rig_flow_limit = 0;
	if (rc != 0) {
		CHECK(0, "rig");
		return;
	}
	opened(&r, t0);
	rig_emitted_free(&r);
	for (uint64_t t = t0 + 50 * MS; t < t0 + 3500 * MS; t += 2 * MS) {
		uint32_t rate = t < t0 + 1500 * MS ? 250 : 125, k = acked;

		while (k < out && ack_at[k] <= t)
			k++;
		if (k > acked) {
			struct seg s = rack(0, k * 1000, 2000);

			acked = k;
			feed_seg(&r, &s, t);
		}
		shown = pacs_highest(&r, shown);
		rig_emitted_free(&r);
		while (sent < BW_SEGS && sent < (shown - ISN_S) / 1000 + 60) {
			struct seg s = data(0, sent++ * 1000);

			feed_seg(&r, &s, t);
		}
		shown = pacs_highest(&r, shown);
		rig_emitted_free(&r);
		bw_path(&r, t, rate, ack_at, &out, &deliv);
		if (t == t0 + 1450 * MS) {
			bps_hi = weir_pep_delivery_bps(&r.w->svc, 0, 0);
			wm_hi = weir_pep_watermark(&r.w->svc, 0, 0);
		}
	}
	bps_lo = weir_pep_delivery_bps(&r.w->svc, 0, 0);
	printf("pep measured: %" PRIu64 " then %" PRIu64 " bit/s, watermark %u\n", bps_hi, bps_lo, wm_hi);
	CHECK(bps_hi >= 1800000 && bps_hi <= 2300000, "2 Mbit/s measured (%" PRIu64 ")", bps_hi);
	/* 2 Mbit/s and a quarter x 40 ms, an eighth and two segments: ~17 kB. */
	CHECK(wm_hi >= 13000 && wm_hi <= 22000, "the watermark follows it, not the share (%u)",
	      wm_hi);
	CHECK(bps_lo >= 900000 && bps_lo <= 1200000, "the fall to 1 Mbit/s followed (%" PRIu64 ")",
	      bps_lo);
	CHECK(ST->give_ups == 0, "no give-up");
	rig_free(&r);
}

int
main(int argc, char **argv)
{
	static uint64_t hz;

	RTE_SET_USED(argc);
	unit_eal_init(argv[0], "pep", "256");
	hz = rte_get_tsc_hz();
	hzp = &hz;
	rig_mempool("pep_mp");
	test_pack_basic(0);
	test_pack_basic(1);
	test_watermark_release();
	test_local_recovery();
	test_partial_ack_holes();
	test_rto_give_up();
	test_rto_receiver_talks();
	test_rto_long_path();
	test_rst_from_sender();
	test_rst_from_receiver();
	test_packed_original_dropped();
	test_stop_drains();
	test_retx_tsval_floor();
	test_class_drop_dups_reach_sender();
	test_ece_reaches_sender();
	test_v6_ext_headers_not_copied();
	test_limits();
	test_end_with_packed();
	test_mode_off();
	test_flush();
	test_signed();
	test_watermark_measured();
	CHECK(rte_mempool_in_use_count(mp) == 0, "no mbuf leaked (%u in use)",
	      rte_mempool_in_use_count(mp));
	return unit_report();
}
