/* SPDX-License-Identifier: BSD-3-Clause
 * Subscribers (lib/classify/subscriber.h, app/weir/lqos.h, lib/classify/subscriber_lpm.h):
 * LibreQoS's files as they are, every kind of bad row reported as FILE:LINE
 * with nothing of the file kept, 100,000 subscribers loaded and diffed, and
 * longest-prefix match over 1,000,000 IPv4 and IPv6 prefixes.
 */
#include <arpa/inet.h>
#include <string.h>
#include <time.h>

#include "lqos.h"
#include "subscriber.h"
#include "subscriber_lpm.h"
#include "unit.h"

#ifndef WEIR_SRC_DIR
#define WEIR_SRC_DIR "."
#endif

static double
now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static const char *
write_tmp(const char *name, const char *text)
{
	static char path[8][256];
	static int k;
	char *p = path[k++ % 8];
	FILE *f;

	snprintf(p, 256, "/tmp/wsubtest-%d-%s", (int)getpid(), name);
	f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
	return p;
}

static void
test_example(void)
{
	struct weir_sub_errs e = { 0 };
	struct weir_subs *s = weir_subs_load_lqos(WEIR_SRC_DIR "/conf/subscribers/ShapedDevices.csv",
						  WEIR_SRC_DIR "/conf/subscribers/network.json", 0, &e);
	const struct weir_sub *u;
	int64_t i;

	CHECK(s != NULL, "%s", e.text ? e.text : "");
	if (s == NULL)
		return;
	CHECK(weir_subs_count(s) == 3, "%u", weir_subs_count(s));
	CHECK(weir_subs_node_count(s) == 5, "%u", weir_subs_node_count(s));
	i = weir_subs_find(s, "c-1001");
	CHECK(i >= 0, "c-1001");
	u = weir_subs_get(s, (uint32_t)i);
	CHECK(u->n_prefixes == 4 && u->n_macs == 1, "%u %u", u->n_prefixes, u->n_macs);
	CHECK(u->max[WEIR_SUB_DOWN] == 50000000 && u->min[WEIR_SUB_UP] == 2000000, "rates");
	CHECK(strcmp(u->name, "Smith, Anna") == 0, "%s", u->name);
	CHECK(strcmp(weir_subs_node(s, u->node)->name, "AP_North_1") == 0, "node");
	/* AP_North_2 sits under a virtual group: its real parent is the site. */
	u = weir_subs_get(s, (uint32_t)weir_subs_find(s, "c-1002"));
	const struct weir_sub_node *ap2 = weir_subs_node(s, u->node);

	CHECK(strcmp(ap2->name, "AP_North_2") == 0 && ap2->depth == 2, "%s %u", ap2->name, ap2->depth);
	CHECK(strcmp(weir_subs_node(s, ap2->real_parent)->name, "Site_North") == 0, "virtual");
	/* Parent named by its id; a decimal rate. */
	u = weir_subs_get(s, (uint32_t)weir_subs_find(s, "c-1003"));
	CHECK(strcmp(weir_subs_node(s, u->node)->name, "Site_South") == 0, "by id");
	CHECK(u->min[WEIR_SUB_DOWN] == 2500000, "%lu", (unsigned long)u->min[0]);
	weir_subs_free(s);
	weir_sub_errs_free(&e);
}

