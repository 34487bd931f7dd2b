/* SPDX-License-Identifier: BSD-3-Clause
 * weir: a set of subscribers and nodes — building, checking, diffing
 * (lib/classify/subscriber.h). Plain C over libc: front ends check files before
 * EAL is up (weir --check) and unit tests run it at 100,000 subscribers.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "subscriber.h"

/* ---- an id -> index table (open addressing, index + 1, 0 = empty) ---- */
struct id_tab {
	uint32_t *slot;
	uint32_t mask;
	uint32_t n;
};

static uint64_t
id_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s != '\0'; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

/* The name slot of entry idx, as the table's owner keeps it. */
typedef const char *(*key_of_fn)(const void *owner, uint32_t idx);

static int64_t
tab_find(const struct id_tab *t, const char *key, key_of_fn key_of, const void *owner)
{
	if (t->slot == NULL)
		return -1;
	for (uint32_t i = (uint32_t)id_hash(key) & t->mask;; i = (i + 1) & t->mask) {
		uint32_t v = t->slot[i];

		if (v == 0)
			return -1;
		if (strcmp(key_of(owner, v - 1), key) == 0)
			return v - 1;
	}
}

static int
tab_grow(struct id_tab *t, key_of_fn key_of, const void *owner)
{
	uint32_t cap = t->slot == NULL ? 1024 : (t->mask + 1) * 2;
	uint32_t *old = t->slot, old_cap = t->slot == NULL ? 0 : t->mask + 1;

	t->slot = calloc(cap, sizeof(*t->slot));
	if (t->slot == NULL) {
		t->slot = old;
		return -1;
	}
	t->mask = cap - 1;
	for (uint32_t i = 0; i < old_cap; i++) {
		uint32_t v = old[i], j;

		if (v == 0)
			continue;
		for (j = (uint32_t)id_hash(key_of(owner, v - 1)) & t->mask; t->slot[j] != 0;
		     j = (j + 1) & t->mask)
			;
		t->slot[j] = v;
	}
	free(old);
	return 0;
}

/* Insert idx under key (the caller checked it is not there). */
static int
tab_put(struct id_tab *t, const char *key, uint32_t idx, key_of_fn key_of, const void *owner)
{
	uint32_t j;

	if ((t->slot == NULL || (uint64_t)(t->n + 1) * 2 > (uint64_t)t->mask + 1) &&
	    tab_grow(t, key_of, owner) != 0)
		return -1;
	for (j = (uint32_t)id_hash(key) & t->mask; t->slot[j] != 0; j = (j + 1) & t->mask)
		;
	t->slot[j] = idx + 1;
	t->n++;
	return 0;
}

/* ---- the set ---- */
#define MAX_FILES 64

struct weir_subs {
	struct weir_sub *subs;
	uint32_t n_subs, cap_subs;
	struct weir_sub_node *nodes;
	uint32_t n_nodes, cap_nodes;
	struct weir_sub_prefix *pfx;
	uint32_t *pfx_line;                     /* FILE:LINE of each prefix, until sealed */
	uint16_t *pfx_file;
	uint32_t n_pfx, cap_pfx;
	struct weir_sub_mac *macs;
	uint32_t *mac_sub;
	uint32_t n_macs, cap_macs;
	char *sub_parent;                       /* parent names as read, WEIR_SUB_ID_LEN each */
	struct id_tab by_id, node_by_name, node_by_id;
	char *files[MAX_FILES];
	uint16_t n_files;
	bool sealed;
	uint32_t refs;                          /* policies and the owner */
};

static const char *
sub_key(const void *owner, uint32_t i)
{
	return ((const struct weir_subs *)owner)->subs[i].id;
}

static const char *
node_name_key(const void *owner, uint32_t i)
{
	return ((const struct weir_subs *)owner)->nodes[i].name;
}

static const char *
node_id_key(const void *owner, uint32_t i)
{
	return ((const struct weir_subs *)owner)->nodes[i].id;
}

void
weir_sub_errs_add(struct weir_sub_errs *e, const char *file, uint32_t line, const char *fmt, ...)
{
	char msg[512];
	int k;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e->n++;
	if (e->len + sizeof(msg) + 4200 > e->cap) {
		size_t cap = e->cap == 0 ? 8192 : e->cap * 2;
		char *t = realloc(e->text, cap);

		if (t == NULL)
			return;         /* counted, not written: the count still refuses the file */
		e->text = t;
		e->cap = cap;
	}
	k = snprintf(e->text + e->len, e->cap - e->len, "%s:%u: %s\n", file, line, msg);
	if (k > 0)
		e->len += (size_t)k;
}

