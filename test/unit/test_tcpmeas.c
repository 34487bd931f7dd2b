/* SPDX-License-Identifier: BSD-3-Clause
 * Passive TCP measurement (lib/worker/tcpmeas.h): round trips each side from the
 * handshake and timestamps, data/ACK timing without them and Karn's rule,
 * retransmissions, holes and duplicate ACKs, on a 1 GHz clock.
 */
#include <inttypes.h>
#include <string.h>

#include "flow.h"
#include "tcpmeas.h"
#include "unit.h"

#define MS 1000000ull   /* ticks of the 1 GHz clock */

static struct weir_tcpm_hot hot;
static struct weir_tcpm_cold cold;
static struct weir_tcpm_table tab = { .n_slots = 1, .hot = &hot, .cold = &cold };
static struct weir_tcpm_stats st;

/* The record as the management side reads it (both lines). */
static const struct weir_tcpm_dir *
R(int d)
{
	static struct weir_tcpm copy;

	weir_tcpm_read(&tab, 0, &copy);
	return &copy.d[d];
}

static void
reset(void)
{
	memset(&hot, 0, sizeof(hot));
	memset(&cold, 0, sizeof(cold));
}
static uint8_t tcp[32];

static void
wr32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24), b[1] = (uint8_t)(v >> 16), b[2] = (uint8_t)(v >> 8), b[3] = (uint8_t)v;
}

/* A segment travelling d at time t (ms, fractional): flags, seq, ack,
 * payload bytes, window, and TSval/TSecr (ts false: no option). */
static void
seg(int d, double t_ms, uint8_t flags, uint32_t seq, uint32_t ack, uint16_t len, uint16_t win,
    bool ts, uint32_t tsval, uint32_t tsecr)
{
	struct weir_pkt p;

	memset(&p, 0, sizeof(p));
	p.l4proto = 6;
	p.tcp_flags = flags;
	p.seq = seq;
	p.ack = ack;
	p.payload_len = len;
	p.win = win;
	if (ts) {
		p.flags |= WEIR_PF_TCP_TS;
		p.ts_off = 24;
		wr32(tcp + 24, tsval);
		wr32(tcp + 28, tsecr);
	}
	weir_tcpm_segment(&tab, 0, 42, &p, tcp, d, (uint64_t)(t_ms * (double)MS), &st);
}

/* A sample in ms, from WEIR_TCPM_SHIFT units of the 1 GHz clock. */
static double
ms(uint32_t units)
{
	return (double)units * (1 << WEIR_TCPM_SHIFT) / (double)MS;
}

static void
test_timestamps(void)
{
	reset();
	/* LAN host opens (travelling out) at 100 ms; the WAN host answers
	 * 50 ms later; the LAN host's ACK 0.5 ms after that. */
	seg(WEIR_DIR_OUT, 100, WEIR_TCP_SYN, 1000, 0, 0, 65535, true, 7000, 0);
	seg(WEIR_DIR_IN, 150, WEIR_TCP_SYN | WEIR_TCP_ACK, 9000, 1001, 0, 65535, true, 300, 7000);
	seg(WEIR_DIR_OUT, 150.5, WEIR_TCP_ACK, 1001, 9001, 0, 500, true, 7050, 300);
	CHECK(R(WEIR_DIR_IN)->samples == 1, "WAN samples %u", R(WEIR_DIR_IN)->samples);
	CHECK(ms(R(WEIR_DIR_IN)->rtt_last) > 49.9 && ms(R(WEIR_DIR_IN)->rtt_last) < 50.1,
	      "WAN rtt %.3f", ms(R(WEIR_DIR_IN)->rtt_last));
	CHECK(R(WEIR_DIR_OUT)->samples == 1, "LAN samples %u", R(WEIR_DIR_OUT)->samples);
	CHECK(ms(R(WEIR_DIR_OUT)->rtt_last) > 0.45 && ms(R(WEIR_DIR_OUT)->rtt_last) < 0.55,
	      "LAN rtt %.3f", ms(R(WEIR_DIR_OUT)->rtt_last));
	/* Data out: 7050 first seen at 150.5 ms (the ACK); a data segment with
	 * the same TSval is no new probe. The echo of 7050 comes 60 ms later. */
	seg(WEIR_DIR_OUT, 151, WEIR_TCP_ACK, 1001, 9001, 1000, 500, true, 7050, 300);
	seg(WEIR_DIR_IN, 210.5, WEIR_TCP_ACK, 9001, 2001, 0, 800, true, 360, 7050);
	CHECK(R(WEIR_DIR_IN)->samples == 2 && ms(R(WEIR_DIR_IN)->rtt_last) > 59.9 &&
	      ms(R(WEIR_DIR_IN)->rtt_last) < 60.1, "WAN rtt %.3f (%u samples)",
	      ms(R(WEIR_DIR_IN)->rtt_last), R(WEIR_DIR_IN)->samples);
	CHECK(ms(R(WEIR_DIR_IN)->rtt_min) < 50.1, "min %.3f", ms(R(WEIR_DIR_IN)->rtt_min));
	/* An echo newer than the outstanding value drops it: no sample. */
	seg(WEIR_DIR_OUT, 212, WEIR_TCP_ACK, 2001, 9001, 1000, 500, true, 7100, 360);
	seg(WEIR_DIR_IN, 400, WEIR_TCP_ACK, 9001, 3001, 0, 800, true, 400, 7200);
	CHECK(R(WEIR_DIR_IN)->samples == 2, "passed-over echo sampled (%u)",
	      R(WEIR_DIR_IN)->samples);
	CHECK(R(WEIR_DIR_OUT)->probe_at == 0 || R(WEIR_DIR_OUT)->probe != 7100,
	      "outstanding 7100 kept");
	/* A retransmission's TSval is not taken. */
	seg(WEIR_DIR_OUT, 401, WEIR_TCP_ACK, 2001, 9001, 1000, 500, true, 7300, 400);
	CHECK(R(WEIR_DIR_OUT)->retrans_segs == 1 && R(WEIR_DIR_OUT)->retrans_bytes == 1000,
	      "retrans %u/%u", R(WEIR_DIR_OUT)->retrans_segs,
	      R(WEIR_DIR_OUT)->retrans_bytes);
	CHECK(R(WEIR_DIR_OUT)->probe_at == 0, "probe taken from a retransmission");
}

