/* SPDX-License-Identifier: MIT */
/*
 * Shared-secret authentication. Every connection to a server that has a
 * secret runs a challenge-response before anything else: the client's
 * hello carries a nonce, the server answers with its own, the client proves
 * it knows the secret with an HMAC-SHA256 over both nonces and its hello,
 * and the server's welcome carries the server's proof. Only then does the
 * server look at the hello or send a table range or rkey.
 */
#ifndef RDPS_AUTH_H
#define RDPS_AUTH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RDPS_SECRET_MAX 256
#define RDPS_NONCE_LEN 32
#define RDPS_MAC_LEN 32
#define RDPS_SECRET_MIN_RECOMMENDED 16

struct rdps_secret {
	uint8_t key[RDPS_SECRET_MAX];
	size_t len; /* 0: no secret */
};

/*
 * Loads the job's secret: from path if given (the file's bytes, one trailing
 * newline removed), else from the environment variable RDPS_SECRET, else
 * none (len 0). Returns 0, or -errno with a reason naming the file.
 */
int rdps_secret_load(const char *path, struct rdps_secret *s, char *err, size_t errlen);

/* Fills buf with n random bytes (getrandom). 0 or -errno. */
int rdps_random_bytes(void *buf, size_t n);

/* HMAC-SHA256(key, label || a || b || c) into mac. */
void rdps_auth_mac(const struct rdps_secret *s, const char *label, const void *a, size_t alen,
		   const void *b, size_t blen, const void *c, size_t clen,
		   uint8_t mac[RDPS_MAC_LEN]);

/* Constant-time comparison of two MACs: 1 if equal. */
int rdps_auth_equal(const uint8_t a[RDPS_MAC_LEN], const uint8_t b[RDPS_MAC_LEN]);

#ifdef __cplusplus
}
#endif
#endif /* RDPS_AUTH_H */
