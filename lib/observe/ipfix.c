/* SPDX-License-Identifier: BSD-3-Clause
 * weir: IPFIX message building (lib/observe/ipfix.h). No I/O, no EAL.
 */
#include <stddef.h>
#include <string.h>

#include "ipfix.h"

/* Which templates a field is in. */
#define IN_V4    0x01
#define IN_V6    0x02
#define IN_MEAS  0x04           /* only the measured variants */
#define IN_ALL   (IN_V4 | IN_V6)

enum kind { UINT, ADDR, STR };

/* pen: 0 IANA, WEIR_IPFIX_PEN_REVERSE, or WEIR: the configured number. */
#define WEIR 1u

struct field {
	uint16_t ie;
	uint32_t pen;
	uint16_t len;           /* on the wire (UINT: the member's size); STR: variable */
	uint8_t in;
	uint8_t kind;
	size_t off;
};

#define M(member) offsetof(struct weir_ipfix_flow, member)
#define U(ie, pen, in, member) \
	{ ie, pen, sizeof(((struct weir_ipfix_flow *)0)->member), in, UINT, M(member) }
#define VARLEN 0xffff

/* The records' fields, in order. One line per information element. */
static const struct field fields[] = {
	{ 8, 0, 4, IN_V4, ADDR, M(src) },                       /* sourceIPv4Address */
	{ 12, 0, 4, IN_V4, ADDR, M(dst) },                      /* destinationIPv4Address */
	{ 27, 0, 16, IN_V6, ADDR, M(src) },                     /* sourceIPv6Address */
	{ 28, 0, 16, IN_V6, ADDR, M(dst) },                     /* destinationIPv6Address */
	U(7, 0, IN_ALL, sport),                                 /* sourceTransportPort */
	U(11, 0, IN_ALL, dport),                                /* destinationTransportPort */
	U(4, 0, IN_ALL, proto),                                 /* protocolIdentifier */
	U(1, 0, IN_ALL, octets),                                /* octetDeltaCount */
	U(2, 0, IN_ALL, packets),                               /* packetDeltaCount */
	U(1, WEIR_IPFIX_PEN_REVERSE, IN_ALL, rev_octets),       /* reverseOctetDeltaCount */
	U(2, WEIR_IPFIX_PEN_REVERSE, IN_ALL, rev_packets),      /* reversePacketDeltaCount */
	U(152, 0, IN_ALL, start_ms),                            /* flowStartMilliseconds */
	U(153, 0, IN_ALL, end_ms),                              /* flowEndMilliseconds */
	U(136, 0, IN_ALL, end_reason),                          /* flowEndReason */
	U(WEIR_IE_CLASS_ID, WEIR, IN_ALL, class_id),
	{ WEIR_IE_CLASS_NAME, WEIR, VARLEN, IN_ALL, STR, M(class_name) },
	{ WEIR_IE_SUBSCRIBER, WEIR, VARLEN, IN_ALL, STR, M(subscriber) },
	U(WEIR_IE_RTT_LAN_US, WEIR, IN_ALL | IN_MEAS, rtt_lan_us),
	U(WEIR_IE_RTT_WAN_US, WEIR, IN_ALL | IN_MEAS, rtt_wan_us),
	U(WEIR_IE_RETRANS_PKTS, WEIR, IN_ALL | IN_MEAS, retrans_pkts),
	U(WEIR_IE_RETRANS_PKTS_REV, WEIR, IN_ALL | IN_MEAS, rev_retrans_pkts),
};
#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))
_Static_assert(sizeof(((struct weir_ipfix_flow *)0)->subscriber) ==
	       sizeof(((struct weir_ipfix_flow *)0)->class_name), "strings of one size");

static bool
field_in(const struct field *fl, uint16_t tid)
{
	const bool v6 = (tid - WEIR_IPFIX_TEMPLATE_V4) & 1;
	const bool meas = (tid - WEIR_IPFIX_TEMPLATE_V4) & WEIR_IPFIX_TEMPLATE_MEAS;

	if (!(fl->in & (v6 ? IN_V6 : IN_V4)))
		return false;
	return !(fl->in & IN_MEAS) || meas;
}

uint16_t
weir_ipfix_template_id(const struct weir_ipfix_flow *f)
{
	return (uint16_t)((f->family == 6 ? WEIR_IPFIX_TEMPLATE_V6 : WEIR_IPFIX_TEMPLATE_V4) +
			  (f->has_meas ? WEIR_IPFIX_TEMPLATE_MEAS : 0));
}

static void
put16(uint8_t *b, uint16_t v)
{
	b[0] = (uint8_t)(v >> 8);
	b[1] = (uint8_t)v;
}

static void
put32(uint8_t *b, uint32_t v)
{
	put16(b, (uint16_t)(v >> 16));
	put16(b + 2, (uint16_t)v);
}

