/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the per-flow pacing state's memory (lib/modes/pace_state.h).
 */
#include <rte_malloc.h>

#include "pace_state.h"

struct weir_tcr *
weir_tcr_create(uint32_t n_flows, int socket_id)
{
	struct weir_tcr *t = rte_zmalloc_socket("weir_tcr", sizeof(*t), 0, socket_id);

	if (t == NULL)
		return NULL;
	t->n_flows = n_flows;
	for (int d = 0; d < 2; d++) {
		t->f[d] = rte_zmalloc_socket("weir_tcr_flows", (size_t)n_flows * sizeof(*t->f[d]),
					     RTE_CACHE_LINE_SIZE, socket_id);
		if (t->f[d] == NULL) {
			weir_tcr_free(t);
			return NULL;
		}
	}
	return t;
}

void
weir_tcr_free(struct weir_tcr *t)
{
	if (t == NULL)
		return;
	rte_free(t->f[0]);
	rte_free(t->f[1]);
	rte_free(t);
}
