/* SPDX-License-Identifier: BSD-3-Clause
 * weir: LibreQoS's ShapedDevices.csv and network.json (lqos.h).
 *
 * The CSV is RFC 4180 with a header row naming the columns; the columns are
 * found by name, so v1.4's file (no Anchor Node ID) and v2.2's (with it,
 * and an optional sqm) read alike. weir reads two optional columns of its
 * own, `Box` (fleet partition, a number) and `Shaping` ("off": the
 * subscriber's traffic passes unshaped). A line starting with '#' is a
 * comment. Rates are Mbit/s, decimals allowed.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "lqos.h"

#define MAX_CELLS 64

/* ---- a whole file in memory ---- */
static char *
slurp(const char *path, size_t *len, struct weir_sub_errs *e)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (f == NULL) {
		weir_sub_errs_add(e, path, 0, "cannot open: %s", strerror(errno));
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
	    (buf = malloc((size_t)n + 1)) == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		weir_sub_errs_add(e, path, 0, "cannot read: %s", strerror(errno ? errno : EIO));
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

/* ---- CSV ---- */

/* One record from *pos: cells unquoted in place (NUL-terminated, trimmed).
 * Returns the cell count, 0 at the end; *line advances past its newlines. */
static int
csv_record(char **pos, char **cell, uint32_t *line, bool *bad_quote)
{
	char *p = *pos, *w;
	int n = 0;

	*bad_quote = false;
	if (*p == '\0')
		return 0;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		w = p;
		if (n < MAX_CELLS)
			cell[n] = w;
		if (*p == '"') {
			p++;
			for (;;) {
				if (*p == '\0') {
					*bad_quote = true;
					break;
				}
				if (*p == '"' && p[1] == '"') {
					*w++ = '"';
					p += 2;
				} else if (*p == '"') {
					p++;
					break;
				} else {
					if (*p == '\n')
						(*line)++;
					*w++ = *p++;
				}
			}
			while (*p == ' ' || *p == '\t' || *p == '\r')
				p++;
			if (*p != ',' && *p != '\n' && *p != '\0')
				*bad_quote = true;
			while (*p != ',' && *p != '\n' && *p != '\0')
				p++;
		} else {
			while (*p != ',' && *p != '\n' && *p != '\0')
				*w++ = *p++;
		}
		char sep = *p;

		while (w > cell[n < MAX_CELLS ? n : MAX_CELLS - 1] && n < MAX_CELLS &&
		       (w[-1] == ' ' || w[-1] == '\t' || w[-1] == '\r'))
			w--;
		n++;
		if (sep == ',') {
			*w = '\0';
			p++;
			continue;
		}
		*w = '\0';
		if (sep == '\n') {
			(*line)++;
			p++;
		}
		break;
	}
	*pos = p;
	return n;
}

enum col {
	C_CIRCUIT_ID, C_CIRCUIT_NAME, C_DEVICE_ID, C_DEVICE_NAME, C_PARENT, C_PARENT_ID,
	C_MAC, C_IPV4, C_IPV6, C_DMIN, C_UMIN, C_DMAX, C_UMAX, C_BOX, C_SHAPING,
	C__COUNT
};
static const char *const col_name[C__COUNT] = {
	"Circuit ID", "Circuit Name", "Device ID", "Device Name", "Parent Node", "Parent Node ID",
	"MAC", "IPv4", "IPv6", "Download Min Mbps", "Upload Min Mbps", "Download Max Mbps",
	"Upload Max Mbps", "Box", "Shaping",
};
static const bool col_required[C__COUNT] = {
	[C_CIRCUIT_ID] = true, [C_DEVICE_ID] = true, [C_PARENT] = true, [C_IPV4] = true,
	[C_IPV6] = true, [C_DMIN] = true, [C_UMIN] = true, [C_DMAX] = true, [C_UMAX] = true,
};

/* Mbit/s text to bit/s; false if not a number in 0 .. 10^6 Mbit/s. */
static bool
mbps(const char *t, uint64_t *out)
{
	char *end;
	double v;

	if (t[0] == '\0')
		return false;
	errno = 0;
	v = strtod(t, &end);
	if (errno != 0 || *end != '\0' || !isfinite(v) || v < 0 || v > 1e6)
		return false;
	*out = (uint64_t)llround(v * 1e6);
	return true;
}

