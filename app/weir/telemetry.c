/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the telemetry commands. The management loop hands over a stats
 * snapshot (weir_stats_json) under a mutex; the telemetry thread reads
 * only that snapshot, under the same mutex, and turns parts of it into
 * rte_tel_data dictionaries. DPDK 22.11 nests containers one level deep,
 * has no floating point values and allows only [A-Za-z0-9_/] in keys, so
 * nested objects are flattened into "a/b/c" keys, floats become strings
 * and other characters of class names become '_'.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <rte_common.h>
#include <rte_log.h>
#include <rte_telemetry.h>

#include "telemetry.h"
#include "stats.h"

static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *snap;                    /* the last published stats; NULL = none */

void
weir_telemetry_publish(const struct weir_app *a)
{
	json_t *s = weir_stats_json(a), *old;

	if (s == NULL)
		return;         /* out of memory: the previous snapshot stays */
	pthread_mutex_lock(&snap_lock);
	old = snap;
	snap = s;
	pthread_mutex_unlock(&snap_lock);
	/* No reader holds it: they only use it under the lock. */
	json_decref(old);
}

void
weir_telemetry_stop(void)
{
	json_t *old;

	pthread_mutex_lock(&snap_lock);
	old = snap;
	snap = NULL;
	pthread_mutex_unlock(&snap_lock);
	json_decref(old);
}

static void
tel_key(char *out, size_t size, const char *prefix, const char *key)
{
	size_t n;

	snprintf(out, size, "%s%s%s", prefix, prefix[0] != '\0' ? "/" : "", key);
	n = strlen(prefix) + (prefix[0] != '\0');
	for (char *p = out + RTE_MIN(n, size - 1); *p != '\0'; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			*p = '_';
}

/* One scalar into dict d; false when d is full. */
static bool
tel_scalar(struct rte_tel_data *d, const char *key, const json_t *v)
{
	char buf[64];
	int rc;

	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);

		rc = i >= 0 ? rte_tel_data_add_dict_u64(d, key, (uint64_t)i)
			    : rte_tel_data_add_dict_int(d, key, (int)i);
	} else if (json_is_real(v)) {
		snprintf(buf, sizeof(buf), "%.6f", json_real_value(v));
		rc = rte_tel_data_add_dict_string(d, key, buf);
	} else if (json_is_string(v)) {
		rc = rte_tel_data_add_dict_string(d, key, json_string_value(v));
	} else if (json_is_boolean(v)) {
		rc = rte_tel_data_add_dict_u64(d, key, json_is_true(v));
	} else {
		return true;    /* null: nothing to say */
	}
	return rc != -ENOSPC;
}

/* Every scalar under v into dict d, its path as the key. false when d
 * filled up before the end. */
static bool
tel_flatten(struct rte_tel_data *d, const char *prefix, const json_t *v)
{
	char key[RTE_TEL_MAX_STRING_LEN];
	const char *k;
	json_t *x;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach((json_t *)(uintptr_t)v, k, x) {
			tel_key(key, sizeof(key), prefix, k);
			if (!tel_flatten(d, key, x))
				return false;
		}
		return true;
	}
	if (json_is_array(v)) {
		json_array_foreach(v, i, x) {
			char idx[24];

			snprintf(idx, sizeof(idx), "%zu", i);
			tel_key(key, sizeof(key), prefix, idx);
			if (!tel_flatten(d, key, x))
				return false;
		}
		return true;
	}
	return tel_scalar(d, prefix, v);
}

/* A dict of v's scalars; its objects and arrays become one container
 * each, flattened ("truncated" = 1 in a container that was full). */
static int
tel_sections(struct rte_tel_data *d, const json_t *v)
{
	char key[RTE_TEL_MAX_STRING_LEN];
	const char *k;
	json_t *x;

	rte_tel_data_start_dict(d);
	json_object_foreach((json_t *)(uintptr_t)v, k, x) {
		struct rte_tel_data *c;

		tel_key(key, sizeof(key), "", k);
		if (!json_is_object(x) && !json_is_array(x)) {
			tel_scalar(d, key, x);
			continue;
		}
		c = rte_tel_data_alloc();
		if (c == NULL)
			return -ENOMEM;
		rte_tel_data_start_dict(c);
		if (!tel_flatten(c, "", x)) {
			/* Make room for the flag: the client must not take a
			 * partial list for the whole. */
			rte_tel_data_free(c);
			c = rte_tel_data_alloc();
			if (c == NULL)
				return -ENOMEM;
			rte_tel_data_start_dict(c);
			rte_tel_data_add_dict_u64(c, "truncated", 1);
		}
		if (rte_tel_data_add_dict_container(d, key, c, 0) != 0)
			rte_tel_data_free(c);
	}
	return 0;
}

