// SPDX-License-Identifier: MIT
/* Tables clients make (DGL's DistTensor): RDPS_REQ_TABLE under s->lock,
 * create (held to --max-table-memory before anything is allocated),
 * lookup, drop (once no request uses the shard), optimizer; the budget's
 * default. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "graph_sample.h"
#include "rdps/common.h"
#include "rdps/graph.h"
#include "rdps/server.h"
#include "server_internal.h"

/* "1000 rows x 16 float32" */
static const char *shape_str(char *buf, size_t len, uint64_t rows, uint32_t elems, int dtype)
{
	snprintf(buf, len, "%llu rows x %u %s", (unsigned long long)rows, elems,
		 rdps_dtype_name(dtype) ? rdps_dtype_name(dtype) : "?");
	return buf;
}

/* The slot of the table called name, or -1. */
static int table_by_name(const struct rdps_server *s, const char *name)
{
	for (uint32_t t = 0; t < s->num_tables; t++) {
		struct rdps_shard_info info;

		if (!s->shards[t])
			continue;
		rdps_shard_info(s->shards[t], &info);
		if (!strcmp(info.name, name))
			return (int)t;
	}
	return -1;
}

/* The desc of slot t as this server exposes it (RDMA keys included). */
static void table_desc(const struct rdps_server *s, uint32_t t, struct rdps_table_desc *d)
{
	if (t >= s->num_config_tables) {
		*d = s->client_tables[t];
		return;
	}
	/* A config table: float32 rows as its shard holds them. */
	{
		struct rdps_shard_info info;

		rdps_shard_info(s->shards[t], &info);
		memset(d, 0, sizeof(*d));
		snprintf(d->name, sizeof(d->name), "%s", info.name);
		d->table_id = t;
		d->dim = d->elems = info.dim;
		d->num_rows = info.num_rows;
		d->lo = info.lo;
		d->hi = info.hi;
		d->stride = (uint32_t)info.stride;
		d->optimizer = (uint32_t)info.optimizer;
		d->dtype = (uint32_t)s->config_dtype[t];
		d->elems = s->config_elems[t] ? s->config_elems[t] : info.dim;
	}
}

/* Whether a table (or a change of one) of need more bytes fits the table
 * budget; if not, a reason naming the budget in req. */
static bool table_fits(struct rdps_server *s, struct rdps_request *req, const char *what,
		       uint64_t need)
{
	char a[32], b[32], c[32];

	if (s->table_bytes <= s->table_budget && need <= s->table_budget - s->table_bytes)
		return true;
	snprintf(req->errmsg, req->errlen, "%s needs %s on server %u, but its tables may take "
		 "%s (--max-table-memory) and hold %s already", what,
		 rdps_bytes_str(need, a, sizeof(a)), s->server_id,
		 rdps_bytes_str(s->table_budget, b, sizeof(b)),
		 rdps_bytes_str(s->table_bytes, c, sizeof(c)));
	return false;
}

/* The first control byte of a table name from the wire, or -1: such names
 * are refused, so none reaches a log, a file name or a terminal. */
