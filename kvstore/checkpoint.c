// SPDX-License-Identifier: MIT
/* Checkpoints of a server's shards: atomic directories of checksummed
 * blobs, restored newest-valid-first. See checkpoint.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "rdps/common.h"
#include "rdps/partition.h"
#include "rdps/server.h"

/* Format 1 throughout; the "job" object and "time_unix_ms" were added
 * later (readers of older manifests go without them). */
#define CKPT_FORMAT_VERSION 1
#define CKPT_BUFFER (2u << 20) /* bytes of each of a streaming writer's 4 buffers */

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* {"num_clients": N, "pushed_rows": [N counts]}, or NULL for no memory. */
static json_t *job_json(const struct rdps_ckpt_job *job)
{
	json_t *o = json_object(), *a = json_array();
	uint32_t n = job ? job->num_clients : 0;

	if (!o || !a)
		goto err;
	for (uint32_t i = 0; i < n; i++)
		if (json_array_append_new(a, json_integer((json_int_t)job->pushed_rows[i])))
			goto err;
	if (json_object_set_new(o, "num_clients", json_integer(n)) ||
	    json_object_set_new(o, "pushed_rows", a))
		goto err_o;
	return o;
err:
	json_decref(a);
err_o:
	json_decref(o);
	return NULL;
}

/* Reads the "job" object of manifest m (file f, for reasons): 0, or
 * -EBADMSG if it is there but malformed. */
static int job_parse(const json_t *m, const char *f, struct rdps_ckpt_info *info, char *why,
		     size_t whylen)
{
	const json_t *o = json_object_get(m, "job"), *a = json_object_get(o, "pushed_rows"),
		     *nj = json_object_get(o, "num_clients");
	json_int_t n = json_integer_value(nj);

	info->job_known = false;
	info->job.num_clients = 0;
	info->job.pushed_rows = NULL;
	if (!o)
		return 0;
	if (!json_is_integer(nj) || n < 0 || n > RDPS_MAX_CLIENTS || !json_is_array(a) ||
	    json_array_size(a) != (size_t)n) {
		snprintf(why, whylen, "%s: field job: malformed push counts", f);
		return -EBADMSG;
	}
	info->job.pushed_rows = calloc(n ? (size_t)n : 1, sizeof(uint64_t));
	if (!info->job.pushed_rows)
		return -ENOMEM;
	for (size_t i = 0; i < (size_t)n; i++) {
		const json_t *v = json_array_get(a, i);

		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			snprintf(why, whylen, "%s: field job.pushed_rows[%zu]: not a count", f, i);
			free(info->job.pushed_rows);
			info->job.pushed_rows = NULL;
			return -EBADMSG;
		}
		info->job.pushed_rows[i] = (uint64_t)json_integer_value(v);
	}
	info->job.num_clients = (uint32_t)n;
	info->job_known = true;
	return 0;
}

static int fsync_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		ret = -errno;
	close(fd);
	return ret;
}

static int mkdir_p(const char *path)
{
	char tmp[4096];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

static int rm_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char f[4096];

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
		unlink(f);
	}
	closedir(d);
	return rmdir(path) ? -errno : 0;
}

/* Sequence numbers of the complete checkpoints under base, newest first. */
static int list_ckpts(const char *base, uint64_t **seqs, size_t *n)
{
	DIR *d = opendir(base);
	struct dirent *e;
	size_t cap = 0;

	*seqs = NULL;
	*n = 0;
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		char *end;
		unsigned long long v;

		if (strncmp(e->d_name, "ckpt-", 5))
			continue;
		v = strtoull(e->d_name + 5, &end, 10);
		if (*end) /* ckpt-N.tmp-...: an interrupted write, never used */
			continue;
		if (*n == cap) {
			uint64_t *ns = realloc(*seqs, (cap ? cap * 2 : 8) * sizeof(uint64_t));

			if (!ns) {
				closedir(d);
				return -ENOMEM;
			}
			*seqs = ns;
			cap = cap ? cap * 2 : 8;
		}
		(*seqs)[(*n)++] = v;
	}
	closedir(d);
	for (size_t i = 1; i < *n; i++) /* few entries: insertion sort, descending */
		for (size_t j = i; j > 0 && (*seqs)[j] > (*seqs)[j - 1]; j--) {
			uint64_t t = (*seqs)[j];

			(*seqs)[j] = (*seqs)[j - 1];
			(*seqs)[j - 1] = t;
		}
	return 0;
}

