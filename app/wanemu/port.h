/* SPDX-License-Identifier: BSD-3-Clause
 * weir-wanemu: AF_PACKET ports. Batches of frames in (recvmmsg) and out
 * (sendmmsg), non-blocking, so one thread sleeping in ppoll serves them all.
 */
#ifndef WANEMU_PORT_H
#define WANEMU_PORT_H

#include <stdint.h>

#include "emu.h"

#define PORT_BATCH 64
/* Largest frame carried: jumbo frames fit. Bigger ones arrive truncated and
 * are counted (rx_bad) and dropped, never forwarded cut short. */
#define FRAME_MAX 9216

/* A raw socket bound to ifname, seeing every EtherType but not its own
 * transmissions; -1 with errno on failure. */
int port_open(const char *ifname);

/* Read one batch from fd; each frame goes to the link(s) it belongs to.
 * from_path is the path index, or -1 for the weir side. Returns frames read. */
int port_receive(struct emu *e, int fd, int from_path);

/* Send whatever is due on l through fd; stops early when the socket is full
 * (the rest waits for the next wake-up). */
void port_transmit(struct link *l, int fd, uint64_t now);

uint64_t now_ns(void);

#endif /* WANEMU_PORT_H */
