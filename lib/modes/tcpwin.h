/* SPDX-License-Identifier: BSD-3-Clause
 * weir: reading and rewriting an ACK's advertised window, for the modes
 * that control TCP through its ACKs (PostACK's clamp, TCR's window sizing).
 */
#ifndef WEIR_TCPWIN_H
#define WEIR_TCPWIN_H

#include <stdint.h>
#include <string.h>
#include <rte_byteorder.h>
#include <rte_mbuf.h>

#include "cksum.h"
#include "flow.h"
#include "parse.h"

static inline bool
weir_seq_lt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

/* The window scale of ACKs travelling a, or -1 when the handshake was not
 * seen (the scale is known only from both SYNs). */
static inline int
weir_ack_wscale(const struct weir_flow *f, int a)
{
	if (f->mss[0] == 0 || f->mss[1] == 0)
		return -1;
	return f->wscale[a] != WEIR_WSCALE_NONE && f->wscale[a ^ 1] != WEIR_WSCALE_NONE ?
	       RTE_MIN(f->wscale[a], (uint8_t)14) : 0;
}

/* A segment's data bytes per wire byte, << 16 (Ethernet + IPv4 + TCP
 * headers, no options): what a window in data bytes carries of a rate
 * counted in frame bytes. */
static inline uint32_t
weir_win_ratio16(uint32_t seg)
{
	return (uint32_t)(((uint64_t)seg << 16) / (seg + 54));
}

/* A rate's window over a round trip, in data bytes (IP-ABR's Eq. 4.6,
 * alloc x data_size/MTU x RTT): rate_bpt in frame bytes per TSC tick
 * << 32, rtt in ticks, ratio16 data bytes per frame byte << 16. */
static inline uint64_t
weir_win_bdp(uint64_t rate_bpt, uint64_t rtt, uint32_t ratio16)
{
	return (uint64_t)((((unsigned __int128)rate_bpt * rtt) >> 32) * ratio16 >> 16);
}

/* The raw window field of ACK m (meta-data p) as it is on the frame now:
 * p->win unless a rewrite (weir_ack_set_win) changed it since the parse.
 * A cut starts from this one, so a later cut never raises an earlier. */
static inline uint16_t
weir_ack_win(const struct rte_mbuf *m, const struct weir_pkt *p)
{
	uint16_t v;

	memcpy(&v, rte_pktmbuf_mtod_offset(m, const uint8_t *, p->l4_off + 14), sizeof(v));
	return rte_be_to_cpu_16(v);
}

/* Write the raw window field of ACK m (meta-data p), patching the TCP
 * checksum (RFC 1624: the same for IPv4 and IPv6). */
static inline void
weir_ack_set_win(struct rte_mbuf *m, const struct weir_pkt *p, uint16_t win)
{
	uint8_t *tcp = rte_pktmbuf_mtod_offset(m, uint8_t *, p->l4_off);

	weir_cksum_set16(tcp + 14, tcp + 16, rte_cpu_to_be_16(win));
}

#endif /* WEIR_TCPWIN_H */
