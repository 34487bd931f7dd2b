/* SPDX-License-Identifier: BSD-3-Clause
 * weir-wanemu: the testbed's WAN emulator (this kernel has no netem).
 *
 * An L2 forwarder between one interface facing weir and N path interfaces,
 * one per WAN host, over AF_PACKET sockets. Each path has its own delay,
 * jitter, random and periodic loss and link rate, applied independently in
 * each direction. It sleeps in ppoll() until the next frame is due or one
 * arrives, so it uses no core while the TCP stacks need them.
 *
 * weir-wanemu --weir IFACE --path IFACE[,delay=MS][,jitter=MS][,loss=PCT][,ploss=N]
 *             [,rate=RATE][,limit=PKTS][,loss_dir=both|to_path|to_weir] [--path ...]
 *             [--seed N] [--stats FILE] [--stats-interval S] [--verbose]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "link.h"

#define MAX_PATHS 16
#define BATCH 64
#define FRAME_MAX 9216          /* jumbo frames fit; larger are counted and dropped */
#define MAC_TABLE 1024          /* learned WAN host MACs (open addressing) */

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

enum { TO_PATH = 0, TO_WEIR = 1 };

struct path {
	char ifname[IFNAMSIZ];
	int fd;
	struct link dir[2];     /* [TO_PATH] frames from weir, [TO_WEIR] frames from the host */
};

struct emu {
	char weir_if[IFNAMSIZ];
	int weir_fd;
	struct path paths[MAX_PATHS];
	int n_paths;
	uint64_t rng;
	const char *stats_file;
	double stats_interval;
	int verbose;
	uint64_t oversize;
	struct { uint8_t mac[6]; int8_t path; } macs[MAC_TABLE];
};

static volatile sig_atomic_t quit;

static void
on_signal(int sig)
{
	(void)sig;
	quit = 1;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void
die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "weir-wanemu: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nusage: weir-wanemu --weir IFACE --path IFACE[,delay=MS][,jitter=MS][,loss=PCT]"
		"[,ploss=N][,rate=RATE][,limit=PKTS][,loss_dir=both|to_path|to_weir] [--path ...]\n"
		"                   [--seed N] [--stats FILE] [--stats-interval S] [--verbose]\n");
	exit(2);
}

static int
parse_double(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return errno == 0 && end != s && *end == '\0' && *out >= 0 ? 0 : -1;
}

/* "10mbit", "500kbit", "1gbit", "64000" (bit/s), "0" = unlimited. */
static int
parse_rate(const char *s, uint64_t *bps)
{
	static const struct { const char *sfx; double mul; } units[] = {
		{ "gbit", 1e9 }, { "mbit", 1e6 }, { "kbit", 1e3 }, { "bit", 1 },
		{ "gbps", 8e9 }, { "mbps", 8e6 }, { "kbps", 8e3 }, { "bps", 8 }, { "", 1 },
	};
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || v < 0)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(end, units[i].sfx) == 0) {
			*bps = (uint64_t)(v * units[i].mul);
			return 0;
		}
	}
	return -1;
}

