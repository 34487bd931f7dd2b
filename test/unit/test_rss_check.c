/* SPDX-License-Identifier: BSD-3-Clause
 * The RSS self-test's software model (lib/net/rss_check.c): the repeated-0x6d5a
 * key weir programs is symmetric over any redirection table, the common
 * default (Microsoft's verification) key is not, and the model's Toeplitz
 * hash matches the published verification vector.
 */
#include <string.h>

#include <rte_thash.h>

#include "rss_check.h"
#include "unit.h"

/* The default key of many NICs (the Microsoft RSS verification suite's). */
static const uint8_t ms_key[40] = {
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
	0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
	0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

int
main(int argc, char **argv)
{
	uint8_t sym[52];
	uint16_t reta[128];
	/* Microsoft's vector: 66.9.149.187:2794 -> 161.142.100.80:1766, IPv4
	 * with TCP ports: 0x51ccc178. */
	uint32_t t[3] = { 0x420995bb, 0xa18e6450, (2794u << 16) | 1766u };

	RTE_SET_USED(argc);
	RTE_SET_USED(argv);
	CHECK(rte_softrss(t, 3, ms_key) == 0x51ccc178, "Toeplitz vector: %08x", rte_softrss(t, 3, ms_key));
	for (size_t i = 0; i < sizeof(sym); i += 2) {
		sym[i] = 0x6d;
		sym[i + 1] = 0x5a;
	}
	for (unsigned int q = 2; q <= 3; q++) {
		for (unsigned int i = 0; i < RTE_DIM(reta); i++)
			reta[i] = (uint16_t)(i % q);
		for (int l4 = 0; l4 <= 1; l4++) {
			unsigned int s = weir_rss_asymmetric(sym, reta, RTE_DIM(reta), l4, 1000, 7);
			unsigned int m = weir_rss_asymmetric(ms_key, reta, RTE_DIM(reta), l4, 1000, 7);

			CHECK(s == 0, "symmetric key, %u queues, l4 %d: %u of 1000 split", q, l4, s);
			/* About (q-1)/q of the flows split with an ordinary key. */
			CHECK(m > 300, "default key, %u queues, l4 %d: only %u of 1000 split", q, l4, m);
		}
	}
	return unit_report();
}
