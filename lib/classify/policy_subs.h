/* SPDX-License-Identifier: BSD-3-Clause
 * weir: subscribers as classes of the policy's two trees — the one place a
 * subscriber becomes a leaf.
 *
 * Each real node of the set becomes an inner class (rate = ceil = its
 * capacity in that direction, under its nearest real ancestor or the link),
 * each subscriber a leaf under its node (rate = its min, ceil = its max;
 * download in the inbound tree, upload in the outbound one). The policy
 * keeps a table subscriber index -> target (weir_policy.sub_target), and
 * a flow's LAN-side address finds its subscriber by longest-prefix match
 * (lib/classify/subscriber_lpm.h) once per new flow, before the rule list.
 *
 * A policy's trees hold WEIR_POLICY_MAX_CLASSES classes with 16-bit
 * indexes, so a set larger than that is refused here with the count; the
 * set and the lookup are 32-bit already.
 */
#ifndef WEIR_POLICY_SUBS_H
#define WEIR_POLICY_SUBS_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "subscriber.h"

/* weir_subs_class_name, weir_subs_node_class_name: lib/classify/policy.h
 * (the policy names the classes). */

/* Is class `name` a subscriber's leaf (weir_subs_class_name's names)? */
bool weir_subs_is_class(const struct weir_subs *s, const char *name);

/* Classes the set adds to one tree. */
uint32_t weir_subs_class_count(const struct weir_subs *s);

/* Subscriber i's leaf in policy direction pdir: its rate and ceil (bit/s)
 * as weir_subs_classes makes them (the one rule: min, else 1 % of max;
 * capped by its node, or by link_rate; shaping off: all its node has). */
void weir_subs_leaf_plan(const struct weir_subs *s, uint32_t i, int pdir, uint64_t link_rate,
			 uint64_t *rate, uint64_t *ceil);

/*
 * Classes of policy direction pdir (0 outbound = upload, 1 inbound =
 * download) appended to base[0..n_base): a new array (free it) of n_base +
 * weir_subs_class_count(s) classes, parents before children; a subscriber
 * without a node hangs from class `under` ("" = the link). The link's rate
 * caps nodes without a rate and subscribers without shaping. NULL with err
 * when the tree cannot hold them.
 */
struct weir_policy_class_conf *weir_subs_classes(const struct weir_subs *s, int pdir,
						 uint64_t link_rate, const char *under,
						 const struct weir_policy_class_conf *base,
						 uint16_t n_base, uint8_t mode, char *err,
						 size_t errlen);

/*
 * Tree tc (policy direction pdir) with the set's classes added after its own;
 * a tree without classes first gets its "default" (1 % of the link) beside
 * them. tc->classes becomes *out (the caller frees it), tc->n_classes counts
 * all, *base the classes before the set's. A tree without a rate is left as
 * it is (*out NULL). 0, or -1 with err when the tree cannot hold them.
 */
int weir_subs_tree(const struct weir_subs *s, int pdir, struct weir_policy_tree_conf *tc,
		   const char *under, uint16_t *base, struct weir_policy_class_conf **out,
		   char *err, size_t errlen);

/* Attach the prefix lookup to a built policy with subscribers (needs EAL;
 * before workers see it). 0, or -1 with err. */
int weir_policy_subs_accelerate(struct weir_policy *p, int socket_id, char *err, size_t errlen);

#endif /* WEIR_POLICY_SUBS_H */