int rdps_ckpt_remove_stale(const char *dir, uint32_t server_id, char *err, size_t errlen)
{
	char base[4096], path[4400];
	struct dirent *e;
	int removed = 0;
	DIR *d;

	snprintf(base, sizeof(base), "%s/server-%u", dir, server_id);
	d = opendir(base);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		unsigned long long seq;
		long pid;
		int used = 0;

		/* ckpt-SEQ.tmp-PID: a checkpoint being written by process PID */
		if (sscanf(e->d_name, "ckpt-%llu.tmp-%ld%n", &seq, &pid, &used) != 2 ||
		    e->d_name[used] || pid <= 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", base, e->d_name);
		if (pid != (long)getpid() && (kill((pid_t)pid, 0) == 0 || errno != ESRCH)) {
			rdps_warn("server %u: %s is being written by process %ld, which still runs "
				  "(two servers with one checkpoint directory?); left as it is",
				  server_id, path, pid);
			continue;
		}
		if (rm_dir(path)) {
			snprintf(err, errlen, "cannot remove %s, left by a checkpoint that did not "
				 "finish: %s", path, strerror(errno));
			closedir(d);
			return -errno;
		}
		rdps_info("server %u: removed %s, left by a checkpoint of process %ld that did not "
			  "finish (the process is gone)", server_id, path, pid);
		removed++;
	}
	closedir(d);
	return removed;
}

uint64_t rdps_ckpt_last_seq(const char *dir, uint32_t server_id)
{
	char base[4096];
	uint64_t *seqs, last = 0;
	size_t n;

	snprintf(base, sizeof(base), "%s/server-%u", dir, server_id);
	if (!list_ckpts(base, &seqs, &n) && n)
		last = seqs[0];
	free(seqs);
	return last;
}

static int write_manifest(const char *path, json_t *m)
{
	char *text = json_dumps(m, JSON_INDENT(2) | JSON_SORT_KEYS);
	size_t len = text ? strlen(text) : 0;
	int fd, ret = 0;

	if (!text)
		return -ENOMEM;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		free(text);
		return -errno;
	}
	if (write(fd, text, len) != (ssize_t)len || fsync(fd))
		ret = errno ? -errno : -EIO;
	close(fd);
	free(text);
	return ret;
}

/*
 * One table's rows and optimizer state, streamed: stripe by stripe from the
 * shard (under its lock, while pushes go on) straight into the buffers of
 * two blob writers, which io_uring writes while the next stripes are copied.
 * Memory: the writers' buffers, whatever the shard's size (a whole-shard
 * copy needed as much memory again as the rows).
 */
