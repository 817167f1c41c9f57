// SPDX-License-Identifier: MIT
/* The client's tables: the ones servers expose and clients make (create,
 * find, drop, optimizer), each with its range book. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_internal.h"
#include "rdps/client.h"
#include "rdps/common.h"

/* Table t's range book from the servers' descs (in server order, tiling
 * its rows); 0, or -EPROTO with a reason. */
static int table_book(struct rdps_client *c, uint32_t t, const struct rdps_table_desc *const *d,
		      char *err, size_t errlen)
{
	uint64_t *off = c->offsets[t];

	if (!off && !(off = c->offsets[t] = calloc(c->num_servers + 1, sizeof(uint64_t))))
		return -ENOMEM;
	off[0] = 0;
	for (uint32_t s = 0; s < c->num_servers; s++) {
		if (strcmp(d[s]->name, d[0]->name) || d[s]->dim != d[0]->dim ||
		    d[s]->num_rows != d[0]->num_rows || d[s]->dtype != d[0]->dtype) {
			snprintf(err, errlen,
				 "%s serves different tables than server 0 (table %u: '%s' %llu x %u vs '%s' %llu x %u)",
				 c->conns[s]->peer, t, d[s]->name, (unsigned long long)d[s]->num_rows,
				 d[s]->dim, d[0]->name, (unsigned long long)d[0]->num_rows, d[0]->dim);
			return -EPROTO;
		}
		if (d[s]->lo != off[s]) {
			snprintf(err, errlen,
				 "%s holds rows [%llu, %llu) of table '%s', expected them to start at %llu",
				 c->conns[s]->peer, (unsigned long long)d[s]->lo,
				 (unsigned long long)d[s]->hi, d[s]->name, (unsigned long long)off[s]);
			return -EPROTO;
		}
		off[s + 1] = d[s]->hi;
	}
	if (off[c->num_servers] != d[0]->num_rows) {
		snprintf(err, errlen, "servers hold rows [0, %llu) of table '%s' of %llu rows",
			 (unsigned long long)off[c->num_servers], d[0]->name,
			 (unsigned long long)d[0]->num_rows);
		return -EPROTO;
	}
	c->tables[t] = *d[0];
	c->books[t].num_parts = c->num_servers;
	c->books[t].off = off;
	if (t >= c->num_tables)
		c->num_tables = t + 1;
	return 0;
}

/* The connections learn table t's descs (one-sided backends read with
 * them), and the client its book. */
static int table_install(struct rdps_client *c, uint32_t t, const struct rdps_table_desc *descs,
			 char *err, size_t errlen)
{
	const struct rdps_table_desc *d[RDPS_MAX_SERVERS];
	int ret;

	for (uint32_t s = 0; s < c->num_servers; s++)
		d[s] = &descs[s];
	ret = table_book(c, t, d, err, errlen);
	if (ret)
		return ret;
	for (uint32_t s = 0; s < c->num_servers; s++) {
		c->conns[s]->tables[t] = descs[s];
		if (t >= c->conns[s]->num_tables)
			c->conns[s]->num_tables = t + 1;
	}
	return 0;
}

static void table_forget(struct rdps_client *c, uint32_t t)
{
	memset(&c->tables[t], 0, sizeof(c->tables[t]));
	for (uint32_t s = 0; s < c->num_servers; s++)
		if (c->conns[s])
			memset(&c->conns[s]->tables[t], 0, sizeof(c->conns[s]->tables[t]));
}

/*
 * The tables of the welcomes. A slot every server fills alike is a table;
 * one no server fills is empty. The servers' own tables (--table,
 * --partition) must agree; a table clients are making right now may be on
 * some servers only: it stays unknown here until asked for by name.
 */