static int name_control_byte(const char *name)
{
	for (int i = 0; name[i]; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return i;
	return -1;
}

static int table_create(struct rdps_server *s, const struct rdps_table_req *tr,
			struct rdps_request *req, uint32_t *id)
{
	uint64_t words64 = rdps_dtype_row_words((int)tr->dtype, tr->elems);
	uint32_t words = words64 <= RDPS_MAX_DIM ? (uint32_t)words64 : 0;
	uint64_t off[2], need;
	struct rdps_shard_params sp = {
		.name = tr->name, .dim = words, .num_rows = tr->num_rows,
		.init = (int)tr->init, .init_range = tr->init_range, .seed = tr->seed,
		.optimizer = (int)tr->optimizer, .lr = tr->lr, .eps = tr->eps,
		.beta1 = tr->beta1, .beta2 = tr->beta2,
	};
	struct rdps_region r = { 0 };
	struct rdps_shard_info info;
	struct rdps_shard *sh;
	char a[96], b[96];
	int t = table_by_name(s, tr->name), ret;

	if (name_control_byte(tr->name) >= 0) {
		snprintf(req->errmsg, req->errlen, "table name has a control byte (0x%02x) at "
			 "offset %d", (unsigned char)tr->name[name_control_byte(tr->name)],
			 name_control_byte(tr->name));
		return -EINVAL;
	}
	if (!tr->name[0] || tr->dtype >= RDPS_DTYPE_COUNT || !tr->elems || !tr->num_rows ||
	    !words || (tr->init != RDPS_INIT_ZEROS && tr->init != RDPS_INIT_UNIFORM) ||
	    (tr->dtype != RDPS_DTYPE_F32 && (tr->init != RDPS_INIT_ZEROS ||
					     tr->optimizer != RDPS_OPT_NONE))) {
		snprintf(req->errmsg, req->errlen, "table '%s': bad shape %s (rows and elements "
			 "above 0, rows of at most %d 32-bit words: this is %llu), or an init or "
			 "optimizer its dtype cannot have (only float32 tables start uniform "
			 "or take gradients)", tr->name,
			 shape_str(a, sizeof(a), tr->num_rows, tr->elems, (int)tr->dtype),
			 RDPS_MAX_DIM, (unsigned long long)words64);
		return -EINVAL;
	}
	if (t >= 0) {
		struct rdps_table_desc d;

		/* Made already (by another client of the job, most likely):
		 * the same shape is the same table; another is an error. */
		table_desc(s, (uint32_t)t, &d);
		if (d.num_rows != tr->num_rows || (d.elems ? d.elems : d.dim) != tr->elems ||
		    d.dtype != tr->dtype ||
		    (tr->table_id != RDPS_TABLE_ANY_ID && tr->table_id != (uint32_t)t)) {
			snprintf(req->errmsg, req->errlen, "table '%s' exists on server %u as %s "
				 "(table %d); this asks for %s%s", tr->name, s->server_id,
				 shape_str(a, sizeof(a), d.num_rows, d.elems ? d.elems : d.dim,
					   (int)d.dtype),
				 t, shape_str(b, sizeof(b), tr->num_rows, tr->elems, (int)tr->dtype),
				 tr->table_id != RDPS_TABLE_ANY_ID && tr->table_id != (uint32_t)t
					 ? " in another slot" : "");
			return -EEXIST;
		}
		*id = (uint32_t)t;
		return 0;
	}
	if (tr->table_id == RDPS_TABLE_ANY_ID) {
		if (s->server_id != 0) {
			snprintf(req->errmsg, req->errlen, "tables are made on server 0 first");
			return -EINVAL;
		}
		/* The lowest free slot after the config's tables. */
		for (t = (int)s->num_config_tables; t < RDPS_MAX_TABLES && s->shards[t]; t++)
			;
		if (t == RDPS_MAX_TABLES) {
			snprintf(req->errmsg, req->errlen, "server %u holds %d tables already, the "
				 "most it can", s->server_id, RDPS_MAX_TABLES);
			return -ENOSPC;
		}
	} else {
		t = (int)tr->table_id;
		if (t < (int)s->num_config_tables || t >= RDPS_MAX_TABLES || s->shards[t]) {
			snprintf(req->errmsg, req->errlen, "table '%s' cannot go into slot %d of "
				 "server %u (another table is there)", tr->name, t, s->server_id);
			return -EEXIST;
		}
	}
	/* Rows split evenly over the servers, as --table's are (the first
	 * num_rows % servers get one more: rdps_book_even). */
	{
		uint64_t q = tr->num_rows / s->num_servers, extra = tr->num_rows % s->num_servers;
		uint64_t i = s->server_id;

		off[0] = i * q + (i < extra ? i : extra);
		off[1] = off[0] + q + (i < extra ? 1 : 0);
	}
	sp.table_id = (uint32_t)t;
	sp.lo = off[0];
	sp.hi = off[1];
	/* Held against the budget before anything is allocated: a 96-byte
	 * request must not make the server zero gigabytes (or wrap a size). */
	if (rdps_shard_footprint(&sp, &need)) {
		snprintf(req->errmsg, req->errlen, "table '%s' (%s): rows [%llu, %llu) of %u "
			 "words on server %u do not fit in 64-bit sizes", tr->name,
			 shape_str(a, sizeof(a), tr->num_rows, tr->elems, (int)tr->dtype),
			 (unsigned long long)off[0], (unsigned long long)off[1], words,
			 s->server_id);
		return -EOVERFLOW;
	}
	snprintf(b, sizeof(b), "table '%s' (%s)", tr->name,
		 shape_str(a, sizeof(a), tr->num_rows, tr->elems, (int)tr->dtype));
	if (!table_fits(s, req, b, need))
		return -ENOSPC;
	ret = rdps_shard_create(&sp, &sh);
	if (ret) {
		snprintf(req->errmsg, req->errlen, "table '%s' (%s) on server %u: %s", tr->name,
			 shape_str(a, sizeof(a), tr->num_rows, tr->elems, (int)tr->dtype), s->server_id,
			 ret == -EINVAL ? "invalid optimizer settings" : rdps_strerror(ret));
		return ret;
	}
	rdps_shard_set_concurrent(sh, true); /* clients write while others read */
	rdps_shard_info(sh, &info);
	snprintf(r.desc.name, sizeof(r.desc.name), "%s", tr->name);
	r.desc.table_id = (uint32_t)t;
	r.desc.dim = words;
	r.desc.num_rows = tr->num_rows;
	r.desc.lo = info.lo;
	r.desc.hi = info.hi;
	r.desc.stride = (uint32_t)info.stride;
	r.desc.optimizer = tr->optimizer;
	r.desc.dtype = tr->dtype;
	r.desc.elems = tr->elems;
	r.base = info.base;
	r.len = info.len;
	ret = s->ops->add_region(s->ts, &r);
	if (ret) {
		snprintf(req->errmsg, req->errlen, "table '%s': the %s transport cannot expose "
			 "it: %s", tr->name, s->ops->name, rdps_strerror(ret));
		rdps_shard_destroy(sh);
		return ret;
	}
	s->client_tables[t] = r.desc;
	s->footprint[t] = need;
	s->table_bytes += need;
	__atomic_store_n(&s->shards[t], sh, __ATOMIC_RELEASE);
	if ((uint32_t)t >= s->num_tables)
		__atomic_store_n(&s->num_tables, (uint32_t)t + 1, __ATOMIC_RELEASE);
	rdps_info("server %u: table '%s' (%s, optimizer %s) made by client %u in slot %d: "
		  "rows [%llu, %llu) here", s->server_id, tr->name,
		  shape_str(a, sizeof(a), tr->num_rows, tr->elems, (int)tr->dtype),
		  rdps_optimizer_name((int)tr->optimizer), req->client_id, t,
		  (unsigned long long)info.lo, (unsigned long long)info.hi);
	*id = (uint32_t)t;
	return 0;
}

/* Drops a table clients made, once no request uses it. */
static int table_drop(struct rdps_server *s, uint32_t t, struct rdps_request *req)
{
	struct rdps_shard *sh = s->shards[t];

	if (t < s->num_config_tables) {
		snprintf(req->errmsg, req->errlen, "table '%s' is the server's own (--table or "
			 "--partition): clients cannot drop it", s->client_tables[t].name);
		return -EPERM;
	}
	__atomic_store_n(&s->shards[t], NULL, __ATOMIC_RELEASE);
	s->ops->remove_region(s->ts, t);
	/* Requests that took the shard before finish first (they are short). */
	while (__atomic_load_n(&s->refs[t], __ATOMIC_ACQUIRE))
		sched_yield();
	rdps_info("server %u: table '%s' dropped by client %u", s->server_id,
		  s->client_tables[t].name, req->client_id);
	memset(&s->client_tables[t], 0, sizeof(s->client_tables[t]));
	rdps_shard_destroy(sh);
	s->table_bytes -= s->footprint[t];
	s->footprint[t] = 0;
	return 0;
}

int rdps_sv_table_request(struct rdps_server *s, struct rdps_request *req)
{
	struct rdps_table_req tr;
	struct rdps_table_desc *d = req->reply;
	struct rdps_shard_info si;
	uint32_t id = 0;
	int t, ret;

	if (req->payload_len != sizeof(tr) || req->reply_cap < sizeof(*d))
		return -EINVAL;
	memcpy(&tr, req->payload, sizeof(tr));
	tr.name[RDPS_TABLE_NAME_MAX - 1] = '\0';
	switch (tr.op) {
	case RDPS_TABLE_CREATE:
		ret = table_create(s, &tr, req, &id);
		break;
	case RDPS_TABLE_LOOKUP:
	case RDPS_TABLE_DROP:
	case RDPS_TABLE_SET_OPTIMIZER:
		t = table_by_name(s, tr.name);
		if (t < 0) {
			snprintf(req->errmsg, req->errlen, "no table '%s' on server %u", tr.name,
				 s->server_id);
			return -ENOENT;
		}
		id = (uint32_t)t;
		ret = 0;
		if (tr.op == RDPS_TABLE_DROP) {
			table_desc(s, id, d);
			req->reply_len = sizeof(*d);
			return table_drop(s, id, req);
		}
		if (tr.op == RDPS_TABLE_SET_OPTIMIZER) {
			struct rdps_table_desc cur;

			table_desc(s, id, &cur);
			if (s->read_only[id] && tr.optimizer != RDPS_OPT_NONE) {
				snprintf(req->errmsg, req->errlen, "table '%s' is read-only (loaded "
					 "from its files by the server): it takes no gradients",
					 tr.name);
				return -EPERM;
			}
			if (cur.dtype != RDPS_DTYPE_F32 && tr.optimizer != RDPS_OPT_NONE) {
				snprintf(req->errmsg, req->errlen, "table '%s' holds %s: only float32 "
					 "tables take gradients", tr.name, rdps_dtype_name((int)cur.dtype));
				return -EINVAL;
			}
			/* Every client may ask for it: the same settings are no
			 * change (its state, which training built, stays). */
			rdps_shard_info(s->shards[id], &si);
			{
				float eps = tr.eps > 0 ? tr.eps
					    : tr.optimizer == RDPS_OPT_ADAM ? RDPS_ADAM_EPS
									   : RDPS_ADAGRAD_EPS;

				if (si.optimizer == (int)tr.optimizer && si.lr == tr.lr && si.eps == eps &&
				    si.beta1 == (tr.beta1 > 0 ? tr.beta1 : RDPS_ADAM_BETA1) &&
				    si.beta2 == (tr.beta2 > 0 ? tr.beta2 : RDPS_ADAM_BETA2))
					break;
			}
			{
				/* The new optimizer's state is allocated before the
				 * old one is freed: both count against the budget. */
				struct rdps_shard_params fp = {
					.dim = si.dim, .lo = si.lo, .hi = si.hi,
					.optimizer = (int)tr.optimizer,
				};
				uint64_t fresh, rows_only;
				char what[96];

				fp.optimizer = RDPS_OPT_NONE;
				if (rdps_shard_footprint(&fp, &rows_only))
					return -EOVERFLOW;
				fp.optimizer = (int)tr.optimizer;
				if (rdps_shard_footprint(&fp, &fresh)) {
					snprintf(req->errmsg, req->errlen, "table '%s': the state of "
						 "optimizer %u does not fit in 64-bit sizes", tr.name,
						 tr.optimizer);
					return -EOVERFLOW;
				}
				snprintf(what, sizeof(what), "optimizer %s for table '%s'",
					 rdps_optimizer_name((int)tr.optimizer), tr.name);
				if (!table_fits(s, req, what, fresh - rows_only))
					return -ENOSPC;
				ret = rdps_shard_set_optimizer(s->shards[id], (int)tr.optimizer, tr.lr,
							       tr.eps, tr.beta1, tr.beta2);
				if (!ret) {
					s->table_bytes = s->table_bytes - s->footprint[id] + fresh;
					s->footprint[id] = fresh;
				}
			}
			if (ret) {
				snprintf(req->errmsg, req->errlen, "table '%s': optimizer %u with lr "
					 "%g, eps %g, betas %g, %g: %s", tr.name, tr.optimizer, tr.lr,
					 tr.eps, tr.beta1, tr.beta2, ret == -EINVAL ? "invalid"
									 : rdps_strerror(ret));
				return ret;
			}
			if (id >= s->num_config_tables)
				s->client_tables[id].optimizer = tr.optimizer;
		}
		break;
	default:
		snprintf(req->errmsg, req->errlen, "unknown table operation %u", tr.op);
		return -EOPNOTSUPP;
	}
	if (ret)
		return ret;
	table_desc(s, id, d);
	req->reply_len = sizeof(*d);
	return 0;
}

/* Whether this process may lock memory past RLIMIT_MEMLOCK (CAP_IPC_LOCK,
 * root's by default): then the limit does not bound registrations. */
static bool may_lock_any(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	unsigned long long caps = 0;
	char line[256];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "CapEff: %llx", &caps) == 1;
	fclose(f);
	return found && (caps >> 14 & 1); /* CAP_IPC_LOCK */
}

uint64_t rdps_server_default_table_budget(const char *transport, char *why, size_t whylen)
{
	const struct rdps_transport_ops *ops = rdps_transport_find(transport ? transport : "tcp");
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
	uint64_t budget = ram / 2;
	struct rdps_transport_info ti = { 0 };
	struct rlimit rl;
	char a[32], b[32];

	if (why && whylen)
		snprintf(why, whylen, "half of the machine's %s of memory",
			 rdps_bytes_str(ram, a, sizeof(a)));
	if (ops && ops->query)
		ops->query(1, &ti);
	if (ti.pins_tables && !getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    !may_lock_any()) {
		uint64_t lock = (uint64_t)rl.rlim_cur > ti.server_pinned_bytes
					? (uint64_t)rl.rlim_cur - ti.server_pinned_bytes : 0;

		if (lock < budget) {
			budget = lock;
			if (why && whylen)
				snprintf(why, whylen, "the locked-memory limit (ulimit -l) of %s less "
					 "the %s the %s transport pins besides tables",
					 rdps_bytes_str((uint64_t)rl.rlim_cur, a, sizeof(a)),
					 rdps_bytes_str(ti.server_pinned_bytes, b, sizeof(b)),
					 ops->name);
		}
	}
	return budget;
}
