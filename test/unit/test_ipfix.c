/* SPDX-License-Identifier: BSD-3-Clause
 * IPFIX message building (lib/observe/ipfix.c): the templates describe exactly the
 * records that follow them (each record decoded with its template gives
 * back the flow), reverse elements carry PEN 29305, sets are split at the
 * message's size, the header's length and sequence are RFC 7011's.
 */
#include <arpa/inet.h>
#include <string.h>

#include "unit.h"
#include "ipfix.h"

static uint16_t
g16(const uint8_t *b)
{
	return (uint16_t)(b[0] << 8 | b[1]);
}

static uint32_t
g32(const uint8_t *b)
{
	return (uint32_t)g16(b) << 16 | g16(b + 2);
}

static uint64_t
gn(const uint8_t *b, unsigned int n)
{
	uint64_t v = 0;

	for (unsigned int i = 0; i < n; i++)
		v = v << 8 | b[i];
	return v;
}

/* One template as read back: (ie, pen, len) per field. */
struct tfield {
	uint16_t ie, len;
	uint32_t pen;
};
struct tmpl {
	uint16_t id, n;
	struct tfield f[32];
};

static int
read_templates(const uint8_t *set, struct tmpl *t, int max)
{
	uint16_t len = g16(set + 2);
	const uint8_t *p = set + 4, *end = set + len;
	int n = 0;

	while (p + 4 <= end && n < max) {
		t[n].id = g16(p);
		t[n].n = g16(p + 2);
		p += 4;
		for (int i = 0; i < t[n].n; i++) {
			uint16_t ie = g16(p);

			t[n].f[i].ie = ie & 0x7fff;
			t[n].f[i].len = g16(p + 2);
			t[n].f[i].pen = (ie & 0x8000) ? g32(p + 4) : 0;
			p += (ie & 0x8000) ? 8 : 4;
		}
		n++;
	}
	return n;
}

static const struct tfield *
find(const struct tmpl *t, uint16_t ie, uint32_t pen, size_t *off, const uint8_t *rec)
{
	size_t o = 0;

	for (int i = 0; i < t->n; i++) {
		uint16_t l = t->f[i].len == 0xffff ? (uint16_t)(1 + rec[o]) : t->f[i].len;

		if (t->f[i].ie == ie && t->f[i].pen == pen) {
			*off = o;
			return &t->f[i];
		}
		o += l;
	}
	return NULL;
}

static void
test_round_trip(void)
{
	struct weir_ipfix_msg m;
	struct weir_ipfix_flow f = {
		.family = 4, .proto = 6, .end_reason = WEIR_IPFIX_END_IDLE,
		.sport = 40000, .dport = 80, .octets = 123456789012ull, .packets = 1000,
		.rev_octets = 5555, .rev_packets = 77, .start_ms = 1700000000123ull,
		.end_ms = 1700000005456ull, .class_id = 3, .class_name = "web",
	};
	struct tmpl t[4];
	const uint8_t *set, *rec;
	const struct tfield *tf;
	size_t off, len;

	inet_pton(AF_INET, "10.0.0.1", f.src);
	inet_pton(AF_INET, "192.0.2.9", f.dst);
	weir_ipfix_msg_begin(&m, 32473);
	CHECK(weir_ipfix_msg_templates(&m) == 0, "templates fit");
	CHECK(weir_ipfix_msg_record(&m, &f) == 0, "record fits");
	len = weir_ipfix_msg_end(&m, 1700000010, 42, 9);
	CHECK(g16(m.buf) == 10 && g16(m.buf + 2) == len && g32(m.buf + 4) == 1700000010 &&
	      g32(m.buf + 8) == 42 && g32(m.buf + 12) == 9, "header");
	set = m.buf + 16;
	CHECK(g16(set) == 2, "a template set first");
	CHECK(read_templates(set, t, 4) == 4 && t[0].id == 256 && t[1].id == 257 &&
	      t[2].id == 258 && t[3].id == 259, "four templates");
	CHECK(t[2].n == t[0].n + 4 && t[1].n == t[0].n, "the measured ones add RTT and retransmissions");
	rec = set + g16(set + 2);
	CHECK(g16(rec) == 256 && rec + g16(rec + 2) == m.buf + len, "one data set to the end");
	rec += 4;
	tf = find(&t[0], 8, 0, &off, rec);
	CHECK(tf != NULL && tf->len == 4 && memcmp(rec + off, f.src, 4) == 0, "sourceIPv4Address");
	tf = find(&t[0], 1, 0, &off, rec);
	CHECK(tf != NULL && gn(rec + off, tf->len) == f.octets, "octetDeltaCount");
	tf = find(&t[0], 1, 29305, &off, rec);
	CHECK(tf != NULL && gn(rec + off, tf->len) == f.rev_octets, "reverseOctetDeltaCount");
	tf = find(&t[0], 2, 29305, &off, rec);
	CHECK(tf != NULL && gn(rec + off, tf->len) == f.rev_packets, "reversePacketDeltaCount");
	tf = find(&t[0], 152, 0, &off, rec);
	CHECK(tf != NULL && gn(rec + off, 8) == f.start_ms, "flowStartMilliseconds");
	tf = find(&t[0], 7, 0, &off, rec);
	CHECK(tf != NULL && gn(rec + off, 2) == 40000, "sourceTransportPort");
	tf = find(&t[0], WEIR_IE_CLASS_NAME, 32473, &off, rec);
	CHECK(tf != NULL && tf->len == 0xffff && rec[off] == 3 && memcmp(rec + off + 1, "web", 3) == 0,
	      "the class name, variable length");
	tf = find(&t[0], WEIR_IE_RTT_LAN_US, 32473, &off, rec);
	CHECK(tf == NULL, "no RTT in the unmeasured template");
}

static void
test_measured_and_v6(void)
{
	struct weir_ipfix_msg m;
	struct weir_ipfix_flow f = { .family = 6, .proto = 17, .has_meas = true,
				     .rtt_lan_us = 1500, .rtt_wan_us = 50000, .retrans_pkts = 4 };
	size_t len;

	weir_ipfix_msg_begin(&m, 1);
	CHECK(weir_ipfix_template_id(&f) == 259, "v6 measured template");
	CHECK(weir_ipfix_msg_record(&m, &f) == 0, "record");
	len = weir_ipfix_msg_end(&m, 0, 0, 0);
	/* 16 addresses x2 + ports 4 + proto 1 + counts 32 + times 16 + reason 1
	 * + class id 2 + name 1 + subscriber id 1 + measurement 16 */
	CHECK(len == 16 + 4 + 32 + 4 + 1 + 32 + 16 + 1 + 2 + 1 + 1 + 16, "record size %zu", len);
}

static void
test_split(void)
{
	struct weir_ipfix_msg m;
	struct weir_ipfix_flow f = { .family = 4, .class_name = "a-rather-long-class-name" };
	int n = 0;

	weir_ipfix_msg_begin(&m, 1);
	while (weir_ipfix_msg_record(&m, &f) == 0)
		n++;
	CHECK(n > 10 && m.len <= WEIR_IPFIX_MSG_MAX && m.records == (uint32_t)n,
	      "records until the message is full (%d, %zu)", n, m.len);
	weir_ipfix_msg_end(&m, 0, 0, 0);
	CHECK(g16(m.buf + 2) == m.len && g16(m.buf + 16 + 2) == m.len - 16, "set length closed");
}

int
main(void)
{
	test_round_trip();
	test_measured_and_v6();
	test_split();
	return unit_report();
}
