/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for IPsec SAs as flows: the sequence-number rule
 * (lib/flow/sa_seq.c), the SA's directional flow key (lib/flow/flow.c), and a worker
 * that carries ESP/AH through leaves whose modes rewrite TCP (postack, tcr)
 * without touching a byte, counted as shaped pfq (lib/worker/worker.c).
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "unit.h"
#include "rig.h"
#include "classify.h"
#include "flow.h"
#include "sa_seq.h"

static void
test_seq_rule(void)
{
	struct weir_sa_seq s;
	const uint64_t owner = 12345;

	memset(&s, 0, sizeof(s));
	CHECK(weir_sa_seq_track(&s, owner, 1) == WEIR_SA_IN_ORDER && s.pkts == 1 && s.top == 1, "first");
	CHECK(weir_sa_seq_track(&s, owner, 2) == WEIR_SA_IN_ORDER, "in order");
	/* 3, 4 missing: a gap of two (SPEP's detector calls them lost). */
	CHECK(weir_sa_seq_track(&s, owner, 5) == WEIR_SA_GAP && s.gaps == 2 && weir_sa_seq_lost(&s) == 2,
	      "gap: %lu", (unsigned long)s.gaps);
	/* 4 arrives late: below the expected number, never a loss; it was. */
	CHECK(weir_sa_seq_track(&s, owner, 4) == WEIR_SA_LATE && s.late == 1 && s.gaps == 2 &&
	      weir_sa_seq_lost(&s) == 1, "late: lost %lu", (unsigned long)weir_sa_seq_lost(&s));
	CHECK(weir_sa_seq_track(&s, owner, 4) == WEIR_SA_DUP && s.dup == 1 && weir_sa_seq_lost(&s) == 1,
	      "dup");
	CHECK(weir_sa_seq_track(&s, owner, 5) == WEIR_SA_DUP && s.dup == 2, "dup of top");
	CHECK(weir_sa_seq_track(&s, owner, 6) == WEIR_SA_IN_ORDER && s.top == 6, "on");
	/* A gap longer than the window: the window restarts, nothing below is late. */
	CHECK(weir_sa_seq_track(&s, owner, 6 + 100) == WEIR_SA_GAP && s.gaps == 2 + 99, "long gap");
	CHECK(weir_sa_seq_track(&s, owner, 30) == WEIR_SA_OLD && s.old == 1 && s.top == 106,
	      "old: below the window");
	CHECK(weir_sa_seq_track(&s, owner, 107) == WEIR_SA_IN_ORDER, "on after old");
	/* A jump back that persists (the sender restarted): resync after a run. */
	for (uint32_t q = 10; q < 10 + WEIR_SA_OLD_RUN - 1; q++)
		CHECK(weir_sa_seq_track(&s, owner, q) == WEIR_SA_OLD, "old run %u", q);
	CHECK(weir_sa_seq_track(&s, owner, 10 + WEIR_SA_OLD_RUN - 1) == WEIR_SA_RESYNC &&
	      s.resync == 1 && s.top == 10 + WEIR_SA_OLD_RUN - 1, "jump back resyncs: top %u", s.top);
	CHECK(weir_sa_seq_track(&s, owner, s.top + 1) == WEIR_SA_IN_ORDER, "in order after resync");
	/* A far forward jump is a resync, not 2^20 losses. */
	uint64_t gaps = s.gaps;
	CHECK(weir_sa_seq_track(&s, owner, s.top + (1u << 20)) == WEIR_SA_RESYNC && s.gaps == gaps &&
	      s.resync == 2, "jump forward");
	/* Round the 32-bit wrap (ESN's low half): 0 is counted, then a resync. */
	memset(&s, 0, sizeof(s));
	weir_sa_seq_track(&s, owner, 0xfffffffeu);
	CHECK(weir_sa_seq_track(&s, owner, 0xffffffffu) == WEIR_SA_IN_ORDER, "near wrap");
	CHECK(weir_sa_seq_track(&s, owner, 0) == WEIR_SA_RESYNC && s.zero == 1, "zero");
	CHECK(weir_sa_seq_track(&s, owner, 1) == WEIR_SA_IN_ORDER && s.gaps == 0, "after wrap");
	CHECK(weir_sa_seq_track(&s, owner, 3) == WEIR_SA_GAP && s.gaps == 1, "gap after wrap");
	/* A wrap without the zero (0xffffffff -> 2): a gap of two (0 and 1). */
	memset(&s, 0, sizeof(s));
	weir_sa_seq_track(&s, owner, 0xffffffffu);
	CHECK(weir_sa_seq_track(&s, owner, 2) == WEIR_SA_GAP && s.gaps == 2, "gap across the wrap");
	/* Another flow in the slot: the record starts over. */
	CHECK(weir_sa_seq_track(&s, owner + 1, 900) == WEIR_SA_IN_ORDER && s.gaps == 0 && s.pkts == 1,
	      "new owner resets");
}