/* A file with every kind of bad row: each is reported at its line. */
static void
test_bad_rows(void)
{
	const char *net = write_tmp("net.json",
		"{\n \"Site\": {\"downloadBandwidthMbps\": 100, \"uploadBandwidthMbps\": 100,\n"
		"  \"children\": {\"AP\": {\"downloadBandwidthMbps\": 50, \"uploadBandwidthMbps\": 50}}}\n}\n");
	const char *csv = write_tmp("bad.csv",
		"Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,Parent Node ID,Anchor Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n"
		"c1,ok,d1,x,AP,,,,10.0.0.0/24,,1,1,10,10,\n"                     /* 2 good */
		"c2,unknown parent,d2,x,Nowhere,,,,10.0.1.1,,1,1,10,10,\n"       /* 3 */
		"c3,bad prefix,d3,x,AP,,,,10.0.2.300,,1,1,10,10,\n"              /* 4 */
		"c4,min above max,d4,x,AP,,,,10.0.3.1,,20,1,10,10,\n"            /* 5 */
		"c5,dup device,d1,x,AP,,,,10.0.4.1,,1,1,10,10,\n"                /* 6 */
		"c6,prefix taken,d6,x,AP,,,,10.0.0.0/24,,1,1,10,10,\n"           /* 7 */
		"c7,bad number,d7,x,AP,,,,10.0.5.1,,1,1,ten,10,\n"               /* 8 */
		"c8,short row,d8,x,AP,,,,10.0.6.1,,1,1,10\n"                     /* 9 */
		"c9,above parent,d9,x,AP,,,,10.0.7.1,,1,1,60,10,\n"              /* 10 */
		"c1,other plan,d10,x,AP,,,,10.0.8.1,,1,1,20,10,\n"               /* 11 */
		"c11,host bits,d11,x,AP,,,,10.0.9.1/24,,1,1,10,10,\n"            /* 12 */
		"c12,bad v6,d12,x,AP,,,,,2001:db8::zz/64,1,1,10,10,\n"           /* 13 */
		"c13,bad mac,d13,x,AP,,,aa:bb,10.0.10.1,,1,1,10,10,\n"           /* 14 */
		"c14,\"unbalanced,d14,x,AP,,,,10.0.11.1,,1,1,10,10,\n");         /* 15 */
	static const struct { uint32_t line; const char *why; } want[] = {
		{ 3, "unknown parent node 'Nowhere'" },
		{ 4, "not an IPv4 or IPv6 address" },
		{ 5, "download min 20.000 Mbit/s above its max" },
		{ 6, "Device ID 'd1' already at line 2" },
		{ 7, "already circuit 'c1''s" },
		{ 8, "Download Max Mbps 'ten': not a rate" },
		{ 9, "13 cells, the header has 15" },
		{ 10, "download max 60.000 Mbit/s above node 'AP'" },
		{ 11, "rates or parent differ from its row at" },
		{ 12, "host bits set" },
		{ 13, "not an IPv4 or IPv6 address" },
		{ 14, "not a MAC address" },
		{ 15, "unbalanced quote" },
	};
	struct weir_sub_errs e = { 0 };
	struct weir_subs *s = weir_subs_load_lqos(csv, net, 0, &e);

	CHECK(s == NULL, "a file with bad rows was taken");
	CHECK(e.n == RTE_DIM(want), "%u problems, want %zu:\n%s", e.n, RTE_DIM(want),
	      e.text ? e.text : "");
	for (size_t i = 0; i < RTE_DIM(want); i++) {
		char head[300];
		const char *at;

		snprintf(head, sizeof(head), "%s:%u: ", csv, want[i].line);
		at = e.text ? strstr(e.text, head) : NULL;
		CHECK(at != NULL && strstr(at, want[i].why) != NULL &&
		      strstr(at, want[i].why) < strchr(at, '\n'),
		      "line %u: want '%s' in:\n%s", want[i].line, want[i].why, e.text ? e.text : "");
	}
	weir_subs_free(s);
	weir_sub_errs_free(&e);

	/* network.json: a bad node and a syntax error, with their lines. */
	memset(&e, 0, sizeof(e));
	net = write_tmp("bad.json", "{\n \"A\": {\"downloadBandwidthMbps\": \"fast\"},\n"
				    " \"B\": {\"children\": {\"C\": 7}}\n}\n");
	s = weir_subs_load_lqos(csv, net, 0, &e);
	CHECK(s == NULL && e.text != NULL && strstr(e.text, ":2: node 'A': bandwidth") != NULL,
	      "%s", e.text ? e.text : "");
	CHECK(e.text != NULL && strstr(e.text, ":3: node 'C' is not an object") != NULL, "%s",
	      e.text ? e.text : "");
	weir_sub_errs_free(&e);
	net = write_tmp("syntax.json", "{\n \"A\": {\n}\n,\n");
	memset(&e, 0, sizeof(e));
	s = weir_subs_load_lqos(csv, net, 0, &e);
	CHECK(s == NULL && e.text != NULL && strstr(e.text, "syntax.json:5:") != NULL, "%s",
	      e.text ? e.text : "");
	weir_sub_errs_free(&e);
}

