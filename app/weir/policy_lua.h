/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the Lua policy front end. An administrator's script declares the
 * class trees and rules through the global table `weir` (lua/README.md);
 * this runs it in a sandbox and compiles the declarations into the same
 * struct weir_policy the config file's `shaping` and `rules` produce.
 *
 * The script runs in a fresh Lua state of its own: no io, os, load,
 * require, debug; bounded memory and a bounded number of VM instructions,
 * so a bad or hostile policy can neither touch the box nor hang the
 * management lcore (it is re-run on SIGHUP).
 */
#ifndef WEIR_APP_POLICY_LUA_H
#define WEIR_APP_POLICY_LUA_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#define WEIR_POLICY_LUA_MEM_DEFAULT     (64u << 20)     /* bytes */
#define WEIR_POLICY_LUA_INSNS_DEFAULT   10000000ull     /* VM instructions */
#define WEIR_POLICY_LUA_LIMIT_DEFAULT   4096u           /* leaf limit, packets */

/* Every field's 0 means its default; a NULL limits pointer means all defaults. */
struct weir_policy_lua_limits {
	size_t mem_bytes;               /* the Lua state's memory, all allocations */
	uint64_t instructions;          /* VM instructions the script may execute */
	/* What the config file knows and the script does not: the leaf limit
	 * when neither weir.link{limit} nor the class sets one (the config path
	 * uses a quarter of the mbufs per worker), and the links' default mode
	 * (the config's shaping.mode; 0 is postack anyway). */
	uint32_t default_limit;
	uint8_t default_mode;           /* enum weir_shape_mode */
};

/*
 * Run the script at path and compile what it declared. NULL on error, with
 * "FILE:LINE: message" in err: the line of the weir.link/class/rule call a
 * problem is about (policy builder errors included), Lua's own position for
 * syntax and runtime errors, the running line for the instruction budget
 * and the memory limit. A script that declares no weir.link is an error:
 * there is nothing to shape (a plain bridge needs no policy).
 */
struct weir_policy *weir_policy_lua_load(const char *path, uint32_t epoch,
					 const struct weir_policy_lua_limits *lim,
					 char *err, size_t errlen);

#endif /* WEIR_APP_POLICY_LUA_H */