/* The SA records: a slot takes one on its first frame and keeps it; with
 * none free the SA goes untracked (NULL); a flow's end gives it back,
 * zeroed for the next SA; the management side reads only a slot's own. */
static void
test_sa_table(void)
{
	struct weir_sa_table *t = weir_sa_table_create(8, 2, SOCKET_ID_ANY);
	struct weir_sa_seq *a, *b, view;

	CHECK(t != NULL && weir_sa_table_create(8, 0, SOCKET_ID_ANY) == NULL &&
	      weir_sa_table_create(8, 70000, SOCKET_ID_ANY) == NULL, "create, bad caps refused");
	if (t == NULL)
		return;
	a = weir_sa_table_get(t, 3);
	CHECK(a != NULL && weir_sa_table_get(t, 3) == a, "slot 3 keeps its record");
	weir_sa_seq_track(a, 77, 5);
	b = weir_sa_table_get(t, 7);
	CHECK(b != NULL && b != a && weir_sa_table_get(t, 1) == NULL, "two records, a third SA untracked");
	CHECK(weir_sa_table_peek(t, 3, &view) == 0 && view.owner == 77 && view.top == 5 &&
	      weir_sa_table_peek(t, 1, &view) == -ENOENT && weir_sa_table_peek(t, 99, &view) == -ENOENT,
	      "peek: a slot's own record only");
	weir_sa_table_put(t, 3);
	weir_sa_table_put(t, 3);        /* twice: nothing more comes back */
	CHECK(weir_sa_table_peek(t, 3, &view) == -ENOENT && t->n_free == 1, "given back once");
	a = weir_sa_table_get(t, 1);
	CHECK(a != NULL && a->owner == 0 && a->top == 0 && a->pkts == 0, "reused, zeroed");
	CHECK(weir_sa_table_get(t, 2) == NULL, "full again");
	weir_sa_table_free(t);
}

/* Ethernet/IPv4 frame from 10.0.0.1 to 192.0.2.1 (or back when `in`) of
 * IP protocol ESP (SPI, seq, payload bytes) or, when `ah`, AH over a pure
 * TCP ACK with the given window. */
static struct rte_mbuf *
ipsec_frame(int in, int ah, uint32_t spi, uint32_t seq, uint16_t payload)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
	uint16_t l4 = ah ? (uint16_t)(24 + 20) : (uint16_t)(8 + payload);
	uint16_t len = (uint16_t)(14 + 20 + l4);
	uint8_t a_lan[4] = { 10, 0, 0, 1 }, a_wan[4] = { 192, 0, 2, 1 };
	uint8_t *f, *h;

	f = (uint8_t *)rte_pktmbuf_append(m, len);
	memset(f, 0, len);
	f[12] = 0x08;
	f[14] = 0x45;
	f[15] = 0x28;                   /* DSCP 10 */
	f[16] = (uint8_t)((len - 14) >> 8);
	f[17] = (uint8_t)(len - 14);
	f[22] = 64;
	f[23] = ah ? IPPROTO_AH : IPPROTO_ESP;
	memcpy(f + 26, in ? a_wan : a_lan, 4);
	memcpy(f + 30, in ? a_lan : a_wan, 4);
	h = f + 34;
	if (ah) {
		h[0] = IPPROTO_TCP;
		h[1] = 4;               /* (4 + 2) * 4 = 24 bytes */
		h += 4;
	}
	for (int i = 0; i < 4; i++) {
		h[i] = (uint8_t)(spi >> (24 - 8 * i));
		h[4 + i] = (uint8_t)(seq >> (24 - 8 * i));
	}
	if (ah) {
		uint8_t *t = f + 34 + 24;

		t[12] = 0x50;
		t[13] = ACK;
		t[14] = 0xff;           /* window 65535: a TCP ACK mode would cut it */
		t[15] = 0xff;
	} else {
		for (uint16_t i = 0; i < payload; i++)
			h[8 + i] = (uint8_t)(seq + i);
	}
	return m;
}

