/* SPDX-License-Identifier: BSD-3-Clause
 * weir: text from outside (error messages of scripts and files, paths,
 * device names) made safe for JSON, which must be valid UTF-8: jansson
 * refuses anything else, and one refused string fails a whole json_pack.
 */
#ifndef WEIR_TEXT_H
#define WEIR_TEXT_H

#include <stddef.h>
#include <jansson.h>

/* Copy src into dst (size bytes with the NUL) as valid UTF-8, truncating
 * on a character boundary: a byte that does not begin a well-formed
 * sequence (RFC 3629) becomes '?', and a sequence cut off at the end of
 * src (an earlier byte-wise truncation) is dropped. Returns the length. */
size_t weir_utf8_copy(char *dst, size_t size, const char *src);

/* A new JSON string of s (NULL: ""): s itself when it is valid UTF-8,
 * else weir_utf8_copy's repair of it. NULL only when out of memory. */
json_t *weir_json_text(const char *s);

#endif /* WEIR_TEXT_H */