void
weir_sub_errs_free(struct weir_sub_errs *e)
{
	free(e->text);
	memset(e, 0, sizeof(*e));
}

struct weir_subs *
weir_subs_new(void)
{
	struct weir_subs *s = calloc(1, sizeof(struct weir_subs));

	if (s != NULL)
		s->refs = 1;
	return s;
}

void
weir_subs_ref(const struct weir_subs *s)
{
	__atomic_fetch_add(&((struct weir_subs *)(uintptr_t)s)->refs, 1, __ATOMIC_RELAXED);
}

void
weir_subs_free(struct weir_subs *s)
{
	if (s == NULL || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	free(s->subs);
	free(s->nodes);
	free(s->pfx);
	free(s->pfx_line);
	free(s->pfx_file);
	free(s->macs);
	free(s->mac_sub);
	free(s->sub_parent);
	free(s->by_id.slot);
	free(s->node_by_name.slot);
	free(s->node_by_id.slot);
	for (uint16_t i = 0; i < s->n_files; i++)
		free(s->files[i]);
	free(s);
}

uint16_t
weir_subs_file(struct weir_subs *s, const char *name)
{
	for (uint16_t i = 0; i < s->n_files; i++)
		if (strcmp(s->files[i], name) == 0)
			return i;
	if (s->n_files == MAX_FILES)
		return MAX_FILES - 1;   /* errors then name the last file: never more than a few */
	s->files[s->n_files] = strdup(name);
	if (s->files[s->n_files] == NULL)
		return 0;
	return s->n_files++;
}

const char *
weir_subs_file_name(const struct weir_subs *s, uint16_t file)
{
	return file < s->n_files && s->files[file] != NULL ? s->files[file] : "-";
}

#define FNAME(s, f) weir_subs_file_name(s, f)

/* Grow array *p of *cap elements of size sz to hold n + 1. */
static int
grow(void **p, uint32_t *cap, uint32_t n, size_t sz)
{
	void *t;
	uint32_t c;

	if (n < *cap)
		return 0;
	c = *cap == 0 ? 256 : *cap * 2;
	t = realloc(*p, (size_t)c * sz);
	if (t == NULL)
		return -1;
	*p = t;
	*cap = c;
	return 0;
}

static bool
copy_id(char *dst, const char *src)
{
	size_t n = src == NULL ? 0 : strlen(src);

	if (n >= WEIR_SUB_ID_LEN)
		return false;
	memcpy(dst, src == NULL ? "" : src, n + 1);
	return true;
}

int
weir_subs_node_add(struct weir_subs *s, const char *name, const char *id, const char *parent,
		   const uint64_t rate[2], bool is_virtual, uint16_t file, uint32_t line,
		   struct weir_sub_errs *e)
{
	struct weir_sub_node *nd;

	if (s->n_nodes >= WEIR_SUB_MAX_NODES) {
		weir_sub_errs_add(e, FNAME(s, file), line, "more than %u nodes", WEIR_SUB_MAX_NODES);
		if (e != NULL)
			e->n_full++;
		return -1;
	}
	if (grow((void **)&s->nodes, &s->cap_nodes, s->n_nodes, sizeof(*s->nodes)) != 0) {
		weir_sub_errs_add(e, FNAME(s, file), line, "out of memory");
		return -1;
	}
	nd = &s->nodes[s->n_nodes];
	memset(nd, 0, sizeof(*nd));
	if (name == NULL || name[0] == '\0' || !copy_id(nd->name, name) || !copy_id(nd->id, id) ||
	    !copy_id(nd->parent_name, parent)) {
		weir_sub_errs_add(e, FNAME(s, file), line,
				  "node name empty, or a name or id longer than %d bytes",
				  WEIR_SUB_ID_LEN - 1);
		return -1;
	}
	if (tab_find(&s->node_by_name, nd->name, node_name_key, s) >= 0) {
		weir_sub_errs_add(e, FNAME(s, file), line, "node '%s' declared twice", nd->name);
		return -1;
	}
	nd->rate[0] = rate[0];
	nd->rate[1] = rate[1];
	nd->is_virtual = is_virtual;
	nd->file = file;
	nd->line = line;
	nd->parent = WEIR_SUB_NONE;
	if (tab_put(&s->node_by_name, nd->name, s->n_nodes, node_name_key, s) != 0 ||
	    (nd->id[0] != '\0' && tab_find(&s->node_by_id, nd->id, node_id_key, s) < 0 &&
	     tab_put(&s->node_by_id, nd->id, s->n_nodes, node_id_key, s) != 0)) {
		weir_sub_errs_add(e, FNAME(s, file), line, "out of memory");
		return -1;
	}
	s->n_nodes++;
	return 0;
}

static const char *dir_name[2] = { "download", "upload" };

/* A later row of a subscriber must describe the same plan as its first. */
static bool
same_plan(const struct weir_subs *s, uint32_t i, const struct weir_sub_conf *c)
{
	const struct weir_sub *u = &s->subs[i];

	return u->min[0] == c->min[0] && u->min[1] == c->min[1] && u->max[0] == c->max[0] &&
	       u->max[1] == c->max[1] && strcmp(&s->sub_parent[(size_t)i * WEIR_SUB_ID_LEN],
						c->parent == NULL ? "" : c->parent) == 0;
}

int64_t
weir_subs_add(struct weir_subs *s, const struct weir_sub_conf *c, uint16_t file, uint32_t line,
	      struct weir_sub_errs *e)
{
	struct weir_sub *u;
	int64_t old;
	uint32_t cap;

	if (c->id == NULL || c->id[0] == '\0' || strlen(c->id) >= WEIR_SUB_ID_LEN) {
		weir_sub_errs_add(e, FNAME(s, file), line, "circuit id empty or longer than %d bytes",
				  WEIR_SUB_ID_LEN - 1);
		return -1;
	}
	old = tab_find(&s->by_id, c->id, sub_key, s);
	if (old >= 0) {
		if (!same_plan(s, (uint32_t)old, c)) {
			weir_sub_errs_add(e, FNAME(s, file), line,
					  "circuit '%s': rates or parent differ from its row at %s:%u",
					  c->id, FNAME(s, s->subs[old].file), s->subs[old].line);
			return -1;
		}
		return old;
	}
	if (s->n_subs >= WEIR_SUB_MAX) {
		weir_sub_errs_add(e, FNAME(s, file), line, "more than %u subscribers", WEIR_SUB_MAX);
		if (e != NULL)
			e->n_full++;
		return -1;
	}
	cap = s->cap_subs;
	if (grow((void **)&s->subs, &s->cap_subs, s->n_subs, sizeof(*s->subs)) != 0) {
		weir_sub_errs_add(e, FNAME(s, file), line, "out of memory");
		return -1;
	}
	if (s->cap_subs != cap) {
		char *t = realloc(s->sub_parent, (size_t)s->cap_subs * WEIR_SUB_ID_LEN);

		if (t == NULL) {
			weir_sub_errs_add(e, FNAME(s, file), line, "out of memory");
			return -1;
		}
		s->sub_parent = t;
	}
	u = &s->subs[s->n_subs];
	memset(u, 0, sizeof(*u));
	if (!copy_id(u->id, c->id) || !copy_id(u->name, c->name) ||
	    !copy_id(&s->sub_parent[(size_t)s->n_subs * WEIR_SUB_ID_LEN], c->parent)) {
		weir_sub_errs_add(e, FNAME(s, file), line,
				  "circuit '%s': name or parent longer than %d bytes", c->id,
				  WEIR_SUB_ID_LEN - 1);
		return -1;
	}
	memcpy(u->min, c->min, sizeof(u->min));
	memcpy(u->max, c->max, sizeof(u->max));
	u->box = c->box;
	u->flags = c->flags;
	u->file = file;
	u->line = line;
	u->node = WEIR_SUB_NONE;
	if (tab_put(&s->by_id, u->id, s->n_subs, sub_key, s) != 0) {
		weir_sub_errs_add(e, FNAME(s, file), line, "out of memory");
		return -1;
	}
	return s->n_subs++;
}

/* Parse "ADDR[/LEN]" into p; NULL or the reason it is not a prefix. */
static const char *
parse_prefix(const char *text, struct weir_sub_prefix *p)
{
	char buf[64];
	const char *slash = strchr(text, '/');
	size_t alen = slash ? (size_t)(slash - text) : strlen(text);
	unsigned int maxlen;
	long len;

	memset(p, 0, sizeof(*p));
	if (alen == 0 || alen >= sizeof(buf))
		return "not an address";
	memcpy(buf, text, alen);
	buf[alen] = '\0';
	if (inet_pton(AF_INET, buf, p->addr) == 1) {
		p->family = 4;
		maxlen = 32;
	} else if (inet_pton(AF_INET6, buf, p->addr) == 1) {
		p->family = 6;
		maxlen = 128;
	} else {
		return "not an IPv4 or IPv6 address";
	}
	len = maxlen;
	if (slash != NULL) {
		char *end;

		if (slash[1] < '0' || slash[1] > '9')
			return "prefix length is not a number";
		len = strtol(slash + 1, &end, 10);
		if (*end != '\0' || len > (long)maxlen)
			return "prefix length out of range";
	}
	if (len == 0)
		return "prefix length 0 would match every address";
	p->len = (uint8_t)len;
	for (unsigned int b = (unsigned int)len; b < maxlen; b++)
		if (p->addr[b / 8] & (0x80 >> (b % 8)))
			return "host bits set past the prefix length";
	return NULL;
}

int
weir_subs_add_prefix_text(struct weir_subs *s, uint32_t sub, const char *text, uint16_t file,
			  uint32_t line, struct weir_sub_errs *e)
{
	struct weir_sub_prefix p;
	const char *why = parse_prefix(text, &p);

	if (why != NULL) {
		weir_sub_errs_add(e, FNAME(s, file), line, "'%s': %s", text, why);
		return -1;
	}
	if (grow((void **)&s->pfx, &s->cap_pfx, s->n_pfx, sizeof(*s->pfx)) != 0) {
		weir_sub_errs_add(e, FNAME(s, file), line, "out of memory");
		return -1;
	}
	{
		uint32_t cap = s->cap_pfx;
		uint32_t *l = realloc(s->pfx_line, (size_t)cap * sizeof(*l));
		uint16_t *f;

		if (l == NULL) {
			weir_sub_errs_add(e, FNAME(s, file), line, "out of memory");
			return -1;
		}
		s->pfx_line = l;
		f = realloc(s->pfx_file, (size_t)cap * sizeof(*f));
		if (f == NULL) {
			weir_sub_errs_add(e, FNAME(s, file), line, "out of memory");
			return -1;
		}
		s->pfx_file = f;
	}
	p.sub = sub;
	s->pfx[s->n_pfx] = p;
	s->pfx_line[s->n_pfx] = line;
	s->pfx_file[s->n_pfx] = file;
	s->n_pfx++;
	return 0;
}

int
weir_subs_add_mac_text(struct weir_subs *s, uint32_t sub, const char *text, uint16_t file,
		       uint32_t line, struct weir_sub_errs *e)
{
	unsigned int b[6];
	char tail;
	struct weir_sub_mac m = { 0 };

	if (sscanf(text, "%2x%*1[:-]%2x%*1[:-]%2x%*1[:-]%2x%*1[:-]%2x%*1[:-]%2x%c", &b[0], &b[1],
		   &b[2], &b[3], &b[4], &b[5], &tail) != 6 || strlen(text) != 17) {
		weir_sub_errs_add(e, FNAME(s, file), line, "'%s': not a MAC address", text);
		return -1;
	}
	for (int i = 0; i < 6; i++)
		m.addr[i] = (uint8_t)b[i];
	if (grow((void **)&s->macs, &s->cap_macs, s->n_macs, sizeof(*s->macs)) != 0) {
		weir_sub_errs_add(e, FNAME(s, file), line, "out of memory");
		return -1;
	}
	{
		uint32_t *t = realloc(s->mac_sub, (size_t)s->cap_macs * sizeof(*t));

		if (t == NULL) {
			weir_sub_errs_add(e, FNAME(s, file), line, "out of memory");
			return -1;
		}
		s->mac_sub = t;
	}
	s->macs[s->n_macs] = m;
	s->mac_sub[s->n_macs++] = sub;
	return 0;
}

/* ---- the next set from a checked one ---- */

static int
copy_node(struct weir_subs *t, const struct weir_subs *s, const struct weir_sub_node *nd,
	  struct weir_sub_errs *e)
{
	return weir_subs_node_add(t, nd->name, nd->id, nd->parent_name, nd->rate,
				  nd->is_virtual, weir_subs_file(t, FNAME(s, nd->file)), nd->line, e);
}

/* Subscriber u of s, with its devices, into t. Its parent is named by its
 * real node: a virtual parent resolves to the same one. */
static int
copy_sub(struct weir_subs *t, const struct weir_subs *s, const struct weir_sub *u,
	 struct weir_sub_errs *e)
{
	struct weir_sub_conf c = {
		.id = u->id, .name = u->name, .box = u->box, .flags = u->flags,
		.parent = u->node == WEIR_SUB_NONE ? "" : s->nodes[u->node].name,
	};
	uint16_t f = weir_subs_file(t, FNAME(s, u->file));
	int64_t k;
	char txt[64];

	memcpy(c.min, u->min, sizeof(c.min));
	memcpy(c.max, u->max, sizeof(c.max));
	k = weir_subs_add(t, &c, f, u->line, e);
	if (k < 0)
		return -1;
	for (uint32_t j = 0; j < u->n_prefixes; j++) {
		weir_sub_prefix_text(&s->pfx[u->first_prefix + j], txt, sizeof(txt));
		if (weir_subs_add_prefix_text(t, (uint32_t)k, txt, f, u->line, e) != 0)
			return -1;
	}
	for (uint32_t j = 0; j < u->n_macs; j++) {
		const uint8_t *m = s->macs[u->first_mac + j].addr;

		snprintf(txt, sizeof(txt), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3],
			 m[4], m[5]);
		if (weir_subs_add_mac_text(t, (uint32_t)k, txt, f, u->line, e) != 0)
			return -1;
	}
	return 0;
}

