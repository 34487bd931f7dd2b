/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>
#include <string.h>

#include "link.h"

/* Ring of frame descriptors; each frame's data is malloc'ed at its exact
 * length, so jumbo frames need no special slots and memory follows what is
 * in flight rather than the ring's capacity. */

uint64_t
rng_next(uint64_t *s)
{
	/* xorshift64*: fast, and reproducible from --seed. */
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

int
link_init(struct link *l, const struct link_params *p, uint64_t *rng)
{
	memset(l, 0, sizeof(*l));
	l->p = *p;
	l->rng = rng;
	l->cap = LINK_RING_CAP;
	l->q = calloc(l->cap, sizeof(*l->q));
	l->delay_ns = (uint64_t)(p->delay_ms * 1e6);
	l->jitter_ns = (uint64_t)(p->jitter_ms * 1e6);
	return l->q == NULL ? -1 : 0;
}

void
link_free(struct link *l)
{
	while (l->head != l->tail)
		link_pop(l);
	free(l->q);
	l->q = NULL;
}

static uint32_t
ring_len(const struct link *l, uint32_t from)
{
	return (l->tail - from) & (l->cap - 1);
}

/* The first frame still serialising is done: In frames waiting drop by one. */
static void
serial_next(struct link *l)
{
	l->rio.qin -= l->q[l->serial].in;
	l->serial = (l->serial + 1) & (l->cap - 1);
}

/* RIO's verdict on an arriving frame (true: drop it, counted); *in is its precedence. */
static bool
rio_offer(struct link *l, const uint8_t *data, uint32_t len, uint64_t now, bool *in)
{
	const int c = rio_class(&l->p.rio, data, len);
	const uint32_t qlen = ring_len(l, l->serial);
	/* The link has been idle since the last frame finished, if nothing waits. */
	const double idle_s = qlen == 0 && now > l->last_finish_ns ?
		(double)(now - l->last_finish_ns) * 1e-9 : 0;
	const double pkt_s = 1000.0 * 8 / (double)l->p.rate_bps;
	const double u = (double)(rng_next(l->rng) >> 11) * (1.0 / 9007199254740992.0);

	*in = c == RIO_IN;
	l->rio_st.rx[c]++;
	if (!rio_drop(&l->p.rio, &l->rio, c, qlen, idle_s, pkt_s, u))
		return false;
	l->rio_st.drop[c]++;
	return true;
}

bool
link_offer(struct link *l, const uint8_t *data, uint32_t len, uint64_t now)
{
	struct frame *f;
	uint64_t finish, delay, due;
	bool in = false;

	l->st.rx++;
	l->count++;
	if (l->p.loss) {
		if (l->p.ploss && l->count % l->p.ploss == 0) {
			l->st.drop_periodic++;
			return false;
		}
		if (l->p.loss_pct > 0 &&
		    (double)(rng_next(l->rng) >> 11) * (1.0 / 9007199254740992.0) * 100.0 < l->p.loss_pct) {
			l->st.drop_random++;
			return false;
		}
	}
	/* Frames that finished serialising no longer count against the limit. */
	l->corrupt_next = l->p.loss && l->p.corrupt && len > 14 + 40 &&
		(double)(rng_next(l->rng) >> 11) * (1.0 / 9007199254740992.0) * l->p.corrupt < len;
	while (l->serial != l->tail && l->q[l->serial].finish_ns <= now)
		serial_next(l);
	if (l->p.rio.on && l->p.rate_bps && rio_offer(l, data, len, now, &in))
		return false;
	if ((l->p.rate_bps && ring_len(l, l->serial) >= l->p.limit) ||
	    ring_len(l, l->head) == l->cap - 1) {
		l->st.drop_queue++;
		return false;
	}
	finish = now;
	if (l->p.rate_bps) {
		uint64_t start = l->last_finish_ns > now ? l->last_finish_ns : now;

		/* A scheduled rate is the one in force when the frame starts on
		 * the wire: frames are short beside any period worth emulating. */
		if (l->p.sched.kind != SCHED_NONE)
			l->p.rate_bps = sched_rate(&l->p.sched, start);
		finish = start + (uint64_t)(len + WANEMU_WIRE_OVERHEAD) * 8ULL * 1000000000ULL / l->p.rate_bps;
		l->last_finish_ns = finish;
	}
	delay = l->delay_ns;
	if (l->jitter_ns) {
		uint64_t span = 2 * l->jitter_ns + 1;
		int64_t j = (int64_t)(rng_next(l->rng) % span) - (int64_t)l->jitter_ns;
		delay = (int64_t)delay + j > 0 ? (uint64_t)((int64_t)delay + j) : 0;
	}
	due = finish + delay;
	if (due < l->last_due_ns)
		due = l->last_due_ns;   /* jitter must not reorder */
	l->last_due_ns = due;

	f = &l->q[l->tail];
	f->data = malloc(len);
	if (f->data == NULL) {
		l->st.drop_queue++;
		return false;
	}
	memcpy(f->data, data, len);
	if (l->corrupt_next) {
		/* One bit past the Ethernet and (up to 40 bytes of) IP header:
		 * the frame still reaches its host, which must notice. */
		uint64_t bit = rng_next(l->rng) % ((uint64_t)(len - 14 - 40) * 8);

		f->data[14 + 40 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
		l->corrupt_next = 0;
		l->st.corrupted++;
	}
	f->len = len;
	f->in = in;
	l->rio.qin += in;
	f->finish_ns = finish;
	f->due_ns = due;
	l->tail = (l->tail + 1) & (l->cap - 1);
	if (l->p.rate_bps && ring_len(l, l->serial) > l->st.backlog_peak)
		l->st.backlog_peak = ring_len(l, l->serial);
	if (ring_len(l, l->head) > l->st.inflight_peak)
		l->st.inflight_peak = ring_len(l, l->head);
	return true;
}

const struct frame *
link_due(const struct link *l, uint64_t now)
{
	if (l->head == l->tail || l->q[l->head].due_ns > now)
		return NULL;
	return &l->q[l->head];
}

void
link_pop(struct link *l)
{
	free(l->q[l->head].data);
	l->q[l->head].data = NULL;
	if (l->serial == l->head)
		serial_next(l);
	l->head = (l->head + 1) & (l->cap - 1);
}

uint64_t
link_next_due(const struct link *l)
{
	return l->head == l->tail ? UINT64_MAX : l->q[l->head].due_ns;
}
