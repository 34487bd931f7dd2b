/* SPDX-License-Identifier: BSD-3-Clause
 * weir: what one Lua policy may declare. The sandbox bounds the
 * script's own memory and time, but what it declares is compiled after it
 * returns, outside the sandbox (off the management loop for reloads and
 * uploads, compile_job.h; on it for a hook's change): a loop of weir.rule or
 * weir.every calls inside the script's budget could otherwise buy seconds
 * of compile and hundreds of MB, or a wake spent running timers. Each limit is refused at the line of the
 * declaration that goes over it. Figures behind them: lua/README.md
 * ("Limits").
 */
#ifndef WEIR_POLICY_LIMITS_H
#define WEIR_POLICY_LIMITS_H

#include "cbq.h"
#include "classify.h"

/* Rules per policy (both directions), by default: an upload or reload
 * at this many, ACL tries' build included, took 0.5 s on the shared 2-core
 * VM (8,192: 1.2 s, 16,384: 3.9 s and a 305 MB peak; lua/README.md); the
 * API answers meanwhile, but a hook's weir.set_class still compiles on the
 * management lcore. policy.max_rules raises it, up to the classifier's own
 * bound, for an operator who accepts that time and memory. */
#define WEIR_LUA_MAX_RULES 4096u
#define WEIR_LUA_MAX_RULES_CEIL WEIR_CLS_MAX_RULES

/* Classes per direction: the class tree's own bound (lib/sched/cbq.h), the root
 * taking one slot. */
#define WEIR_LUA_MAX_CLASSES (WEIR_CBQ_MAX_CLASSES - 1)

/* Timers (weir.every and weir.at together) per policy: a schedule needs a
 * handful; 256 at the shortest period (0.1 s) are 2,560 calls a second,
 * which the per-wake hook budget still spreads over wakes. */
#define WEIR_LUA_MAX_TIMERS 256u

/* The other hooks (on_flow, on_flow_end, on_stats): one function each,
 * refused at the second registration. */

#endif /* WEIR_POLICY_LIMITS_H */
