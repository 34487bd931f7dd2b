/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for app/weir/text.c: error messages and paths become valid
 * UTF-8 before they go into JSON (issue 17 #13: one message cut inside a
 * character made json_pack fail, and /status, /counters and /metrics with
 * it), and are cut on character boundaries.
 */
#include <string.h>

#include <jansson.h>

#include "unit.h"
#include "text.h"

static int
valid(const char *s)
{
	json_t *j = json_string(s);

	json_decref(j);
	return j != NULL;
}

static void
test_copy_cuts_on_a_boundary(void)
{
	/* "é" is 2 bytes, "€" 3, U+1D11E 4: every cut must land between them. */
	const char *s = "a\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e" "b";
	char out[16];

	for (size_t size = 1; size <= strlen(s) + 1; size++) {
		size_t n = weir_utf8_copy(out, size, s);

		CHECK(n < size && strlen(out) == n, "size %zu: length %zu", size, n);
		CHECK(valid(out), "size %zu: '%s' is not UTF-8", size, out);
		CHECK(strncmp(out, s, n) == 0, "size %zu: not a prefix", size);
	}
	CHECK(weir_utf8_copy(out, 4, s) == 3, "a + e-acute is 3 bytes");
	CHECK(weir_utf8_copy(out, 6, s) == 3, "the euro sign does not fit in 5");
	CHECK(weir_utf8_copy(out, sizeof(out), s) == strlen(s), "all of it");
}

static void
test_copy_repairs(void)
{
	char out[64];

	/* A lone continuation byte, an overlong, a surrogate, past U+10FFFF,
	 * 0xff: each one byte of '?' (the rest of the sequence too). */
	weir_utf8_copy(out, sizeof(out), "x\x80y\xc0\xafz\xed\xa0\x80w\xf4\x90\x80\x80v\xff");
	CHECK(strcmp(out, "x?y??z???w????v?") == 0, "'%s'", out);
	/* Cut mid-character before us (snprintf did it): the stub is dropped. */
	weir_utf8_copy(out, sizeof(out), "boom \xe2\x82");
	CHECK(strcmp(out, "boom ") == 0, "'%s'", out);
	CHECK(valid(out), "not UTF-8");
}

static void
test_json_text(void)
{
	char msg[512];
	json_t *j, *o;

	/* The old failure: a message filled byte-wise, cut inside "€". */
	memset(msg, 0, sizeof(msg));
	strcpy(msg, "policy.lua:3: ");
	while (strlen(msg) + 3 < sizeof(msg) - 1)
		strcat(msg, "\xe2\x82\xac");
	msg[strlen(msg) - 1] = '\0';
	CHECK(!valid(msg), "the test's message should be cut mid-character");
	CHECK(json_pack("{s:s}", "last_error", msg) == NULL, "jansson took invalid UTF-8");
	o = json_pack("{s:o}", "last_error", weir_json_text(msg));
	CHECK(o != NULL, "json_pack failed");
	CHECK(o != NULL && strncmp(json_string_value(json_object_get(o, "last_error")), msg,
				   strlen(msg) - 2) == 0, "not the message");
	json_decref(o);
	j = weir_json_text("plain");
	CHECK(j != NULL && strcmp(json_string_value(j), "plain") == 0, "plain text changed");
	json_decref(j);
	j = weir_json_text(NULL);
	CHECK(j != NULL && strcmp(json_string_value(j), "") == 0, "NULL is not \"\"");
	json_decref(j);
}

int
main(void)
{
	test_copy_cuts_on_a_boundary();
	test_copy_repairs();
	test_json_text();
	return unit_report();
}
