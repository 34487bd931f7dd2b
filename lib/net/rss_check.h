/* SPDX-License-Identifier: BSD-3-Clause
 * weir: does a port's RSS send both directions of a flow to the same queue?
 *
 * The start-up self-test for NICs that hash with a Toeplitz key (ports.c):
 * sample flows are hashed in software the way the NIC does (rte_softrss over
 * the IPv4 addresses, and the L4 ports when `l4`), both ways round, with the
 * key and redirection table read back from the device; a flow whose two
 * directions map to different queues would be split across workers.
 */
#ifndef WEIR_RSS_CHECK_H
#define WEIR_RSS_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The queue a NIC picks for a hash: redirection table entry hash mod size. */
uint16_t weir_rss_queue(uint32_t hash, const uint16_t *reta, uint16_t reta_size);

/* Of `n` sample flows (pseudo-random from `seed`, the same every call), how
 * many go to different queues in their two directions. key: at least 40
 * bytes (what an IPv4 4-tuple's hash reads). */
unsigned int weir_rss_asymmetric(const uint8_t *key, const uint16_t *reta, uint16_t reta_size,
				 bool l4, unsigned int n, uint32_t seed);

#endif /* WEIR_RSS_CHECK_H */