static int ckpt_stream_table(const struct rdps_shard *sh, const struct rdps_shard_info *info,
			     const char *dir, uint64_t *rx, uint64_t *sx, char *err,
			     size_t errlen)
{
	uint64_t rows = info->hi - info->lo, sf = rdps_shard_state_floats(sh);
	uint64_t spr = rows ? sf / rows : 0;
	struct rdps_blob_writer *rw = NULL, *sw = NULL;
	char rpath[4200], spath[4200];
	int ret;

	snprintf(rpath, sizeof(rpath), "%s/%s.rows", dir, info->name);
	snprintf(spath, sizeof(spath), "%s/%s.state", dir, info->name);
	ret = rdps_loader_writer_create(rpath, RDPS_BLOB_CKPT_ROWS, info->dim * 4, 0,
					RDPS_BLOB_NO_PART, CKPT_BUFFER, &rw);
	if (!ret)
		ret = rdps_loader_writer_create(spath, RDPS_BLOB_CKPT_STATE, 4, 0,
						RDPS_BLOB_NO_PART, CKPT_BUFFER, &sw);
	if (ret) {
		snprintf(err, errlen, "cannot create %s: %s", rw ? spath : rpath, strerror(-ret));
		goto out;
	}
	for (uint64_t at = 0; at < rows;) {
		void *rp, *sp = NULL;
		uint64_t k = rdps_loader_writer_space(rw, 1, &rp);

		if (k && spr) {
			uint64_t ks = rdps_loader_writer_space(sw, spr, &sp) / spr;

			k = k < ks ? k : ks;
		}
		if (!k) {
			ret = -EIO;
			break;
		}
		if (k > rows - at)
			k = rows - at;
		rdps_shard_export_range(sh, at, k, rp, sp);
		ret = rdps_loader_writer_advance(rw, k);
		if (!ret && spr)
			ret = rdps_loader_writer_advance(sw, k * spr);
		if (ret)
			break;
		at += k;
	}
	if (!ret)
		ret = rdps_loader_writer_commit(rw, rx);
	if (!ret)
		ret = rdps_loader_writer_commit(sw, sx);
	if (ret)
		snprintf(err, errlen, "writing %s and %s: %s", rpath, spath,
			 ret == -EIO ? "a write failed" : strerror(-ret));
out:
	rdps_loader_writer_destroy(rw);
	rdps_loader_writer_destroy(sw);
	return ret;
}

int rdps_ckpt_write(const char *dir, uint32_t server_id, struct rdps_shard **shards,
		    uint32_t n, const struct rdps_ckpt_job *job, uint64_t seq, uint64_t keep,
		    uint64_t *bytes, char *err, size_t errlen)
{
	char base[4096], tmp[4096], final[4096], path[4200];
	json_t *m = json_object(), *tables = json_array(), *jj = job_json(job);
	uint64_t now_ms;
	uint64_t *seqs = NULL, total = 0;
	size_t nseqs = 0;
	int ret;

	snprintf(base, sizeof(base), "%s/server-%u", dir, server_id);
	snprintf(tmp, sizeof(tmp), "%s/ckpt-%llu.tmp-%d", base, (unsigned long long)seq, (int)getpid());
	snprintf(final, sizeof(final), "%s/ckpt-%llu", base, (unsigned long long)seq);
	if (!m || !tables || !jj) {
		ret = -ENOMEM;
		goto out;
	}
	ret = mkdir_p(tmp);
	if (ret) {
		snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(-ret));
		goto out;
	}
	for (uint32_t t = 0; t < n; t++) {
		struct rdps_shard_info info;
		uint64_t rows, sf, rx = 0, sx = 0;

		rdps_shard_info(shards[t], &info);
		rows = info.hi - info.lo;
		sf = rdps_shard_state_floats(shards[t]);
		ret = ckpt_stream_table(shards[t], &info, tmp, &rx, &sx, err, errlen);
		if (ret)
			goto out_rm;
		total += rows * info.dim * 4 + sf * 4;
		{
			char rhex[20], shex[20];

			snprintf(rhex, sizeof(rhex), "%016llx", (unsigned long long)rx);
			snprintf(shex, sizeof(shex), "%016llx", (unsigned long long)sx);
			json_array_append_new(tables,
				json_pack("{s:s, s:i, s:i, s:I, s:I, s:I, s:s, s:I, s:s, s:s}",
					  "name", info.name, "table_id", (int)info.table_id,
					  "dim", (int)info.dim, "num_rows", (json_int_t)info.num_rows,
					  "lo", (json_int_t)info.lo, "hi", (json_int_t)info.hi,
					  "optimizer", rdps_optimizer_name(info.optimizer),
					  "state_floats", (json_int_t)sf, "rows_xxh3", rhex,
					  "state_xxh3", shex));
		}
	}
	json_object_set_new(m, "format_version", json_integer(CKPT_FORMAT_VERSION));
	json_object_set_new(m, "server_id", json_integer(server_id));
	json_object_set_new(m, "seq", json_integer((json_int_t)seq));
	now_ms = wall_ms();
	json_object_set_new(m, "time_unix", json_integer((json_int_t)(now_ms / 1000)));
	json_object_set_new(m, "time_unix_ms", json_integer((json_int_t)now_ms));
	json_object_set_new(m, "tables", tables);
	json_object_set_new(m, "job", jj);
	tables = jj = NULL;
	snprintf(path, sizeof(path), "%s/manifest.json", tmp);
	ret = write_manifest(path, m);
	if (!ret)
		ret = fsync_path(tmp);
	if (!ret && rename(tmp, final))
		ret = -errno;
	if (!ret)
		ret = fsync_path(base);
	if (ret) {
		if (!err[0])
			snprintf(err, errlen, "writing checkpoint %s: %s", final, strerror(-ret));
		goto out_rm;
	}
	/* Keep this one and a previous one: a crash while writing the next
	 * still leaves a complete one, and damage to this one a fallback. */
	if (!list_ckpts(base, &seqs, &nseqs))
		for (size_t i = 0; i < nseqs; i++) {
			if (seqs[i] == seq || seqs[i] == keep)
				continue;
			if (!keep && seqs[i] < seq) {
				keep = seqs[i]; /* newest first: the newest older one */
				continue;
			}
			snprintf(path, sizeof(path), "%s/ckpt-%llu", base, (unsigned long long)seqs[i]);
			rm_dir(path);
		}
	free(seqs);
	if (bytes)
		*bytes = total;
	goto out;
