/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a capture's filter and the worker's copy ring (lib/observe/capture.h).
 * Runs only while a capture is active; nothing here is on the path of a
 * worker without one.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <rte_bpf.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#ifdef WEIR_HAVE_PCAP
#include <pcap/pcap.h>
#endif
#include <rte_ring_elem.h>

#include "capture.h"
#include "cbq.h"

static const char *const verdict_names[WEIR_CAPV__COUNT] = {
	[WEIR_CAPV_FORWARDED] = "forwarded",
	[WEIR_CAPV_QUEUED] = "queued",
	[WEIR_CAPV_HELD] = "ack-held",
	[WEIR_CAPV_TAKEN] = "kept-by-mode",
	[WEIR_CAPV_DROP_QUEUE] = "dropped:queue",
	[WEIR_CAPV_DROP_ADMISSION] = "dropped:admission",
	[WEIR_CAPV_DROP_MALFORMED] = "dropped:malformed-limit",
	[WEIR_CAPV_DROP_L3CTL] = "dropped:l3-control-limit",
};

const char *
weir_cap_verdict_name(enum weir_cap_verdict v)
{
	return (unsigned int)v < WEIR_CAPV__COUNT && verdict_names[v] != NULL ?
		verdict_names[v] : "unknown";
}

/* Do the first `bits` bits of a and b agree? */
static bool
prefix_eq(const uint8_t *a, const uint8_t *b, unsigned int bits)
{
	unsigned int whole = bits / 8, rest = bits % 8;

	if (memcmp(a, b, whole) != 0)
		return false;
	return rest == 0 || ((a[whole] ^ b[whole]) & (uint8_t)(0xff00u >> rest)) == 0;
}

/* One end (address a, port pt) against the host side of f, the other
 * (b, pb) against the peer side. */
static bool
ends_match(const struct weir_cap_filter *f, const uint8_t *a, uint16_t pa, const uint8_t *b,
	   uint16_t pb)
{
	if ((f->match & WEIR_CAPF_HOST) && !prefix_eq(a, f->host, f->host_len))
		return false;
	if ((f->match & WEIR_CAPF_PEER) && !prefix_eq(b, f->peer, f->peer_len))
		return false;
	if ((f->match & WEIR_CAPF_PORT) && pa != f->port)
		return false;
	if ((f->match & WEIR_CAPF_PPORT) && pb != f->pport)
		return false;
	return true;
}

bool
weir_cap_filter_match(const struct weir_cap_filter *f, struct rte_mbuf *m,
		      const struct weir_pkt *p, int dir, uint32_t cls)
{
	const uint32_t tuple = WEIR_CAPF_HOST | WEIR_CAPF_PEER | WEIR_CAPF_PROTO | WEIR_CAPF_PORT |
			       WEIR_CAPF_PPORT;

	if ((f->match & WEIR_CAPF_DIR) && dir != f->dir)
		return false;
	if ((f->match & WEIR_CAPF_CLASS) && cls != WEIR_CAP_CLS_ANY &&
	    (cls == WEIR_CBQ_NONE || cls != f->cls[dir & 1]))
		return false;
	if (f->match & tuple) {
		const uint8_t *src, *dst;
		bool ports = p->l4proto == IPPROTO_TCP || p->l4proto == IPPROTO_UDP ||
			     p->l4proto == IPPROTO_SCTP;
		uint16_t sp = ports ? p->sport : 0, dp = ports ? p->dport : 0;

		if (p->addr_len == 0 || p->malformed != WEIR_MAL_NONE)
			return false;
		if ((f->match & WEIR_CAPF_PROTO) && p->l4proto != f->proto)
			return false;
		if ((f->match & (WEIR_CAPF_HOST | WEIR_CAPF_PEER)) &&
		    (p->addr_len == 4) != (f->family == 4))
			return false;
		src = rte_pktmbuf_mtod_offset(m, const uint8_t *, p->l3_off + p->saddr_off);
		dst = src + p->addr_len;
		if (!ends_match(f, src, sp, dst, dp) && !ends_match(f, dst, dp, src, sp))
			return false;
	}
	if (f->match & WEIR_CAPF_BPF) {
		uint64_t rc = f->bpf_jit != NULL ? f->bpf_jit(m) : rte_bpf_exec(f->bpf, m);

		if (rc == 0)
			return false;
	}
	return true;
}

