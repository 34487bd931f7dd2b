/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the per-flow pacing state, its layout and inline updates: a
 * service of the worker (made, reset and freed with the ACK store) shared
 * by the modes that pace ACKs or time a flow's round trip: tcr (lib/modes/tcr.c),
 * postack and postack-paced; their clocks over it are lib/modes/pace.h's. For
 * the data plane only: the worker, the modes, white-box tests.
 */
#ifndef WEIR_PACE_STATE_H
#define WEIR_PACE_STATE_H

#include <stdint.h>
#include <rte_common.h>


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

struct weir_tcr *weir_tcr_create(uint32_t n_flows, int socket_id);
void weir_tcr_free(struct weir_tcr *t);

/* A TCR window's headroom over the flow's BDP: two segments (in 1/16 of a
 * segment), fewer where the class's queue is short against its flows, and
 * at most what the flow's share sends in WEIR_TCR_MARGIN_MS (lib/modes/tcr.c).
 * The worker turns them into per-class figures (lib/worker/worker_active.c). */
#define WEIR_TCR_MARGIN16 32u
#define WEIR_TCR_MARGIN_MS 40u

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

#endif /* WEIR_PACE_STATE_H */