/* Ethernet/IPv4/UDP frame between 10.0.0.1:lport (LAN side: the NAT's
 * outside, say) and 192.0.2.1:4500 (the gateway), or back when `in`, with
 * `plen` payload bytes `pl`. */
static struct rte_mbuf *
udp4500_frame(int in, uint16_t lport, const uint8_t *pl, uint16_t plen)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
	uint16_t len = (uint16_t)(14 + 20 + 8 + plen);
	uint8_t a_lan[4] = { 10, 0, 0, 1 }, a_wan[4] = { 192, 0, 2, 1 };
	uint16_t sp = in ? 4500 : lport, dp = in ? lport : 4500;
	uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, len);

	memset(f, 0, len);
	f[12] = 0x08;
	f[14] = 0x45;
	f[16] = (uint8_t)((len - 14) >> 8);
	f[17] = (uint8_t)(len - 14);
	f[22] = 64;
	f[23] = IPPROTO_UDP;
	memcpy(f + 26, in ? a_wan : a_lan, 4);
	memcpy(f + 30, in ? a_lan : a_wan, 4);
	f[34] = (uint8_t)(sp >> 8);
	f[35] = (uint8_t)sp;
	f[36] = (uint8_t)(dp >> 8);
	f[37] = (uint8_t)dp;
	f[38] = (uint8_t)((8 + plen) >> 8);
	f[39] = (uint8_t)(8 + plen);
	if (plen > 0)
		memcpy(f + 42, pl, plen);
	return m;
}

/* ESP in UDP: SPI, sequence number and 16 opaque bytes. */
static struct rte_mbuf *
esp_udp_frame(int in, uint16_t lport, uint32_t spi, uint32_t seq)
{
	uint8_t pl[24];

	for (int i = 0; i < 4; i++) {
		pl[i] = (uint8_t)(spi >> (24 - 8 * i));
		pl[4 + i] = (uint8_t)(seq >> (24 - 8 * i));
	}
	for (int i = 8; i < 24; i++)
		pl[i] = (uint8_t)(i * 37);
	return udp4500_frame(in, lport, pl, sizeof(pl));
}

/* Issue 36.9a. On UDP 4500 only ESP is an SA: IKE (the zero non-ESP
 * marker), the 0xff keepalive and payloads too short for an SPI and a
 * sequence number are the IKE socket's ordinary UDP (a receiving stack
 * hands them to IKE too), never malformed. ESP in UDP is one SA per
 * direction keyed with its UDP ports: two hosts behind one NAT whose
 * inbound SAs got the same SPI (each host picks its own) are two SAs,
 * their sequence numbers not mixed. */
