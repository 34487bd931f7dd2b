/* SPDX-License-Identifier: BSD-3-Clause
 * weir-wanemu: RIO (rio.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rio.h"

int
rio_parse(struct rio_params *p, const char *s, const char **why)
{
	double v[6];
	char tail;

	if (sscanf(s, "%lf:%lf:%lf:%lf:%lf:%lf%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		   &tail) != 6) {
		*why = "want MININ:MAXIN:PIN:MINOUT:MAXOUT:POUT (packets, packets, probability)";
		return -1;
	}
	for (int c = 0; c < 2; c++) {
		p->min[c] = v[3 * c];
		p->max[c] = v[3 * c + 1];
		p->maxp[c] = v[3 * c + 2];
		if (!(p->min[c] >= 0 && p->max[c] > p->min[c] && p->max[c] < 1e6 &&
		      p->maxp[c] > 0 && p->maxp[c] <= 1)) {
			*why = "each curve needs 0 <= min < max and 0 < max_p <= 1";
			return -1;
		}
	}
	if (p->min[RIO_OUT] > p->min[RIO_IN] || p->max[RIO_OUT] > p->max[RIO_IN]) {
		*why = "Out's thresholds must not be above In's (Out is dropped first)";
		return -1;
	}
	p->on = true;
	if (p->wq == 0)
		p->wq = 0.002;
	if (p->in_dscp == 0)
		p->in_dscp = 1ull << 10;        /* AF11 */
	return 0;
}

/* 0-63 or a name: BE, EF, CS0-CS7, AF11-AF43. */
static int
dscp_of(const char *s)
{
	char *end;
	long v;

	if (strcasecmp(s, "BE") == 0)
		return 0;
	if (strcasecmp(s, "EF") == 0)
		return 46;
	if (strncasecmp(s, "CS", 2) == 0 && s[2] >= '0' && s[2] <= '7' && s[3] == '\0')
		return (s[2] - '0') * 8;
	if (strncasecmp(s, "AF", 2) == 0 && s[2] >= '1' && s[2] <= '4' && s[3] >= '1' &&
	    s[3] <= '3' && s[4] == '\0')
		return (s[2] - '0') * 8 + (s[3] - '0') * 2;
	v = strtol(s, &end, 10);
	return end != s && *end == '\0' && v >= 0 && v <= 63 ? (int)v : -1;
}

int
rio_parse_in(struct rio_params *p, const char *s, const char **why)
{
	char buf[256], *save = NULL, *tok;
	uint64_t mask = 0;

	if (strlen(s) >= sizeof(buf) || *s == '\0') {
		*why = "want DSCPs joined by '+' (10+12 or AF11+AF21)";
		return -1;
	}
	strcpy(buf, s);
	for (tok = strtok_r(buf, "+", &save); tok != NULL; tok = strtok_r(NULL, "+", &save)) {
		int d = dscp_of(tok);

		if (d < 0) {
			*why = "a DSCP is 0-63 or a name (BE, EF, CS0-CS7, AF11-AF43)";
			return -1;
		}
		mask |= 1ull << d;
	}
	p->in_dscp = mask;
	return 0;
}

int
rio_class(const struct rio_params *p, const uint8_t *f, uint32_t len)
{
	uint32_t off = 12;
	uint16_t et;
	int dscp;

	if (len < 14)
		return RIO_IN;
	et = (uint16_t)(f[12] << 8 | f[13]);
	while ((et == 0x8100 || et == 0x88a8) && off + 6 <= len) {
		off += 4;
		et = (uint16_t)(f[off] << 8 | f[off + 1]);
	}
	off += 2;
	if (et == 0x0800 && off + 2 <= len && (f[off] >> 4) == 4)
		dscp = f[off + 1] >> 2;
	else if (et == 0x86dd && off + 2 <= len && (f[off] >> 4) == 6)
		dscp = ((f[off] & 0x0f) << 4 | f[off + 1] >> 4) >> 2;
	else
		return RIO_IN;
	return (p->in_dscp >> dscp) & 1 ? RIO_IN : RIO_OUT;
}

/* RED's average over q, decayed as if idle_s / pkt_s empty arrivals came. */
static void
ewma(double *avg, double q, double wq, double idle_s, double pkt_s)
{
	if (idle_s > 0 && pkt_s > 0)
		*avg *= pow(1 - wq, idle_s / pkt_s);
	*avg = (1 - wq) * *avg + wq * q;
}

bool
rio_drop(const struct rio_params *p, struct rio_state *s, int c, uint32_t qlen, double idle_s,
	 double pkt_s, double u)
{
	double avg, pb, pa;

	ewma(&s->avg[RIO_OUT], qlen, p->wq, idle_s, pkt_s);
	if (c == RIO_IN)
		ewma(&s->avg[RIO_IN], s->qin, p->wq, idle_s, pkt_s);
	avg = s->avg[c];
	if (avg < p->min[c]) {
		s->count[c] = -1;
		return false;
	}
	if (avg >= p->max[c]) {
		s->count[c] = 0;
		return true;
	}
	s->count[c]++;
	pb = p->maxp[c] * (avg - p->min[c]) / (p->max[c] - p->min[c]);
	pa = s->count[c] * pb >= 1 ? 1 : pb / (1 - s->count[c] * pb);
	if (u < pa) {
		s->count[c] = 0;
		return true;
	}
	return false;
}