struct dev_id {
	const char *id;
	uint32_t line;
};

static int
dev_cmp(const void *x, const void *y)
{
	const struct dev_id *a = x, *b = y;
	int c = strcmp(a->id, b->id);

	return c != 0 ? c : (a->line < b->line ? -1 : a->line > b->line);
}

/* Each address or prefix of a comma- or space-separated cell. */
static uint32_t
add_prefixes(struct weir_subs *s, uint32_t sub, char *cell, uint16_t file, uint32_t line,
	     struct weir_sub_errs *e)
{
	uint32_t bad = 0;
	char *save = NULL;

	for (char *t = strtok_r(cell, ", \t", &save); t != NULL; t = strtok_r(NULL, ", \t", &save))
		bad += weir_subs_add_prefix_text(s, sub, t, file, line, e) != 0;
	return bad;
}

/* The header row: which cell holds which column. */
static uint32_t
csv_header(char **cell, int n, int *at, const char *path, uint32_t line, struct weir_sub_errs *e)
{
	uint32_t bad = 0;

	for (int c = 0; c < C__COUNT; c++) {
		at[c] = -1;
		for (int i = 0; i < n && i < MAX_CELLS; i++)
			if (strcasecmp(cell[i], col_name[c]) == 0)
				at[c] = i;
		if (at[c] < 0 && col_required[c]) {
			weir_sub_errs_add(e, path, line, "header has no column '%s'", col_name[c]);
			bad++;
		}
	}
	return bad;
}

/* One device row. */
static uint32_t
csv_row(struct weir_subs *s, char **cell, const int *at, uint16_t file, uint32_t line,
	uint16_t box, struct weir_sub_errs *e)
{
	const char *path = weir_subs_file_name(s, file);
	struct weir_sub_conf c = { 0 };
	const int rate_col[4] = { C_DMIN, C_UMIN, C_DMAX, C_UMAX };
	uint64_t *rate_out[4] = { &c.min[0], &c.min[1], &c.max[0], &c.max[1] };
	uint32_t bad = 0;
	int64_t sub;

#define CELL(k) (at[k] < 0 ? "" : cell[at[k]])
	for (int k = 0; k < 4; k++)
		if (!mbps(CELL(rate_col[k]), rate_out[k])) {
			weir_sub_errs_add(e, path, line, "%s '%s': not a rate in Mbit/s",
					  col_name[rate_col[k]], CELL(rate_col[k]));
			bad++;
		}
	if (CELL(C_BOX)[0] != '\0') {
		char *end;
		long b = strtol(CELL(C_BOX), &end, 10);

		if (*end != '\0' || b < 0 || b > 65535) {
			weir_sub_errs_add(e, path, line, "Box '%s': not a number 0..65535",
					  CELL(C_BOX));
			bad++;
		}
		c.box = (uint16_t)b;
	}
	if (strcasecmp(CELL(C_SHAPING), "off") == 0)
		c.flags |= WEIR_SUBF_UNSHAPED;
	else if (CELL(C_SHAPING)[0] != '\0' && strcasecmp(CELL(C_SHAPING), "on") != 0) {
		weir_sub_errs_add(e, path, line, "Shaping '%s': on or off", CELL(C_SHAPING));
		bad++;
	}
	if (bad != 0)
		return bad;
	/* Another box's partition: that box shapes it (docs/fleet.md). */
	if (box != 0 && c.box != 0 && c.box != box)
		return 0;
	c.id = CELL(C_CIRCUIT_ID);
	c.name = CELL(C_CIRCUIT_NAME);
	c.parent = CELL(C_PARENT)[0] != '\0' ? CELL(C_PARENT) : CELL(C_PARENT_ID);
	sub = weir_subs_add(s, &c, file, line, e);
	if (sub < 0)
		return 1;
	bad += add_prefixes(s, (uint32_t)sub, (char *)CELL(C_IPV4), file, line, e);
	bad += add_prefixes(s, (uint32_t)sub, (char *)CELL(C_IPV6), file, line, e);
	if (CELL(C_MAC)[0] != '\0')
		bad += weir_subs_add_mac_text(s, (uint32_t)sub, CELL(C_MAC), file, line, e) != 0;
#undef CELL
	return bad;
}