static void
test_natt_worker(void)
{
	struct weir_policy_conf pc = { .tree = { { .rate = 100000000000ull }, { .rate = 0 } } };
	static const uint8_t ike[28] = { 0, 0, 0, 0, 0x11, 0x22 }, keepalive[1] = { 0xff };
	static const uint8_t three[3] = { 1, 2, 3 }, eight[8] = { 0, 0, 0x10, 1, 0, 0, 0, 1 };
	uint64_t now = rte_get_tsc_hz();
	const struct weir_port_counters *lan, *wan;
	struct rte_mbuf *out[8];
	struct rig r;
	unsigned int went = 0;

	if (rig_make(&r, &pc, "natt") != 0) {
		CHECK(0, "rig");
		return;
	}
	went += feed(&r, udp4500_frame(0, 61000, ike, sizeof(ike)), 0, now);
	went += feed(&r, udp4500_frame(1, 61000, ike, sizeof(ike)), 1, now + 1);
	went += feed(&r, udp4500_frame(0, 61000, keepalive, sizeof(keepalive)), 0, now + 2);
	went += feed(&r, udp4500_frame(0, 61000, NULL, 0), 0, now + 3);
	went += feed(&r, udp4500_frame(0, 61000, three, sizeof(three)), 0, now + 4);
	went += feed(&r, udp4500_frame(0, 61000, eight, sizeof(eight)), 0, now + 5);
	lan = &r.w->svc.ctr.port[WEIR_PORT_LAN];
	wan = &r.w->svc.ctr.port[WEIR_PORT_WAN];
	CHECK(lan->malformed == 0 && wan->malformed == 0 && lan->ipsec == 0 && wan->ipsec == 0 &&
	      lan->managed == 5 && wan->managed == 1,
	      "IKE, keepalive, short: UDP (malformed %lu short %lu, ipsec %lu, managed %lu)",
	      (unsigned long)lan->malformed, (unsigned long)lan->malformed_by[WEIR_MAL_IPSEC_SHORT],
	      (unsigned long)lan->ipsec, (unsigned long)lan->managed);
	CHECK(weir_flow_table_stats(r.ft)->active == 1, "one UDP flow, both ways: %u",
	      weir_flow_table_stats(r.ft)->active);

	/* Two associations behind one NAT (ports 61000, 61001): outbound SAs
	 * 0x1000 and 0x1001 (the gateway's SPIs), inbound both 0xc001. */
	for (uint32_t seq = 1; seq <= 3; seq++) {
		went += feed(&r, esp_udp_frame(0, 61000, 0x1000, seq), 0, now + 10 * seq);
		went += feed(&r, esp_udp_frame(0, 61001, 0x1001, seq), 0, now + 10 * seq + 1);
		went += feed(&r, esp_udp_frame(1, 61000, 0xc001, seq), 1, now + 10 * seq + 2);
		went += feed(&r, esp_udp_frame(1, 61001, 0xc001, seq), 1, now + 10 * seq + 3);
	}
	for (uint16_t d = 0; d < 2; d++) {
		uint16_t n;

		while ((n = rig_dequeue(&r, (enum weir_port_role)d, now + 1000, out, 8)) > 0) {
			went += n;
			for (uint16_t i = 0; i < n; i++)
				rte_pktmbuf_free(out[i]);
		}
	}
	CHECK(went == 6 + 12, "every frame went on: %u", went);
	CHECK(lan->ipsec == 6 && wan->ipsec == 6 && wan->ipsec_dup == 0 && wan->ipsec_old == 0 &&
	      wan->ipsec_resync == 0 && wan->ipsec_gaps == 0 && lan->ipsec_dup == 0,
	      "each SA in order: ipsec %lu/%lu dup %lu old %lu resync %lu gaps %lu",
	      (unsigned long)lan->ipsec, (unsigned long)wan->ipsec, (unsigned long)wan->ipsec_dup,
	      (unsigned long)wan->ipsec_old, (unsigned long)wan->ipsec_resync,
	      (unsigned long)wan->ipsec_gaps);
	CHECK(weir_flow_table_stats(r.ft)->active == 1 + 4, "four SAs and the IKE flow: %u",
	      weir_flow_table_stats(r.ft)->active);
	rig_free(&r);
}