static void
parse_path(struct emu *e, const char *arg)
{
	struct link_params lp = { .limit = 1000, .loss = true };
	struct link_params to_weir;
	char buf[512], *save = NULL, *tok;
	const char *loss_dir = "both";
	struct path *p;

	if (e->n_paths == MAX_PATHS)
		die_usage("at most 16 --path options (%s)", arg);
	if (strlen(arg) >= sizeof(buf))
		die_usage("--path %s is too long", arg);
	strcpy(buf, arg);
	p = &e->paths[e->n_paths];
	tok = strtok_r(buf, ",", &save);
	if (tok == NULL || strlen(tok) >= IFNAMSIZ || strchr(tok, '=') != NULL)
		die_usage("--path %s: must start with an interface name", arg);
	snprintf(p->ifname, sizeof(p->ifname), "%s", tok);
	while ((tok = strtok_r(NULL, ",", &save)) != NULL) {
		char *val = strchr(tok, '=');
		double d;

		if (val == NULL)
			die_usage("--path option '%s' needs a value (name=value)", tok);
		*val++ = '\0';
		if (strcmp(tok, "delay") == 0 && parse_double(val, &d) == 0)
			lp.delay_ms = d;
		else if (strcmp(tok, "jitter") == 0 && parse_double(val, &d) == 0)
			lp.jitter_ms = d;
		else if (strcmp(tok, "loss") == 0 && parse_double(val, &d) == 0 && d <= 100)
			lp.loss_pct = d;
		else if (strcmp(tok, "ploss") == 0 && parse_double(val, &d) == 0 && d == (uint32_t)d && d != 1)
			lp.ploss = (uint32_t)d;
		else if (strcmp(tok, "rate") == 0 && parse_rate(val, &lp.rate_bps) == 0)
			;
		else if (strcmp(tok, "limit") == 0 && parse_double(val, &d) == 0 && d >= 1 && d == (uint32_t)d)
			lp.limit = (uint32_t)d;
		else if (strcmp(tok, "loss_dir") == 0 &&
			 (!strcmp(val, "both") || !strcmp(val, "to_path") || !strcmp(val, "to_weir")))
			loss_dir = strcmp(val, "both") == 0 ? "both" : strcmp(val, "to_path") == 0 ? "to_path" : "to_weir";
		else {
			char what[300];
			snprintf(what, sizeof(what), "%s=%s", tok, val);
			die_usage("--path: bad or unknown option '%s'", what);
		}
	}
	to_weir = lp;
	lp.loss = strcmp(loss_dir, "to_weir") != 0;
	to_weir.loss = strcmp(loss_dir, "to_path") != 0;
	if (link_init(&p->dir[TO_PATH], &lp, &e->rng) < 0 || link_init(&p->dir[TO_WEIR], &to_weir, &e->rng) < 0) {
		fprintf(stderr, "weir-wanemu: out of memory\n");
		exit(1);
	}
	e->n_paths++;
}

static int
open_port(const char *ifname)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL) };
	int one = 1, buf = 8 << 20;
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));

	if (fd < 0)
		return -1;
	sll.sll_ifindex = (int)if_nametoindex(ifname);
	if (sll.sll_ifindex == 0 || bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		close(fd);
		return -1;
	}
	/* VLAN tags the kernel moved into metadata (rx VLAN offload) come back
	 * as auxdata; receive() puts them back into the frame. */
	setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one));
	/* Never read back what we send on the same interface. */
	setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	/* Bursts from a fast TCP sender must not overflow the socket. */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
	return fd;
}

static unsigned int
mac_slot(const uint8_t *mac)
{
	uint32_t h = 2166136261u;

	for (int i = 0; i < 6; i++)
		h = (h ^ mac[i]) * 16777619u;
	return h & (MAC_TABLE - 1);
}

static void
mac_learn(struct emu *e, const uint8_t *mac, int path)
{
	if (mac[0] & 1)
		return;         /* a group address is never a source */
	for (unsigned int i = mac_slot(mac), n = 0; n < MAC_TABLE; i = (i + 1) & (MAC_TABLE - 1), n++) {
		if (e->macs[i].path == 0 || memcmp(e->macs[i].mac, mac, 6) == 0) {
			memcpy(e->macs[i].mac, mac, 6);
			e->macs[i].path = (int8_t)(path + 1);   /* hosts may move between paths */
			return;
		}
	}
}

/* The path a destination MAC was learned on, or -1 to flood. */
static int
mac_lookup(const struct emu *e, const uint8_t *mac)
{
	if (mac[0] & 1)
		return -1;
	for (unsigned int i = mac_slot(mac), n = 0; n < MAC_TABLE; i = (i + 1) & (MAC_TABLE - 1), n++) {
		if (e->macs[i].path == 0)
			return -1;
		if (memcmp(e->macs[i].mac, mac, 6) == 0)
			return e->macs[i].path - 1;
	}
	return -1;
}

static uint8_t rxbuf[BATCH][FRAME_MAX];
static uint8_t rxctl[BATCH][CMSG_SPACE(sizeof(struct tpacket_auxdata))];

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

