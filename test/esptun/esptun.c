/* SPDX-License-Identifier: BSD-3-Clause
 * weir-esptun: a user-space IPsec ESP tunnel (RFC 4303, tunnel mode, IPv4)
 * for the testbed, whose kernel has no ESP transform. One TUN device; each
 * IP packet read from it is carried to the peer as ESP with real crypto:
 * AES-128-CBC (random IV per packet) and HMAC-SHA-256-128 over the whole
 * ESP packet (SPI, sequence, IV, ciphertext). What arrives is checked (ICV
 * first, then the anti-replay window) and only then decrypted and written
 * to the TUN. A single bit changed on the way makes it fail the ICV,
 * counted: so a transfer that completes with auth_fail == 0 crossed
 * everything in between untouched.
 *
 * --drop-every N consumes a sequence number without sending every Nth
 * packet: an exactly known loss upstream of whatever sees the SA next.
 * Counters go to --stats FILE (JSON) every second and at exit (SIGTERM).
 * No busy loop: it sleeps in poll().
 *
 * Usage: weir-esptun --tun NAME --local A --remote B --spi-out X --spi-in Y
 *          --key HEX64 [--drop-every N] [--stats FILE]
 *   HEX64: 16 bytes AES key then 16 bytes HMAC key (both ends use the same).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#define IV_LEN 16
#define ICV_LEN 16
#define BLK 16
#define BUF 2048
#define REPLAY_WIN 64

static volatile sig_atomic_t stop;

struct counters {
	uint64_t tx, tx_bytes, dropped, rx_ok, auth_fail, replay, bad, foreign, tun_err, send_err;
};

struct tunnel {
	int tun, raw;
	struct in_addr local, remote;
	uint32_t spi_out, spi_in;
	uint8_t kenc[16], kauth[16];
	uint32_t seq_out;
	uint32_t top_in;
	uint64_t win_in;
	unsigned long drop_every;
	const char *stats;
	EVP_CIPHER_CTX *enc, *dec;
	struct counters c;
};

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int
hexkey(const char *s, uint8_t *out, size_t n)
{
	if (strlen(s) != 2 * n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned int v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	return 0;
}

static int
tun_open(const char *name)
{
	struct ifreq ifr;
	int fd = open("/dev/net/tun", O_RDWR);

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void
icv(const struct tunnel *t, const uint8_t *p, size_t n, uint8_t *out)
{
	uint8_t md[32];
	unsigned int mdlen = sizeof(md);

	HMAC(EVP_sha256(), t->kauth, sizeof(t->kauth), p, n, md, &mdlen);
	memcpy(out, md, ICV_LEN);
}

static void
write_stats(const struct tunnel *t)
{
	char tmp[4096];
	FILE *f;

	if (t->stats == NULL)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", t->stats);
	f = fopen(tmp, "w");
	if (f == NULL)
		return;
	fprintf(f, "{\"spi_out\": %u, \"spi_in\": %u, \"tx\": %lu, \"tx_bytes\": %lu, \"dropped\": %lu, "
		"\"rx_ok\": %lu, \"auth_fail\": %lu, \"replay\": %lu, \"bad\": %lu, \"foreign\": %lu, "
		"\"tun_err\": %lu, \"send_err\": %lu, \"seq_out\": %u}\n", t->spi_out, t->spi_in,
		t->c.tx, t->c.tx_bytes, t->c.dropped, t->c.rx_ok, t->c.auth_fail, t->c.replay, t->c.bad,
		t->c.foreign, t->c.tun_err, t->c.send_err, t->seq_out);
	fclose(f);
	rename(tmp, t->stats);
}

/* An inner packet from the TUN: pad, encrypt, authenticate, send. */
static void
encap(struct tunnel *t, const uint8_t *in, size_t n)
{
	uint8_t pkt[BUF + 128], plain[BUF + BLK];
	size_t padded = (n + 2 + BLK - 1) / BLK * BLK, pad = padded - n - 2;
	int outl = 0;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr = t->remote };
	uint32_t v;

	memcpy(plain, in, n);
	for (size_t i = 0; i < pad; i++)
		plain[n + i] = (uint8_t)(i + 1);        /* RFC 4303's default padding */
	plain[n + pad] = (uint8_t)pad;
	plain[n + pad + 1] = 4;                         /* next header: IPv4 */
	t->seq_out++;
	v = htonl(t->spi_out);
	memcpy(pkt, &v, 4);
	v = htonl(t->seq_out);
	memcpy(pkt + 4, &v, 4);
	RAND_bytes(pkt + 8, IV_LEN);
	EVP_EncryptInit_ex(t->enc, NULL, NULL, NULL, pkt + 8);
	EVP_EncryptUpdate(t->enc, pkt + 8 + IV_LEN, &outl, plain, (int)padded);
	icv(t, pkt, 8 + IV_LEN + padded, pkt + 8 + IV_LEN + padded);
	if (t->drop_every && t->seq_out % t->drop_every == 0) {
		t->c.dropped++;
		return;
	}
	if (sendto(t->raw, pkt, 8 + IV_LEN + padded + ICV_LEN, 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
		t->c.send_err++;
		return;
	}
	t->c.tx++;
	t->c.tx_bytes += 20 + 8 + IV_LEN + padded + ICV_LEN;
}

