# SPDX-License-Identifier: MIT
"""The process's connection to the job: initialize(), finalize() and friends.

One client per process. An rdps client is not thread-safe, so every call of
the client and graph API goes through `lib` below, which serialises them with
one lock: the loaders' sampler threads (num_samplers) then share the client
with the training loop. Standalone (no job) starts the servers in this
process: transport inproc, each rdps_server_run() in a daemon thread (cffi
releases the GIL during C calls, so they serve while Python runs).
"""
import atexit
import errno
import os
import sys
import threading

from .._errors import RdpsError
from .._ffi import ERRLEN, SERVER_CONFIG_BYTES, ffi, string
from .._ffi import lib as _raw_lib

class _SerializedLib:
    """librdps with its client-side calls (rdps_client_*, rdps_graph_* but
    not the server's rdps_graph_part_*) made under one re-entrant lock, so
    that threads share the process's client. The lock is held for the C
    call only (the GIL is not: cffi releases it)."""

    _PREFIXES = ("rdps_client_", "rdps_graph_")

    def __init__(self, raw):
        self._raw = raw
        self._lock = threading.RLock()
        self._wrapped = {}

    @property
    def lock(self):
        return self._lock

    def __getattr__(self, name):
        fn = self._wrapped.get(name)
        if fn is not None:
            return fn
        f = getattr(self._raw, name)
        if not callable(f) or not name.startswith(self._PREFIXES) or \
                name.startswith("rdps_graph_part_"):
            return f

        lock = self._lock

        def call(*args):
            with lock:
                return f(*args)

        call.__name__ = name
        self._wrapped[name] = call
        return call

    def __setattr__(self, name, value):
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._raw, name, value)


lib = _SerializedLib(_raw_lib)

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
        self.num_samplers = 0   # loaders' background sampler threads
        self.machine = None     # $RDPS_MACHINE: this trainer's machine in the job

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


def _launched():
    """True in a process rdps launch started ($RDPS_IP_CONFIG)."""
    return bool(os.environ.get("RDPS_IP_CONFIG"))


def initialize(ip_config=None, rank=None, num_trainers=None, transport=None, *,
               num_servers=1, timeout=60.0, barrier_timeout=None,
               secret_file=None, shutdown_servers=True, num_samplers=None, **kwargs):
    """Joins the job, as dgl.distributed.initialize.

    In a process rdps launch started, the job is the launcher's:
    $RDPS_IP_CONFIG, $RDPS_RANK, $RDPS_NUM_TRAINERS, $RDPS_TRANSPORT (the
    defaults of ip_config, rank, num_trainers and transport) and
    $RDPS_MACHINE, $RDPS_NUM_SAMPLERS. Elsewhere the process runs
    standalone, as DGL's does when its launcher did not start it:
    num_servers servers (transport inproc) run in this process, rank 0 of 1,
    and an ip_config given (DGL's scripts pass one) is not used; pass rank,
    num_trainers or transport too (or set $RDPS_DIST_MODE=distributed) to
    join servers started by hand. The same script runs either way.

    timeout: seconds to wait for servers still starting (and per request);
    barrier_timeout: seconds a barrier waits for the others (default 600).
    secret_file: the job's shared secret (default $RDPS_SECRET, else none).
    shutdown_servers: trainer 0 asks the servers to exit at finalize(), after
    the last barrier (as rdps train does); False leaves them running.
    num_samplers: background threads that sample the next mini-batches of
    the loaders while training runs (default $RDPS_NUM_SAMPLERS, which rdps
    launch --num_samplers sets; else DGL's num_workers; else 0: sampling in
    the training loop). Other keyword arguments of DGL's (net_type,
    num_worker_threads, max_queue_size, ...) are accepted and ignored.
    """
    global _ctx
    with _lock:
        if _ctx is not None:
            raise RdpsError(-errno.EALREADY, "rdps.distributed is already initialized (rank %d of %d): "
                            "call finalize() first" % (_ctx.rank, _ctx.num_trainers))
        ctx = _Context()
        explicit = rank is not None or num_trainers is not None or transport is not None or \
            os.environ.get("RDPS_DIST_MODE") == "distributed"
        if _launched():
            ip_config = os.environ["RDPS_IP_CONFIG"]
        elif ip_config is not None and not explicit:
            if os.path.exists(ip_config):
                _check_ip_config(ip_config)  # a broken one is an error even unused
            print("rdps: initialize(%r): not started by rdps launch ($RDPS_IP_CONFIG unset), "
                  "so this process runs standalone with its servers inside it, as DGL's does "
                  "(pass rank= to join servers started by hand)" % (ip_config,), file=sys.stderr)
            ip_config = None
        ctx.rank = _env_int("RDPS_RANK", rank, 0)
        ctx.num_trainers = _env_int("RDPS_NUM_TRAINERS", num_trainers, 1)
        ctx.standalone = ip_config is None
        ctx.shutdown_servers = shutdown_servers
        ctx.num_samplers = _env_int("RDPS_NUM_SAMPLERS", num_samplers,
                                    int(kwargs.get("num_workers", 0) or 0))
        machine = os.environ.get("RDPS_MACHINE")
        ctx.machine = _env_int("RDPS_MACHINE", None, 0) if machine else None
        if ctx.num_samplers < 0:
            raise RdpsError(-errno.EINVAL, "num_samplers is %d, not >= 0" % ctx.num_samplers)
        if ctx.num_trainers < 1 or not 0 <= ctx.rank < ctx.num_trainers:
            raise RdpsError(-errno.EINVAL, "rank %d is not in 0..%d (num_trainers %d)" %
                            (ctx.rank, ctx.num_trainers - 1, ctx.num_trainers))
        if ctx.standalone:
            if ctx.num_trainers != 1:
                raise RdpsError(-errno.EINVAL, "standalone (no ip_config, no $RDPS_IP_CONFIG) runs one "
                                "trainer, not %d: give the job's ip_config" % ctx.num_trainers)
            transport = "inproc"
            ctx.machine = 0
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
    if not ctx.standalone and ctx.num_trainers > 1:
        _torch_distributed_env(ctx)


