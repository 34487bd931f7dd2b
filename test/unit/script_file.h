/* SPDX-License-Identifier: BSD-3-Clause
 * Lua policy tests: scripts written to files in a temporary directory
 * (main sets tmpdir with mkdtemp), since policies load from files.
 */
#ifndef WEIR_TEST_SCRIPT_FILE_H
#define WEIR_TEST_SCRIPT_FILE_H

#include <stdio.h>
#include <stdlib.h>

static char tmpdir[64];
static unsigned int n_scripts;

/* Write text to a new file in tmpdir; the path stays valid for the next
 * 63 calls. */
static const char *
script(const char *text)
{
	static char paths[64][128];
	char *path = paths[n_scripts++ % 64];
	FILE *f;

	snprintf(path, 128, "%s/p%u.lua", tmpdir, n_scripts);
	f = fopen(path, "w");
	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
		printf("cannot write %s\n", path);
		exit(2);
	}
	return path;
}

#endif /* WEIR_TEST_SCRIPT_FILE_H */