static void
test_sa_keys(void)
{
	struct rte_mbuf *a = ipsec_frame(0, 0, 0x1111, 1, 10), *b = ipsec_frame(1, 0, 0x2222, 1, 10);
	struct rte_mbuf *c = ipsec_frame(1, 0, 0x1111, 1, 10);
	struct weir_flow_key ka, kb, kc;
	struct weir_pkt pa, pb, pc;

	weir_parse(rte_pktmbuf_mtod(a, uint8_t *), a->data_len, &pa);
	weir_parse(rte_pktmbuf_mtod(b, uint8_t *), b->data_len, &pb);
	weir_parse(rte_pktmbuf_mtod(c, uint8_t *), c->data_len, &pc);
	CHECK(weir_flow_key_make(rte_pktmbuf_mtod(a, uint8_t *), &pa, &ka) == 1 &&
	      weir_flow_key_make(rte_pktmbuf_mtod(b, uint8_t *), &pb, &kb) == 1 &&
	      weir_flow_key_make(rte_pktmbuf_mtod(c, uint8_t *), &pc, &kc) == 1, "source is addr_lo");
	CHECK(weir_flow_key_spi(&ka) == 0x1111 && weir_flow_key_spi(&kb) == 0x2222 &&
	      (ka.vlan & WEIR_FK_SA) && ka.proto == IPPROTO_ESP, "SA key");
	/* One flow per direction: the tunnel's two SAs, and even the same SPI
	 * the other way, are different flows. */
	CHECK(memcmp(&ka, &kb, sizeof(ka)) != 0 && memcmp(&ka, &kc, sizeof(ka)) != 0, "directional");
	CHECK(memcmp(ka.addr_lo, kc.addr_hi, 4) == 0 && memcmp(ka.addr_hi, kc.addr_lo, 4) == 0,
	      "paired by addresses");
	rte_pktmbuf_free(a);
	rte_pktmbuf_free(b);
	rte_pktmbuf_free(c);
}

/* ESP through a postack leaf and AH-wrapped ACKs against a tcr leaf: every
 * frame comes out byte-identical, in order, shaped pfq and counted. */
static void
test_worker_modes(uint8_t mode, const char *name)
{
	struct weir_policy_conf pc = {
		.tree = { { .rate = 100000000000ull, .mode = mode },
			  { .rate = 0 } },
	};
	static const uint32_t seqs[] = { 1, 2, 4, 3, 7, 8, 8, 20 };
	struct rte_mbuf *in[RTE_DIM(seqs)], *copy[RTE_DIM(seqs)], *out[64];
	uint64_t now = rte_get_tsc_hz();
	const struct weir_port_counters *lan, *wan;
	struct rig r;
	uint16_t n = 0;

	if (rig_make_pa(&r, &pc, name, 256) != 0) {
		CHECK(0, "rig");
		return;
	}
	for (unsigned int i = 0; i < RTE_DIM(seqs); i++) {
		in[i] = ipsec_frame(0, 0, 0xabcd0001, seqs[i], 100);
		copy[i] = ipsec_frame(0, 0, 0xabcd0001, seqs[i], 100);
	}
	n = rig_process(&r, in, RTE_DIM(seqs), WEIR_PORT_LAN, now);
	for (uint16_t i = 0; i < n; i++)
		out[i] = in[i];
	n += rig_dequeue(&r, WEIR_PORT_LAN, now + 1000, out + n, (uint16_t)(64 - n));
	CHECK(n == RTE_DIM(seqs), "%s: all ESP frames out: %u", name, n);
	for (uint16_t i = 0; i < n && i < RTE_DIM(seqs); i++) {
		CHECK(out[i]->data_len == copy[i]->data_len &&
		      memcmp(rte_pktmbuf_mtod(out[i], void *), rte_pktmbuf_mtod(copy[i], void *),
			     copy[i]->data_len) == 0, "%s: frame %u unchanged, in order", name, i);
		rte_pktmbuf_free(out[i]);
	}
	for (unsigned int i = 0; i < RTE_DIM(seqs); i++)
		rte_pktmbuf_free(copy[i]);
	lan = &r.w->svc.ctr.port[WEIR_PORT_LAN];
	/* 1 2 4(gap 3) 3(late) 7(gap 5,6) 8 8(dup) 20(gap 9..19). */
	CHECK(lan->ipsec == RTE_DIM(seqs) && lan->ipsec_gaps == 1 + 2 + 11 && lan->ipsec_late == 1 &&
	      lan->ipsec_dup == 1 && lan->managed == RTE_DIM(seqs),
	      "%s: ipsec %lu gaps %lu late %lu dup %lu", name, (unsigned long)lan->ipsec,
	      (unsigned long)lan->ipsec_gaps, (unsigned long)lan->ipsec_late, (unsigned long)lan->ipsec_dup);
	CHECK(lan->ipsec_plain == (mode == WEIR_MODE_PFQ || mode == WEIR_MODE_FIFO ? 0 : RTE_DIM(seqs)),
	      "%s: shaped as pfq instead: %lu", name, (unsigned long)lan->ipsec_plain);

	/* AH over pure TCP ACKs coming back: an ACK mode never sees them. */
	for (uint32_t i = 0; i < 4; i++) {
		struct rte_mbuf *m = ipsec_frame(1, 1, 0x77, i + 1, 0);
		struct rte_mbuf *ref = ipsec_frame(1, 1, 0x77, i + 1, 0);

		n = rig_process(&r, &m, 1, WEIR_PORT_WAN, now + 2000 + i);
		CHECK(n == 1 && memcmp(rte_pktmbuf_mtod(m, void *), rte_pktmbuf_mtod(ref, void *),
				       ref->data_len) == 0, "%s: AH ACK %u passed unchanged", name, i);
		if (n == 1)
			rte_pktmbuf_free(m);
		rte_pktmbuf_free(ref);
	}
	wan = &r.w->svc.ctr.port[WEIR_PORT_WAN];
	CHECK(wan->ipsec == 4 && wan->ipsec_gaps == 0 && wan->win_clamped == 0 && r.n_emitted == 0,
	      "%s: AH counted, never clamped or held", name);
	rig_free(&r);
}