/* n subscribers under 3 levels of nodes; `bump` changes every 100th plan
 * and drops the last 10 for 10 new ones. */
static const char *
write_big(const char *name, uint32_t n, bool bump, const char **net)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/wsubtest-%d-net-%s.json", (int)getpid(), name);
	f = fopen(path, "w");
	fprintf(f, "{");
	for (int a = 0; a < 10; a++) {
		fprintf(f, "%s\"S%d\": {\"downloadBandwidthMbps\": 100000, \"uploadBandwidthMbps\": 100000, \"children\": {",
			a ? "," : "", a);
		for (int b = 0; b < 10; b++) {
			fprintf(f, "%s\"S%d_%d\": {\"downloadBandwidthMbps\": 10000, \"uploadBandwidthMbps\": 10000, \"children\": {",
				b ? "," : "", a, b);
			for (int c = 0; c < 10; c++)
				fprintf(f, "%s\"AP%d_%d_%d\": {\"downloadBandwidthMbps\": 1000, \"uploadBandwidthMbps\": 1000}",
					c ? "," : "", a, b, c);
			fprintf(f, "}}");
		}
		fprintf(f, "}}");
	}
	fprintf(f, "}\n");
	fclose(f);
	*net = strdup(path);
	snprintf(path, sizeof(path), "/tmp/wsubtest-%d-%s.csv", (int)getpid(), name);
	f = fopen(path, "w");
	fprintf(f, "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,Parent Node ID,Anchor Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment,sqm\n");
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = bump && i >= n - 10 ? i + n : i;
		unsigned int rate = bump && i % 100 == 0 ? 30 : 20;

		fprintf(f, "c%u,Customer %u,d%u,cpe,AP%u_%u_%u,,,,100.%u.%u.%u/32,2001:db8:%x:%x00::/56,2,1,%u,%u,,\n",
			id, id, id, i % 1000 / 100, i % 100 / 10, i % 10, 64 + (id >> 16), (id >> 8) & 255,
			id & 255, id >> 8, id & 255, rate, rate / 2);
	}
	fclose(f);
	return strdup(path);
}

static void
test_scale(void)
{
	const uint32_t n = 100000;
	const char *net_a, *net_b;
	const char *a = write_big("a", n, false, &net_a), *b = write_big("b", n, true, &net_b);
	struct weir_sub_errs e = { 0 };
	double t0 = now_s();
	struct weir_subs *sa = weir_subs_load_lqos(a, net_a, 0, &e);
	double t1 = now_s();
	struct weir_subs *sb = weir_subs_load_lqos(b, net_b, 0, &e);
	struct weir_sub_diff d;
	double t2, t3;

	CHECK(sa != NULL && sb != NULL, "%s", e.text ? e.text : "");
	if (sa == NULL || sb == NULL)
		return;
	CHECK(weir_subs_count(sa) == n && weir_subs_prefix_count(sa) == 2 * n, "%u",
	      weir_subs_count(sa));
	t2 = now_s();
	weir_subs_diff(sa, sb, &d, NULL, NULL);
	t3 = now_s();
	/* Every 100th changed its rates (1,000; none of the last 10, which
	 * were replaced: 10 removed, 10 added). */
	CHECK(d.n[WEIR_SUB_ADDED] == 10 && d.n[WEIR_SUB_REMOVED] == 10, "%u %u",
	      d.n[WEIR_SUB_ADDED], d.n[WEIR_SUB_REMOVED]);
	CHECK(d.n[WEIR_SUB_RATES] == 1000 && d.n[WEIR_SUB_CHANGED] == 0, "%u %u",
	      d.n[WEIR_SUB_RATES], d.n[WEIR_SUB_CHANGED]);
	CHECK(d.unchanged == n - 10 - 1000 && !d.nodes_changed, "%u", d.unchanged);
	printf("100,000 subscribers (1,000 nodes, 200,000 prefixes): load %.3f s, diff %.3f s, "
	       "%zu bytes (%.0f a subscriber, struct %zu)\n", t1 - t0, t3 - t2,
	       weir_subs_memory(sa), (double)weir_subs_memory(sa) / n, sizeof(struct weir_sub));
	weir_subs_free(sa);
	weir_subs_free(sb);
	weir_sub_errs_free(&e);
	unlink(a);
	unlink(b);
	unlink(net_a);
	unlink(net_b);
}