/* Read a batch from fd and hand each frame to `dispatch`. */
static void
receive(struct emu *e, int fd, int from_path)
{
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	uint64_t now;
	int n;

	for (int i = 0; i < BATCH; i++) {
		iov[i].iov_base = rxbuf[i];
		iov[i].iov_len = FRAME_MAX - 4;        /* room for a restored tag */
		memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
		msgs[i].msg_hdr.msg_control = rxctl[i];
		msgs[i].msg_hdr.msg_controllen = sizeof(rxctl[i]);
	}
	n = recvmmsg(fd, msgs, BATCH, MSG_DONTWAIT, NULL);
	if (n <= 0)
		return;
	now = now_ns();
	for (int i = 0; i < n; i++) {
		uint8_t *f = rxbuf[i];
		uint32_t len = msgs[i].msg_len;

		if ((msgs[i].msg_hdr.msg_flags & MSG_TRUNC) || len < 14) {
			e->oversize++;
			continue;
		}
		len = restore_vlan(f, len, &msgs[i].msg_hdr);
		if (from_path >= 0) {
			mac_learn(e, f + 6, from_path);
			link_offer(&e->paths[from_path].dir[TO_WEIR], f, len, now);
			continue;
		}
		int to = mac_lookup(e, f);
		if (to >= 0) {
			link_offer(&e->paths[to].dir[TO_PATH], f, len, now);
		} else {
			for (int p = 0; p < e->n_paths; p++)
				link_offer(&e->paths[p].dir[TO_PATH], f, len, now);
		}
	}
}

