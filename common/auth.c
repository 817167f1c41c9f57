// SPDX-License-Identifier: MIT
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "rdps/auth.h"

int rdps_secret_load(const char *path, struct rdps_secret *s, char *err, size_t errlen)
{
	const char *env;
	FILE *f;
	size_t n;

	memset(s, 0, sizeof(*s));
	if (!path) {
		env = getenv("RDPS_SECRET");
		if (!env || !*env)
			return 0;
		n = strlen(env);
		if (n > RDPS_SECRET_MAX) {
			snprintf(err, errlen, "RDPS_SECRET is longer than %d bytes", RDPS_SECRET_MAX);
			return -EINVAL;
		}
		memcpy(s->key, env, n);
		s->len = n;
		return 0;
	}
	f = fopen(path, "rb");
	if (!f) {
		int ret = -errno;

		snprintf(err, errlen, "secret file %s: %s", path, strerror(errno));
		return ret;
	}
	n = fread(s->key, 1, sizeof(s->key), f);
	if (fgetc(f) != EOF) {
		fclose(f);
		snprintf(err, errlen, "secret file %s is longer than %d bytes", path, RDPS_SECRET_MAX);
		return -EINVAL;
	}
	fclose(f);
	if (n && s->key[n - 1] == '\n')
		n--;
	if (!n) {
		snprintf(err, errlen, "secret file %s is empty", path);
		return -EINVAL;
	}
	s->len = n;
	return 0;
}

int rdps_random_bytes(void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = getrandom(p, n, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

void rdps_auth_mac(const struct rdps_secret *s, const char *label, const void *a, size_t alen,
		   const void *b, size_t blen, const void *c, size_t clen,
		   uint8_t mac[RDPS_MAC_LEN])
{
	uint8_t buf[512];
	size_t n = 0, l = strlen(label);
	unsigned int mlen = RDPS_MAC_LEN;

	/* Inputs are small fixed-size fields: one buffer, one HMAC. */
	if (l + alen + blen + clen > sizeof(buf))
		abort();
	memcpy(buf + n, label, l);
	n += l;
	/* Fields may be absent (NULL, 0): memcpy from NULL is undefined even
	 * for 0 bytes (UBSan stopped every ofi server's first binding). */
	if (alen)
		memcpy(buf + n, a, alen);
	n += alen;
	if (blen)
		memcpy(buf + n, b, blen);
	n += blen;
	if (clen)
		memcpy(buf + n, c, clen);
	n += clen;
	HMAC(EVP_sha256(), s->key, (int)s->len, buf, n, mac, &mlen);
}

int rdps_auth_equal(const uint8_t a[RDPS_MAC_LEN], const uint8_t b[RDPS_MAC_LEN])
{
	return CRYPTO_memcmp(a, b, RDPS_MAC_LEN) == 0;
}