/* An IPv4 packet from the raw socket (header included). */
static void
decap(struct tunnel *t, const uint8_t *ip, size_t n)
{
	uint8_t plain[BUF + BLK], want[ICV_LEN];
	size_t ihl, len;
	const uint8_t *esp;
	uint32_t spi, seq, behind;
	int outl = 0;

	if (n < 20 || (ip[0] >> 4) != 4 || (ihl = (size_t)(ip[0] & 15) * 4) < 20 || ihl > n) {
		t->c.bad++;
		return;
	}
	if (memcmp(ip + 12, &t->remote, 4) != 0) {
		t->c.foreign++;
		return;
	}
	esp = ip + ihl;
	len = n - ihl;
	if (len < 8 + IV_LEN + BLK + ICV_LEN || (len - 8 - IV_LEN - ICV_LEN) % BLK != 0) {
		t->c.bad++;
		return;
	}
	memcpy(&spi, esp, 4);
	memcpy(&seq, esp + 4, 4);
	spi = ntohl(spi);
	seq = ntohl(seq);
	if (spi != t->spi_in) {
		t->c.foreign++;
		return;
	}
	icv(t, esp, len - ICV_LEN, want);
	if (CRYPTO_memcmp(want, esp + len - ICV_LEN, ICV_LEN) != 0) {
		t->c.auth_fail++;
		return;
	}
	/* Anti-replay (RFC 4303 3.4.3), after the ICV as the RFC says. */
	behind = t->top_in - seq;
	if (seq == 0 || (seq <= t->top_in && (behind >= REPLAY_WIN || (t->win_in >> behind) & 1))) {
		t->c.replay++;
		return;
	}
	if (seq > t->top_in) {
		uint32_t d = seq - t->top_in;

		t->win_in = d >= 64 ? 1 : t->win_in << d | 1;
		t->top_in = seq;
	} else {
		t->win_in |= 1ull << behind;
	}
	EVP_DecryptInit_ex(t->dec, NULL, NULL, NULL, esp + 8);
	EVP_DecryptUpdate(t->dec, plain, &outl, esp + 8 + IV_LEN, (int)(len - 8 - IV_LEN - ICV_LEN));
	if (outl < 2 || plain[outl - 1] != 4 || (size_t)plain[outl - 2] + 2 > (size_t)outl) {
		t->c.bad++;
		return;
	}
	if (write(t->tun, plain, (size_t)outl - 2 - plain[outl - 2]) < 0) {
		t->c.tun_err++;
		return;
	}
	t->c.rx_ok++;
}

int
main(int argc, char **argv)
{
	struct tunnel t = { .tun = -1, .raw = -1 };
	const char *tun = NULL, *key = NULL;
	uint8_t buf[BUF + 128];
	struct timespec last = { 0 };

	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];

		if (strcmp(k, "--tun") == 0)
			tun = v;
		else if (strcmp(k, "--local") == 0 && inet_pton(AF_INET, v, &t.local) == 1)
			;
		else if (strcmp(k, "--remote") == 0 && inet_pton(AF_INET, v, &t.remote) == 1)
			;
		else if (strcmp(k, "--spi-out") == 0)
			t.spi_out = (uint32_t)strtoul(v, NULL, 0);
		else if (strcmp(k, "--spi-in") == 0)
			t.spi_in = (uint32_t)strtoul(v, NULL, 0);
		else if (strcmp(k, "--key") == 0)
			key = v;
		else if (strcmp(k, "--drop-every") == 0)
			t.drop_every = strtoul(v, NULL, 0);
		else if (strcmp(k, "--stats") == 0)
			t.stats = v;
		else {
			fprintf(stderr, "weir-esptun: bad option %s %s\n", k, v);
			return 2;
		}
	}
	if (tun == NULL || key == NULL || t.spi_out == 0 || t.spi_in == 0 || t.remote.s_addr == 0) {
		fprintf(stderr, "usage: weir-esptun --tun NAME --local A --remote B --spi-out X "
			"--spi-in Y --key HEX64 [--drop-every N] [--stats FILE]\n");
		return 2;
	}
	uint8_t k[32];
	if (hexkey(key, k, sizeof(k)) != 0) {
		fprintf(stderr, "weir-esptun: --key takes 64 hex digits\n");
		return 2;
	}
	memcpy(t.kenc, k, 16);
	memcpy(t.kauth, k + 16, 16);
	t.enc = EVP_CIPHER_CTX_new();
	t.dec = EVP_CIPHER_CTX_new();
	EVP_EncryptInit_ex(t.enc, EVP_aes_128_cbc(), NULL, t.kenc, NULL);
	EVP_DecryptInit_ex(t.dec, EVP_aes_128_cbc(), NULL, t.kenc, NULL);
	EVP_CIPHER_CTX_set_padding(t.enc, 0);
	EVP_CIPHER_CTX_set_padding(t.dec, 0);
	t.tun = tun_open(tun);
	t.raw = socket(AF_INET, SOCK_RAW, IPPROTO_ESP);
	if (t.tun < 0 || t.raw < 0) {
		fprintf(stderr, "weir-esptun: %s: %s\n", t.tun < 0 ? "tun" : "raw socket", strerror(errno));
		return 1;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	printf("READY\n");
	fflush(stdout);
	while (!stop) {
		struct pollfd pf[2] = { { .fd = t.tun, .events = POLLIN }, { .fd = t.raw, .events = POLLIN } };
		struct timespec now;
		ssize_t n;

		if (poll(pf, 2, 500) < 0 && errno != EINTR)
			break;
		if (pf[0].revents & POLLIN) {
			n = read(t.tun, buf, BUF);
			if (n > 0)
				encap(&t, buf, (size_t)n);
		}
		if (pf[1].revents & POLLIN) {
			n = recv(t.raw, buf, sizeof(buf), 0);
			if (n > 0)
				decap(&t, buf, (size_t)n);
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec != last.tv_sec) {
			write_stats(&t);
			last = now;
		}
	}
	write_stats(&t);
	EVP_CIPHER_CTX_free(t.enc);
	EVP_CIPHER_CTX_free(t.dec);
	return 0;
}
