/* SPDX-License-Identifier: BSD-3-Clause
 * Unit tests of run-time class changes through a worker's command ring
 * (lib/worker/class_cmd.h, lib/worker/worker_classcmd.c): set, add, remove, refusals,
 * stale commands, and the time from request to in force for one change and
 * for a batch of 10,000.
 */
#include <stdio.h>

#include <rte_cycles.h>

#include "unit.h"
#include "rig.h"
#include "class_cmd.h"

#define MBIT 1000000ull

static void
loop_until_empty(struct weir_worker *w, struct rte_ring *ring)
{
	while (!rte_ring_empty(ring))
		weir_worker_class_cmds(w);
}

static void
test_class_cmds(void)
{
	static const struct weir_policy_class_conf cls[] = {
		{ .name = "a", .rate = 6 * MBIT, .ceil = 10 * MBIT },
		{ .name = "b", .rate = 4 * MBIT, .ceil = 10 * MBIT },
	};
	const struct weir_policy_conf pc = {
		.tree = { { .rate = 10 * MBIT, .n_classes = 2, .classes = cls, .default_class = "b" } },
	};
	struct rte_ring *ring = weir_class_cmd_ring("cc_test", 16384, SOCKET_ID_ANY);
	struct weir_class_cmd_stats st;
	struct weir_class_cmd c;
	struct rig r;
	uint32_t a, fresh;
	uint64_t t0, t1;

	rig_class_capacity = 16;
	if (ring == NULL || rig_make(&r, &pc, "cc_rig") != 0) {
		CHECK(0, "rig");
		return;
	}
	r.w->conf.class_cmds = ring;
	a = weir_policy_class_find(r.p, 0, "a");

	/* One change: rate and ceil of a. */
	c = (struct weir_class_cmd){ .op = WEIR_CLASS_SET, .dir = 0, .epoch = r.p->epoch, .cls = a,
				     .conf = { .rate = 2 * MBIT, .ceil = 3 * MBIT } };
	CHECK(weir_class_cmd_post(ring, &c) == 0, "posted");
	CHECK(weir_worker_class_cmds(r.w) == 1, "taken");
	weir_worker_class_cmd_stats(r.w, &st);
	CHECK(st.applied == 1 && weir_cbq_rate(r.w->svc.shaper[0], a) == 2 * MBIT &&
	      weir_cbq_ceil(r.w->svc.shaper[0], a) == 3 * MBIT, "in force");
	printf("  one change: %.2f us from request to in force\n",
	       (double)st.lat_last * 1e6 / rte_get_tsc_hz());

	/* Another policy's command: stale, nothing changed. */
	c.epoch = r.p->epoch + 1;
	c.conf.rate = 5 * MBIT;
	weir_class_cmd_post(ring, &c);
	weir_worker_class_cmds(r.w);
	weir_worker_class_cmd_stats(r.w, &st);
	CHECK(st.stale == 1 && weir_cbq_rate(r.w->svc.shaper[0], a) == 2 * MBIT, "stale: ignored");

	/* A bad figure: refused by the tree, counted. */
	c = (struct weir_class_cmd){ .op = WEIR_CLASS_SET, .dir = 0, .epoch = r.p->epoch, .cls = a,
				     .conf = { .rate = 5 * MBIT, .ceil = 1 * MBIT } };
	weir_class_cmd_post(ring, &c);
	weir_worker_class_cmds(r.w);
	weir_worker_class_cmd_stats(r.w, &st);
	CHECK(st.failed == 1 && st.last_err == -EINVAL && weir_cbq_rate(r.w->svc.shaper[0], a) == 2 * MBIT,
	      "ceil below rate: refused");

	/* A leaf added under the root, then removed. */
	fresh = weir_cbq_class_free_id(r.w->svc.shaper[0]);
	c = (struct weir_class_cmd){ .op = WEIR_CLASS_ADD, .dir = 0, .epoch = r.p->epoch, .cls = fresh,
				     .conf = { .parent = 0, .rate = 1 * MBIT } };
	weir_class_cmd_post(ring, &c);
	weir_worker_class_cmds(r.w);
	CHECK(fresh != WEIR_CBQ_NONE && weir_cbq_is_leaf(r.w->svc.shaper[0], fresh), "added (%u)", fresh);
	c.op = WEIR_CLASS_REMOVE;
	weir_class_cmd_post(ring, &c);
	weir_worker_class_cmds(r.w);
	CHECK(!weir_cbq_is_leaf(r.w->svc.shaper[0], fresh), "removed");

	/* A batch of 10,000 changes: all in force, and how long it took. */
	weir_worker_class_cmd_stats(r.w, &st);
	t0 = rte_rdtsc();
	for (unsigned int i = 0; i < 10000; i++) {
		c = (struct weir_class_cmd){ .op = WEIR_CLASS_SET, .dir = 0, .epoch = r.p->epoch,
					     .cls = a, .conf = { .rate = (1 + i % 8) * MBIT,
								 .ceil = 10 * MBIT } };
		if (weir_class_cmd_post(ring, &c) != 0)
			CHECK(0, "post %u", i);
	}
	loop_until_empty(r.w, ring);
	t1 = rte_rdtsc();
	{
		struct weir_class_cmd_stats s2;

		weir_worker_class_cmd_stats(r.w, &s2);
		CHECK(s2.applied - st.applied == 10000 &&
		      weir_cbq_rate(r.w->svc.shaper[0], a) == (1 + 9999 % 8) * MBIT, "10,000 applied");
		printf("  10,000 changes: %.2f ms posted and applied (%.0f cycles each), "
		       "longest wait %.2f ms\n", (double)(t1 - t0) * 1e3 / rte_get_tsc_hz(),
		       (double)(t1 - t0) / 10000, (double)s2.lat_max * 1e3 / rte_get_tsc_hz());
	}
	rig_free(&r);
	rte_ring_free(ring);
	rig_class_capacity = 0;
}

int
main(int argc, char **argv)
{
	RTE_SET_USED(argc);
	unit_eal_init(argv[0], "class_cmd", "128");
	rig_mempool("class_cmd_test");
	test_class_cmds();
	rte_eal_cleanup();
	return unit_report();
}