/* 1,000,000 prefixes: 500,000 IPv4 /32 in 10/8 under a /8 and /16 of
 * their own, 500,000 IPv6 /56 under a /32, and /64s inside some /56s. */
static void
test_lpm(void)
{
	const uint32_t n = 500000;
	struct weir_subs *s = weir_subs_new();
	struct weir_sub_errs e = { 0 };
	struct weir_sub_conf c = { .max = { 10000000, 10000000 } };
	char id[32], txt[64];
	struct weir_sub_lpm *l;
	double t0, t1;
	uint32_t bad = 0;

	/* Subscribers 0 .. n-1 own a /32 and a /56 each; n: 10.0.0.0/8, n+1: 10.1.0.0/16,
	 * n+2 .. : a /64 inside every 1000th /56. */
	for (uint32_t i = 0; i < n + 2 + n / 1000; i++) {
		int64_t k;

		snprintf(id, sizeof(id), "s%u", i);
		c.id = id;
		k = weir_subs_add(s, &c, 0, i + 1, &e);
		if (i < n) {
			snprintf(txt, sizeof(txt), "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
			bad += weir_subs_add_prefix_text(s, (uint32_t)k, txt, 0, i + 1, &e) != 0;
			snprintf(txt, sizeof(txt), "2001:db8:%x:%x00::/56", i >> 8, i & 255);
			bad += weir_subs_add_prefix_text(s, (uint32_t)k, txt, 0, i + 1, &e) != 0;
		} else if (i == n) {
			bad += weir_subs_add_prefix_text(s, (uint32_t)k, "10.0.0.0/8", 0, i + 1, &e) != 0;
		} else if (i == n + 1) {
			bad += weir_subs_add_prefix_text(s, (uint32_t)k, "10.1.0.0/16", 0, i + 1, &e) != 0;
		} else {
			uint32_t j = (i - n - 2) * 1000;

			snprintf(txt, sizeof(txt), "2001:db8:%x:%x00::/64", j >> 8, j & 255);
			bad += weir_subs_add_prefix_text(s, (uint32_t)k, txt, 0, i + 1, &e) != 0;
		}
	}
	CHECK(bad == 0 && weir_subs_check(s, &e) == 0, "%s", e.text ? e.text : "");
	CHECK(weir_subs_prefix_count(s) == 2 * n + 2 + n / 1000, "%u", weir_subs_prefix_count(s));
	t0 = now_s();
	l = weir_sub_lpm_build(s, SOCKET_ID_ANY, txt, sizeof(txt));
	t1 = now_s();
	CHECK(l != NULL, "%s", txt);
	if (l == NULL)
		goto out;
	bad = 0;
	for (uint32_t i = 0; i < n; i += 7) {
		uint8_t a4[4], a6[16];
		uint32_t want6 = i % 1000 == 0 ? n + 2 + i / 1000 : i;

		snprintf(txt, sizeof(txt), "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
		inet_pton(AF_INET, txt, a4);
		snprintf(txt, sizeof(txt), "2001:db8:%x:%x00::42", i >> 8, i & 255);
		inet_pton(AF_INET6, txt, a6);
		bad += weir_sub_lpm_lookup(l, 4, a4) != i;
		bad += weir_sub_lpm_lookup(l, 6, a6) != want6;
	}
	CHECK(bad == 0, "%u lookups wrong", bad);
	{
		uint8_t a[16];
		uint32_t hit;

		inet_pton(AF_INET, "10.200.0.1", a);            /* only the /8 */
		CHECK(weir_sub_lpm_lookup(l, 4, a) == n, "/8");
		inet_pton(AF_INET, "10.1.250.3", a);            /* the /16 holds no /32 here? */
		hit = weir_sub_lpm_lookup(l, 4, a);
		CHECK(hit == ((1u << 16) | (250u << 8) | 3u) || hit == n + 1, "%u", hit);
		inet_pton(AF_INET, "10.7.255.255", a);          /* beyond the /32s: the /8 */
		CHECK(weir_sub_lpm_lookup(l, 4, a) == n, "/8 beyond");
		inet_pton(AF_INET, "11.0.0.1", a);
		CHECK(weir_sub_lpm_lookup(l, 4, a) == WEIR_SUB_NONE, "no subscriber");
		inet_pton(AF_INET6, "2001:db9::1", a);
		CHECK(weir_sub_lpm_lookup(l, 6, a) == WEIR_SUB_NONE, "no subscriber v6");
		inet_pton(AF_INET6, "2001:db8:3e8:1::1", a);    /* /56 of 1000<<8, outside its /64 */
		CHECK(weir_sub_lpm_lookup(l, 6, a) == 1000u * 256, "%u", weir_sub_lpm_lookup(l, 6, a));
	}
	/* The per-new-flow cost: one lookup per family. */
	{
		const uint32_t rounds = 1000000;
		uint64_t c0, c1, c2, sum = 0;
		uint8_t a6[16];

		inet_pton(AF_INET6, "2001:db8::", a6);
		c0 = rte_rdtsc();
		for (uint32_t i = 0; i < rounds; i++) {
			uint32_t v = rte_cpu_to_be_32((10u << 24) | ((i * 2654435761u) & 0x7ffff));

			sum += weir_sub_lpm_lookup(l, 4, (const uint8_t *)&v);
		}
		c1 = rte_rdtsc();
		for (uint32_t i = 0; i < rounds; i++) {
			uint32_t r = (i * 2654435761u) % n;

			a6[4] = (uint8_t)(r >> 16);
			a6[5] = (uint8_t)(r >> 8);
			a6[6] = (uint8_t)r;
			sum += weir_sub_lpm_lookup(l, 6, a6);
		}
		c2 = rte_rdtsc();
		printf("LPM over %u prefixes: built in %.2f s, %.0f MB; lookup %.0f cycles (v4), "
		       "%.0f (v6) [%lu]\n", weir_subs_prefix_count(s), t1 - t0,
		       weir_sub_lpm_memory(l) / 1e6, (double)(c1 - c0) / rounds,
		       (double)(c2 - c1) / rounds, (unsigned long)(sum & 1));
	}
	weir_sub_lpm_free(l);
out:
	weir_subs_free(s);
	weir_sub_errs_free(&e);
}

/* subscribers.box: a box takes its own partition's rows and the shared
 * ones (no Box); a bad row in another box's part still fails the file. */
static void
test_box(void)
{
	static const char head[] = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,"
				   "Parent Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,"
				   "Download Max Mbps,Upload Max Mbps,Comment,Box\n";
	char text[1024];
	const char *csv;
	struct weir_sub_errs e = { 0 };
	struct weir_subs *s;

	snprintf(text, sizeof(text), "%s%s", head,
		 "a1,a1,d1,x,,,,10.0.1.1,,1,1,10,10,,1\n"
		 "b1,b1,d2,x,,,,10.0.2.1,,1,1,10,10,,2\n"
		 "all,all,d3,x,,,,10.0.3.1,,1,1,10,10,,\n");
	csv = write_tmp("box.csv", text);
	for (uint16_t box = 0; box <= 2; box++) {
		s = weir_subs_load_lqos(csv, NULL, box, &e);
		CHECK(s != NULL && weir_subs_count(s) == (box == 0 ? 3u : 2u), "box %u: %s", box,
		      e.text ? e.text : "");
		CHECK(s != NULL && weir_subs_find(s, "all") >= 0 &&
		      (weir_subs_find(s, "a1") >= 0) == (box != 2) &&
		      (weir_subs_find(s, "b1") >= 0) == (box != 1), "box %u's rows", box);
		weir_subs_free(s);
	}
	snprintf(text, sizeof(text), "%s%s", head,
		 "a1,a1,d1,x,,,,10.0.1.1,,1,1,10,10,,1\n"
		 "b1,b1,d2,x,,,,10.0.2.1,,1,1,ten,10,,2\n");
	csv = write_tmp("box-bad.csv", text);
	s = weir_subs_load_lqos(csv, NULL, 1, &e);
	CHECK(s == NULL && e.text != NULL && strstr(e.text, ":3: ") != NULL, "%s",
	      e.text ? e.text : "");
	weir_sub_errs_free(&e);
}

static bool
drop_c1002(void *arg, uint32_t i)
{
	const struct weir_subs *s = arg;

	return strcmp(weir_subs_get(s, i)->id, "c-1002") != 0;
}

/* The next set from the one in force (what every live change builds):
 * a whole copy diffs as unchanged; one without a subscriber, plus a new one
 * holding a prefix already taken, is refused naming the holder (and
 * counted as a conflict); without the conflict it diffs as one added, one
 * removed, and keeps the file names and lines of what it copied. */
static void
test_copy(void)
{
	struct weir_sub_errs e = { 0 };
	struct weir_subs *s = weir_subs_load_lqos(WEIR_SRC_DIR "/conf/subscribers/ShapedDevices.csv",
						  WEIR_SRC_DIR "/conf/subscribers/network.json", 0, &e);
	struct weir_sub_conf c = { .id = "new", .name = "new", .parent = "AP_North_1",
				   .max = { 10000000, 5000000 } };
	struct weir_sub_diff d;
	struct weir_subs *t;
	const struct weir_sub *u;
	int64_t k;
	char pfx[64];

	CHECK(s != NULL, "%s", e.text ? e.text : "");
	if (s == NULL)
		return;
	t = weir_subs_copy(s, NULL, NULL, NULL, &e);
	CHECK(t != NULL && weir_subs_check(t, &e) == 0, "%s", e.text ? e.text : "");
	weir_subs_diff(s, t, &d, NULL, NULL);
	CHECK(d.n[0] + d.n[1] + d.n[2] + d.n[3] == 0 && !d.nodes_changed && d.unchanged == 3,
	      "copy: %u %u %u %u %u", d.n[0], d.n[1], d.n[2], d.n[3], d.unchanged);
	u = weir_subs_get(t, (uint32_t)weir_subs_find(t, "c-1001"));
	CHECK(u->n_macs == 1 && u->line == weir_subs_get(s, (uint32_t)weir_subs_find(s, "c-1001"))->line,
	      "devices and line kept");
	weir_subs_free(t);

	/* c-1001's first prefix, claimed by a new subscriber. */
	u = weir_subs_get(s, (uint32_t)weir_subs_find(s, "c-1001"));
	weir_sub_prefix_text(&weir_subs_prefixes(s)[u->first_prefix], pfx, sizeof(pfx));
	t = weir_subs_copy(s, drop_c1002, NULL, s, &e);
	k = weir_subs_add(t, &c, weir_subs_file(t, "request"), 1, &e);
	CHECK(k >= 0 && weir_subs_add_prefix_text(t, (uint32_t)k, pfx, weir_subs_file(t, "request"),
						  1, &e) == 0, "add");
	CHECK(weir_subs_check(t, &e) == 1 && e.n_conflicts == 1 &&
	      strstr(e.text, "request:1: prefix") != NULL && strstr(e.text, "'c-1001'") != NULL,
	      "%s", e.text ? e.text : "");
	weir_subs_free(t);
	weir_sub_errs_free(&e);

	t = weir_subs_copy(s, drop_c1002, NULL, s, &e);
	k = weir_subs_add(t, &c, weir_subs_file(t, "request"), 1, &e);
	CHECK(k >= 0 && weir_subs_add_prefix_text(t, (uint32_t)k, "192.0.2.0/24",
						  weir_subs_file(t, "request"), 1, &e) == 0 &&
	      weir_subs_check(t, &e) == 0, "%s", e.text ? e.text : "");
	weir_subs_diff(s, t, &d, NULL, NULL);
	CHECK(d.n[WEIR_SUB_ADDED] == 1 && d.n[WEIR_SUB_REMOVED] == 1 && d.unchanged == 2,
	      "%u %u %u", d.n[WEIR_SUB_ADDED], d.n[WEIR_SUB_REMOVED], d.unchanged);
	weir_subs_free(t);
	weir_subs_free(s);
	weir_sub_errs_free(&e);
}

/* No argument: the files and their bad rows. "scale": 100,000 subscribers
 * loaded and diffed, 1,000,000 prefixes in the LPM (minutes under ASan, so
 * the sanitizer stage leaves this half out: meson suite "scale"). */
int
main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "scale") == 0) {
		test_scale();
		unit_eal_init(argv[0], "subscriber", "1536");
		test_lpm();
	} else {
		test_example();
		test_bad_rows();
		test_box();
		test_copy();
	}
	return unit_report();
}