struct weir_subs *
weir_subs_copy(const struct weir_subs *s, bool (*keep)(void *arg, uint32_t i),
	       void (*place)(void *arg, struct weir_subs *t, uint32_t i), void *arg,
	       struct weir_sub_errs *e)
{
	struct weir_subs *t = weir_subs_new();

	if (t == NULL) {
		weir_sub_errs_add(e, "-", 0, "out of memory");
		return NULL;
	}
	for (uint16_t f = 0; f < s->n_files; f++)
		weir_subs_file(t, s->files[f]);
	for (uint32_t i = 0; i < s->n_nodes; i++)
		if (copy_node(t, s, &s->nodes[i], e) != 0)
			goto fail;
	for (uint32_t i = 0; i < s->n_subs; i++) {
		if (keep == NULL || keep(arg, i)) {
			if (copy_sub(t, s, &s->subs[i], e) != 0)
				goto fail;
		} else if (place != NULL) {
			place(arg, t, i);
		}
	}
	return t;
fail:
	weir_subs_free(t);
	return NULL;
}

/* ---- the check ---- */

static int64_t
node_lookup(const struct weir_subs *s, const char *name)
{
	int64_t i = tab_find(&s->node_by_name, name, node_name_key, s);

	return i >= 0 ? i : tab_find(&s->node_by_id, name, node_id_key, s);
}

