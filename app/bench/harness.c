/* SPDX-License-Identifier: BSD-3-Clause
 * weir-bench*: the shared start and end of the benchmark mains (harness.h).
 */
#include <stdlib.h>
#include <string.h>

#include <rte_debug.h>
#include <rte_eal.h>

#include "harness.h"

void
bench_init(int *argc, char ***argv)
{
	int rc = rte_eal_init(*argc, *argv);

	if (rc < 0)
		rte_exit(EXIT_FAILURE, "EAL init failed\n");
	*argc -= rc;
	*argv += rc;
}

void
bench_fini(void)
{
	rte_eal_cleanup();
}

unsigned int
bench_list(char *s, uint32_t *out, unsigned int max)
{
	unsigned int n = 0;
	char *tok;

	while ((tok = strsep(&s, ",")) != NULL && n < max)
		out[n++] = (uint32_t)strtoul(tok, NULL, 0);
	return n;
}
