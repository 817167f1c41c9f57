// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdps/common.h"
#include "rdps/ipconfig.h"

static int parse_uint(const char *tok, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (!isdigit((unsigned char)tok[0]))
		return -EINVAL;
	errno = 0;
	v = strtoul(tok, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int rdps_ipconfig_parse(const char *name, const char *text,
			struct rdps_ipconfig *cfg, char *err, size_t errlen)
{
	struct rdps_endpoint *eps = NULL;
	uint32_t nsrv = 0, nmach = 0;
	const char *line = text;
	unsigned lineno = 0;
	int ret = 0;

	memset(cfg, 0, sizeof(*cfg));
	if (err && errlen)
		err[0] = '\0';
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[1024], *tok[4], *save = NULL, *p;
		unsigned long port = RDPS_DEFAULT_BASE_PORT, count = 1;
		int ntok = 0;

		lineno++;
		if (len >= sizeof(buf)) {
			snprintf(err, errlen, "%s:%u: line too long", name, lineno);
			ret = -EINVAL;
			goto err_free;
		}
		memcpy(buf, line, len);
		buf[len] = '\0';
		line = nl ? nl + 1 : NULL;
		if ((p = strchr(buf, '#')))
			*p = '\0';
		for (p = strtok_r(buf, " \t\r", &save); p;
		     p = strtok_r(NULL, " \t\r", &save)) {
			if (ntok == 3) {
				snprintf(err, errlen,
					 "%s:%u: expected 'IP [base_port [num_servers]]', found more than 3 fields",
					 name, lineno);
				ret = -EINVAL;
				goto err_free;
			}
			tok[ntok++] = p;
		}
		if (!ntok)
			continue;
		if (strlen(tok[0]) >= RDPS_HOST_MAX) {
			snprintf(err, errlen, "%s:%u: host name too long", name, lineno);
			ret = -EINVAL;
			goto err_free;
		}
		if (ntok > 1 && parse_uint(tok[1], 65535, &port)) {
			snprintf(err, errlen, "%s:%u: bad base_port '%s' (want 1..65535)",
				 name, lineno, tok[1]);
			ret = -EINVAL;
			goto err_free;
		}
		if (ntok > 2 && (parse_uint(tok[2], RDPS_MAX_SERVERS, &count) ||
				 count == 0)) {
			snprintf(err, errlen, "%s:%u: bad num_servers '%s' (want 1..%d)",
				 name, lineno, tok[2], RDPS_MAX_SERVERS);
			ret = -EINVAL;
			goto err_free;
		}
		if (port == 0 || port + count - 1 > 65535) {
			snprintf(err, errlen, "%s:%u: ports %lu..%lu out of range",
				 name, lineno, port, port + count - 1);
			ret = -EINVAL;
			goto err_free;
		}
		if (nsrv + count > RDPS_MAX_SERVERS) {
			snprintf(err, errlen, "%s:%u: more than %d servers in all",
				 name, lineno, RDPS_MAX_SERVERS);
			ret = -EINVAL;
			goto err_free;
		}
		struct rdps_endpoint *n = realloc(eps, (nsrv + count) * sizeof(*eps));
		if (!n) {
			ret = -ENOMEM;
			goto err_free;
		}
		eps = n;
		for (unsigned long j = 0; j < count; j++) {
			struct rdps_endpoint *ep = &eps[nsrv++];

			memset(ep, 0, sizeof(*ep));
			strcpy(ep->host, tok[0]);
			ep->port = (uint16_t)(port + j);
			ep->machine = nmach;
			ep->local_index = (uint32_t)j;
		}
		nmach++;
	}
	if (!nsrv) {
		snprintf(err, errlen, "%s: no server listed", name);
		ret = -ENOENT;
		goto err_free;
	}
	cfg->num_machines = nmach;
	cfg->num_servers = nsrv;
	cfg->servers = eps;
	return 0;

err_free:
	free(eps);
	return ret;
}

int rdps_ipconfig_load(const char *path, struct rdps_ipconfig *cfg, char *err,
		       size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *text = NULL;
	size_t cap = 0, len = 0, n;
	int ret;

	memset(cfg, 0, sizeof(*cfg));
	if (!f) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	do {
		if (rdps_reserve((void **)&text, &cap, len + 4097)) {
			ret = -ENOMEM;
			goto err_close;
		}
		n = fread(text + len, 1, cap - len - 1, f);
		len += n;
	} while (n > 0 && len < (1u << 24));
	if (ferror(f)) {
		ret = -EIO;
		snprintf(err, errlen, "%s: read error", path);
		goto err_close;
	}
	text[len] = '\0';
	if (strlen(text) != len) {
		ret = -EINVAL;
		snprintf(err, errlen, "%s: contains a NUL byte", path);
		goto err_close;
	}
	ret = rdps_ipconfig_parse(path, text, cfg, err, errlen);
err_close:
	free(text);
	fclose(f);
	return ret;
}

void rdps_ipconfig_free(struct rdps_ipconfig *cfg)
{
	if (!cfg)
		return;
	free(cfg->servers);
	cfg->servers = NULL;
	cfg->num_servers = cfg->num_machines = 0;
}
