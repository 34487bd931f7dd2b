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

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *frame = malloc(size ? size : 1);
	struct weir_pkt p;
	unsigned int rc;

	if (frame == NULL)
		return 0;
	memcpy(frame, data, size);
	rc = weir_parse(frame, (uint32_t)size, &p);
	if (rc != p.malformed || rc >= WEIR_MAL__COUNT)
		abort();
	if (rc == WEIR_MAL_NONE && p.l3 != WEIR_L3_OTHER) {
		/* Offsets that later stages dereference stay inside the frame. */
		if (p.l3_off > size || p.l4_off > size || p.l3_off + p.ip_len > size)
			abort();
		if ((size_t)p.l3_off + p.saddr_off + 2u * p.addr_len > size)
			abort();
		if ((p.flags & WEIR_PF_L4) && !(p.flags & WEIR_PF_FRAGMENT)) {
			if (p.l4_off < p.l3_off || p.payload_off < p.l4_off ||
			    (size_t)p.payload_off + p.payload_len > (size_t)p.l3_off + p.ip_len)
				abort();
			if ((p.flags & WEIR_PF_TCP_TS) && (size_t)p.l4_off + p.ts_off + 8 > p.payload_off)
				abort();
			if ((p.flags & WEIR_PF_TCP_SACK) &&
			    (size_t)p.l4_off + p.sack_off + 8u * p.sack_n > p.payload_off)
				abort();
		}
	}
	if (p.n_vlan > 2)
		abort();
	free(frame);
	return 0;
}
