/* SPDX-License-Identifier: BSD-3-Clause
 * weir: incremental Internet checksum updates (RFC 1624).
 *
 * When weir rewrites a field of a header it patches the checksum that
 * covers it instead of recomputing it: HC' = ~(~HC + ~m + m') (RFC 1624,
 * eqn. 3), which also gets the 0x0000/0xffff corner right that RFC 1141's
 * form got wrong. The one's complement sum does not care about byte
 * order as long as every operand is in the same order, so the functions
 * take the 16-bit words exactly as they sit in the packet (network order,
 * loaded as they are). The TCP checksum covers the IPv4 and IPv6 pseudo
 * headers alike: a TCP field's change is patched the same way for both.
 */
#ifndef WEIR_CKSUM_H
#define WEIR_CKSUM_H

#include <stdint.h>
#include <string.h>

static inline uint16_t
weir_cksum_fold(uint32_t s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* Checksum `hc` after a 16-bit word of the covered data changes from
 * `old` to `new` (all three as stored in the packet). */
static inline uint16_t
weir_cksum_update16(uint16_t hc, uint16_t old, uint16_t new)
{
	return (uint16_t)~weir_cksum_fold((uint32_t)(uint16_t)~hc + (uint16_t)~old + new);
}

/* Set the 16-bit word at `field` (anywhere in the covered data, 2-byte
 * aligned relative to the start of the covered data) to `new_be` and patch
 * the checksum at `ck`. Both are byte pointers into the packet. */
static inline void
weir_cksum_set16(uint8_t *field, uint8_t *ck, uint16_t new_be)
{
	uint16_t old, hc;

	memcpy(&old, field, 2);
	memcpy(&hc, ck, 2);
	hc = weir_cksum_update16(hc, old, new_be);
	memcpy(field, &new_be, 2);
	memcpy(ck, &hc, 2);
}

#endif /* WEIR_CKSUM_H */
