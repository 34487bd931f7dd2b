/* SPDX-License-Identifier: BSD-3-Clause
 * weir: Lua error text made fit for API clients.
 */
#ifndef WEIR_LUA_ERRTEXT_H
#define WEIR_LUA_ERRTEXT_H

#include <stddef.h>

/* In place: every address Lua's tostring gives a table, function,
 * userdata or thread ("function: 0x55df45795180", "function: builtin:
 * 0x...") becomes "<address>". Those addresses tell an API client where
 * the heap is (an ASLR leak) and mean nothing to an administrator; the
 * type name stays. Returns how many were replaced. */
unsigned int weir_lua_hide_addresses(char *s, size_t size);

#endif /* WEIR_LUA_ERRTEXT_H */