/* Send everything due on one link; stop early if the socket is full. */
static void
transmit(struct link *l, int fd, uint64_t now)
{
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];

	for (;;) {
		uint32_t idx = l->head;
		int n = 0, sent;

		while (n < BATCH) {
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
				return;         /* retried on the next wake-up */
			/* Any other error loses the frame, counted, never wedges. */
			sent = 1;
			l->st.drop_send++;
			l->st.tx--;
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

static void
print_link(FILE *out, const char *name, const struct link *l, int last)
{
	const struct link_stats *s = &l->st;

	fprintf(out, "\"%s\": {\"rx\": %lu, \"tx\": %lu, \"tx_bytes\": %lu, \"dropped_random\": %lu, "
		"\"dropped_periodic\": %lu, \"dropped_queue\": %lu, \"dropped_send\": %lu, "
		"\"queue_peak\": %u}%s", name, (unsigned long)s->rx, (unsigned long)s->tx,
		(unsigned long)s->tx_bytes, (unsigned long)s->drop_random,
		(unsigned long)s->drop_periodic, (unsigned long)s->drop_queue,
		(unsigned long)s->drop_send, s->backlog_peak, last ? "" : ", ");
}

static void
write_stats(const struct emu *e, FILE *out)
{
	fprintf(out, "{\"oversize\": %lu, \"paths\": {", (unsigned long)e->oversize);
	for (int i = 0; i < e->n_paths; i++) {
		fprintf(out, "\"%s\": {", e->paths[i].ifname);
		print_link(out, "to_path", &e->paths[i].dir[TO_PATH], 0);
		print_link(out, "to_weir", &e->paths[i].dir[TO_WEIR], 1);
		fprintf(out, "}%s", i + 1 < e->n_paths ? ", " : "");
	}
	fprintf(out, "}}\n");
}

static void
write_stats_file(const struct emu *e)
{
	char tmp[4200];
	FILE *f;

	if (e->stats_file == NULL)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", e->stats_file);
	f = fopen(tmp, "w");
	if (f == NULL)
		return;
	write_stats(e, f);
	/* Atomic replace: readers never see half a file. */
	if (fclose(f) == 0)
		rename(tmp, e->stats_file);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "weir", required_argument, NULL, 'w' }, { "path", required_argument, NULL, 'p' },
		{ "seed", required_argument, NULL, 's' }, { "stats", required_argument, NULL, 'S' },
		{ "stats-interval", required_argument, NULL, 'i' }, { "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	static struct emu e;
	struct pollfd pfd[MAX_PATHS + 1];
	uint64_t next_stats;
	sigset_t block, orig;
	double d;
	int c;

	e.rng = 0x9e3779b97f4a7c15ULL;
	e.stats_interval = 1.0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'w':
			if (strlen(optarg) >= IFNAMSIZ)
				die_usage("--weir %s: interface name too long", optarg);
			snprintf(e.weir_if, sizeof(e.weir_if), "%s", optarg);
			break;
		case 'p': parse_path(&e, optarg); break;
		case 's':
			if (parse_double(optarg, &d) != 0)
				die_usage("--seed %s: not a number", optarg);
			e.rng = (uint64_t)d * 0x9e3779b97f4a7c15ULL + 1;
			break;
		case 'S': e.stats_file = optarg; break;
		case 'i':
			if (parse_double(optarg, &d) != 0 || d < 0.01)
				die_usage("--stats-interval %s: must be a number >= 0.01", optarg);
			e.stats_interval = d;
			break;
		case 'v': e.verbose = 1; break;
		case 'h': die_usage("%s", "help"); break;
		default: die_usage("unknown argument %s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument %s", argv[optind]);
	if (e.weir_if[0] == '\0')
		die_usage("%s", "--weir IFACE is required");
	if (e.n_paths == 0)
		die_usage("%s", "at least one --path is required");

	e.weir_fd = open_port(e.weir_if);
	if (e.weir_fd < 0) {
		fprintf(stderr, "weir-wanemu: --weir %s: %s\n", e.weir_if, strerror(errno));
		return 1;
	}
	for (int i = 0; i < e.n_paths; i++) {
		e.paths[i].fd = open_port(e.paths[i].ifname);
		if (e.paths[i].fd < 0) {
			fprintf(stderr, "weir-wanemu: --path %s: %s\n", e.paths[i].ifname, strerror(errno));
			return 1;
		}
	}

	/* Signals are only delivered inside ppoll, so the loop never races them. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &orig);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	pfd[0] = (struct pollfd){ .fd = e.weir_fd, .events = POLLIN };
	for (int i = 0; i < e.n_paths; i++)
		pfd[i + 1] = (struct pollfd){ .fd = e.paths[i].fd, .events = POLLIN };
	next_stats = now_ns() + (uint64_t)(e.stats_interval * 1e9);

	while (!quit) {
		uint64_t now = now_ns(), next = next_stats;
		struct timespec ts;

		for (int i = 0; i < e.n_paths; i++) {
			transmit(&e.paths[i].dir[TO_PATH], e.paths[i].fd, now);
			transmit(&e.paths[i].dir[TO_WEIR], e.weir_fd, now);
			for (int d2 = 0; d2 < 2; d2++) {
				uint64_t nd = link_next_due(&e.paths[i].dir[d2]);
				/* A head that is already due could not be sent (socket
				 * full): look again shortly. */
				if (nd <= now)
					nd = now + 50000;
				if (nd < next)
					next = nd;
			}
		}
		if (now >= next_stats) {
			write_stats_file(&e);
			next_stats = now + (uint64_t)(e.stats_interval * 1e9);
			continue;
		}
		ts.tv_sec = (time_t)((next - now) / 1000000000ULL);
		ts.tv_nsec = (long)((next - now) % 1000000000ULL);
		if (ppoll(pfd, (nfds_t)(e.n_paths + 1), &ts, &orig) <= 0)
			continue;
		if (pfd[0].revents & POLLIN)
			receive(&e, e.weir_fd, -1);
		for (int i = 0; i < e.n_paths; i++)
			if (pfd[i + 1].revents & POLLIN)
				receive(&e, e.paths[i].fd, i);
	}

	write_stats_file(&e);
	write_stats(&e, stdout);
	close(e.weir_fd);
	for (int i = 0; i < e.n_paths; i++) {
		close(e.paths[i].fd);
		link_free(&e.paths[i].dir[TO_PATH]);
		link_free(&e.paths[i].dir[TO_WEIR]);
	}
	return 0;
}