/* Parents, depth, the nearest real ancestor, rates: a node's 0 is its
 * parent's, and a node above its parent is held to the parent's (a
 * network.json often oversubscribes an uplink; the parent caps it). */
static uint32_t
check_nodes(struct weir_subs *s, struct weir_sub_errs *e)
{
	uint32_t bad = 0;
	uint8_t *state = calloc(s->n_nodes + 1u, 1);    /* 0 new, 1 walking, 2 done */
	uint32_t *stack = malloc(((size_t)s->n_nodes + 1) * sizeof(*stack));

	if (state == NULL || stack == NULL) {
		free(state);
		free(stack);
		weir_sub_errs_add(e, "-", 0, "out of memory");
		return 1;
	}
	for (uint32_t i = 0; i < s->n_nodes; i++) {
		struct weir_sub_node *nd = &s->nodes[i];

		if (nd->parent_name[0] == '\0')
			continue;
		int64_t p = node_lookup(s, nd->parent_name);

		if (p < 0) {
			weir_sub_errs_add(e, FNAME(s, nd->file), nd->line,
					  "node '%s': unknown parent node '%s'", nd->name,
					  nd->parent_name);
			bad++;
			state[i] = 3;   /* left out of the walk below */
			continue;
		}
		nd->parent = (uint32_t)p;
	}
	/* Walk each node up to a done ancestor, then fill downwards. */
	for (uint32_t i = 0; i < s->n_nodes; i++) {
		uint32_t top = 0, j = i;

		while (j != WEIR_SUB_NONE && state[j] == 0) {
			state[j] = 1;
			stack[top++] = j;
			j = s->nodes[j].parent;
		}
		if (j != WEIR_SUB_NONE && state[j] == 1) {
			weir_sub_errs_add(e, FNAME(s, s->nodes[j].file), s->nodes[j].line,
					  "node '%s' is its own ancestor", s->nodes[j].name);
			bad++;
		}
		bool broken = j != WEIR_SUB_NONE && state[j] != 2;

		while (top > 0) {
			struct weir_sub_node *nd = &s->nodes[stack[--top]];
			const struct weir_sub_node *pa =
				nd->parent == WEIR_SUB_NONE ? NULL : &s->nodes[nd->parent];

			state[stack[top]] = broken ? 3 : 2;
			if (broken)
				continue;
			nd->real_parent = pa == NULL ? WEIR_SUB_NONE
				: pa->is_virtual ? pa->real_parent : nd->parent;
			const struct weir_sub_node *rp =
				nd->real_parent == WEIR_SUB_NONE ? NULL : &s->nodes[nd->real_parent];

			nd->depth = (uint8_t)((rp == NULL ? 0 : rp->depth) + (nd->is_virtual ? 0 : 1));
			for (int d = 0; d < 2; d++)
				if (rp != NULL && (nd->rate[d] == 0 || nd->rate[d] > rp->rate[d]))
					nd->rate[d] = rp->rate[d];
			if (!nd->is_virtual && nd->depth > WEIR_SUB_MAX_DEPTH) {
				weir_sub_errs_add(e, FNAME(s, nd->file), nd->line,
						  "node '%s': %u levels deep, the tree takes %u",
						  nd->name, nd->depth, WEIR_SUB_MAX_DEPTH);
				bad++;
			}
		}
	}
	free(state);
	free(stack);
	return bad;
}

