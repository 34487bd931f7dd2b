/* SPDX-License-Identifier: BSD-3-Clause */
#include <string.h>

#include "counters.h"

void
weir_counters_sum(const struct weir_worker_counters *const *w, unsigned int n,
		  struct weir_worker_counters *out)
{
	/* Every field is a uint64_t, so the blocks sum as arrays of words. */
	const size_t words = sizeof(*out) / sizeof(uint64_t);
	uint64_t *dst = (uint64_t *)out;

	memset(out, 0, sizeof(*out));
	for (unsigned int i = 0; i < n; i++) {
		const uint64_t *src = (const uint64_t *)w[i];
		for (size_t k = 0; k < words; k++)
			dst[k] += src[k];
	}
}