/* Rules by SPI range, DSCP and addresses; NAT-T ESP classifies as ESP; a
 * TCP flow never matches an SPI rule; SPI errors are refused. */
static void
test_classify_spi(void)
{
	struct weir_classify_rule rules[3];
	struct weir_classifier *c;
	struct rte_mbuf *m;
	struct weir_pkt p;
	char err[128];
	uint8_t natt[14 + 20 + 8 + 16] = { [12] = 0x08, [14] = 0x45, [17] = 20 + 8 + 16, [22] = 64,
					   [23] = IPPROTO_UDP, [26] = 10, [29] = 1, [30] = 192,
					   [32] = 2, [33] = 1, [34] = 0x11, [35] = 0x94, [36] = 0x11,
					   [37] = 0x94, [39] = 8 + 16, [44] = 0x20, [45] = 0x01,
					   [49] = 1 };

	memset(rules, 0, sizeof(rules));
	rules[0].spi_lo = 0x2000;               /* NAT-T's 0x2001 */
	rules[0].spi_hi = 0x2fff;
	rules[0].proto = IPPROTO_ESP;
	rules[0].class_id = 1;
	rules[1].spi_lo = rules[1].spi_hi = 0xabcd0001;
	rules[1].dscp_mask = 1ull << 10;        /* ipsec_frame's DSCP */
	rules[1].class_id = 2;
	rules[2].proto = IPPROTO_ESP;
	rules[2].class_id = 3;
	c = weir_classifier_build(rules, 3, 0, err, sizeof(err));
	CHECK(c != NULL, "build: %s", err);
	if (c == NULL)
		return;
	weir_parse(natt, sizeof(natt), &p);
	CHECK(p.ipsec == WEIR_IPSEC_NATT && weir_classify(c, natt, &p, WEIR_DIR_OUT) == 1,
	      "NAT-T ESP by SPI range");
	m = ipsec_frame(0, 0, 0xabcd0001, 1, 20);
	weir_parse(rte_pktmbuf_mtod(m, uint8_t *), m->data_len, &p);
	CHECK(weir_classify(c, rte_pktmbuf_mtod(m, uint8_t *), &p, WEIR_DIR_OUT) == 2, "SPI + DSCP");
	rte_pktmbuf_free(m);
	m = ipsec_frame(0, 0, 0x77, 1, 20);
	weir_parse(rte_pktmbuf_mtod(m, uint8_t *), m->data_len, &p);
	CHECK(weir_classify(c, rte_pktmbuf_mtod(m, uint8_t *), &p, WEIR_DIR_OUT) == 3, "other SA: esp");
	rte_pktmbuf_free(m);
	m = ipsec_frame(0, 1, 0x2001, 1, 0);    /* AH: not proto esp */
	weir_parse(rte_pktmbuf_mtod(m, uint8_t *), m->data_len, &p);
	CHECK(weir_classify(c, rte_pktmbuf_mtod(m, uint8_t *), &p, WEIR_DIR_OUT) == 0, "AH 0x2001");
	rte_pktmbuf_free(m);
	/* A TCP packet whose ports read as 0x2001 never matches an SPI rule. */
	rules[0].proto = 0;
	weir_classifier_free(c);
	c = weir_classifier_build(rules, 1, 0, err, sizeof(err));
	m = tcp_frame(0, 1, 0, 1, 0x2001, ACK, 1, 0);
	weir_parse(rte_pktmbuf_mtod(m, uint8_t *), m->data_len, &p);
	CHECK(c != NULL && weir_classify(c, rte_pktmbuf_mtod(m, uint8_t *), &p, WEIR_DIR_OUT) == 0,
	      "TCP never matches an SPI rule");
	rte_pktmbuf_free(m);
	weir_classifier_free(c);
	rules[0].spi_lo = 5;
	rules[0].spi_hi = 4;
	CHECK(weir_classifier_build(rules, 1, 0, err, sizeof(err)) == NULL && strstr(err, "SPI") != NULL,
	      "lo > hi refused: %s", err);
	rules[0].spi_lo = 4;
	rules[0].port[3].lo = rules[0].port[3].hi = 80;
	CHECK(weir_classifier_build(rules, 1, 0, err, sizeof(err)) == NULL, "SPI and ports refused");
}

