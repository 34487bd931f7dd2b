/* SPDX-License-Identifier: BSD-3-Clause */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "port.h"

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int
port_open(const char *ifname)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL) };
	int one = 1, buf = 8 << 20;
	/* Protocol 0 at creation: the socket receives nothing until bind(), so
	 * no frame of another interface slips in before it is bound. */
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	sll.sll_ifindex = (int)if_nametoindex(ifname);
	if (sll.sll_ifindex == 0) {
		close(fd);
		errno = ENODEV;
		return -1;
	}
	/* VLAN tags the kernel moved into metadata (rx VLAN offload) come back
	 * as auxdata; port_receive() puts them back into the frame. */
	setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one));
	/* Never read back what we send on the same interface (kernels without
	 * this option are covered by the PACKET_OUTGOING check on receive). */
	setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	/* Bursts from a fast TCP sender must not overflow the socket while the
	 * loop is busy elsewhere. FORCE works as root; fall back to the capped. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		int err = errno;

		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

static uint8_t rxbuf[PORT_BATCH][FRAME_MAX];
static uint8_t rxctl[PORT_BATCH][CMSG_SPACE(sizeof(struct tpacket_auxdata))];

/* Re-insert an 802.1Q/802.1ad tag that the kernel stripped on receive, so
 * tagged frames cross the emulator as they were sent. */
static uint32_t
restore_vlan(uint8_t *f, uint32_t len, struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
		struct tpacket_auxdata aux;
		uint16_t tpid, tci;

		if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA)
			continue;
		memcpy(&aux, CMSG_DATA(c), sizeof(aux));
		if (!(aux.tp_status & TP_STATUS_VLAN_VALID) || len < 12)
			return len;
		tpid = (aux.tp_status & TP_STATUS_VLAN_TPID_VALID) ? aux.tp_vlan_tpid : 0x8100;
		tci = aux.tp_vlan_tci;
		memmove(f + 16, f + 12, len - 12);
		f[12] = (uint8_t)(tpid >> 8);
		f[13] = (uint8_t)tpid;
		f[14] = (uint8_t)(tci >> 8);
		f[15] = (uint8_t)tci;
		return len + 4;
	}
	return len;
}

int
port_receive(struct emu *e, int fd, int from_path)
{
	struct mmsghdr msgs[PORT_BATCH];
	struct iovec iov[PORT_BATCH];
	struct sockaddr_ll from[PORT_BATCH];
	uint64_t now;
	int n;

	for (int i = 0; i < PORT_BATCH; i++) {
		iov[i].iov_base = rxbuf[i];
		iov[i].iov_len = FRAME_MAX - 4;        /* room for a restored tag */
		memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
		msgs[i].msg_hdr.msg_name = &from[i];
		msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
		msgs[i].msg_hdr.msg_control = rxctl[i];
		msgs[i].msg_hdr.msg_controllen = sizeof(rxctl[i]);
	}
	n = recvmmsg(fd, msgs, PORT_BATCH, MSG_DONTWAIT, NULL);
	if (n <= 0)
		return 0;
	/* One timestamp per batch: the batch arrived within the wake-up. */
	now = now_ns();
	for (int i = 0; i < n; i++) {
		uint8_t *f = rxbuf[i];
		uint32_t len = msgs[i].msg_len;
		int to;

		if (from[i].sll_pkttype == PACKET_OUTGOING)
			continue;
		if ((msgs[i].msg_hdr.msg_flags & MSG_TRUNC) || len < 14) {
			e->rx_bad++;
			continue;
		}
		len = restore_vlan(f, len, &msgs[i].msg_hdr);
		if (from_path >= 0) {
			if (mac_learn(&e->macs, f + 6, from_path) && e->verbose)
				fprintf(stderr, "weir-wanemu: %02x:%02x:%02x:%02x:%02x:%02x is on path %s\n",
					f[6], f[7], f[8], f[9], f[10], f[11], e->paths[from_path].ifname);
			link_offer(&e->paths[from_path].dir[TO_WEIR], f, len, now);
			continue;
		}
		if (e->has_core) {
			link_offer(&e->core, f, len, now);     /* its path after the core */
			continue;
		}
		to = mac_lookup(&e->macs, f);
		if (to >= 0) {
			link_offer(&e->paths[to].dir[TO_PATH], f, len, now);
		} else {
			/* Unknown or group destination: each path emulates its own copy. */
			for (int p = 0; p < e->n_paths; p++)
				link_offer(&e->paths[p].dir[TO_PATH], f, len, now);
		}
	}
	return n;
}

void
port_transmit(struct link *l, int fd, uint64_t now)
{
	struct mmsghdr msgs[PORT_BATCH];
	struct iovec iov[PORT_BATCH];

	for (;;) {
		uint32_t idx = l->head;
		int n = 0, sent;

		while (n < PORT_BATCH) {
			const struct frame *f;

			if (idx == l->tail || l->q[idx].due_ns > now)
				break;
			f = &l->q[idx];
			iov[n].iov_base = f->data;
			iov[n].iov_len = f->len;
			memset(&msgs[n].msg_hdr, 0, sizeof(msgs[n].msg_hdr));
			msgs[n].msg_hdr.msg_iov = &iov[n];
			msgs[n].msg_hdr.msg_iovlen = 1;
			n++;
			idx = (idx + 1) & (l->cap - 1);
		}
		if (n == 0)
			return;
		sent = sendmmsg(fd, msgs, (unsigned int)n, MSG_DONTWAIT);
		if (sent < 0) {
			if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR)
				return;         /* socket full: retried on the next wake-up */
			/* Anything else (e.g. EMSGSIZE: frame above the far MTU) is
			 * that frame's fault: count it and move on, never wedge. */
			l->st.drop_send++;
			link_pop(l);
			continue;
		}
		for (int i = 0; i < sent; i++) {
			l->st.tx++;
			l->st.tx_bytes += l->q[l->head].len;
			link_pop(l);
		}
		if (sent < n)
			return;
	}
}
