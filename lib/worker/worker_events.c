/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the worker's flow events for the policy hooks (lib/worker/worker_int.h):
 * once per flow, never per packet, posted to the management lcore's ring
 * within a rate budget; the token bucket is the malformed-frame limit's too.
 */
#include <string.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_ring_elem.h>

#include "worker.h"
#include "worker_int.h"



/* May one more go now, at `per_s` a second (0: no limit)? */
bool
weir_wk_tbucket_take(struct weir_tbucket *b, uint32_t per_s, uint64_t hz, uint64_t now)
{
	const uint64_t cap = (uint64_t)per_s << 20;

	if (per_s == 0)
		return true;
	if (now - b->tsc >= hz)
		b->tokens = cap;
	else
		b->tokens = RTE_MIN(cap, b->tokens + (uint64_t)((unsigned __int128)(now - b->tsc) *
								cap / hz));
	b->tsc = now;
	if (b->tokens < (1u << 20))
		return false;
	b->tokens -= 1u << 20;
	return true;
}

static inline bool
event_budget(struct weir_worker *w, uint64_t now)
{
	return weir_wk_tbucket_take(&w->ev_bucket, w->conf.events_per_s, w->svc.tsc_hz, now);
}

static void
event_post(struct weir_worker *w, const struct weir_flow_event *ev, uint64_t now)
{
	if (!event_budget(w, now) ||
	    rte_ring_sp_enqueue_elem(w->conf.events, (void *)(uintptr_t)ev, sizeof(*ev)) != 0) {
		w->events_dropped++;
		return;
	}
	w->events_sent++;
}

static inline void
put_be64(uint8_t *b, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		b[i] = (uint8_t)v;
}

/* A new flow, classified: tell the hooks, and remember which side of its
 * key is the LAN (for its end event). */
void
weir_wk_event_new(struct weir_worker *w, struct weir_flow *f, const struct weir_cls_tuple *t,
		  const uint8_t *frame, const struct weir_pkt *p)
{
	struct weir_flow_event ev = {
		.type = WEIR_FEV_NEW, .init_dir = t->init_dir, .proto = t->proto,
		.family = t->family, .dscp = t->dscp, .vlan = t->vlan,
		.lan_port = t->port[0], .wan_port = t->port[1],
		.slot = weir_flow_slot(w->svc.flows, f), .target = f->class_id,
		.epoch = w->svc.policy->epoch, .first_tsc = f->first_tsc, .last_tsc = f->last_tsc,
	};
	struct weir_flow_key key;

	put_be64(ev.lan, t->addr[0][0]);
	put_be64(ev.lan + 8, t->addr[0][1]);
	put_be64(ev.wan, t->addr[1][0]);
	put_be64(ev.wan + 8, t->addr[1][1]);
	if (w->conf.end_flow_events && !(f->shape & WEIR_FSH_LAN_HI) &&
	    weir_flow_key_make(frame, p, &key) == 0 &&
	    memcmp(key.addr_hi, ev.lan, 16) == 0 && memcmp(key.addr_lo, ev.lan, 16) != 0)
		f->shape |= WEIR_FSH_LAN_HI;
	if (w->conf.new_flow_events)
		event_post(w, &ev, f->last_tsc);
}

/* A flow leaves the table: its totals for the hooks. */
void
weir_wk_event_end(struct weir_worker *w, struct weir_flow *f, const struct weir_flow_key *key)
{
	const int hi = !!(f->shape & WEIR_FSH_LAN_HI);
	struct weir_flow_event ev = {
		.type = WEIR_FEV_END, .init_dir = (f->shape & WEIR_FSH_INIT_IN) ? WEIR_DIR_IN : WEIR_DIR_OUT,
		.proto = key->proto, .family = key->family, .vlan = key->vlan & WEIR_FK_VLAN_ID,
		.lan_port = hi ? key->port_hi : key->port_lo, .wan_port = hi ? key->port_lo : key->port_hi,
		.slot = weir_flow_slot(w->svc.flows, f), .target = f->class_id, .state = f->state,
		.epoch = f->class_gen == w->svc.gen8 ? w->svc.policy->epoch : 0,
		.first_tsc = f->first_tsc, .last_tsc = f->last_tsc,
		.bytes = { f->bytes[0], f->bytes[1] }, .pkts = { f->pkts[0], f->pkts[1] },
	};

	memcpy(ev.lan, hi ? key->addr_hi : key->addr_lo, 16);
	memcpy(ev.wan, hi ? key->addr_lo : key->addr_hi, 16);
	event_post(w, &ev, rte_rdtsc());
}
