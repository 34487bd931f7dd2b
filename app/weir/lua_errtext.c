/* SPDX-License-Identifier: BSD-3-Clause
 * weir: heap addresses out of Lua error text (lua_errtext.h).
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lua_errtext.h"

#define HIDDEN "<address>"

/* Whether s[i..] is "0x" and a hex digit that follows "TYPE: " for one of
 * the types Lua prints with %p: a user's own "0x1F" elsewhere stays. */
static bool
lua_address_at(const char *s, size_t i)
{
	static const char *const prefix[] = { "table: ", "function: ", "userdata: ", "thread: ",
					      "builtin: " };

	if (s[i] != '0' || (s[i + 1] != 'x' && s[i + 1] != 'X') ||
	    !isxdigit((unsigned char)s[i + 2]))
		return false;
	for (size_t k = 0; k < sizeof(prefix) / sizeof(prefix[0]); k++) {
		size_t n = strlen(prefix[k]);

		if (i >= n && strncmp(s + i - n, prefix[k], n) == 0)
			return true;
	}
	return false;
}

unsigned int
weir_lua_hide_addresses(char *s, size_t size)
{
	char out[1024];
	size_t o = 0, i = 0;
	unsigned int n = 0;

	if (s == NULL || size == 0)
		return 0;
	while (s[i] != '\0' && o + 1 < sizeof(out)) {
		if (lua_address_at(s, i)) {
			o += (size_t)snprintf(out + o, sizeof(out) - o, "%s", HIDDEN);
			if (o >= sizeof(out))
				o = sizeof(out) - 1;
			/* %p of a 64-bit pointer: at most 16 digits (glibc
			 * prints no leading zeros, so text glued on without a
			 * separator may lose its first letters a-f too). */
			i += 2;
			for (int d = 0; d < 16 && isxdigit((unsigned char)s[i]); d++)
				i++;
			n++;
		} else {
			out[o++] = s[i++];
		}
	}
	if (n == 0)
		return 0;
	/* The replacement is never longer than what it replaces (at least
	 * "0x" and 7 digits for any address glibc prints), except for tiny
	 * ones: cut to size, the callers' messages are cut there anyway. */
	if (o >= size)
		o = size - 1;
	memcpy(s, out, o);
	s[o] = '\0';
	return n;
}
