/* SPDX-License-Identifier: BSD-3-Clause
 * parse_pcap FILE.pcap: run the real parser over every frame of a pcap and
 * print the counts in the shape test/pcap/gen_malformed.py writes, so a test
 * can compare what the generator meant with what the parser finds without
 * starting weir. Frames are classified as the worker does
 * (lib/worker/worker.c classify_unmanaged): malformed first, then fragment, then
 * non-IP (anything else not manageable), else managed.
 */
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>

#include "parse.h"

int
main(int argc, char **argv)
{
	char errbuf[PCAP_ERRBUF_SIZE];
	unsigned long total = 0, fragments = 0, non_ip = 0, l2_control = 0, managed = 0, ipsec = 0;
	unsigned long by[WEIR_MAL__COUNT] = { 0 };
	struct pcap_pkthdr *h;
	const u_char *data;
	pcap_t *pc;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE.pcap\n", argv[0]);
		return 2;
	}
	pc = pcap_open_offline(argv[1], errbuf);
	if (pc == NULL) {
		fprintf(stderr, "%s: %s\n", argv[1], errbuf);
		return 1;
	}
	if (pcap_datalink(pc) != DLT_EN10MB) {
		fprintf(stderr, "%s: not an Ethernet capture\n", argv[1]);
		return 1;
	}
	while ((rc = pcap_next_ex(pc, &h, &data)) == 1) {
		struct weir_pkt p;

		/* The parser sees what a port would deliver: the captured bytes. */
		weir_parse(data, h->caplen, &p);
		total++;
		if (p.malformed != WEIR_MAL_NONE)
			by[p.malformed]++;
		else if (p.flags & WEIR_PF_FRAGMENT)
			fragments++;
		else if (p.flags & WEIR_PF_L2_CONTROL)
			l2_control++;
		else if (!weir_pkt_manageable(&p))
			non_ip++;
		else {
			managed++;
			ipsec += p.ipsec != WEIR_IPSEC_NONE;
		}
	}
	if (rc != PCAP_ERROR_BREAK) {
		fprintf(stderr, "%s: %s\n", argv[1], pcap_geterr(pc));
		return 1;
	}
	pcap_close(pc);

	printf("{\"total\": %lu, \"malformed\": {", total);
	for (unsigned int r = 1; r < WEIR_MAL__COUNT; r++)
		printf("%s\"%s\": %lu", r > 1 ? ", " : "", weir_malformed_name(r), by[r]);
	printf("}, \"fragments\": %lu, \"non_ip\": %lu, \"l2_control\": %lu, \"managed\": %lu, "
	       "\"ipsec\": %lu}\n", fragments, non_ip, l2_control, managed, ipsec);
	return 0;
}