uint8_t
weir_cap_tap_match(const struct weir_cap_tap *t, struct rte_mbuf *m, const struct weir_pkt *p,
		   int dir, uint32_t cls)
{
	uint8_t mask = 0;

	for (unsigned int i = 0; i < t->n; i++)
		if (weir_cap_filter_match(&t->filter[i], m, p, dir, cls))
			mask |= (uint8_t)(1u << t->slot[i]);
	return mask;
}

uint8_t
weir_cap_tap_class(const struct weir_cap_tap *t, uint8_t mask, int dir, uint32_t cls)
{
	for (unsigned int i = 0; i < t->n; i++) {
		const struct weir_cap_filter *f = &t->filter[i];

		if ((f->match & WEIR_CAPF_CLASS) && (cls == WEIR_CBQ_NONE || cls != f->cls[dir & 1]))
			mask &= (uint8_t)~(1u << t->slot[i]);
	}
	return mask;
}

static void
count_lost(struct weir_cap_counters *c, uint8_t mask)
{
	for (unsigned int s = 0; s < WEIR_CAP_MAX; s++)
		if (mask & (1u << s))
			c->lost[s]++;
}

struct rte_mbuf *
weir_cap_copy(const struct weir_cap_tap *t, struct rte_mempool *mp, struct weir_cap_counters *c,
	      struct rte_mbuf *m, uint8_t mask)
{
	struct rte_mbuf *cp = rte_pktmbuf_copy(m, mp, 0, t->snap);

	if (unlikely(cp == NULL)) {
		c->lost_nombuf++;
		count_lost(c, mask);
	}
	return cp;
}

void
weir_cap_push(struct rte_ring *r, struct weir_cap_counters *c, const struct weir_cap_rec *rec)
{
	if (unlikely(rte_ring_sp_enqueue_elem(r, (void *)(uintptr_t)rec, sizeof(*rec)) != 0)) {
		rte_pktmbuf_free(rec->m);
		c->lost_ring++;
		count_lost(c, rec->mask);
		return;
	}
	c->copied++;
}

/* ---- building a filter ---- */

static int
parse_prefix(const char *val, uint8_t *addr, uint8_t *len, uint8_t *family, char *err,
	     size_t errlen)
{
	char buf[64], *slash, *end;
	long bits;
	int fam;

	if (strlen(val) >= sizeof(buf))
		goto bad;
	snprintf(buf, sizeof(buf), "%s", val);
	slash = strchr(buf, '/');
	if (slash != NULL)
		*slash++ = '\0';
	memset(addr, 0, 16);
	if (inet_pton(AF_INET, buf, addr) == 1)
		fam = 4;
	else if (inet_pton(AF_INET6, buf, addr) == 1)
		fam = 6;
	else
		goto bad;
	bits = fam == 4 ? 32 : 128;
	if (slash != NULL) {
		errno = 0;
		bits = strtol(slash, &end, 10);
		if (*slash == '\0' || *end != '\0' || errno != 0 || bits < 0 ||
		    bits > (fam == 4 ? 32 : 128))
			goto bad;
	}
	if (*family != 0 && *family != fam) {
		snprintf(err, errlen, "'%s': host and peer must be of one address family", val);
		return -1;
	}
	*family = (uint8_t)fam;
	*len = (uint8_t)bits;
	return 0;
bad:
	snprintf(err, errlen, "'%s' is not an IPv4 or IPv6 address or prefix (ADDR or ADDR/LEN)",
		 val);
	return -1;
}

static int
parse_num(const char *val, long lo, long hi, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(val, &end, 10);
	return *val == '\0' || *end != '\0' || errno != 0 || *out < lo || *out > hi ? -1 : 0;
}

static const struct { const char *name; uint8_t proto; } protos[] = {
	{ "tcp", IPPROTO_TCP }, { "udp", IPPROTO_UDP }, { "icmp", IPPROTO_ICMP },
	{ "icmpv6", IPPROTO_ICMPV6 }, { "sctp", IPPROTO_SCTP }, { "esp", IPPROTO_ESP },
	{ "ah", IPPROTO_AH }, { "gre", IPPROTO_GRE },
};

/* A pcap filter expression for Ethernet frames, as rte_bpf runs it on an
 * mbuf (the conversion dpdk-dumpcap uses). */
