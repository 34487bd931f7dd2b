/* SPDX-License-Identifier: BSD-3-Clause
 * weir: run-time changes of one class, from the management lcore to a
 * worker's class tree (lib/sched/cbq.h: weir_cbq_class_set/_add/_remove).
 *
 * Each worker has a ring of these (weir_worker_conf.class_cmds, single
 * producer: the management lcore; single consumer: the worker), taken at
 * the top of its loop between bursts, so a change is in force within one
 * loop iteration of its posting and no packet is dropped or reordered by it.
 * A command names the policy epoch it was made for: one that reaches a
 * worker on another policy is counted stale and dropped (the new policy's
 * trees carry their own figures).
 */
#ifndef WEIR_CLASS_CMD_H
#define WEIR_CLASS_CMD_H

#include <stdint.h>
#include <rte_ring.h>

#include "cbq.h"

enum weir_class_op {
	WEIR_CLASS_SET = 1,     /* rate, ceil, bursts, prio, limit, quantum, boost */
	WEIR_CLASS_ADD = 2,     /* a new leaf `cls` under conf.parent */
	WEIR_CLASS_REMOVE = 3,  /* leaf `cls`, which must be idle (else counted failed) */
};

struct weir_class_cmd {
	uint8_t  op;            /* enum weir_class_op */
	uint8_t  dir;           /* the tree: enum weir_port_role it shapes towards */
	uint16_t _pad;
	uint32_t epoch;         /* the policy it was made for */
	uint32_t cls;
	uint32_t _pad2;
	uint64_t req_tsc;       /* TSC when it was asked (the worker measures latency) */
	struct weir_cbq_class_conf conf;        /* SET, ADD */
};

/* What a worker did with its class commands. */
struct weir_class_cmd_stats {
	uint64_t applied;
	uint64_t failed;        /* refused by the tree (cbq's -E code, e.g. a busy leaf) */
	uint64_t stale;         /* for another policy, or no such tree */
	uint64_t lat_last;      /* TSC ticks from req_tsc to in force, the last one */
	uint64_t lat_max;
	int last_err;           /* the last failure's negative errno */
};

/* A ring for one worker's class commands (count a power of two). */
struct rte_ring *weir_class_cmd_ring(const char *name, unsigned int count, int socket_id);

/* Management side: post one command (req_tsc stamped now). 0, or -ENOBUFS
 * when the worker's ring is full (nothing posted: try again). */
int weir_class_cmd_post(struct rte_ring *r, struct weir_class_cmd *c);

#endif /* WEIR_CLASS_CMD_H */
