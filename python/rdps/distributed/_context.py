# SPDX-License-Identifier: MIT
"""The process's connection to the job: initialize(), finalize() and friends.

One client per process (rdps clients are not thread-safe: call the package
from one thread). Standalone (no ip_config anywhere) starts the servers in
this process: transport inproc, each rdps_server_run() in a daemon thread
(cffi releases the GIL during C calls, so they serve while Python runs).
"""
import atexit
import errno
import os
import sys
import threading

from .._errors import RdpsError
from .._ffi import ERRLEN, SERVER_CONFIG_BYTES, ffi, lib, string

_ctx = None
_lock = threading.Lock()
_exiting_on_error = False
_hooks_installed = False
_standalone_jobs = 0


class _Context:
    def __init__(self):
        self.client = ffi.NULL
        self.rank = 0
        self.num_trainers = 1
        self.standalone = False
        self.shutdown_servers = True
        self.servers = []       # standalone: (struct rdps_server *, thread)
        self.keep = []          # cdata the C side points into
        self.ipc = None
        self.anon = 0           # anonymous tensors made so far
        self.transient = []     # names of non-persistent tensors
        self.ip_config = None
        self.transport = None
        self.graphs = []        # struct rdps_graph * of the DistGraphs made
        self.parts = []         # standalone graph: struct rdps_graph_part * served
        self.part_config = None
        self.accumulators = {}  # all_reduce's tables by rows

    def check(self, ret, what=None):
        """Raises RdpsError for a negative return, with the client's message."""
        if ret < 0:
            msg = string(lib.rdps_client_errmsg(self.client)) or string(lib.rdps_strerror(ret))
            raise RdpsError(ret, "%s: %s" % (what, msg) if what else msg)
        return ret


def _context():
    if _ctx is None:
        raise RdpsError(-errno.ENOTCONN, "rdps.distributed is not initialized: call "
                        "rdps.distributed.initialize() first")
    return _ctx


def _env_int(name, value, default):
    if value is not None:
        return int(value)
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise RdpsError(-errno.EINVAL, "$%s is '%s', not an integer" % (name, v)) from None


def _excepthook(tp, value, tb):
    # A trainer dying of an exception must not wait in the final barrier for
    # the others (they would wait for it too): finalize then only leaves.
    global _exiting_on_error
    _exiting_on_error = True
    _orig_excepthook(tp, value, tb)


_orig_excepthook = sys.excepthook


def _install_hooks():
    global _hooks_installed, _orig_excepthook
    if _hooks_installed:
        return
    _orig_excepthook = sys.excepthook
    sys.excepthook = _excepthook
    atexit.register(_atexit)
    _hooks_installed = True


def _atexit():
    if _ctx is None:
        return
    try:
        finalize()
    except RdpsError as e:
        print("rdps: finalize at exit: %s" % e, file=sys.stderr)


def _start_servers(ctx, num_servers, parts=()):
    """Standalone: num_servers inproc servers in this process (one thread
    each), no tables, or server p with the tables of graph part parts[p]
    (struct rdps_graph_part *)."""
    global _standalone_jobs
    _standalone_jobs += 1
    # The inproc registry is keyed by host:port within this process only.
    text = "127.0.0.1 %d %d\n" % (40000 + _standalone_jobs % 20000, num_servers)
    err = ffi.new("char[]", ERRLEN)
    ipc = ffi.new("struct rdps_ipconfig *")
    ret = lib.rdps_ipconfig_parse(b"standalone", text.encode(), ipc, err, ERRLEN)
    if ret < 0:
        raise RdpsError(ret, string(err))
    ctx.ipc = ipc
    transport = ffi.new("char[]", b"inproc")
    ctx.keep.append(transport)
    for s in range(num_servers):
        buf = ffi.new("char[]", SERVER_CONFIG_BYTES)  # zeros: every default
        cfg = ffi.cast("struct rdps_server_config_head *", buf)
        cfg.transport = transport
        cfg.ipc = ipc
        cfg.server_id = s
        cfg.num_tables = 0
        if parts:
            ret = lib.rdps_graph_part_add_tables(parts[s], buf)
            if ret < 0:
                _stop_servers(ctx)
                raise RdpsError(ret, "in-process server %d: the graph's tables" % s)
        srv = ffi.new("struct rdps_server **")
        ret = lib.rdps_server_create(cfg, srv, err, ERRLEN)
        if ret < 0:
            _stop_servers(ctx)
            raise RdpsError(ret, "in-process server %d: %s" % (s, string(err)))
        th = threading.Thread(target=lib.rdps_server_run, args=(srv[0],),
                              name="rdps-server-%d" % s, daemon=True)
        th.start()
        ctx.servers.append((srv[0], th))