static uint32_t
check_subs(struct weir_subs *s, struct weir_sub_errs *e)
{
	uint32_t bad = 0;

	for (uint32_t i = 0; i < s->n_subs; i++) {
		struct weir_sub *u = &s->subs[i];
		const char *pn = &s->sub_parent[(size_t)i * WEIR_SUB_ID_LEN];
		const struct weir_sub_node *nd = NULL;

		if (pn[0] != '\0') {
			int64_t p = node_lookup(s, pn);

			if (p < 0) {
				weir_sub_errs_add(e, FNAME(s, u->file), u->line,
						  "circuit '%s': unknown parent node '%s'", u->id, pn);
				bad++;
				continue;
			}
			nd = &s->nodes[p];
			if (nd->is_virtual)
				nd = nd->real_parent == WEIR_SUB_NONE ? NULL : &s->nodes[nd->real_parent];
			u->node = nd == NULL ? WEIR_SUB_NONE : (uint32_t)(nd - s->nodes);
		}
		for (int d = 0; d < 2; d++) {
			if (u->max[d] == 0) {
				weir_sub_errs_add(e, FNAME(s, u->file), u->line,
						  "circuit '%s': no %s max rate", u->id, dir_name[d]);
				bad++;
			} else if (u->min[d] > u->max[d]) {
				weir_sub_errs_add(e, FNAME(s, u->file), u->line,
						  "circuit '%s': %s min %.3f Mbit/s above its max %.3f",
						  u->id, dir_name[d], u->min[d] / 1e6, u->max[d] / 1e6);
				bad++;
			} else if (nd != NULL && nd->rate[d] != 0 && u->max[d] > nd->rate[d]) {
				weir_sub_errs_add(e, FNAME(s, u->file), u->line,
						  "circuit '%s': %s max %.3f Mbit/s above node '%s' (%.3f)",
						  u->id, dir_name[d], u->max[d] / 1e6, nd->name,
						  nd->rate[d] / 1e6);
				bad++;
			}
		}
	}
	return bad;
}

