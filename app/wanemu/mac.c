/* SPDX-License-Identifier: BSD-3-Clause */
#include <string.h>

#include "mac.h"

static unsigned int
mac_slot(const uint8_t *mac)
{
	uint32_t h = 2166136261u;       /* FNV-1a: cheap, spreads similar MACs */

	for (int i = 0; i < 6; i++)
		h = (h ^ mac[i]) * 16777619u;
	return h & (MAC_TABLE - 1);
}

int
mac_learn(struct mac_table *t, const uint8_t *mac, int path)
{
	if (mac[0] & 1)
		return 0;       /* a group address is never a real source */
	for (unsigned int i = mac_slot(mac), n = 0; n < MAC_TABLE; i = (i + 1) & (MAC_TABLE - 1), n++) {
		if (t->e[i].path == 0) {
			/* Keep one slot free so lookups of unknown MACs terminate. */
			if (t->used + 1 >= MAC_TABLE)
				return 0;
			memcpy(t->e[i].mac, mac, 6);
			t->e[i].path = (int8_t)(path + 1);
			t->used++;
			return 1;
		}
		if (memcmp(t->e[i].mac, mac, 6) == 0) {
			if (t->e[i].path == path + 1)
				return 0;
			t->e[i].path = (int8_t)(path + 1);      /* the host moved */
			return 1;
		}
	}
	return 0;
}

int
mac_lookup(const struct mac_table *t, const uint8_t *mac)
{
	if (mac[0] & 1)
		return -1;
	for (unsigned int i = mac_slot(mac), n = 0; n < MAC_TABLE; i = (i + 1) & (MAC_TABLE - 1), n++) {
		if (t->e[i].path == 0)
			return -1;
		if (memcmp(t->e[i].mac, mac, 6) == 0)
			return t->e[i].path - 1;
	}
	return -1;
}
