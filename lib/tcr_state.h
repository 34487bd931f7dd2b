/* SPDX-License-Identifier: BSD-3-Clause
 * weir: TCR's per-flow pacing state, its layout and inline updates
 * (lib/tcr.h). For the data plane only: the worker, the modes, white-box
 * tests.
 */
#ifndef WEIR_TCR_STATE_H
#define WEIR_TCR_STATE_H

#include <stdint.h>
#include <rte_common.h>

#include "tcr.h"

struct weir_tcr_flow {
	uint64_t next_release;  /* TSC the next ACK may go */
	uint64_t sample_tsc;    /* when the timed segment left; 0 = no sample running */
	uint32_t sample_seq;    /* an ACK at or past this ends the sample */
	uint32_t srtt;          /* gateway -> data receiver -> gateway, ticks; 0 = unknown */
	/* postack-paced (Fig. 4's i.out): data packets queued since the
	 * flow's last released ACK, less the turns it passed up since. */
	uint32_t out;
	uint32_t _pad;
};

struct weir_tcr {
	struct weir_tcr_flow *f[2];     /* [data direction][flow slot] */
	uint32_t n_flows;
	uint64_t samples;               /* round-trip samples taken */
};

static inline void
weir_tcr_reset(struct weir_tcr *t, uint32_t slot)
{
	t->f[0][slot] = (struct weir_tcr_flow){ 0 };
	t->f[1][slot] = (struct weir_tcr_flow){ 0 };
}

/* A data segment of direction d ending at seq_end left the gateway. */
static inline void
weir_tcr_on_data(struct weir_tcr *t, int d, uint32_t slot, uint32_t seq_end, uint64_t now)
{
	struct weir_tcr_flow *f = &t->f[d][slot];

	if (f->sample_tsc == 0) {
		f->sample_seq = seq_end;
		f->sample_tsc = now;
	}
}

/* An ACK of direction d's data arrived: end the sample it covers. */
static inline void
weir_tcr_on_ack(struct weir_tcr *t, int d, uint32_t slot, uint32_t ack, uint64_t now)
{
	struct weir_tcr_flow *f = &t->f[d][slot];
	int64_t s;

	if (f->sample_tsc == 0 || (int32_t)(ack - f->sample_seq) < 0)
		return;
	s = (int64_t)(now - f->sample_tsc);
	f->sample_tsc = 0;
	if (s <= 0 || s > (int64_t)UINT32_MAX)
		return;
	/* srtt += (sample - srtt) / 8 */
	f->srtt = f->srtt ? (uint32_t)((int64_t)f->srtt + ((s - (int64_t)f->srtt) >> 3)) : (uint32_t)s;
	t->samples++;
}

#endif /* WEIR_TCR_STATE_H */
