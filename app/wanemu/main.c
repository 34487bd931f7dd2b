/* SPDX-License-Identifier: BSD-3-Clause
 * weir-wanemu: the testbed's WAN emulator (this kernel has no netem).
 *
 * An L2 forwarder between one interface facing weir and N path interfaces,
 * one per WAN host, over AF_PACKET sockets. Each path has its own delay,
 * jitter, random and periodic loss and link rate, applied independently in
 * each direction. One thread sleeps in ppoll() until a frame arrives or the
 * next one is due (nanosecond timeout, 1 ns timer slack), so it takes no
 * core away from the TCP stacks it serves.
 *
 * weir-wanemu --weir IFACE --path IFACE[,delay=MS][,jitter=MS][,loss=PCT][,ploss=N]
 *             [,rate=RATE][,limit=PKTS][,loss_dir=both|to_path|to_weir] [--path ...]
 *             [--seed N] [--stats FILE] [--stats-interval S] [--verbose]
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"
#include "port.h"

/* When a due frame could not be sent (socket full), look again this soon. */
#define RETRY_NS 50000ULL
/* Bounds of the early wake-up: a VM's timer fires tens of microseconds
 * late, which would add to every frame's delay. */
#define WAKE_EARLY_MAX_NS 200000ULL
#define WAKE_EARLY_INIT_NS 50000ULL

static volatile sig_atomic_t quit;

static void
on_signal(int sig)
{
	(void)sig;
	quit = 1;
}

static void
log_config(const struct emu *e)
{
	fprintf(stderr, "weir-wanemu: weir side %s\n", e->weir_if);
	for (int i = 0; i < e->n_paths; i++) {
		const struct link_params *a = &e->paths[i].dir[TO_PATH].p;

		fprintf(stderr, "weir-wanemu: path %s delay %.3f ms jitter %.3f ms loss %.3f%% ploss %u "
			"rate %lu bit/s limit %u loss to_path %s to_weir %s\n", e->paths[i].ifname,
			a->delay_ms, a->jitter_ms, a->loss_pct, a->ploss, (unsigned long)a->rate_bps,
			a->limit, a->loss ? "on" : "off", e->paths[i].dir[TO_WEIR].p.loss ? "on" : "off");
	}
}

/* Send what is due; return the time of the next event (a due frame, the
 * next stats write). */
/* Frames through the core go on to their paths (by MAC, as from weir). */
static void
core_to_paths(struct emu *e, uint64_t now)
{
	const struct frame *f;

	while ((f = link_due(&e->core, now)) != NULL) {
		int to = mac_lookup(&e->macs, f->data);

		if (to >= 0) {
			link_offer(&e->paths[to].dir[TO_PATH], f->data, f->len, now);
		} else {
			for (int p = 0; p < e->n_paths; p++)
				link_offer(&e->paths[p].dir[TO_PATH], f->data, f->len, now);
		}
		e->core.st.tx++;
		e->core.st.tx_bytes += f->len;
		link_pop(&e->core);
	}
}

static uint64_t
release_due(struct emu *e, uint64_t now, uint64_t next)
{
	if (e->has_core) {
		uint64_t nd;

		core_to_paths(e, now);
		nd = link_next_due(&e->core);
		if (nd < next)
			next = nd;
	}
	for (int i = 0; i < e->n_paths; i++) {
		port_transmit(&e->paths[i].dir[TO_PATH], e->paths[i].fd, now);
		port_transmit(&e->paths[i].dir[TO_WEIR], e->weir_fd, now);
		for (int d = 0; d < 2; d++) {
			uint64_t nd = link_next_due(&e->paths[i].dir[d]);

			if (nd <= now)
				nd = now + RETRY_NS;
			if (nd < next)
				next = nd;
		}
	}
	return next;
}

static void
cleanup(struct emu *e)
{
	if (e->weir_fd >= 0)
		close(e->weir_fd);
	for (int i = 0; i < e->n_paths; i++) {
		if (e->paths[i].fd >= 0)
			close(e->paths[i].fd);
		link_free(&e->paths[i].dir[TO_PATH]);
		link_free(&e->paths[i].dir[TO_WEIR]);
	}
	if (e->has_core)
		link_free(&e->core);
}

int
main(int argc, char **argv)
{
	static struct emu e;    /* big (MAC table): not on the stack */
	struct pollfd pfd[MAX_PATHS + 1];
	uint64_t next_stats, stats_ns, early;
	sigset_t block, orig;
	struct sigaction sa;

	e.weir_fd = -1;
	for (int i = 0; i < MAX_PATHS; i++)
		e.paths[i].fd = -1;
	emu_parse_args(&e, argc, argv);

	e.weir_fd = port_open(e.weir_if);
	if (e.weir_fd < 0) {
		fprintf(stderr, "weir-wanemu: --weir %s: %s\n", e.weir_if, strerror(errno));
		cleanup(&e);
		return 1;
	}
	for (int i = 0; i < e.n_paths; i++) {
		e.paths[i].fd = port_open(e.paths[i].ifname);
		if (e.paths[i].fd < 0) {
			fprintf(stderr, "weir-wanemu: --path %s: %s\n", e.paths[i].ifname, strerror(errno));
			cleanup(&e);
			return 1;
		}
	}
	if (e.verbose)
		log_config(&e);

	/* The default 50 us timer slack would add up to 50 us to every
	 * wake-up, i.e. to every frame's delay: ask for precise timers. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

	/* Signals are only delivered inside ppoll, so the loop never races them. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &orig);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	pfd[0] = (struct pollfd){ .fd = e.weir_fd, .events = POLLIN };
	for (int i = 0; i < e.n_paths; i++)
		pfd[i + 1] = (struct pollfd){ .fd = e.paths[i].fd, .events = POLLIN };
	stats_ns = (uint64_t)(e.stats_interval * 1e9);
	next_stats = now_ns() + stats_ns;
	early = WAKE_EARLY_INIT_NS;

	while (!quit) {
		uint64_t now = now_ns(), next, target;
		struct timespec ts;
		int n;

		if (now >= next_stats) {
			stats_write_file(&e);
			next_stats = now + stats_ns;
		}
		next = release_due(&e, now, next_stats);
		now = now_ns();
		/* Wake `early` before the frame is due (the timer's measured
		 * lateness) and poll without sleeping for the rest: frames leave
		 * on time, and the short spin still serves arrivals. */
		target = next > early ? next - early : 0;
		if (target <= now) {
			ts.tv_sec = 0;
			ts.tv_nsec = 0;
		} else {
			ts.tv_sec = (time_t)((target - now) / 1000000000ULL);
			ts.tv_nsec = (long)((target - now) % 1000000000ULL);
		}
		n = ppoll(pfd, (nfds_t)(e.n_paths + 1), &ts, &orig);
		if (n == 0 && target > now) {
			uint64_t woke = now_ns(), late = woke > target ? woke - target : 0;

			/* EWMA (1/8) of how late a timed sleep ends. */
			if (late > WAKE_EARLY_MAX_NS)
				late = WAKE_EARLY_MAX_NS;
			early = early - early / 8 + late / 8;
		}
		if (n <= 0)
			continue;
		if (pfd[0].revents & POLLIN)
			port_receive(&e, e.weir_fd, -1);
		for (int i = 0; i < e.n_paths; i++)
			if (pfd[i + 1].revents & POLLIN)
				port_receive(&e, e.paths[i].fd, i);
	}

	stats_write_file(&e);
	stats_print(&e, stdout);
	fflush(stdout);
	cleanup(&e);
	return 0;
}