static int
pfx_cmp(const struct weir_sub_prefix *a, const struct weir_sub_prefix *b)
{
	if (a->family != b->family)
		return a->family < b->family ? -1 : 1;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return memcmp(a->addr, b->addr, a->family == 4 ? 4 : 16);
}

static const struct weir_sub_prefix *sort_base;

static int
pfx_idx_cmp(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	int c = pfx_cmp(&sort_base[a], &sort_base[b]);

	return c != 0 ? c : (a < b ? -1 : a > b);
}

/* A prefix named by two circuits is refused; named twice by one, kept once.
 * Then the prefixes are grouped by subscriber (first_prefix, n_prefixes). */
static uint32_t
check_prefixes(struct weir_subs *s, struct weir_sub_errs *e)
{
	uint32_t bad = 0, n = s->n_pfx, kept = 0;
	uint32_t *idx = malloc(((size_t)n + 1) * sizeof(*idx));
	uint8_t *drop = calloc((size_t)n + 1, 1);
	struct weir_sub_prefix *out = malloc(((size_t)n + 1) * sizeof(*out));

	if (idx == NULL || drop == NULL || out == NULL) {
		free(idx);
		free(drop);
		free(out);
		weir_sub_errs_add(e, "-", 0, "out of memory");
		return 1;
	}
	for (uint32_t i = 0; i < n; i++)
		idx[i] = i;
	sort_base = s->pfx;
	qsort(idx, n, sizeof(*idx), pfx_idx_cmp);
	for (uint32_t k = 1; k < n; k++) {
		const struct weir_sub_prefix *a = &s->pfx[idx[k - 1]], *b = &s->pfx[idx[k]];
		char txt[64];

		if (pfx_cmp(a, b) != 0)
			continue;
		if (a->sub == b->sub) {
			drop[idx[k]] = 1;
			continue;
		}
		weir_sub_prefix_text(b, txt, sizeof(txt));
		weir_sub_errs_add(e, FNAME(s, s->pfx_file[idx[k]]), s->pfx_line[idx[k]],
				  "prefix %s of circuit '%s' is already circuit '%s''s (%s:%u)", txt,
				  s->subs[b->sub].id, s->subs[a->sub].id,
				  FNAME(s, s->pfx_file[idx[k - 1]]), s->pfx_line[idx[k - 1]]);
		if (e != NULL)
			e->n_conflicts++;
		bad++;
	}
	/* Counting sort by subscriber, in the order they were read. */
	for (uint32_t i = 0; i < s->n_subs; i++)
		s->subs[i].n_prefixes = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!drop[i])
			s->subs[s->pfx[i].sub].n_prefixes++;
	for (uint32_t i = 0, at = 0; i < s->n_subs; i++) {
		s->subs[i].first_prefix = at;
		at += s->subs[i].n_prefixes;
		s->subs[i].n_prefixes = 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct weir_sub *u;

		if (drop[i])
			continue;
		u = &s->subs[s->pfx[i].sub];
		out[u->first_prefix + u->n_prefixes++] = s->pfx[i];
		kept++;
	}
	free(s->pfx);
	s->pfx = out;
	s->n_pfx = kept;
	free(idx);
	free(drop);
	return bad;
}

