/* SPDX-License-Identifier: BSD-3-Clause
 * weir: IPFIX messages (RFC 7011) of bidirectional flow records (RFC 5103),
 * built without I/O: the exporter (app/weir/ipfix_export.c) sends them.
 *
 * A record's fields come from one table (ipfix.c, `fields`): adding an
 * information element is one line there and, if new, one member in
 * struct weir_ipfix_flow. The forward direction is the flow's initiator to
 * its responder; the reverse direction's counters are the same elements
 * under RFC 5103's reverse enterprise number 29305. weir's own elements
 * (class, subscriber, TCP measurement) are enterprise-specific, under the
 * enterprise number the exporter is configured with.
 *
 * Four templates, one per address family, with and without the TCP
 * measurement fields (RTT each side, retransmissions each way): a record
 * uses the measured one only when the flow carries measurements.
 */
#ifndef WEIR_IPFIX_H
#define WEIR_IPFIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WEIR_IPFIX_VERSION      10
#define WEIR_IPFIX_PEN_REVERSE  29305   /* RFC 5103 */
/* RFC 5612's enterprise number for documentation: the default of weir's
 * own elements until an operator configures the number of their own. */
#define WEIR_IPFIX_PEN_DOC      32473
/* Largest message: fits an Ethernet MTU of 1500 in IPv6 and UDP. */
#define WEIR_IPFIX_MSG_MAX      1400
#define WEIR_IPFIX_TEMPLATE_V4  256
#define WEIR_IPFIX_TEMPLATE_V6  257
#define WEIR_IPFIX_TEMPLATE_MEAS 2      /* added to the id: the measured variant */

/* weir's enterprise-specific elements (numbers under the configured PEN). */
enum weir_ipfix_ie {
	WEIR_IE_CLASS_ID = 1,           /* unsigned16: the policy target */
	WEIR_IE_CLASS_NAME = 2,         /* string: its leaf class (outbound, else inbound) */
	WEIR_IE_SUBSCRIBER = 3,         /* string: the subscriber's id, "" for none */
	WEIR_IE_RTT_LAN_US = 4,         /* unsigned32: the LAN side's round trip, us */
	WEIR_IE_RTT_WAN_US = 5,         /* unsigned32: the WAN side's */
	WEIR_IE_RETRANS_PKTS = 6,       /* unsigned32: retransmitted segments, forward */
	WEIR_IE_RETRANS_PKTS_REV = 7,   /* unsigned32: and reverse */
};

/* flowEndReason (IE 136) */
enum weir_ipfix_end {
	WEIR_IPFIX_END_IDLE = 1,
	WEIR_IPFIX_END_ACTIVE = 2,      /* an active-timeout report of a flow that goes on */
	WEIR_IPFIX_END_FLOW = 3,        /* FIN/RST seen */
	WEIR_IPFIX_END_FORCED = 4,
	WEIR_IPFIX_END_RESOURCES = 5,   /* evicted */
};

/* One bidirectional record. Addresses network order (IPv4: first 4 bytes);
 * counts are deltas since the flow's last record. */
struct weir_ipfix_flow {
	uint8_t family;                 /* 4 or 6 */
	uint8_t proto;
	uint8_t end_reason;             /* enum weir_ipfix_end */
	uint8_t src[16], dst[16];       /* initiator, responder */
	uint16_t sport, dport;
	uint64_t octets, packets;       /* initiator to responder */
	uint64_t rev_octets, rev_packets;
	uint64_t start_ms, end_ms;      /* Unix time, ms */
	uint16_t class_id;
	char class_name[64];
	char subscriber[64];            /* the subscriber's id, "" for none */
	/* TCP measurement: exported (the measured template) when has_meas. */
	bool has_meas;
	uint32_t rtt_lan_us, rtt_wan_us;
	uint32_t retrans_pkts, rev_retrans_pkts;
};

/* A message being filled: header, then sets; records of one template
 * share a set. */
struct weir_ipfix_msg {
	uint8_t buf[WEIR_IPFIX_MSG_MAX];
	size_t len;
	size_t set_off;                 /* the open set's header (0: none) */
	uint16_t set_id;
	uint32_t records;               /* data records in this message */
	uint32_t pen;                   /* weir's elements' enterprise number */
};

void weir_ipfix_msg_begin(struct weir_ipfix_msg *m, uint32_t pen);
/* Add every template (a template set): 0, or -1 if it does not fit. */
int weir_ipfix_msg_templates(struct weir_ipfix_msg *m);
/* Add a data record: 0, or -1 if it does not fit (send, begin, add again). */
int weir_ipfix_msg_record(struct weir_ipfix_msg *m, const struct weir_ipfix_flow *f);
/* Close the last set and write the header: the bytes to send (m->len). */
size_t weir_ipfix_msg_end(struct weir_ipfix_msg *m, uint32_t export_time, uint32_t seq,
			  uint32_t domain);
/* The template id a record of f uses. */
uint16_t weir_ipfix_template_id(const struct weir_ipfix_flow *f);

#endif /* WEIR_IPFIX_H */
