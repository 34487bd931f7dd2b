/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests for weir_flow_read_next, the management side's read of a
 * flow table (issue 17 #15): a walk in slot order finds every live flow
 * once, as copies, cut into pages anywhere; and what paging costs, by
 * cursor against by offset (every page a whole walk), printed.
 */
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>

#include "unit.h"
#include "flow.h"

#define CAP (1u << 16)
#define N 50000u

static struct weir_flow_key
key_of(uint32_t i)
{
	struct weir_flow_key k;

	memset(&k, 0, sizeof(k));
	k.family = 4;
	k.proto = 17;
	k.addr_lo[0] = 10;
	k.addr_lo[1] = (uint8_t)(i >> 16);
	k.addr_lo[2] = (uint8_t)(i >> 8);
	k.addr_lo[3] = (uint8_t)i;
	k.addr_hi[0] = 192;
	k.port_lo = 1000;
	k.port_hi = 53;
	return k;
}

static int
count_one(const struct weir_flow *f, const struct weir_flow_key *k, void *arg)
{
	(*(uint32_t *)arg)++;
	return 0;
}

/* A page of up to `limit` flows from *pos: how many; *pos is then the next. */
static uint32_t
page(const struct weir_flow_table *t, uint32_t *pos, uint32_t limit, uint8_t *seen)
{
	struct weir_flow f;
	struct weir_flow_key k;
	uint32_t n = 0, s = *pos;

	while (n < limit && (s = weir_flow_read_next(t, s, &f, &k)) < CAP) {
		uint32_t i = (uint32_t)k.addr_lo[1] << 16 | (uint32_t)k.addr_lo[2] << 8 | k.addr_lo[3];

		if (seen != NULL && i < N)
			seen[i]++;
		n++;
		s++;
	}
	*pos = s < CAP ? s : CAP;
	return n;
}

int
main(int argc, char **argv)
{
	struct weir_flow_table_conf fc = {
		.name = "read_ft", .capacity = CAP, .socket_id = SOCKET_ID_ANY,
		.tsc_hz = rte_get_tsc_hz(), .timeouts = { 5, 100, 10, 2, 30, 15 },
	};
	static uint8_t seen[N];
	struct weir_flow_table *t;
	struct weir_flow_key keys[WEIR_FLOW_BULK_MAX];
	struct weir_flow *out[WEIR_FLOW_BULK_MAX];
	uint32_t pos, n, walked = 0, bad = 0, pages = 0;
	double ms;
	uint64_t t0;
	double walk_ms, cursor_ms;

	unit_eal_init(argv[0], "flow_read", "512");
	fc.tsc_hz = rte_get_tsc_hz();
	ms = 1e3 / (double)rte_get_tsc_hz();
	t = weir_flow_table_create(&fc);
	if (t == NULL) {
		printf("no table\n");
		return 2;
	}
	for (uint32_t i = 0; i < N; i += WEIR_FLOW_BULK_MAX) {
		unsigned int m = RTE_MIN((unsigned int)WEIR_FLOW_BULK_MAX, N - i);

		for (unsigned int j = 0; j < m; j++)
			keys[j] = key_of(i + j);
		weir_flow_lookup_bulk(t, keys, m, 1000 + i, out);
		for (unsigned int j = 0; j < m; j++)
			out[j]->bytes[0] = i + j;       /* a mark the copy must carry */
	}
	CHECK(weir_flow_table_stats(t)->active == N, "%u active", weir_flow_table_stats(t)->active);

	/* Pages of 7 from 0: every flow once, with its own entry. */
	pos = 0;
	while ((n = page(t, &pos, 7, seen)) > 0)
		walked += n;
	for (uint32_t i = 0; i < N; i++)
		bad += seen[i] != 1;
	CHECK(walked == N && bad == 0, "%u walked, %u flows not seen exactly once", walked, bad);
	{
		struct weir_flow f;
		struct weir_flow_key k;
		uint32_t s = weir_flow_read_next(t, 0, &f, &k);
		uint32_t i = (uint32_t)k.addr_lo[1] << 16 | (uint32_t)k.addr_lo[2] << 8 | k.addr_lo[3];

		CHECK(s < CAP && f.bytes[0] == i,
		      "slot %u: the copy is not its flow's entry", s);
		CHECK(weir_flow_read_next(t, CAP, &f, &k) == CAP, "read past the end");
	}

	/* What paging through all of them costs, 1000 a page. */
	t0 = rte_rdtsc();
	walked = 0;
	weir_flow_walk(t, count_one, &walked);
	walk_ms = (double)(rte_rdtsc() - t0) * ms;
	t0 = rte_rdtsc();
	pos = 0;
	while (page(t, &pos, 1000, NULL) > 0)
		pages++;
	cursor_ms = (double)(rte_rdtsc() - t0) * ms;
	printf("%u flows in a table of %u: a whole walk %.2f ms; %u pages of 1000 by cursor "
	       "%.2f ms in all; by offset each page is a whole walk: ~%.0f ms in all\n", N, CAP,
	       walk_ms, pages, cursor_ms, walk_ms * pages);
	CHECK(walked == N && pages == N / 1000, "%u walked, %u pages", walked, pages);
	weir_flow_table_free(t);
	return unit_report();
}