static void
group_macs(struct weir_subs *s)
{
	struct weir_sub_mac *out = malloc(((size_t)s->n_macs + 1) * sizeof(*out));

	if (out == NULL)
		return;
	for (uint32_t i = 0; i < s->n_subs; i++)
		s->subs[i].n_macs = 0;
	for (uint32_t i = 0; i < s->n_macs; i++)
		s->subs[s->mac_sub[i]].n_macs++;
	for (uint32_t i = 0, at = 0; i < s->n_subs; i++) {
		s->subs[i].first_mac = at;
		at += s->subs[i].n_macs;
		s->subs[i].n_macs = 0;
	}
	for (uint32_t i = 0; i < s->n_macs; i++) {
		struct weir_sub *u = &s->subs[s->mac_sub[i]];

		out[u->first_mac + u->n_macs++] = s->macs[i];
	}
	free(s->macs);
	s->macs = out;
}

uint32_t
weir_subs_check(struct weir_subs *s, struct weir_sub_errs *e)
{
	uint32_t bad;

	if (s->sealed)
		return 0;
	bad = check_nodes(s, e);
	bad += check_subs(s, e);
	bad += check_prefixes(s, e);
	if (bad != 0)
		return bad;
	group_macs(s);
	free(s->pfx_line);
	free(s->pfx_file);
	free(s->mac_sub);
	free(s->sub_parent);
	s->pfx_line = NULL;
	s->pfx_file = NULL;
	s->mac_sub = NULL;
	s->sub_parent = NULL;
	s->sealed = true;
	return 0;
}

uint32_t weir_subs_count(const struct weir_subs *s) { return s->n_subs; }
uint32_t weir_subs_node_count(const struct weir_subs *s) { return s->n_nodes; }
uint32_t weir_subs_prefix_count(const struct weir_subs *s) { return s->n_pfx; }
const struct weir_sub_prefix *weir_subs_prefixes(const struct weir_subs *s) { return s->pfx; }
const struct weir_sub_mac *weir_subs_macs(const struct weir_subs *s) { return s->macs; }

const struct weir_sub *
weir_subs_get(const struct weir_subs *s, uint32_t i)
{
	return i < s->n_subs ? &s->subs[i] : NULL;
}

const struct weir_sub_node *
weir_subs_node(const struct weir_subs *s, uint32_t i)
{
	return i < s->n_nodes ? &s->nodes[i] : NULL;
}