static void
test_seq_timing(void)
{
	reset();
	/* No timestamps: SYN out at 0, SYN/ACK 20 ms later, ACK 1 ms after. */
	seg(WEIR_DIR_OUT, 1, WEIR_TCP_SYN, 1000, 0, 0, 65535, false, 0, 0);
	seg(WEIR_DIR_IN, 21, WEIR_TCP_SYN | WEIR_TCP_ACK, 5000, 1001, 0, 65535, false, 0, 0);
	seg(WEIR_DIR_OUT, 22, WEIR_TCP_ACK, 1001, 5001, 0, 500, false, 0, 0);
	CHECK(R(WEIR_DIR_IN)->samples == 1 && ms(R(WEIR_DIR_IN)->rtt_last) > 19.9 &&
	      ms(R(WEIR_DIR_IN)->rtt_last) < 20.1, "WAN handshake %.3f",
	      ms(R(WEIR_DIR_IN)->rtt_last));
	CHECK(R(WEIR_DIR_OUT)->samples == 1 && ms(R(WEIR_DIR_OUT)->rtt_last) > 0.9 &&
	      ms(R(WEIR_DIR_OUT)->rtt_last) < 1.1, "LAN handshake %.3f",
	      ms(R(WEIR_DIR_OUT)->rtt_last));
	/* Data timed at 30 ms, retransmitted at 35 (Karn: no sample from the
	 * ACK at 50 ms); the next segment, timed at 60, ACKed at 81. */
	seg(WEIR_DIR_OUT, 30, WEIR_TCP_ACK, 1001, 5001, 100, 500, false, 0, 0);
	seg(WEIR_DIR_OUT, 35, WEIR_TCP_ACK, 1001, 5001, 100, 500, false, 0, 0);
	seg(WEIR_DIR_IN, 50, WEIR_TCP_ACK, 5001, 1101, 0, 700, false, 0, 0);
	CHECK(R(WEIR_DIR_IN)->samples == 1, "sample from a retransmitted segment");
	seg(WEIR_DIR_OUT, 60, WEIR_TCP_ACK, 1101, 5001, 100, 500, false, 0, 0);
	seg(WEIR_DIR_IN, 81, WEIR_TCP_ACK, 5001, 1201, 0, 700, false, 0, 0);
	CHECK(R(WEIR_DIR_IN)->samples == 2 && ms(R(WEIR_DIR_IN)->rtt_last) > 20.9 &&
	      ms(R(WEIR_DIR_IN)->rtt_last) < 21.1, "data/ACK %.3f",
	      ms(R(WEIR_DIR_IN)->rtt_last));
	/* A hole (1201 missing), then two duplicate ACKs of 1201. */
	seg(WEIR_DIR_OUT, 90, WEIR_TCP_ACK, 1301, 5001, 100, 500, false, 0, 0);
	CHECK(R(WEIR_DIR_OUT)->ooo == 1, "ooo %u", R(WEIR_DIR_OUT)->ooo);
	seg(WEIR_DIR_IN, 91, WEIR_TCP_ACK, 5001, 1201, 0, 700, false, 0, 0);
	seg(WEIR_DIR_IN, 92, WEIR_TCP_ACK, 5001, 1201, 0, 700, false, 0, 0);
	seg(WEIR_DIR_IN, 93, WEIR_TCP_ACK, 5001, 1201, 0, 900, false, 0, 0);   /* window update */
	CHECK(R(WEIR_DIR_IN)->dupacks == 2, "dupacks %u", R(WEIR_DIR_IN)->dupacks);
	/* The hole filled late: below the highest seen, a retransmission. */
	seg(WEIR_DIR_OUT, 94, WEIR_TCP_ACK, 1201, 5001, 100, 500, false, 0, 0);
	CHECK(R(WEIR_DIR_OUT)->retrans_segs == 2, "retrans %u", R(WEIR_DIR_OUT)->retrans_segs);
	/* A new flow in the slot starts over. */
	/* The management side's copy: of this flow only. */
	struct weir_tcpm copy;
	CHECK(weir_tcpm_peek(&tab, 0, 42, &copy) == 0 && copy.d[WEIR_DIR_OUT].retrans_segs == 2,
	      "peek of the flow's record");
	CHECK(weir_tcpm_peek(&tab, 0, 41, &copy) != 0 && weir_tcpm_peek(&tab, 1, 42, &copy) != 0,
	      "peek of another flow's record");
	struct weir_pkt p = { .l4proto = 6, .tcp_flags = WEIR_TCP_SYN, .seq = 1 };
	weir_tcpm_segment(&tab, 0, 43, &p, tcp, WEIR_DIR_OUT, 100 * MS, &st);
	CHECK(hot.owner == 43 && R(WEIR_DIR_IN)->samples == 0 && R(WEIR_DIR_OUT)->retrans_segs == 0,
	      "record not reset for a new flow");
}

int
main(void)
{
	test_timestamps();
	test_seq_timing();
	return unit_report();
}
