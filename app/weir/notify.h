/* SPDX-License-Identifier: BSD-3-Clause
 * weir: systemd's service notification protocol (Type=notify): READY once
 * the ports forward, WATCHDOG from the management loop (so a management
 * lcore that stops turning gets weir restarted), STOPPING on the way out.
 * Without libsystemd at build time, or when not started by systemd
 * (no NOTIFY_SOCKET), these do nothing.
 */
#ifndef WEIR_NOTIFY_H
#define WEIR_NOTIFY_H

#include <stdint.h>

void weir_notify_ready(const char *status);
/* From every turn of the management loop: a keep-alive every half of
 * WATCHDOG_USEC, when the unit sets WatchdogSec. `now_us`: a monotonic clock. */
void weir_notify_watchdog(uint64_t now_us);
void weir_notify_stopping(void);

#endif /* WEIR_NOTIFY_H */
