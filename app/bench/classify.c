/* SPDX-License-Identifier: BSD-3-Clause
 * weir-bench-classify: the cost of a policy's rules, at 10, 1,000 and
 * 100,000 rules (issue #5's benchmark).
 *
 * For each size: the time to compile the rules (weir_policy_build: what a
 * reload or a hook's change pays on the management lcore before the
 * switch), the time to build the ACL tries from them, and the cost per
 * classification of a new flow on a worker through the tries and through
 * the first-match scan, on the same tuples (a quarter match the last rule,
 * the rest no rule: the scan's worst cases). Rules are what generated
 * policies look like: one per customer prefix (a distinct IPv4 /24 on the
 * WAN side) and port, TCP, with every 7th rule naming a DSCP set and every
 * 5th a LAN prefix.
 *
 * Then the subscribers' lookup (lib/classify/subscriber_lpm.h) at 1,000, 100,000 and
 * 500,000 subscribers of one IPv4 /32 and one IPv6 /56 each: the time to build
 * it and its cost per new flow, on random subscribers' addresses.
 *
 *     weir-bench-classify [EAL] -- [--rules 10,1000,100000] [--subscribers 1000,100000]
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <netinet/in.h>
#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_eal.h>

#include "harness.h"
#include "classify.h"
#include "policy.h"
#include "subscriber.h"
#include "subscriber_lpm.h"

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t
v4_word(unsigned int a, unsigned int b, unsigned int c, unsigned int d)
{
	return (uint64_t)(a << 24 | b << 16 | c << 8 | d) << 32;
}

static void
run(unsigned int n)
{
	struct weir_policy_class_conf cls[2] = { { .name = "a", .rate = 10000000 },
						 { .name = "b", .rate = 10000000 } };
	struct weir_policy_rule_conf *rules = calloc(n, sizeof(*rules));
	struct weir_policy_conf pc = {
		.tree = { { .rate = 30000000, .n_classes = 2, .classes = cls, .default_class = "b" } },
		.n_rules = n, .rules = rules,
	};
	enum { NT = 1024 };
	static struct weir_cls_tuple t[NT];
	struct weir_policy_err e;
	struct weir_policy *p;
	double t0, compile_s, acl_s;
	char err[256];
	uint64_t c0, scan_cyc, acl_cyc;
	unsigned int scan_n = n >= 10000 ? 64 : NT, sink = 0;

	for (unsigned int i = 0; i < n; i++) {
		struct weir_classify_rule *r = &rules[i].match;

		snprintf(rules[i].class_name, sizeof(rules[i].class_name), "a");
		r->proto = IPPROTO_TCP;
		r->prefix[WEIR_CLS_WAN] = (struct weir_cls_prefix){ .family = 4, .len = 24,
			.addr = { (uint8_t)(1 + i / 65536), (uint8_t)(i / 256), (uint8_t)i, 0 } };
		r->port[WEIR_CLS_WAN] = (struct weir_cls_ports){ (uint16_t)(1000 + i % 50000),
								 (uint16_t)(1000 + i % 50000) };
		if (i % 7 == 0)
			r->dscp_mask = 1ull << 46 | 1ull << 34 | 1ull << 8;
		if (i % 5 == 0)
			r->prefix[WEIR_CLS_LAN] = (struct weir_cls_prefix){ .family = 4, .len = 16,
									    .addr = { 10, (uint8_t)(i % 4) } };
	}
	t0 = now_s();
	p = weir_policy_build(&pc, 1, &e);
	compile_s = now_s() - t0;
	if (p == NULL) {
		fprintf(stderr, "%u rules: %s\n", n, e.msg);
		exit(1);
	}
	for (unsigned int k = 0; k < NT; k++) {
		unsigned int i = n - 1;

		memset(&t[k], 0, sizeof(t[k]));
		t[k].family = 4;
		t[k].proto = IPPROTO_TCP;
		t[k].has_ports = 1;
		t[k].port[0] = (uint16_t)(40000 + k);
		t[k].addr[0][0] = v4_word(10, i % 4, 0, 2);
		if (k % 4 == 0) {       /* the last rule */
			t[k].addr[1][0] = v4_word(1 + i / 65536, (i / 256) & 255, i & 255, 9);
			t[k].port[1] = (uint16_t)(1000 + i % 50000);
			t[k].dscp = i % 7 == 0 ? 46 : 0;
		} else {                /* no rule */
			t[k].addr[1][0] = v4_word(250, k & 255, 1, 1);
			t[k].port[1] = 443;
		}
	}
	c0 = rte_rdtsc();
	for (unsigned int k = 0; k < scan_n; k++)
		sink += (unsigned int)weir_classify_scan(p->classifier, &t[k]);
	scan_cyc = (rte_rdtsc() - c0) / scan_n;
	t0 = now_s();
	if (weir_classifier_accelerate(p->classifier, SOCKET_ID_ANY, err, sizeof(err)) < 0) {
		fprintf(stderr, "%u rules: ACL: %s\n", n, err);
		acl_s = -1;
		acl_cyc = 0;
	} else {
		acl_s = now_s() - t0;
		c0 = rte_rdtsc();
		for (int rep = 0; rep < 100; rep++)
			for (unsigned int k = 0; k < NT; k++)
				sink += (unsigned int)weir_classify_tuple(p->classifier, &t[k]);
		acl_cyc = (rte_rdtsc() - c0) / (100 * NT);
	}
	/* The two must agree before their costs mean anything. */
	for (unsigned int k = 0; k < scan_n; k++)
		if (weir_classify_scan(p->classifier, &t[k]) != weir_classify_rule_index(p->classifier, &t[k])) {
			fprintf(stderr, "%u rules: ACL and scan disagree on tuple %u\n", n, k);
			exit(1);
		}
	printf("%-8u %12.2f %12.2f %14" PRIu64 " %14" PRIu64 " %9.1fx%s\n", n, compile_s * 1e3,
	       acl_s * 1e3, scan_cyc, acl_cyc,
	       acl_cyc ? (double)scan_cyc / (double)acl_cyc : 0.0,
	       weir_classifier_accelerated(p->classifier) ? "" : "  (scan: below the ACL threshold)");
	(void)sink;
	weir_policy_free(p);
	free(rules);
}