static uint32_t
duplicate_devices(struct dev_id *dev, uint32_t n, const char *path, struct weir_sub_errs *e)
{
	uint32_t bad = 0;

	qsort(dev, n, sizeof(*dev), dev_cmp);
	for (uint32_t i = 1; i < n; i++)
		if (strcmp(dev[i].id, dev[i - 1].id) == 0) {
			weir_sub_errs_add(e, path, dev[i].line, "Device ID '%s' already at line %u",
					  dev[i].id, dev[i - 1].line);
			bad++;
		}
	return bad;
}

uint32_t
weir_subs_read_shaped_devices(struct weir_subs *s, const char *path, uint16_t box,
			      struct weir_sub_errs *e)
{
	size_t len;
	char *buf = slurp(path, &len, e), *pos;
	char *cell[MAX_CELLS];
	int at[C__COUNT], header_n = 0;
	uint32_t line = 1, bad = 0, n_dev = 0;
	uint16_t file = weir_subs_file(s, path);
	struct dev_id *dev;

	if (buf == NULL)
		return 1;
	dev = malloc((len / 16 + 2) * sizeof(*dev));    /* a row is longer than 16 bytes */
	if (dev == NULL) {
		free(buf);
		weir_sub_errs_add(e, path, 0, "out of memory");
		return 1;
	}
	pos = buf;
	for (;;) {
		uint32_t at_line = line;
		bool bad_quote;
		int n = csv_record(&pos, cell, &line, &bad_quote);

		if (n == 0)
			break;
		if (n == 1 && cell[0][0] == '\0')
			continue;                       /* a blank line */
		if (cell[0][0] == '#')
			continue;
		if (bad_quote) {
			weir_sub_errs_add(e, path, at_line, "unbalanced quote");
			bad++;
			continue;
		}
		if (header_n == 0) {
			header_n = n;
			if (csv_header(cell, n, at, path, at_line, e) != 0) {
				bad++;
				break;
			}
			continue;
		}
		if (n != header_n) {
			weir_sub_errs_add(e, path, at_line, "%d cells, the header has %d", n,
					  header_n);
			bad++;
			continue;
		}
		if (cell[at[C_DEVICE_ID]][0] != '\0')
			dev[n_dev++] = (struct dev_id){ cell[at[C_DEVICE_ID]], at_line };
		bad += csv_row(s, cell, at, file, at_line, box, e) != 0;
	}
	if (header_n == 0 && bad == 0) {
		weir_sub_errs_add(e, path, 1, "no header row");
		bad++;
	}
	bad += duplicate_devices(dev, n_dev, path, e);
	free(dev);
	free(buf);
	return bad;
}

/* ---- network.json ---- */

struct json_walk {
	struct weir_subs *s;
	struct weir_sub_errs *e;
	const char *path;
	const char *text;       /* the file, to find a node's line */
	size_t cursor;
	uint32_t cursor_line;   /* the line cursor is on */
	uint16_t file;
	uint32_t bad;
};

/* The line of key `name` (a node), searching forward in document order. */
static uint32_t
key_line(struct json_walk *w, const char *name)
{
	size_t nl = strlen(name);
	const char *p = w->text + w->cursor;
	size_t from = w->cursor;

	for (const char *q; (q = strstr(p, name)) != NULL; p = q + 1) {
		const char *r = q + nl;

		if (q > w->text && q[-1] == '"' && *r == '"') {
			for (r++; *r == ' ' || *r == '\t' || *r == '\r' || *r == '\n'; r++)
				;
			if (*r == ':') {
				w->cursor = (size_t)(q - w->text) + nl;
				break;
			}
		}
	}
	for (const char *c = w->text + from; c < w->text + w->cursor; c++)
		w->cursor_line += *c == '\n';
	return w->cursor_line;
}