static int
compile_bpf(struct weir_cap_filter *f, const char *expr, char *err, size_t errlen)
{
#ifdef WEIR_HAVE_PCAP
	struct bpf_program bf;
	struct rte_bpf_prm *prm;
	struct rte_bpf_jit jit = { 0 };
	struct rte_bpf *bpf;
	pcap_t *pc = pcap_open_dead(DLT_EN10MB, 65535);

	if (pc == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (pcap_compile(pc, &bf, expr, 1, PCAP_NETMASK_UNKNOWN) != 0) {
		snprintf(err, errlen, "bpf '%s': %s", expr, pcap_geterr(pc));
		pcap_close(pc);
		return -1;
	}
	pcap_close(pc);
	prm = rte_bpf_convert(&bf);
	pcap_freecode(&bf);
	if (prm == NULL) {
		snprintf(err, errlen, "bpf '%s': cannot convert for rte_bpf: %s", expr,
			 rte_strerror(rte_errno));
		return -1;
	}
	prm->prog_arg.type = RTE_BPF_ARG_PTR_MBUF;
	prm->prog_arg.size = sizeof(struct rte_mbuf);
	prm->prog_arg.buf_size = RTE_MBUF_DEFAULT_BUF_SIZE;
	bpf = rte_bpf_load(prm);
	rte_free(prm);
	if (bpf == NULL) {
		snprintf(err, errlen, "bpf '%s': rte_bpf refused the program: %s", expr,
			 rte_strerror(rte_errno));
		return -1;
	}
	if (f->bpf != NULL)
		rte_bpf_destroy((struct rte_bpf *)(uintptr_t)f->bpf);
	f->bpf = bpf;
	f->bpf_jit = rte_bpf_get_jit(bpf, &jit) == 0 ? jit.func : NULL;
	f->match |= WEIR_CAPF_BPF;
	return 0;
#else
	(void)f;
	snprintf(err, errlen, "bpf '%s': this weir was built without libpcap", expr);
	return -1;
#endif
}

int
weir_cap_filter_set(struct weir_cap_filter *f, const char *key, const char *val, char *err,
		    size_t errlen)
{
	long v;

	if (strcmp(key, "host") == 0 || strcmp(key, "peer") == 0) {
		bool host = key[0] == 'h';

		if (parse_prefix(val, host ? f->host : f->peer, host ? &f->host_len : &f->peer_len,
				 &f->family, err, errlen) < 0)
			return -1;
		f->match |= host ? WEIR_CAPF_HOST : WEIR_CAPF_PEER;
		return 0;
	}
	if (strcmp(key, "port") == 0 || strcmp(key, "peer_port") == 0) {
		if (parse_num(val, 1, 65535, &v) < 0) {
			snprintf(err, errlen, "'%s' must be a port number 1-65535, not '%s'", key, val);
			return -1;
		}
		if (key[0] == 'p' && key[1] == 'o') {
			f->port = (uint16_t)v;
			f->match |= WEIR_CAPF_PORT;
		} else {
			f->pport = (uint16_t)v;
			f->match |= WEIR_CAPF_PPORT;
		}
		return 0;
	}
	if (strcmp(key, "proto") == 0) {
		for (size_t i = 0; i < sizeof(protos) / sizeof(protos[0]); i++)
			if (strcasecmp(val, protos[i].name) == 0) {
				f->proto = protos[i].proto;
				f->match |= WEIR_CAPF_PROTO;
				return 0;
			}
		if (parse_num(val, 0, 255, &v) < 0) {
			snprintf(err, errlen, "'proto' must be tcp, udp, icmp, icmpv6, sctp, esp, ah, "
				 "gre or a number 0-255, not '%s'", val);
			return -1;
		}
		f->proto = (uint8_t)v;
		f->match |= WEIR_CAPF_PROTO;
		return 0;
	}
	if (strcmp(key, "direction") == 0) {
		if (strcmp(val, "lan") != 0 && strcmp(val, "wan") != 0) {
			snprintf(err, errlen, "'direction' must be lan or wan (the port frames arrive "
				 "on), not '%s'", val);
			return -1;
		}
		f->dir = val[0] == 'w';
		f->match |= WEIR_CAPF_DIR;
		return 0;
	}
	if (strcmp(key, "bpf") == 0)
		return compile_bpf(f, val, err, errlen);
	snprintf(err, errlen, "unknown filter key '%s'", key);
	return -1;
}

void
weir_cap_filter_free(struct weir_cap_filter *f)
{
	if (f->bpf != NULL)
		rte_bpf_destroy((struct rte_bpf *)(uintptr_t)f->bpf);
	memset(f, 0, sizeof(*f));
}
