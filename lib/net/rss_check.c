/* SPDX-License-Identifier: BSD-3-Clause */
#include <rte_thash.h>

#include "rss_check.h"

uint16_t
weir_rss_queue(uint32_t hash, const uint16_t *reta, uint16_t reta_size)
{
	return reta_size ? reta[hash % reta_size] : 0;
}

/* xorshift32: a fixed sample, not a secret. */
static uint32_t
next(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static uint32_t
hash_of(const uint8_t *key, uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, bool l4)
{
	/* rte_softrss's input: host-order words, as the NIC reads the
	 * header fields in network order. */
	uint32_t t[3] = { src, dst, (uint32_t)sport << 16 | dport };

	return rte_softrss(t, l4 ? 3 : 2, key);
}

unsigned int
weir_rss_asymmetric(const uint8_t *key, const uint16_t *reta, uint16_t reta_size, bool l4,
		    unsigned int n, uint32_t seed)
{
	uint32_t s = seed ? seed : 1;
	unsigned int bad = 0;

	for (unsigned int i = 0; i < n; i++) {
		uint32_t a = next(&s), b = next(&s), p = next(&s);
		uint16_t sp = (uint16_t)p, dp = (uint16_t)(p >> 16);
		uint16_t q_out = weir_rss_queue(hash_of(key, a, b, sp, dp, l4), reta, reta_size);
		uint16_t q_in = weir_rss_queue(hash_of(key, b, a, dp, sp, l4), reta, reta_size);

		bad += q_out != q_in;
	}
	return bad;
}