/* The part of the snapshot at the '/'-separated path (NULL if none). */
static const json_t *
snap_path(const json_t *v, const char *path)
{
	char part[RTE_TEL_MAX_STRING_LEN];

	while (v != NULL && path != NULL && *path != '\0') {
		const char *slash = strchr(path, '/');
		size_t n = slash != NULL ? (size_t)(slash - path) : strlen(path);

		if (n >= sizeof(part))
			return NULL;
		memcpy(part, path, n);
		part[n] = '\0';
		if (json_is_array(v)) {
			char *end;
			unsigned long i = strtoul(part, &end, 10);

			v = *end == '\0' && n > 0 ? json_array_get(v, i) : NULL;
		} else {
			v = json_object_get(v, part);
		}
		path = slash != NULL ? slash + 1 : NULL;
	}
	return v;
}

static int
cb_status(const char *cmd, const char *params, struct rte_tel_data *d)
{
	static const char *const keys[] = {
		"version", "uptime_s", "flows/active", "flows/capacity", "mbufs/in_use",
		"mbufs/total", "policy/epoch", "policy/reloads", "policy/reload_failures",
		"ports/lan/rx", "ports/lan/tx", "ports/lan/dropped", "ports/wan/rx", "ports/wan/tx",
		"ports/wan/dropped",
	};
	int rc = -ENODATA;

	pthread_mutex_lock(&snap_lock);
	if (snap != NULL) {
		rte_tel_data_start_dict(d);
		for (size_t i = 0; i < RTE_DIM(keys); i++)
			tel_scalar(d, keys[i], snap_path(snap, keys[i]));
		rc = 0;
	}
	pthread_mutex_unlock(&snap_lock);
	return rc;
}

/* Classes per direction: "outbound/NAME" -> the class's counters. */
static int
cb_classes(const char *cmd, const char *params, struct rte_tel_data *d)
{
	static const char *const dirs[] = { "outbound", "inbound" };
	char key[RTE_TEL_MAX_STRING_LEN];
	int rc = -ENODATA;

	pthread_mutex_lock(&snap_lock);
	if (snap != NULL) {
		rte_tel_data_start_dict(d);
		rc = 0;
		for (size_t i = 0; i < RTE_DIM(dirs) && rc == 0; i++) {
			const json_t *cl = snap_path(json_object_get(snap, "shaping"), dirs[i]);
			const char *name;
			json_t *cj;

			json_object_foreach(json_object_get(cl, "classes"), name, cj) {
				struct rte_tel_data *c = rte_tel_data_alloc();

				if (c == NULL) {
					rc = -ENOMEM;
					break;
				}
				rte_tel_data_start_dict(c);
				tel_flatten(c, "", cj);
				tel_key(key, sizeof(key), dirs[i], name);
				if (rte_tel_data_add_dict_container(d, key, c, 0) != 0)
					rte_tel_data_free(c);
			}
		}
	}
	pthread_mutex_unlock(&snap_lock);
	return rc;
}

/* The whole snapshot by section, or with a parameter ("shaping/outbound",
 * "workers/0") that part of it, flattened. */
static int
cb_counters(const char *cmd, const char *params, struct rte_tel_data *d)
{
	const json_t *v;
	int rc = -ENODATA;

	pthread_mutex_lock(&snap_lock);
	if (snap != NULL) {
		v = params != NULL && params[0] != '\0' ? snap_path(snap, params) : snap;
		if (v == NULL) {
			rc = -EINVAL;
		} else if (v == snap) {
			rc = tel_sections(d, v);
		} else {
			rte_tel_data_start_dict(d);
			if (!tel_flatten(d, "", v)) {
				rte_tel_data_start_dict(d);
				rte_tel_data_add_dict_u64(d, "truncated", 1);
			}
			rc = 0;
		}
	}
	pthread_mutex_unlock(&snap_lock);
	return rc;
}

void
weir_telemetry_init(struct weir_app *a)
{
	weir_telemetry_publish(a);
	if (rte_telemetry_register_cmd("/weir/status", cb_status,
				       "weir: version, uptime, flows, mbufs, policy, ports. "
				       "No parameters") != 0 ||
	    rte_telemetry_register_cmd("/weir/classes", cb_classes,
				       "weir: every class's rates and counters, by "
				       "direction/name. No parameters") != 0 ||
	    rte_telemetry_register_cmd("/weir/counters", cb_counters,
				       "weir: the stats snapshot by section. Parameter: a path "
				       "into it, e.g. shaping/outbound/classes") != 0)
		RTE_LOG(WARNING, USER1, "cannot register the /weir telemetry commands\n");
}