static bool
json_mbps(json_t *v, uint64_t *out)
{
	double x;

	if (v == NULL) {
		*out = 0;
		return true;
	}
	if (!json_is_number(v))
		return false;
	x = json_number_value(v);
	if (!isfinite(x) || x < 0 || x > 1e6)
		return false;
	*out = (uint64_t)llround(x * 1e6);
	return true;
}

static void
json_nodes(struct json_walk *w, json_t *obj, const char *parent, int depth)
{
	const char *name;
	json_t *v;

	json_object_foreach(obj, name, v) {
		uint32_t line = key_line(w, name);
		uint64_t rate[2];
		json_t *id = json_object_get(v, "id"), *virt, *kids;
		char idbuf[32];
		const char *ids = "";

		if (!json_is_object(v)) {
			weir_sub_errs_add(w->e, w->path, line, "node '%s' is not an object", name);
			w->bad++;
			continue;
		}
		if (depth > 32) {
			weir_sub_errs_add(w->e, w->path, line, "node '%s': nested too deep", name);
			w->bad++;
			continue;
		}
		if (!json_mbps(json_object_get(v, "downloadBandwidthMbps"), &rate[0]) ||
		    !json_mbps(json_object_get(v, "uploadBandwidthMbps"), &rate[1])) {
			weir_sub_errs_add(w->e, w->path, line,
					  "node '%s': bandwidth is not a number of Mbit/s", name);
			w->bad++;
		}
		if (json_is_string(id)) {
			ids = json_string_value(id);
		} else if (json_is_integer(id)) {
			snprintf(idbuf, sizeof(idbuf), "%lld", (long long)json_integer_value(id));
			ids = idbuf;
		}
		virt = json_object_get(v, "virtual");
		if (virt != NULL && !json_is_boolean(virt)) {
			weir_sub_errs_add(w->e, w->path, line, "node '%s': virtual is not true or false",
					  name);
			w->bad++;
		}
		if (weir_subs_node_add(w->s, name, ids, parent, rate, json_is_true(virt), w->file,
				       line, w->e) != 0)
			w->bad++;
		kids = json_object_get(v, "children");
		if (kids != NULL && !json_is_object(kids)) {
			weir_sub_errs_add(w->e, w->path, line, "node '%s': children is not an object",
					  name);
			w->bad++;
		} else if (kids != NULL) {
			json_nodes(w, kids, name, depth + 1);
		}
	}
}

uint32_t
weir_subs_read_network_json(struct weir_subs *s, const char *path, struct weir_sub_errs *e)
{
	size_t len;
	char *buf = slurp(path, &len, e);
	json_error_t je;
	json_t *root;
	struct json_walk w = { .s = s, .e = e, .path = path, .text = buf, .cursor_line = 1 };

	if (buf == NULL)
		return 1;
	root = json_loadb(buf, len, 0, &je);
	if (root == NULL) {
		weir_sub_errs_add(e, path, (uint32_t)(je.line > 0 ? je.line : 0), "%s", je.text);
		free(buf);
		return 1;
	}
	if (!json_is_object(root)) {
		weir_sub_errs_add(e, path, 1, "the top level is not an object of nodes");
		w.bad++;
	} else {
		w.file = weir_subs_file(s, path);
		json_nodes(&w, root, "", 1);
	}
	json_decref(root);
	free(buf);
	return w.bad;
}

struct weir_subs *
weir_subs_load_lqos(const char *shaped_devices, const char *network, uint16_t box,
		    struct weir_sub_errs *e)
{
	struct weir_subs *s = weir_subs_new();
	uint32_t bad = 0;

	if (s == NULL) {
		weir_sub_errs_add(e, shaped_devices, 0, "out of memory");
		return NULL;
	}
	if (network != NULL && network[0] != '\0')
		bad += weir_subs_read_network_json(s, network, e);
	bad += weir_subs_read_shaped_devices(s, shaped_devices, box, e);
	/* Resolving parents needs the nodes whole: checked even after row
	 * errors, so one pass reports every bad row. */
	bad += weir_subs_check(s, e);
	if (bad != 0 || e->n != 0) {
		weir_subs_free(s);
		return NULL;
	}
	return s;
}