int rdps_cl_check_tables(struct rdps_client *c, char *err, size_t errlen)
{
	uint32_t n = 0;

	for (uint32_t s = 0; s < c->num_servers; s++)
		if (c->conns[s]->num_tables > n)
			n = c->conns[s]->num_tables;
	c->num_tables = 0;
	for (uint32_t t = 0; t < n; t++) {
		const struct rdps_table_desc *d[RDPS_MAX_SERVERS];
		static const struct rdps_table_desc none;
		uint32_t filled = 0;
		bool made_by_clients = false;
		int ret;

		for (uint32_t s = 0; s < c->num_servers; s++) {
			d[s] = t < c->conns[s]->num_tables ? &c->conns[s]->tables[t] : &none;
			filled += d[s]->dim != 0;
			made_by_clients |= d[s]->elems != 0;
		}
		if (!filled)
			continue;
		if (filled < c->num_servers && made_by_clients)
			continue;
		if (filled < c->num_servers) {
			snprintf(err, errlen, "table %u ('%s') is on %u of the %u servers", t,
				 d[0]->dim ? d[0]->name : "?", filled, c->num_servers);
			return -EPROTO;
		}
		ret = table_book(c, t, d, err, errlen);
		if (ret) {
			if (made_by_clients) {
				memset(&c->tables[t], 0, sizeof(c->tables[t]));
				continue;
			}
			return ret;
		}
	}
	return 0;
}

uint32_t rdps_client_num_tables(const struct rdps_client *c)
{
	return c->num_tables;
}

int rdps_client_table_info(const struct rdps_client *c, uint32_t id,
			   struct rdps_table_info *info)
{
	if (id >= c->num_tables || !c->tables[id].dim)
		return -ENOENT;
	info->name = c->tables[id].name;
	info->id = id;
	info->dim = c->tables[id].dim;
	info->num_rows = c->tables[id].num_rows;
	info->dtype = (int)c->tables[id].dtype;
	info->elems = c->tables[id].elems ? c->tables[id].elems : c->tables[id].dim;
	info->optimizer = (int)c->tables[id].optimizer;
	return 0;
}

/* One table request to every server, in order (server 0 first: it decides
 * a new table's slot, the others take it); descs[s] gets each reply. */
static int table_call(struct rdps_client *c, struct rdps_table_req *tr,
		      struct rdps_table_desc *descs)
{
	int ret;

	if (rdps_cl_ensure_conns(c))
		return -ENOTCONN;
	if (c->observer) {
		snprintf(c->errmsg, sizeof(c->errmsg), "an observer cannot use tables");
		return -EPERM;
	}
	for (uint32_t s = 0; s < c->num_servers; s++) {
		ret = c->ops->call(c->conns[s], RDPS_REQ_TABLE, tr, sizeof(*tr), &descs[s],
				   sizeof(descs[s]), 0);
		if (ret)
			return rdps_cl_conn_fail(c, ret, s);
		if (tr->op == RDPS_TABLE_CREATE)
			tr->table_id = descs[0].table_id;
		if (descs[s].table_id != descs[0].table_id || descs[s].table_id >= RDPS_MAX_TABLES) {
			snprintf(c->errmsg, sizeof(c->errmsg), "%s put table '%s' in slot %u, server "
				 "0 in slot %u", c->conns[s]->peer, tr->name, descs[s].table_id,
				 descs[0].table_id);
			return -EPROTO;
		}
	}
	return 0;
}

static int table_named(struct rdps_client *c, const char *name, struct rdps_table_req *tr)
{
	if (!name || !name[0] || strlen(name) >= RDPS_TABLE_NAME_MAX) {
		snprintf(c->errmsg, sizeof(c->errmsg), "a table name of 1 to %d bytes",
			 RDPS_TABLE_NAME_MAX - 1);
		return -EINVAL;
	}
	memset(tr, 0, sizeof(*tr));
	snprintf(tr->name, sizeof(tr->name), "%s", name);
	return 0;
}

int rdps_client_table(struct rdps_client *c, const char *name, struct rdps_table_info *info)
{
	struct rdps_table_desc *descs;
	struct rdps_table_req tr;
	uint32_t t;
	int ret;

	for (t = 0; t < c->num_tables; t++)
		if (c->tables[t].dim && !strcmp(c->tables[t].name, name))
			return rdps_client_table_info(c, t, info);
	if (c->observer || (ret = table_named(c, name, &tr)))
		return -ENOENT;
	/* Made by a client since this one connected? */
	descs = calloc(c->num_servers, sizeof(*descs));
	if (!descs)
		return -ENOMEM;
	tr.op = RDPS_TABLE_LOOKUP;
	ret = table_call(c, &tr, descs);
	t = descs[0].table_id;
	if (!ret)
		ret = table_install(c, t, descs, c->errmsg, sizeof(c->errmsg));
	free(descs);
	return ret ? ret : rdps_client_table_info(c, t, info);
}