/* A flow table full of SAs: the next SA's frames go on unmanaged, counted
 * flow_full, as any new flow's would; an SA already in the table goes on. */
static void
test_table_full_of_sas(void)
{
	struct weir_policy_conf pc = { .tree = { { .rate = 100000000000ull }, { .rate = 0 } } };
	uint64_t now = rte_get_tsc_hz();
	const struct weir_port_counters *lan;
	struct rte_mbuf *out[4];
	struct rig r;
	unsigned int went = 0;

	if (rig_make(&r, &pc, "ipsec_full") != 0) {
		CHECK(0, "rig");
		return;
	}
	for (uint32_t spi = 1; spi <= CAP + 3; spi++) {
		struct rte_mbuf *m = ipsec_frame(0, 0, spi, 1, 40);

		uint16_t n;

		went += feed(&r, m, 0, now);
		n = rig_dequeue(&r, WEIR_PORT_LAN, now + spi, out, 4);
		went += n;
		for (uint16_t i = 0; i < n; i++)
			rte_pktmbuf_free(out[i]);
	}
	CHECK(went == CAP + 3, "every frame went on: %u", went);
	lan = &r.w->svc.ctr.port[WEIR_PORT_LAN];
	CHECK(lan->managed == CAP && lan->flow_full == 3 && lan->ipsec == CAP,
	      "managed %lu full %lu ipsec %lu", (unsigned long)lan->managed,
	      (unsigned long)lan->flow_full, (unsigned long)lan->ipsec);
	CHECK(weir_flow_table_stats(r.ft)->active == CAP, "table full of SAs");
	rig_free(&r);
}

int
main(int argc, char **argv)
{
	(void)argc;
	unit_eal_init(argv[0], "ipsec", "256");
	rig_mempool("ipsec_mp");
	test_seq_rule();
	test_sa_table();
	test_sa_keys();
	test_worker_modes(WEIR_MODE_POSTACK, "postack");
	test_worker_modes(WEIR_MODE_TCR, "tcr");
	test_worker_modes(WEIR_MODE_PACED, "paced");
	test_worker_modes(WEIR_MODE_PFQ, "pfq");
	test_worker_modes(WEIR_MODE_FIFO, "fifo");
	test_table_full_of_sas();
	test_natt_worker();
	test_classify_spi();
	return unit_report();
}
