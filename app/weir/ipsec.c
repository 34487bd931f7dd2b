/* SPDX-License-Identifier: BSD-3-Clause
 * weir: the IPsec SAs of every worker's flow table, with their sequence
 * figures (lib/flow/sa_seq.h), grouped by tunnel.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "flow.h"
#include "ipsec.h"
#include "worker_view.h"

static void
addr_text(const struct weir_flow_key *k, const uint8_t *a, char *buf, size_t len)
{
	inet_ntop(k->family == 4 ? AF_INET : AF_INET6, a, buf, (socklen_t)len);
}

/* An SA's end as text: its address, and for ESP in UDP its port
 * ("192.0.2.1:4500", "[2001:db8::1]:4500"). */
static void
end_text(const struct weir_flow_key *k, const char *addr, uint16_t port, char *buf, size_t len)
{
	if (!(k->vlan & WEIR_FK_NATT))
		snprintf(buf, len, "%s", addr);
	else if (k->family == 6)
		snprintf(buf, len, "[%s]:%u", addr, port);
	else
		snprintf(buf, len, "%s:%u", addr, port);
}

static const char *
sa_proto(const struct weir_flow_key *k)
{
	if (k->vlan & WEIR_FK_NATT)
		return "esp-udp";
	return k->proto == IPPROTO_AH ? "ah" : "esp";
}

/* Lost over what the sender sent (what arrived plus what did not). */
static double
loss_ratio(uint64_t pkts, uint64_t lost)
{
	return pkts + lost ? (double)lost / (double)(pkts + lost) : 0.0;
}

static void
add_int(json_t *o, const char *key, uint64_t v)
{
	json_t *old = json_object_get(o, key);

	json_object_set_new(o, key, json_integer((json_int_t)(json_integer_value(old) + (json_int_t)v)));
}

json_t *
weir_ipsec_json(const struct weir_app *app)
{
	json_t *sas = json_object(), *tunnels = json_object();
	uint64_t active = 0, listed = 0, seen = 0;

	/* The walk reads every flow slot: skip it while no worker has seen an
	 * IPsec packet (every stats snapshot builds this). */
	for (unsigned int i = 0; i < app->n_workers; i++) {
		struct weir_worker_counters wc;

		weir_worker_port_counters(app->workers[i], &wc);
		seen += wc.port[WEIR_PORT_LAN].ipsec + wc.port[WEIR_PORT_WAN].ipsec;
	}
	for (unsigned int i = 0; seen != 0 && i < app->n_workers; i++) {
		const struct weir_flow_table *t = app->flows[i];
		const uint32_t cap = weir_flow_table_capacity(t);
		struct weir_flow_key k;
		struct weir_flow f;
		struct weir_sa_seq s;

		for (uint32_t slot = weir_flow_read_next(t, 0, &f, &k); slot < cap;
		     slot = weir_flow_read_next(t, slot + 1, &f, &k)) {
			char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN], name[160], tname[160];
			char s_end[INET6_ADDRSTRLEN + 8], d_end[INET6_ADDRSTRLEN + 8], vtag[16] = "";
			const int dir = (f.flags & WEIR_FF_SEEN_IN) ? WEIR_DIR_IN : WEIR_DIR_OUT;
			const unsigned int vlan = k.vlan & WEIR_FK_VLAN_ID;
			const bool natt = (k.vlan & WEIR_FK_NATT) != 0;
			const int c = memcmp(k.addr_lo, k.addr_hi, 16);
			const bool lo_first = c < 0 || (c == 0 && k.natt_sport <= k.natt_dport);
			json_t *sj, *tj;

			if (!(k.vlan & WEIR_FK_SA))
				continue;
			active++;
			if (listed == WEIR_IPSEC_LIST_MAX ||
			    weir_worker_sa_view(app->workers[i], slot, &f, &s) != 0)
				continue;
			listed++;
			addr_text(&k, k.addr_lo, src, sizeof(src));
			addr_text(&k, k.addr_hi, dst, sizeof(dst));
			/* An SA is what its key holds (lib/flow/flow.h): the ends (with
			 * the UDP ports of ESP in UDP), the SPI and the VLAN; its
			 * name holds all of them, so no two SAs share one. */
			end_text(&k, src, k.natt_sport, s_end, sizeof(s_end));
			end_text(&k, dst, k.natt_dport, d_end, sizeof(d_end));
			if (vlan != 0)
				snprintf(vtag, sizeof(vtag), " vlan %u", vlan);
			snprintf(name, sizeof(name), "%s>%s 0x%08" PRIx32 "%s", s_end, d_end,
				 weir_flow_key_spi(&k), vtag);
			sj = json_pack(
				"{s:s, s:s, s:I, s:s, s:s, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
				"s:I, s:I, s:I, s:f}",
				"src", src, "dst", dst, "spi", (json_int_t)weir_flow_key_spi(&k),
				"proto", sa_proto(&k), "dir", dir == WEIR_DIR_OUT ? "outbound" : "inbound",
				"worker", (int)i, "vlan", (int)vlan,
				"pkts", (json_int_t)s.pkts, "bytes", (json_int_t)f.bytes[dir],
				"gaps", (json_int_t)s.gaps, "late", (json_int_t)s.late,
				"lost", (json_int_t)weir_sa_seq_lost(&s), "dup", (json_int_t)s.dup,
				"old", (json_int_t)s.old, "resync", (json_int_t)s.resync,
				"zero", (json_int_t)s.zero, "top", (json_int_t)s.top,
				"loss", loss_ratio(s.pkts, weir_sa_seq_lost(&s)));
			if (natt) {
				json_object_set_new(sj, "sport", json_integer(k.natt_sport));
				json_object_set_new(sj, "dport", json_integer(k.natt_dport));
			}
			json_object_set_new(sas, name, sj);
			/* The tunnel: both directions' SAs between the two ends
			 * (addresses, and ports for ESP in UDP: one NAT-T
			 * association) on one VLAN. */
			snprintf(tname, sizeof(tname), "%s<>%s%s", lo_first ? s_end : d_end,
				 lo_first ? d_end : s_end, vtag);
			tj = json_object_get(tunnels, tname);
			if (tj == NULL) {
				tj = json_pack("{s:s, s:s, s:i}", "a", lo_first ? src : dst,
					       "b", lo_first ? dst : src, "vlan", (int)vlan);
				if (natt) {
					json_object_set_new(tj, "a_port", json_integer(
						lo_first ? k.natt_sport : k.natt_dport));
					json_object_set_new(tj, "b_port", json_integer(
						lo_first ? k.natt_dport : k.natt_sport));
				}
				json_object_set_new(tunnels, tname, tj);
			}
			add_int(tj, "sas", 1);
			add_int(tj, "pkts", s.pkts);
			add_int(tj, "gaps", s.gaps);
			add_int(tj, "late", s.late);
			add_int(tj, "lost", weir_sa_seq_lost(&s));
			add_int(tj, "resync", s.resync);
		}
	}
	/* A tunnel's health: the share of its SAs' packets lost before weir. */
	{
		const char *key;
		json_t *tj;

		json_object_foreach(tunnels, key, tj)
			json_object_set_new(tj, "loss", json_real(loss_ratio(
				(uint64_t)json_integer_value(json_object_get(tj, "pkts")),
				(uint64_t)json_integer_value(json_object_get(tj, "lost")))));
	}
	return json_pack("{s:I, s:I, s:o, s:o}", "sas_active", (json_int_t)active,
			 "sas_listed", (json_int_t)listed, "sa", sas, "tunnels", tunnels);
}
