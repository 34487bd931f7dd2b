/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdbool.h>
#include <stdio.h>

#include "notify.h"

#ifdef WEIR_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

static uint64_t wd_half_us;     /* 0: no watchdog asked for */
static uint64_t wd_next_us;

void
weir_notify_ready(const char *status)
{
	uint64_t usec = 0;
	char msg[256];

	/* WATCHDOG_USEC (and WATCHDOG_PID, if set, naming this process). */
	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
		wd_half_us = usec / 2;
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", status);
	sd_notify(0, msg);
}

void
weir_notify_watchdog(uint64_t now_us)
{
	if (wd_half_us == 0 || now_us < wd_next_us)
		return;
	wd_next_us = now_us + wd_half_us;
	sd_notify(0, "WATCHDOG=1");
}

void
weir_notify_stopping(void)
{
	sd_notify(0, "STOPPING=1");
}

#else

void
weir_notify_ready(const char *status)
{
	(void)status;
}

void
weir_notify_watchdog(uint64_t now_us)
{
	(void)now_us;
}

void
weir_notify_stopping(void)
{
}

#endif
