/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer harness for the parser. The input is copied into a buffer of
 * exactly its size so AddressSanitizer flags any read past the frame; the
 * invariants below are what the rest of the data plane relies on.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* abort() with the failed condition visible in the crash report's stack. */
#define MUST(cond) do { if (!(cond)) abort(); } while (0)

static void
check_offsets(const struct weir_pkt *p, size_t size)
{
	size_t l3_end = (size_t)p->l3_off + p->ip_len;

	/* Offsets that later stages dereference stay inside the IP packet. */
	MUST(p->l3_off >= 14 && l3_end <= size);
	MUST(p->addr_len == (p->l3 == WEIR_L3_IPV4 ? 4 : 16));
	MUST((size_t)p->l3_off + p->saddr_off + 2u * p->addr_len <= l3_end);
	MUST(p->l4_off >= p->l3_off + (p->l3 == WEIR_L3_IPV4 ? 20 : 40) && p->l4_off <= l3_end);
	if (p->flags & WEIR_PF_FRAGMENT)
		return;         /* no L4 fields: nothing further is read */
	MUST(p->flags & WEIR_PF_L4);
	MUST(p->l4_off <= p->payload_off && (size_t)p->payload_off + p->payload_len <= l3_end);
	if (p->flags & WEIR_PF_TCP_TS)
		MUST((size_t)p->l4_off + p->ts_off + 8 <= p->payload_off);
	/* An SA's SPI and sequence number were read inside the IP packet. */
	if (p->ipsec != WEIR_IPSEC_NONE) {
		MUST(p->ipsec <= WEIR_IPSEC_NATT && (p->sport | p->dport) != 0);
		MUST((size_t)p->payload_off + 8 <= l3_end);
		MUST(p->ipsec == WEIR_IPSEC_NATT ? p->l4proto == 17 && p->payload_len > 8
						  : p->l4proto == 50 || p->l4proto == 51);
	}
	if (p->flags & WEIR_PF_TCP_SACK)
		MUST(p->sack_n >= 1 && p->sack_n <= 4 &&
		     (size_t)p->l4_off + p->sack_off + 8u * p->sack_n <= p->payload_off);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *frame = malloc(size ? size : 1);
	struct weir_pkt p, q;
	unsigned int rc;

	if (frame == NULL)
		return 0;
	memcpy(frame, data, size);
	rc = weir_parse(frame, (uint32_t)size, &p);
	MUST(rc == p.malformed && rc < WEIR_MAL__COUNT);
	MUST(p.n_vlan <= 2 && !!(p.flags & WEIR_PF_VLAN) == (p.n_vlan > 0));
	/* A second parse must agree to the byte: no state, no uninitialised fields. */
	weir_parse(frame, (uint32_t)size, &q);
	MUST(memcmp(&p, &q, sizeof(p)) == 0);
	if (rc == WEIR_MAL_NONE && p.l3 != WEIR_L3_OTHER) {
		size_t l3_end = (size_t)p.l3_off + p.ip_len;

		check_offsets(&p, size);
		/* Bytes after the IP packet are Ethernet padding: cutting them off
		 * must not change a thing, and cutting one more byte must make the
		 * frame malformed (the IP length no longer fits). */
		weir_parse(frame, (uint32_t)l3_end, &q);
		MUST(memcmp(&p, &q, sizeof(p)) == 0);
		MUST(weir_parse(frame, (uint32_t)l3_end - 1, &q) != WEIR_MAL_NONE);
	}
	if (rc == WEIR_MAL_NONE && p.l3 == WEIR_L3_OTHER)
		MUST(!weir_pkt_manageable(&p) && p.ip_len == 0);
	free(frame);
	return 0;
}