int64_t
weir_subs_find(const struct weir_subs *s, const char *id)
{
	return tab_find(&s->by_id, id, sub_key, s);
}

int64_t
weir_subs_node_find(const struct weir_subs *s, const char *name)
{
	return node_lookup(s, name);
}

size_t
weir_subs_memory(const struct weir_subs *s)
{
	return sizeof(*s) + (size_t)s->cap_subs * sizeof(*s->subs) +
	       (size_t)s->cap_nodes * sizeof(*s->nodes) + (size_t)s->n_pfx * sizeof(*s->pfx) +
	       (size_t)s->n_macs * sizeof(*s->macs) +
	       ((size_t)s->by_id.mask + 1 + s->node_by_name.mask + 1 + s->node_by_id.mask + 1) *
	       sizeof(uint32_t);
}

void
weir_sub_prefix_text(const struct weir_sub_prefix *p, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];

	inet_ntop(p->family == 4 ? AF_INET : AF_INET6, p->addr, a, sizeof(a));
	snprintf(buf, len, "%s/%u", a, p->len);
}

/* ---- diff ---- */

static bool
same_devices(const struct weir_subs *a, const struct weir_sub *x, const struct weir_subs *b,
	     const struct weir_sub *y)
{
	if (x->n_prefixes != y->n_prefixes || x->n_macs != y->n_macs)
		return false;
	for (uint32_t k = 0; k < x->n_prefixes; k++)
		if (pfx_cmp(&a->pfx[x->first_prefix + k], &b->pfx[y->first_prefix + k]) != 0)
			return false;
	return x->n_macs == 0 ||
	       memcmp(&a->macs[x->first_mac], &b->macs[y->first_mac],
		      x->n_macs * sizeof(*a->macs)) == 0;
}

/* A subscriber's node, by name (indexes differ between two sets). */
static const char *
node_name_of(const struct weir_subs *s, const struct weir_sub *u)
{
	return u->node == WEIR_SUB_NONE ? "" : s->nodes[u->node].name;
}

static bool
same_nodes(const struct weir_subs *a, const struct weir_subs *b)
{
	if (a->n_nodes != b->n_nodes)
		return false;
	for (uint32_t i = 0; i < a->n_nodes; i++) {
		const struct weir_sub_node *x = &a->nodes[i], *y = &b->nodes[i];

		if (strcmp(x->name, y->name) != 0 || x->is_virtual != y->is_virtual ||
		    x->rate[0] != y->rate[0] || x->rate[1] != y->rate[1] ||
		    strcmp(x->parent == WEIR_SUB_NONE ? "" : a->nodes[x->parent].name,
			   y->parent == WEIR_SUB_NONE ? "" : b->nodes[y->parent].name) != 0)
			return false;
	}
	return true;
}

void
weir_subs_diff(const struct weir_subs *old, const struct weir_subs *new_, struct weir_sub_diff *d,
	       void (*visit)(void *arg, enum weir_sub_change, uint32_t idx), void *arg)
{
	memset(d, 0, sizeof(*d));
	d->nodes_changed = !same_nodes(old, new_);
	for (uint32_t i = 0; i < new_->n_subs; i++) {
		const struct weir_sub *y = &new_->subs[i], *x;
		int64_t o = weir_subs_find(old, y->id);
		enum weir_sub_change c;

		if (o < 0) {
			c = WEIR_SUB_ADDED;
		} else {
			x = &old->subs[o];
			if (strcmp(x->name, y->name) != 0 || x->flags != y->flags ||
			    x->box != y->box ||
			    strcmp(node_name_of(old, x), node_name_of(new_, y)) != 0 ||
			    !same_devices(old, x, new_, y))
				c = WEIR_SUB_CHANGED;
			else if (memcmp(x->min, y->min, sizeof(x->min)) != 0 ||
				 memcmp(x->max, y->max, sizeof(x->max)) != 0)
				c = WEIR_SUB_RATES;
			else {
				d->unchanged++;
				continue;
			}
		}
		d->n[c]++;
		if (visit != NULL)
			visit(arg, c, i);
	}
	for (uint32_t i = 0; i < old->n_subs; i++) {
		if (weir_subs_find(new_, old->subs[i].id) >= 0)
			continue;
		d->n[WEIR_SUB_REMOVED]++;
		if (visit != NULL)
			visit(arg, WEIR_SUB_REMOVED, i);
	}
}