int rdps_client_table_create(struct rdps_client *c, const struct rdps_table_spec *spec,
			     struct rdps_table_info *info)
{
	struct rdps_table_desc *descs;
	struct rdps_table_req tr;
	uint32_t t;
	int ret;

	if ((ret = table_named(c, spec->name, &tr)))
		return ret;
	if (spec->dtype < 0 || spec->dtype >= RDPS_DTYPE_COUNT || !spec->elems ||
	    !spec->num_rows || rdps_dtype_row_words(spec->dtype, spec->elems) > RDPS_MAX_DIM ||
	    (spec->init_range > 0 && spec->dtype != RDPS_DTYPE_F32) || !(spec->init_range >= 0)) {
		snprintf(c->errmsg, sizeof(c->errmsg), "table '%s': %llu rows of %u elements of "
			 "dtype %d%s: not a table (rows and elements above 0, a dtype of "
			 "enum rdps_dtype, rows of at most %d words, a uniform start for float32 "
			 "only)", spec->name, (unsigned long long)spec->num_rows, spec->elems,
			 spec->dtype, spec->init_range > 0 ? " starting uniform" : "",
			 RDPS_MAX_DIM);
		return -EINVAL;
	}
	tr.op = RDPS_TABLE_CREATE;
	tr.table_id = RDPS_TABLE_ANY_ID;
	tr.num_rows = spec->num_rows;
	tr.elems = spec->elems;
	tr.dtype = (uint32_t)spec->dtype;
	tr.init = spec->init_range > 0 ? RDPS_INIT_UNIFORM : RDPS_INIT_ZEROS;
	tr.init_range = spec->init_range > 0 ? spec->init_range : 0;
	tr.seed = spec->seed;
	tr.optimizer = RDPS_OPT_NONE;
	descs = calloc(c->num_servers, sizeof(*descs));
	if (!descs)
		return -ENOMEM;
	ret = table_call(c, &tr, descs);
	t = descs[0].table_id;
	if (!ret)
		ret = table_install(c, t, descs, c->errmsg, sizeof(c->errmsg));
	free(descs);
	return ret ? ret : rdps_client_table_info(c, t, info);
}

int rdps_client_table_drop(struct rdps_client *c, const char *name)
{
	struct rdps_table_desc *descs;
	struct rdps_table_req tr;
	int ret;

	if ((ret = table_named(c, name, &tr)))
		return ret;
	descs = calloc(c->num_servers, sizeof(*descs));
	if (!descs)
		return -ENOMEM;
	tr.op = RDPS_TABLE_DROP;
	/* Pushes of this client to it must not come after it. */
	ret = rdps_client_flush(c);
	if (!ret)
		ret = table_call(c, &tr, descs);
	if (!ret)
		table_forget(c, descs[0].table_id);
	free(descs);
	return ret;
}

int rdps_client_table_set_optimizer(struct rdps_client *c, uint32_t table,
				    const struct rdps_optimizer_spec *o)
{
	struct rdps_table_desc *descs;
	struct rdps_table_req tr;
	int ret;

	if (table >= c->num_tables || !c->tables[table].dim) {
		snprintf(c->errmsg, sizeof(c->errmsg), "unknown table %u", table);
		return -ENOENT;
	}
	if ((ret = table_named(c, c->tables[table].name, &tr)))
		return ret;
	tr.op = RDPS_TABLE_SET_OPTIMIZER;
	tr.optimizer = (uint32_t)o->optimizer;
	tr.lr = o->lr;
	tr.eps = o->eps;
	tr.beta1 = o->beta1;
	tr.beta2 = o->beta2;
	descs = calloc(c->num_servers, sizeof(*descs));
	if (!descs)
		return -ENOMEM;
	ret = rdps_client_flush(c);
	if (!ret)
		ret = table_call(c, &tr, descs);
	if (!ret)
		c->tables[table].optimizer = (uint32_t)o->optimizer;
	free(descs);
	return ret;
}

int rdps_client_table_offsets(const struct rdps_client *c, uint32_t table, uint64_t *off)
{
	if (table >= c->num_tables || !c->offsets[table])
		return -ENOENT;
	memcpy(off, c->offsets[table], (c->num_servers + 1) * sizeof(*off));
	return 0;
}
