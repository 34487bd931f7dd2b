/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched.h"

/* Rates below this are refused: a 1500-byte frame would take over a minute. */
#define SCHED_MIN_BPS 200.0

static int
parse_secs(const char *s, uint64_t *ns)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0.001 || v > 86400)
		return -1;
	*ns = (uint64_t)(v * 1e9);
	return 0;
}

int
sched_parse(struct rate_sched *s, const char *spec, int (*parse_rate)(const char *, uint64_t *),
	    const char **why)
{
	char buf[512], *save = NULL, *tok, *fields[2 * SCHED_MAX_STEPS + 1];
	struct timespec ts;
	uint32_t n = 0;

	memset(s, 0, sizeof(*s));
	if (strlen(spec) >= sizeof(buf)) {
		*why = "too long";
		return -1;
	}
	strcpy(buf, spec);
	if (strncmp(buf, "steps:", 6) == 0)
		s->kind = SCHED_STEPS;
	else if (strncmp(buf, "sine:", 5) == 0)
		s->kind = SCHED_SINE;
	else {
		*why = "must start with steps: or sine:";
		return -1;
	}
	for (tok = strtok_r(strchr(buf, ':') + 1, "/", &save); tok != NULL; tok = strtok_r(NULL, "/", &save)) {
		if (n == sizeof(fields) / sizeof(fields[0])) {
			*why = "too many fields (at most 16 steps)";
			return -1;
		}
		fields[n++] = tok;
	}
	if (s->kind == SCHED_STEPS) {
		if (n < 2 || n % 2 != 0) {
			*why = "steps: needs RATE/SECONDS pairs";
			return -1;
		}
		for (uint32_t i = 0; i < n / 2; i++) {
			if (parse_rate(fields[2 * i], &s->rate[i]) != 0 || s->rate[i] < SCHED_MIN_BPS) {
				*why = "a step's rate is not a rate of at least 200 bit/s";
				return -1;
			}
			if (parse_secs(fields[2 * i + 1], &s->dur_ns[i]) != 0) {
				*why = "a step's duration is not a number of seconds in [0.001, 86400]";
				return -1;
			}
			s->cycle_ns += s->dur_ns[i];
		}
		s->n = n / 2;
	} else {
		uint64_t base, amp;

		if (n != 3 || parse_rate(fields[0], &base) != 0 || parse_rate(fields[1], &amp) != 0 ||
		    parse_secs(fields[2], &s->period_ns) != 0) {
			*why = "sine: needs BASE/AMPLITUDE/PERIOD_SECONDS";
			return -1;
		}
		if ((double)base - (double)amp < SCHED_MIN_BPS) {
			*why = "sine: BASE - AMPLITUDE must stay at least 200 bit/s";
			return -1;
		}
		s->base = (double)base;
		s->amp = (double)amp;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	s->t0_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	return 0;
}

uint64_t
sched_rate(const struct rate_sched *s, uint64_t now_ns)
{
	uint64_t t = now_ns > s->t0_ns ? now_ns - s->t0_ns : 0;

	if (s->kind == SCHED_STEPS) {
		t %= s->cycle_ns;
		for (uint32_t i = 0; i < s->n; i++) {
			if (t < s->dur_ns[i])
				return s->rate[i];
			t -= s->dur_ns[i];
		}
		return s->rate[s->n - 1];
	}
	return (uint64_t)(s->base + s->amp * sin(2.0 * M_PI * (double)(t % s->period_ns) /
						 (double)s->period_ns));
}
