/* SPDX-License-Identifier: BSD-3-Clause
 * weir: text from outside made valid UTF-8 for JSON (text.h).
 */
#include <stdlib.h>
#include <string.h>

#include "text.h"

/* Length of the well-formed UTF-8 sequence at s (1 to 4), 0 if there is
 * none, or -1 if s ends inside one that was well-formed so far. */
static int
seq_len(const unsigned char *s)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	int n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;       /* continuation byte, overlong C0/C1, or past U+10FFFF */
	/* The second byte's range excludes overlongs, surrogates and > U+10FFFF. */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	for (int i = 1; i < n; i++) {
		if (s[i] == '\0')
			return -1;
		if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf))
			return 0;
	}
	return n;
}

size_t
weir_utf8_copy(char *dst, size_t size, const char *src)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t o = 0;

	if (size == 0)
		return 0;
	while (*s != '\0') {
		int n = seq_len(s);

		if (n < 0)
			break;          /* cut off mid-character before us: drop the rest */
		if (n == 0) {
			if (o + 1 >= size)
				break;
			dst[o++] = '?';
			s++;
			continue;
		}
		if (o + (size_t)n >= size)
			break;          /* no room for the whole character */
		memcpy(dst + o, s, (size_t)n);
		o += (size_t)n;
		s += n;
	}
	dst[o] = '\0';
	return o;
}

json_t *
weir_json_text(const char *s)
{
	json_t *j;
	char *fixed;
	size_t len;

	if (s == NULL)
		s = "";
	j = json_string(s);
	if (j != NULL)
		return j;
	/* Not UTF-8: the repair is never longer than s. */
	len = strlen(s) + 1;
	fixed = malloc(len);
	if (fixed == NULL)
		return NULL;
	weir_utf8_copy(fixed, len, s);
	j = json_string(fixed);
	free(fixed);
	return j;
}