/* n subscribers of a /32 and a /56 each: LPM build time and lookup cycles. */
static void
run_subs(unsigned int n)
{
	struct weir_subs *s = weir_subs_new();
	struct weir_sub_errs e = { 0 };
	struct weir_sub_conf c = { .max = { 10000000, 10000000 } };
	enum { NT = 4096 };
	static struct weir_cls_tuple t[NT];
	char id[32], txt[64], err[256];
	struct weir_sub_lpm *l;
	uint64_t c0, cyc[2];
	unsigned int sink = 0;
	double t0, build_s;

	for (unsigned int i = 0; i < n; i++) {
		int64_t k;

		snprintf(id, sizeof(id), "s%u", i);
		c.id = id;
		k = weir_subs_add(s, &c, 0, i + 1, &e);
		snprintf(txt, sizeof(txt), "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
		weir_subs_add_prefix_text(s, (uint32_t)k, txt, 0, i + 1, &e);
		snprintf(txt, sizeof(txt), "2001:db8:%x:%x00::/56", i >> 8, i & 255);
		weir_subs_add_prefix_text(s, (uint32_t)k, txt, 0, i + 1, &e);
	}
	if (e.n != 0 || weir_subs_check(s, &e) != 0) {
		fprintf(stderr, "%u subscribers: %s", n, e.text ? e.text : "");
		exit(1);
	}
	t0 = now_s();
	l = weir_sub_lpm_build(s, SOCKET_ID_ANY, err, sizeof(err));
	build_s = now_s() - t0;
	if (l == NULL) {
		fprintf(stderr, "%u subscribers: %s\n", n, err);
		exit(1);
	}
	for (int fam = 0; fam < 2; fam++) {
		for (unsigned int k = 0; k < NT; k++) {
			unsigned int i = (unsigned int)(((uint64_t)k * 2654435761u) % n);

			memset(&t[k], 0, sizeof(t[k]));
			t[k].family = fam == 0 ? 4 : 6;
			if (fam == 0) {
				t[k].addr[0][0] = v4_word(10, i >> 16, (i >> 8) & 255, i & 255);
			} else {
				t[k].addr[0][0] = 0x20010db800000000ull | (uint64_t)i << 8 | 0x42;
				t[k].addr[0][1] = 1;
			}
		}
		c0 = rte_rdtsc();
		for (int rep = 0; rep < 50; rep++)
			for (unsigned int k = 0; k < NT; k++)
				sink += weir_sub_lpm_lookup_tuple(l, &t[k]);
		cyc[fam] = (rte_rdtsc() - c0) / (50 * NT);
		/* Each address is its subscriber's. */
		for (unsigned int k = 0; k < NT; k++)
			if (weir_sub_lpm_lookup_tuple(l, &t[k]) !=
			    (unsigned int)(((uint64_t)k * 2654435761u) % n)) {
				fprintf(stderr, "%u subscribers: lookup %u wrong\n", n, k);
				exit(1);
			}
	}
	printf("%-12u %10u %14.1f %14.1f %12" PRIu64 " %12" PRIu64 "\n", n,
	       weir_subs_prefix_count(s), build_s * 1e3, weir_sub_lpm_memory(l) / 1e6, cyc[0],
	       cyc[1]);
	(void)sink;
	weir_sub_lpm_free(l);
	weir_subs_free(s);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = { { "rules", required_argument, NULL, 'r' },
					      { "subscribers", required_argument, NULL, 's' }, { 0 } };
	char list[256] = "10,1000,100000", subs[256] = "1000,100000,500000";
	int c;

	bench_init(&argc, &argv);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 'r' && c != 's') {
			fprintf(stderr, "usage: weir-bench-classify [EAL] -- [--rules N,N] "
				"[--subscribers N,N]\n");
			return 2;
		}
		snprintf(c == 'r' ? list : subs, sizeof(list), "%s", optarg);
	}
	printf("%-8s %12s %12s %14s %14s %10s\n", "rules", "compile ms", "ACL build ms",
	       "scan cyc/flow", "ACL cyc/flow", "scan/ACL");
	for (char *tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ","))
		run((unsigned int)strtoul(tok, NULL, 10));
	printf("\n%-12s %10s %14s %14s %12s %12s\n", "subscribers", "prefixes", "LPM build ms",
	       "LPM MB", "v4 cyc/flow", "v6 cyc/flow");
	for (char *tok = strtok(subs, ","); tok != NULL; tok = strtok(NULL, ","))
		run_subs((unsigned int)strtoul(tok, NULL, 10));
	bench_fini();
	return 0;
}