def _stop_servers(ctx):
    for srv, _ in ctx.servers:
        lib.rdps_server_stop(srv)
    for srv, th in ctx.servers:
        th.join()
        lib.rdps_server_destroy(srv)
    ctx.servers = []
    for part in ctx.parts:
        lib.rdps_graph_part_free(part)
    ctx.parts = []
    if ctx.ipc is not None:
        lib.rdps_ipconfig_free(ctx.ipc)
        ctx.ipc = None


def initialize(ip_config=None, rank=None, num_trainers=None, transport=None, *,
               num_servers=1, timeout=60.0, barrier_timeout=None,
               secret_file=None, shutdown_servers=True, **kwargs):
    """Joins the job, as dgl.distributed.initialize.

    ip_config: the job's servers (DGL-KE format); default $RDPS_IP_CONFIG,
    which rdps launch --exec sets, with $RDPS_RANK, $RDPS_NUM_TRAINERS and
    $RDPS_TRANSPORT (the defaults of rank, num_trainers and transport; else
    0, 1 and "auto"). With neither, the job is standalone: num_servers
    servers (transport inproc) run in this process, and rank/num_trainers
    are 0/1: the same script runs either way.

    timeout: seconds to wait for servers still starting (and per request);
    barrier_timeout: seconds a barrier waits for the others (default 600).
    secret_file: the job's shared secret (default $RDPS_SECRET, else none).
    shutdown_servers: trainer 0 asks the servers to exit at finalize(), after
    the last barrier (as rdps train does); False leaves them running.
    Other keyword arguments of DGL's (net_type, num_worker_threads, ...)
    are accepted and ignored.
    """
    global _ctx
    with _lock:
        if _ctx is not None:
            raise RdpsError(-errno.EALREADY, "rdps.distributed is already initialized (rank %d of %d): "
                            "call finalize() first" % (_ctx.rank, _ctx.num_trainers))
        ctx = _Context()
        if ip_config is None:
            ip_config = os.environ.get("RDPS_IP_CONFIG") or None
        ctx.rank = _env_int("RDPS_RANK", rank, 0)
        ctx.num_trainers = _env_int("RDPS_NUM_TRAINERS", num_trainers, 1)
        ctx.standalone = ip_config is None
        ctx.shutdown_servers = shutdown_servers
        if ctx.num_trainers < 1 or not 0 <= ctx.rank < ctx.num_trainers:
            raise RdpsError(-errno.EINVAL, "rank %d is not in 0..%d (num_trainers %d)" %
                            (ctx.rank, ctx.num_trainers - 1, ctx.num_trainers))
        if ctx.standalone:
            if ctx.num_trainers != 1:
                raise RdpsError(-errno.EINVAL, "standalone (no ip_config, no $RDPS_IP_CONFIG) runs one "
                                "trainer, not %d: give the job's ip_config" % ctx.num_trainers)
            transport = "inproc"
            _start_servers(ctx, int(num_servers))
        else:
            transport = transport or os.environ.get("RDPS_TRANSPORT") or "auto"
        ctx.ip_config = ip_config
        ctx.transport = transport

        err = ffi.new("char[]", ERRLEN)
        secret = ffi.new("struct rdps_secret *")
        ret = lib.rdps_secret_load(secret_file.encode() if secret_file else ffi.NULL,
                                   secret, err, ERRLEN)
        if ret < 0:
            _stop_servers(ctx)
            raise RdpsError(ret, string(err))
        ctx.secret = secret
        ctx.timeout = timeout
        ctx.barrier_timeout = barrier_timeout
        try:
            _connect(ctx)
        except RdpsError:
            _stop_servers(ctx)
            raise
        _install_hooks()
        _ctx = ctx


def _connect(ctx):
    """ctx.client: a client of ctx's servers."""
    err = ffi.new("char[]", ERRLEN)
    transport, secret = ctx.transport, ctx.secret
    p = ffi.new("struct rdps_client_params *")
    tr = ffi.new("char[]", transport.encode())
    ctx.keep += [secret, tr]
    if ctx.standalone:
        p.servers = ctx.ipc
    else:
        path = ffi.new("char[]", os.fsencode(ctx.ip_config))
        ctx.keep.append(path)
        p.ip_config = path
    p.transport = tr
    p.client_id = ctx.rank
    p.num_clients = ctx.num_trainers
    p.timeout_ms = int(ctx.timeout * 1000)
    if ctx.barrier_timeout is not None:
        p.barrier_timeout_ms = int(ctx.barrier_timeout * 1000)
    p.quiet = True
    p.secret = secret
    out = ffi.new("struct rdps_client **")
    ret = lib.rdps_client_create(p, out, err, ERRLEN)
    if ret < 0:
        raise RdpsError(ret, string(err))
    ctx.client = out[0]
    ctx.transport = string(lib.rdps_client_transport(ctx.client))


