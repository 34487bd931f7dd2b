/* SPDX-License-Identifier: BSD-3-Clause
 * What every C unit test shares: the CHECK counter, the closing line that
 * meson's log and CI read ("N passed, N failed"), EAL set up for tests (no
 * hugepages, a private file prefix so parallel tests never collide), and
 * mbufs that carry a (flow, sequence) tag so order can be checked.
 */
#ifndef WEIR_TEST_UNIT_H
#define WEIR_TEST_UNIT_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_eal.h>
#include <rte_mbuf.h>

static unsigned int n_pass, n_fail;

#define CHECK(cond, ...) do {                                           \
	if (cond) {                                                     \
		n_pass++;                                               \
	} else {                                                        \
		n_fail++;                                               \
		printf("FAIL %s:%d: %s: ", __func__, __LINE__, #cond);  \
		printf(__VA_ARGS__);                                    \
		printf("\n");                                           \
	}                                                               \
} while (0)

/* Print the closing line and give main its exit status. */
static inline int
unit_report(void)
{
	printf("%u passed, %u failed\n", n_pass, n_fail);
	return n_fail == 0 ? 0 : 1;
}

/* EAL for a test named `name` with `mem_mb` of ordinary (non-huge) memory. */
static inline void
unit_eal_init(const char *argv0, const char *name, const char *mem_mb)
{
	char prefix[96];
	char *argv[] = { (char *)argv0, "--no-huge", "-m", (char *)mem_mb, "--no-pci",
			 "--log-level=error", prefix, NULL };

	snprintf(prefix, sizeof(prefix), "--file-prefix=wtest-%s-%d", name, (int)getpid());
	if (rte_eal_init((int)RTE_DIM(argv) - 1, argv) < 0) {
		printf("EAL init failed\n");
		exit(2);
	}
}

struct unit_tag {
	uint32_t flow, seq;
};

/* An mbuf of `len` bytes whose data starts with (flow, seq). */
static inline struct rte_mbuf *
unit_tagged_mbuf(struct rte_mempool *mp, uint32_t flow, uint32_t seq, uint16_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
	struct unit_tag *t;

	if (m == NULL) {
		printf("mempool exhausted\n");
		exit(2);
	}
	t = (struct unit_tag *)rte_pktmbuf_append(m, len);
	t->flow = flow;
	t->seq = seq;
	return m;
}

/* The (flow, seq) a unit_tagged_mbuf carries. */
static inline struct unit_tag
unit_tag_of(struct rte_mbuf *m)
{
	return *rte_pktmbuf_mtod(m, struct unit_tag *);
}

#endif /* WEIR_TEST_UNIT_H */