static void
put_uint(uint8_t *b, const void *src, size_t len)
{
	uint64_t v = 0;

	switch (len) {
	case 1: v = *(const uint8_t *)src; break;
	case 2: v = *(const uint16_t *)src; break;
	case 4: v = *(const uint32_t *)src; break;
	default: v = *(const uint64_t *)src; break;
	}
	for (size_t i = len; i-- > 0; v >>= 8)
		b[i] = (uint8_t)v;
}

static void
close_set(struct weir_ipfix_msg *m)
{
	if (m->set_off == 0)
		return;
	put16(m->buf + m->set_off + 2, (uint16_t)(m->len - m->set_off));
	m->set_off = 0;
}

/* Room for a set header if one for set_id must be opened, plus need. */
static int
room(struct weir_ipfix_msg *m, uint16_t set_id, size_t need)
{
	bool open = m->set_off != 0 && m->set_id == set_id;

	if (m->len + need + (open ? 0 : 4) > sizeof(m->buf))
		return -1;
	if (!open) {
		close_set(m);
		m->set_off = m->len;
		m->set_id = set_id;
		put16(m->buf + m->len, set_id);
		m->len += 4;
	}
	return 0;
}

void
weir_ipfix_msg_begin(struct weir_ipfix_msg *m, uint32_t pen)
{
	m->len = 16;
	m->set_off = 0;
	m->set_id = 0;
	m->records = 0;
	m->pen = pen;
}

int
weir_ipfix_msg_templates(struct weir_ipfix_msg *m)
{
	static const uint16_t ids[] = {
		WEIR_IPFIX_TEMPLATE_V4, WEIR_IPFIX_TEMPLATE_V6,
		WEIR_IPFIX_TEMPLATE_V4 + WEIR_IPFIX_TEMPLATE_MEAS,
		WEIR_IPFIX_TEMPLATE_V6 + WEIR_IPFIX_TEMPLATE_MEAS,
	};
	size_t need = 0;

	for (size_t t = 0; t < sizeof(ids) / sizeof(ids[0]); t++) {
		need += 4;
		for (size_t i = 0; i < N_FIELDS; i++)
			if (field_in(&fields[i], ids[t]))
				need += fields[i].pen != 0 ? 8 : 4;
	}
	if (room(m, 2, need) < 0)
		return -1;
	for (size_t t = 0; t < sizeof(ids) / sizeof(ids[0]); t++) {
		uint8_t *hdr = m->buf + m->len;
		uint16_t n = 0;

		m->len += 4;
		for (size_t i = 0; i < N_FIELDS; i++) {
			const struct field *fl = &fields[i];
			uint32_t pen = fl->pen == WEIR ? m->pen : fl->pen;

			if (!field_in(fl, ids[t]))
				continue;
			put16(m->buf + m->len, (uint16_t)(fl->ie | (pen != 0 ? 0x8000 : 0)));
			put16(m->buf + m->len + 2, fl->len);
			m->len += 4;
			if (pen != 0) {
				put32(m->buf + m->len, pen);
				m->len += 4;
			}
			n++;
		}
		put16(hdr, ids[t]);
		put16(hdr + 2, n);
	}
	return 0;
}

int
weir_ipfix_msg_record(struct weir_ipfix_msg *m, const struct weir_ipfix_flow *f)
{
	const uint16_t tid = weir_ipfix_template_id(f);
	const uint8_t *base = (const uint8_t *)f;
	size_t need = 0;

	for (size_t i = 0; i < N_FIELDS; i++) {
		const struct field *fl = &fields[i];

		if (!field_in(fl, tid))
			continue;
		if (fl->kind == STR) {
			size_t sl = strnlen((const char *)base + fl->off, sizeof(f->class_name) - 1);

			need += 1 + sl;         /* shorter than 255: one length octet */
		} else {
			need += fl->len;
		}
	}
	if (room(m, tid, need) < 0)
		return -1;
	for (size_t i = 0; i < N_FIELDS; i++) {
		const struct field *fl = &fields[i];
		uint8_t *b = m->buf + m->len;

		if (!field_in(fl, tid))
			continue;
		switch (fl->kind) {
		case ADDR:
			memcpy(b, base + fl->off, fl->len);
			m->len += fl->len;
			break;
		case STR: {
			size_t sl = strnlen((const char *)base + fl->off, sizeof(f->class_name) - 1);

			b[0] = (uint8_t)sl;
			memcpy(b + 1, base + fl->off, sl);
			m->len += 1 + sl;
			break;
		}
		default:
			put_uint(b, base + fl->off, fl->len);
			m->len += fl->len;
			break;
		}
	}
	m->records++;
	return 0;
}

size_t
weir_ipfix_msg_end(struct weir_ipfix_msg *m, uint32_t export_time, uint32_t seq,
		   uint32_t domain)
{
	close_set(m);
	put16(m->buf, WEIR_IPFIX_VERSION);
	put16(m->buf + 2, (uint16_t)m->len);
	put32(m->buf + 4, export_time);
	put32(m->buf + 8, seq);
	put32(m->buf + 12, domain);
	return m->len;
}