_TORCH_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def _endpoints():
    """(host, port, machine) of every server of the job's ip_config."""
    ctx = _context()
    err = ffi.new("char[]", ERRLEN)
    ipc = ffi.new("struct rdps_ipconfig *")
    ret = lib.rdps_ipconfig_load(os.fsencode(ctx.ip_config), ipc, err, ERRLEN)
    if ret < 0:
        raise RdpsError(ret, string(err))
    try:
        return [(string(ipc.servers[s].host), int(ipc.servers[s].port),
                 int(ipc.servers[s].machine)) for s in range(ipc.num_servers)]
    finally:
        lib.rdps_ipconfig_free(ipc)


def _torch_distributed_env(ctx):
    """What torch.distributed.init_process_group reads (env://), set where
    the launcher did not: RANK and WORLD_SIZE (the trainers'), LOCAL_RANK
    (among the trainers of this machine), MASTER_ADDR (trainer 0's machine,
    its ip_config address) and MASTER_PORT (a port trainer 0 found free
    there). DGL's scripts call init_process_group right after initialize:
    with this, DDP runs over gloo in rdps launch's jobs. One allreduce."""
    if all(os.environ.get(k) for k in _TORCH_ENV):
        return
    import socket

    n, rank = ctx.num_trainers, ctx.rank
    eps = _endpoints()
    machine = ctx.machine if ctx.machine is not None else -1
    port = 0
    if rank == 0:
        hosts = [h for h, _, m in eps if m == machine] or [eps[0][0]]
        with socket.socket() as sock:
            try:
                sock.bind((hosts[0], 0))
            except OSError:
                sock.bind(("", 0))
            port = sock.getsockname()[1]
    v = [0.0] * (2 * n + 1)
    v[rank] = float(machine + 1)   # 0: unknown
    if rank == 0:
        v[2 * n] = float(port)
    v = allreduce(v)
    machines = [int(round(x)) - 1 for x in v[:n]]
    port = int(round(v[2 * n]))
    m0 = machines[0]
    master = next((h for h, _, m in eps if m == m0), eps[0][0])
    local = sum(1 for r in range(rank) if machines[r] == machines[rank]) \
        if machines[rank] >= 0 else rank
    env = {"RANK": str(rank), "WORLD_SIZE": str(n), "LOCAL_RANK": str(local),
           "MASTER_ADDR": master, "MASTER_PORT": str(port)}
    for k, val in env.items():
        os.environ.setdefault(k, val)


def _check_ip_config(path):
    err = ffi.new("char[]", ERRLEN)
    ipc = ffi.new("struct rdps_ipconfig *")
    ret = lib.rdps_ipconfig_load(os.fsencode(path), ipc, err, ERRLEN)
    if ret < 0:
        raise RdpsError(ret, string(err))
    lib.rdps_ipconfig_free(ipc)


def server_machines():
    """The machine (its line in the ip_config) of each server of the job."""
    ctx = _context()
    if ctx.standalone:
        return [0] * get_num_servers()
    err = ffi.new("char[]", ERRLEN)
    ipc = ffi.new("struct rdps_ipconfig *")
    ret = lib.rdps_ipconfig_load(os.fsencode(ctx.ip_config), ipc, err, ERRLEN)
    if ret < 0:
        raise RdpsError(ret, string(err))
    try:
        return [int(ipc.servers[s].machine) for s in range(ipc.num_servers)]
    finally:
        lib.rdps_ipconfig_free(ipc)


def get_machine():
    """This trainer's machine in the job ($RDPS_MACHINE, which rdps launch
    sets; 0 standalone), or None where no launcher said."""
    return _context().machine


def get_num_samplers():
    """Background sampler threads of the loaders (initialize's num_samplers)."""
    return _context().num_samplers


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