out_rm:
	rm_dir(tmp);
out:
	json_decref(jj);
	json_decref(tables);
	json_decref(m);
	return ret;
}

/* Loads and checks one checkpoint; imports only if every table is valid,
 * and then fills info (its push counts malloc'd). */
static int try_restore(const char *path, uint32_t server_id, struct rdps_shard **shards,
		       uint32_t n, struct rdps_ckpt_info *ci, char *why, size_t whylen)
{
	char f[4300];
	json_error_t je;
	json_t *m, *tables;
	struct rdps_blob *rows = calloc(n, sizeof(*rows)), *state = calloc(n, sizeof(*state));
	int ret = 0;

	snprintf(f, sizeof(f), "%s/manifest.json", path);
	m = json_load_file(f, 0, &je);
	if (!rows || !state) {
		ret = -ENOMEM;
		goto out;
	}
	if (!m) {
		snprintf(why, whylen, "%s: %s (line %d)", f, je.text, je.line);
		ret = -EBADMSG;
		goto out;
	}
	tables = json_object_get(m, "tables");
	if (json_integer_value(json_object_get(m, "format_version")) != CKPT_FORMAT_VERSION ||
	    json_integer_value(json_object_get(m, "server_id")) != server_id ||
	    !json_is_array(tables) || json_array_size(tables) != n) {
		snprintf(why, whylen, "%s: another format, server or table count", f);
		ret = -EBADMSG;
		goto out;
	}
	ret = job_parse(m, f, ci, why, whylen);
	if (ret)
		goto out;
	{
		json_int_t ms = json_integer_value(json_object_get(m, "time_unix_ms"));

		ci->time_unix_ms = ms > 0 ? (uint64_t)ms :
			(uint64_t)json_integer_value(json_object_get(m, "time_unix")) * 1000;
	}
	for (uint32_t t = 0; t < n && !ret; t++) {
		json_t *tj = json_array_get(tables, t);
		struct rdps_shard_info info;
		const char *name = json_string_value(json_object_get(tj, "name"));
		char want[32];

		rdps_shard_info(shards[t], &info);
		if (!name || strcmp(name, info.name) ||
		    json_integer_value(json_object_get(tj, "dim")) != info.dim ||
		    (uint64_t)json_integer_value(json_object_get(tj, "lo")) != info.lo ||
		    (uint64_t)json_integer_value(json_object_get(tj, "hi")) != info.hi ||
		    (uint64_t)json_integer_value(json_object_get(tj, "state_floats")) !=
			    rdps_shard_state_floats(shards[t])) {
			snprintf(why, whylen,
				 "%s: table %u does not match this server's '%s' (rows [%llu, %llu), dim %u, optimizer %s)",
				 f, t, info.name, (unsigned long long)info.lo, (unsigned long long)info.hi,
				 info.dim, rdps_optimizer_name(info.optimizer));
			ret = -EBADMSG;
			break;
		}
		snprintf(f, sizeof(f), "%s/%s.rows", path, info.name);
		ret = rdps_loader_load(f, RDPS_BLOB_CKPT_ROWS, NULL, &rows[t], why, whylen);
		snprintf(want, sizeof(want), "%016llx", (unsigned long long)rows[t].hdr.payload_xxh3);
		if (!ret && (rows[t].hdr.count != info.hi - info.lo ||
			     rows[t].hdr.record_size != info.dim * 4 ||
			     strcmp(want, json_string_value(json_object_get(tj, "rows_xxh3")) ?: ""))) {
			snprintf(why, whylen, "%s: does not match the manifest", f);
			ret = -EBADMSG;
		}
		if (ret)
			break;
		snprintf(f, sizeof(f), "%s/%s.state", path, info.name);
		ret = rdps_loader_load(f, RDPS_BLOB_CKPT_STATE, NULL, &state[t], why, whylen);
		snprintf(want, sizeof(want), "%016llx", (unsigned long long)state[t].hdr.payload_xxh3);
		if (!ret && (state[t].hdr.count != rdps_shard_state_floats(shards[t]) ||
			     strcmp(want, json_string_value(json_object_get(tj, "state_xxh3")) ?: ""))) {
			snprintf(why, whylen, "%s: does not match the manifest", f);
			ret = -EBADMSG;
		}
	}
	if (!ret)
		for (uint32_t t = 0; t < n; t++)
			rdps_shard_import(shards[t], rows[t].data, state[t].data);
out:
	if (ret) {
		free(ci->job.pushed_rows);
		ci->job.pushed_rows = NULL;
	}
	for (uint32_t t = 0; rows && state && t < n; t++) {
		rdps_loader_blob_free(&rows[t]);
		rdps_loader_blob_free(&state[t]);
	}
	free(rows);
	free(state);
	json_decref(m);
	return ret;
}