def _serve_graph(ctx, part_dir, num_parts):
    """Standalone: restarts the in-process servers as a graph job's, server
    p holding part p of the graph partition part_dir (as rdps server --graph
    does), and reconnects. Only before any tensor is made (they would be
    lost with the servers)."""
    made = int(lib.rdps_client_num_tables(ctx.client))
    if made:
        raise RdpsError(-errno.EBUSY, "DistGraph: standalone, the graph is served by in-process "
                        "servers started for it, but %d tensor(s) were made before it on the "
                        "servers it replaces: make the DistGraph first" % made)
    err = ffi.new("char[]", ERRLEN)
    parts = []
    try:
        for p in range(num_parts):
            out = ffi.new("struct rdps_graph_part **")
            ret = lib.rdps_graph_part_load(os.fsencode(part_dir), p, out, err, ERRLEN)
            if ret < 0:
                raise RdpsError(ret, "DistGraph: %s" % string(err))
            parts.append(out[0])
    except RdpsError:
        for part in parts:
            lib.rdps_graph_part_free(part)
        raise
    lib.rdps_client_destroy(ctx.client)
    ctx.client = ffi.NULL
    _stop_servers(ctx)
    ctx.parts = parts
    _start_servers(ctx, num_parts, parts)
    _connect(ctx)
    ctx.part_config = part_dir


def is_initialized():
    """True between initialize() and finalize()."""
    return _ctx is not None


def is_standalone():
    """True when the servers run in this process (no ip_config)."""
    return _context().standalone


def get_rank():
    """This trainer's rank, 0 .. get_num_trainers()-1."""
    return _context().rank


def get_num_trainers():
    """The trainers of the job (1 standalone)."""
    return _context().num_trainers


def get_num_servers():
    """The servers of the job (standalone: those running in this process)."""
    return int(lib.rdps_client_num_servers(_context().client))


def get_transport():
    """The transport the client uses ("tcp", "verbs", "ofi", "inproc")."""
    return _context().transport


def barrier():
    """Waits until every trainer of the job got here (after flushing this
    trainer's pushes)."""
    ctx = _context()
    ctx.check(lib.rdps_client_barrier(ctx.client), "barrier")


def allreduce(values):
    """Sums a list of floats over every trainer (each gets the same bits)."""
    ctx = _context()
    v = ffi.new("double[]", [float(x) for x in values])
    ctx.check(lib.rdps_client_allreduce(ctx.client, v, len(values)), "allreduce")
    return [v[i] for i in range(len(values))]


def finalize():
    """Leaves the job: a last barrier, then trainer 0 drops the job's
    non-persistent tensors (when the servers stay up) or shuts the servers
    down (shutdown_servers, as rdps train does); standalone, the in-process
    servers stop. Runs at exit if the script does not call it. After an
    uncaught exception it only leaves (no barrier: the others' collectives
    then fail at once instead of waiting)."""
    global _ctx
    with _lock:
        ctx = _ctx
        if ctx is None:
            return
        _ctx = None
        error = None
        try:
            if not _exiting_on_error:
                ctx.check(lib.rdps_client_barrier(ctx.client), "the final barrier")
                servers_stay = ctx.standalone is False and not ctx.shutdown_servers
                if ctx.rank == 0 and servers_stay:
                    for name in ctx.transient:
                        ret = lib.rdps_client_table_drop(ctx.client, name.encode())
                        if ret < 0 and ret != -errno.ENOENT:  # someone dropped it
                            ctx.check(ret, "dropping tensor '%s'" % name)
                if ctx.rank == 0 and not ctx.standalone and ctx.shutdown_servers:
                    ctx.check(lib.rdps_client_shutdown_servers(ctx.client),
                              "shutting the servers down")
        except RdpsError as e:
            error = e
        finally:
            for g in ctx.graphs:
                lib.rdps_graph_close(g)
            ctx.graphs = []
            lib.rdps_client_destroy(ctx.client)
            ctx.client = ffi.NULL
            _stop_servers(ctx)
        if error is not None:
            raise error


exit_client = finalize