int rdps_ckpt_restore(const char *dir, uint32_t server_id, struct rdps_shard **shards,
		      uint32_t n, struct rdps_ckpt_info *out, char *err, size_t errlen)
{
	char base[4096], path[4200], why[512] = "";
	struct rdps_ckpt_info info = { 0 };
	uint64_t *seqs;
	size_t nseqs;
	int ret;

	snprintf(base, sizeof(base), "%s/server-%u", dir, server_id);
	ret = list_ckpts(base, &seqs, &nseqs);
	if (ret) {
		snprintf(err, errlen, "cannot list %s: %s", base, strerror(-ret));
		return ret;
	}
	if (!nseqs) {
		snprintf(err, errlen, "no checkpoint under %s", base);
		free(seqs);
		return -ENOENT;
	}
	for (size_t i = 0; i < nseqs; i++) {
		snprintf(path, sizeof(path), "%s/ckpt-%llu", base, (unsigned long long)seqs[i]);
		why[0] = '\0';
		ret = try_restore(path, server_id, shards, n, &info, why, sizeof(why));
		if (!ret) {
			info.seq = seqs[i];
			if (out)
				*out = info;
			else
				free(info.job.pushed_rows);
			free(seqs); /* the caller says what it restored */
			return 0;
		}
		rdps_err("server %u: checkpoint %s refused: %s%s", server_id, path,
			 why[0] ? why : rdps_strerror(ret),
			 i + 1 < nseqs ? "; trying the previous one" : "");
	}
	snprintf(err, errlen, "every checkpoint under %s is damaged (the last: %s)", base, why);
	free(seqs);
	return -EBADMSG;
}
