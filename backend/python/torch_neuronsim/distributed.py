"""torch.distributed on `neuron`: the c10d backend named "neuron".

`dist.init_process_group(backend="neuron")` (or no backend: it is the
default for the device; or "cpu:gloo,neuron:neuron") makes a
NeuronProcessGroup: a torch.distributed.ProcessGroup whose collectives move
the data through Gloo -- PyTorch's own transport, so ranks may be processes
on different hosts -- and charge each rank's simulated stream clock the
collective model's time (device_model/collectives.c, the same figures as
`neuronsim collective`):

1. every rank publishes (collective, element count, dtype, root, its
   stream's clock) to the group; a disagreement raises on every rank and
   names it, so mismatched shapes never hang or corrupt;
2. the values: a neuron tensor's bytes are read and written by the host
   without the host link's charge (the hardware moves them over
   NeuronLink), reduced by Gloo;
3. the collective runs on the device's collective stream (one per
   device, as NCCL's): it starts when this rank's stream has its inputs,
   the last rank arrived and the collective stream is free, and lasts the
   model's time.  The caller's stream waits for its end when it waits on
   the Work (a synchronous call does at once) or on its future (DDP's
   reducer), so compute issued in between overlaps the collective.  The
   device timeline and the trace show it as "all_reduce 4.0 MiB ring x2".

The values move before the call returns; a dead peer surfaces as Gloo's
timeout error.  CPU tensors in the same group go to Gloo directly and are
not timed."""
import atexit
import ctypes
import weakref

import neuronsim
import torch
import torch.distributed as dist
import torch.utils._pytree as pytree
from torch.futures import Future

from . import _lib
from .device import _call

_CODES = {"all_reduce": 1, "broadcast": 2, "all_gather": 3, "reduce_scatter": 4, "all_to_all": 5, "barrier": 6,
          "reduce": 7, "gather": 8, "scatter": 9}
_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
           torch.int8, torch.uint8, torch.bool]


class _Done(dist.Work):
    """A collective whose values moved before the call returned.  Its
    simulated time runs on the device's collective stream until `end_ps`:
    wait() makes the caller's current stream wait for that end, and the
    future completes on the collective stream, so a stream that waits on it
    (DDP's reducer, a .then callback) waits for the end too -- NCCL's
    semantics, so compute issued before the wait overlaps the collective."""

    def __init__(self, result=None, dev=None, end_ps=None):
        super().__init__()
        self._result = result if result is not None else []
        self._dev, self._end = (dev, end_ps) if end_ps is not None else (None, None)
        self._future = _completed_future(self._result, self._dev)

    @staticmethod
    def joined(result, works):
        """one Work for several collectives: it ends when the last does"""
        timed = [w for w in works if w._dev is not None]
        if not timed:
            return _Done(result)
        return _Done(result, timed[0]._dev, max(w._end for w in timed))

    def wait(self, timeout=None):
        if self._dev is not None:
            _call(_lib.neuron_collective_wait, self._dev, ctypes.c_uint64(self._end))
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def result(self):
        return self._result

    def get_future(self):
        return self._future

    def synchronize(self):
        pass


def _completed_future(result, dev):
    """a completed Future of `result`; with a device, one that completes on
    the device's collective stream (all of result's tensors on that device)"""
    ts = [t for t in pytree.tree_leaves(result) if isinstance(t, torch.Tensor)]
    if dev is None or not ts or any(not _is_neuron(t) or t.device.index != dev for t in ts):
        fut = Future()
        fut.set_result(result)
        return fut
    from .device import Stream, stream
    fut = Future(devices=[torch.device("neuron", dev)])
    with stream(Stream(dev, _id=_call(_lib.neuron_collective_stream, dev))):
        fut.set_result(result)
    return fut


def _is_neuron(t):
    return isinstance(t, torch.Tensor) and t.device.type == "neuron"


def _host(t):
    """a contiguous CPU copy of t's values (a neuron tensor: no host-link charge)"""
    if _is_neuron(t):
        return torch.ops.neuronsim.collective_read(t).contiguous()
    return t.contiguous() if not t.is_contiguous() else t


def _put(dst, src):
    """src's values (CPU) into dst"""
    if _is_neuron(dst):
        torch.ops.neuronsim.collective_write_(dst, src.to(dst.dtype).reshape(dst.shape))
    elif dst.data_ptr() != src.data_ptr():
        dst.copy_(src.reshape(dst.shape))


def _clock(dev):
    """the simulated time (ps) of dev's current stream; 0 without a device"""
    if dev is None:
        return 0
    from .device import _stream_time_ps, current_stream
    return _stream_time_ps(dev, current_stream(dev).stream_id)


def _nbytes(ts):
    return sum(t.numel() * t.element_size() for t in ts)


def _size_text(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _reduce_op(opts):
    """the ReduceOp Gloo runs, and whether to divide after (AVG)"""
    op = opts.reduceOp
    if op == dist.ReduceOp.AVG:
        return dist.ReduceOp.SUM, True
    if op == dist.ReduceOp.PREMUL_SUM:
        raise RuntimeError("neuron: ReduceOp.PREMUL_SUM is not supported by the neuron backend")
    return op, False


def _ranks_text(ranks):
    """a group's global ranks as the trace shows them: "0-7", "0,8,16,24"
    or "0-3,8-11" (runs of consecutive ranks joined)"""
    runs, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            runs.append(f"{start}-{r}" if r > start else f"{r}")
            start = None
    return ",".join(runs)


# Groups still open when the interpreter exits (a script that never calls
# destroy_process_group, as Accelerate's examples do not) are shut down by an
# atexit hook while Python still runs.  Left to static destruction, Gloo's
# event loop thread could see a peer that exited first drop its connection
# and abort the process ("terminate called without an active exception");
# CUDA's NCCL groups only warn in that case.
_OPEN_GROUPS = weakref.WeakSet()


@atexit.register
def _shutdown_open_groups():
    for g in list(_OPEN_GROUPS):
        g.shutdown()


class NeuronProcessGroup(dist.ProcessGroup):
    def __init__(self, store, rank, size, timeout, group_name="", global_ranks=None):
        super().__init__(rank, size)
        self._gloo_pg = dist.ProcessGroupGloo(store, rank, size, timeout)
        _OPEN_GROUPS.add(self)
        self._name, self._desc = group_name, ""
        self._set_ranks(global_ranks, size)

    def _set_ranks(self, global_ranks, size):
        # the model places the group by its global ranks (rank r is
        # NeuronCore r): a strided FSDP group crosses chips where a
        # contiguous one of the same size would not
        self._ranks = list(global_ranks) if global_ranks else list(range(size))
        self._coalesced = None
        self._peers = _ranks_text(self._ranks).encode()

    # -------------------------------------------------------- identity
    def getBackendName(self):
        return "neuron"

    def _set_group_name(self, name):
        self._name = name

    @property
    def group_name(self):
        return self._name

    def _set_group_desc(self, desc):
        self._desc = desc

    @property
    def group_desc(self):
        return self._desc

    # destroy_process_group() shuts the group down: Gloo's threads end now,
    # while Python runs, not when the last holder (a DDP reducer kept alive
    # to the interpreter's exit) lets the group go
    def shutdown(self):
        g, self._gloo_pg = self._gloo_pg, None
        if g is not None:
            g.shutdown()

    def abort(self):
        g, self._gloo_pg = self._gloo_pg, None
        if g is not None:
            g.abort()

    @property
    def _gloo(self):
        if self._gloo_pg is None:
            raise RuntimeError(f"neuron: process group '{self._name}' was destroyed (destroy_process_group)")
        return self._gloo_pg

    # ----------------------------------------------------------- timing
    def _begin(self, kind, tensors, root=-1, dev=None):
        """every rank's (collective, elements, dtype, root, clock): a mismatch
        raises on every rank; returns (device, start clock in ps)"""
        if dev is None:
            dev = next((t.device.index for t in tensors if _is_neuron(t)), None)
        clock = _clock(dev)
        dtype = tensors[0].dtype if tensors else torch.float32
        code = _DTYPES.index(dtype) if dtype in _DTYPES else len(_DTYPES)
        # all-to-all's inputs may differ in size across ranks (uneven splits)
        count = -1 if kind == "all_to_all" else sum(t.numel() for t in tensors)
        mine = torch.tensor([_CODES[kind], count, code, root, clock], dtype=torch.int64)
        every = torch.empty(self.size() * 5, dtype=torch.int64)
        self._gloo._allgather_base(every, mine).wait()
        rows = every.view(self.size(), 5).tolist()
        names = {v: k for k, v in _CODES.items()}
        for r, (op, n, dt, rt, _) in enumerate(rows):
            if (op, n, dt, rt) != tuple(mine[:4].tolist()):
                theirs = f"{names.get(op, op)} of {n} elements of {_DTYPES[dt] if dt < len(_DTYPES) else '?'}"
                raise RuntimeError(
                    f"neuron: collective mismatch in group '{self._name}': rank {self.rank()} called {kind} of "
                    f"{mine[1].item()} elements of {dtype}" + (f" (root {root})" if root >= 0 else "") +
                    f", rank {r} called {theirs}" + (f" (root {rt})" if rt >= 0 else ""))
        return dev, max(row[4] for row in rows)

    def _charge(self, kind, dev, start_ps, nbytes, sent):
        """the model's time for `kind` over the group on dev's collective
        stream: (dev, its end in ps), or (None, None) without a device"""
        if dev is None:
            return None, None
        # reduce / gather / scatter move what all-reduce / all-gather do
        model = {"reduce": "all_reduce", "gather": "all_gather", "scatter": "all_gather"}.get(kind, kind)
        cost = neuronsim.collective_estimate(model, self._ranks, nbytes)
        label = f"{kind} {_size_text(nbytes)} {cost['algorithm']} x{self.size()}"
        end = ctypes.c_uint64()
        _call(_lib.neuron_collective_charge, dev, ctypes.c_uint64(start_ps), ctypes.c_uint64(round(cost["us"] * 1e6)),
           label.encode(), ctypes.c_uint64(sent), cost["algorithm"].encode(), self._peers, ctypes.byref(end))
        return dev, end.value

    def _done(self, result, dev=None, end_ps=None):
        work = _Done(result, dev, end_ps)
        if self._coalesced is not None:
            self._coalesced.append(work)
        return work

    def _timed(self, kind, tensors, nbytes, run, root=-1, result=None):
        dev, start = self._begin(kind, tensors, root)
        run()
        return self._done(result, *self._charge(kind, dev, start, nbytes, nbytes))

    # ----------------------------------------------------- collectives
    def allreduce(self, tensors, opts=None):
        opts = opts or dist.AllreduceOptions()
        op, avg = _reduce_op(opts)

        def run():
            for t, h in zip(tensors, self._reduced([_host(t) for t in tensors], op, avg)):
                _put(t, h)
        return self._timed("all_reduce", tensors, _nbytes(tensors), run, result=tensors)

    def _reduced(self, hosts, op, avg):
        """host tensors all-reduced by Gloo in place, divided by the group
        size for AVG (Gloo has no AVG)"""
        o = dist.AllreduceOptions()
        o.reduceOp = op
        self._gloo.allreduce(hosts, o).wait()
        if not avg:
            return hosts
        for h in hosts:
            if not h.is_floating_point():
                raise RuntimeError(f"neuron: ReduceOp.AVG needs a floating-point tensor, not {h.dtype}")
        return [h / self.size() for h in hosts]

    def allreduce_coalesced(self, tensors, opts=None):
        """tensors of any sizes (one dtype: one flat all-reduce, timed as
        one collective of their total size, as the coalescing manager asks)"""
        o = dist.AllreduceOptions()
        if opts is not None:
            o.reduceOp = opts.reduceOp
        if len({t.dtype for t in tensors}) > 1:
            return _Done.joined(tensors, [self.allreduce([t], o) for t in tensors])
        if not tensors:
            return _Done([])
        op, avg = _reduce_op(o)

        def run():
            flat, = self._reduced([torch.cat([_host(t).reshape(-1) for t in tensors])], op, avg)
            offset = 0
            for t in tensors:
                _put(t, flat[offset:offset + t.numel()])
                offset += t.numel()
        return self._timed("all_reduce", tensors, _nbytes(tensors), run, result=tensors)

    def broadcast(self, tensors, opts=None):
        opts = opts or dist.BroadcastOptions()

        def run():
            hosts = [_host(t) for t in tensors]
            o = dist.BroadcastOptions()
            o.rootRank, o.rootTensor = opts.rootRank, opts.rootTensor
            self._gloo.broadcast(hosts, o).wait()
            if self.rank() != opts.rootRank:
                for t, h in zip(tensors, hosts):
                    _put(t, h)
        return self._timed("broadcast", tensors, _nbytes(tensors), run, root=opts.rootRank, result=tensors)

    def _allgather_base(self, output, input, opts=None):
        def run():
            out = torch.empty(output.numel(), dtype=output.dtype)
            self._gloo._allgather_base(out, _host(input).reshape(-1)).wait()
            _put(output, out)
        return self._timed("all_gather", [input], output.numel() * output.element_size(), run, result=[output])

    def allgather(self, output_tensors, input_tensors, opts=None):
        def run():
            for outs, inp in zip(output_tensors, input_tensors):
                hosts = [torch.empty(o.shape, dtype=o.dtype) for o in outs]
                self._gloo.allgather([hosts], [_host(inp)]).wait()
                for o, h in zip(outs, hosts):
                    _put(o, h)
        total = sum(_nbytes(outs) for outs in output_tensors)
        return self._timed("all_gather", input_tensors, total, run, result=output_tensors)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        return self.allgather(output_lists, input_list, opts)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        return _Done.joined(outputs, [self._allgather_base(o, i, opts) for o, i in zip(outputs, inputs)])

    def _reduce_scatter(self, output, flat, opts, nbytes, inputs):
        """output = this rank's slice of the reduction of every rank's flat
        host tensor (Gloo's reduce-scatter)"""
        opts = opts or dist.ReduceScatterOptions()
        op, avg = _reduce_op(opts)
        n = output.numel()
        if flat.numel() != n * self.size():
            raise RuntimeError(f"neuron: reduce_scatter: input of {flat.numel()} elements is not "
                               f"{self.size()} x the output's {n}")

        def run():
            part = torch.empty(n, dtype=flat.dtype)
            o = dist.ReduceScatterOptions()
            o.reduceOp = op
            self._gloo._reduce_scatter_base(part, flat, o).wait()
            _put(output, part / self.size() if avg else part)
        return self._timed("reduce_scatter", inputs, nbytes, run, result=[output])

    def _reduce_scatter_base(self, output, input, opts=None):
        return self._reduce_scatter(output, _host(input).reshape(-1), opts, input.numel() * input.element_size(),
                                    [input])

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        works = [self._reduce_scatter(out, torch.cat([_host(i).reshape(-1) for i in ins]), opts, _nbytes(ins),
                                      list(ins)) for out, ins in zip(output_tensors, input_tensors)]
        return _Done.joined(output_tensors, works)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        return _Done.joined(outputs, [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs)])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        def run():
            out = torch.empty(output.shape, dtype=output.dtype)
            self._gloo.alltoall_base(out, _host(input), list(output_split_sizes), list(input_split_sizes)).wait()
            _put(output, out)
        return self._timed("all_to_all", [input], input.numel() * input.element_size(), run, result=[output])

    def alltoall(self, output_tensors, input_tensors, opts=None):
        def run():
            outs = [torch.empty(o.shape, dtype=o.dtype) for o in output_tensors]
            self._gloo.alltoall(outs, [_host(i) for i in input_tensors]).wait()
            for o, h in zip(output_tensors, outs):
                _put(o, h)
        return self._timed("all_to_all", input_tensors, _nbytes(input_tensors), run, result=output_tensors)

    def barrier(self, opts=None):
        from .device import current_device
        dev, start = self._begin("barrier", [], dev=current_device())
        return self._done([], *self._charge("barrier", dev, start, 0, 0))

    # the names torch.distributed's Python API calls a group by
    def all_gather_single(self, output, input, opts=None):
        return self._allgather_base(output, input, opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        return self.allgather_into_tensor_coalesced(outputs, inputs, opts)

    def reduce_scatter_single(self, output, input, opts=None):
        return self._reduce_scatter_base(output, input, opts)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        return self.reduce_scatter_tensor_coalesced(outputs, inputs, opts)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    # collectives run as they are called: coalescing has nothing to batch;
    # the Work of the block ends when its last collective does
    def _start_coalescing(self, device):
        self._coalesced = []

    def _end_coalescing(self, device):
        works, self._coalesced = self._coalesced or [], None
        return _Done.joined([], works)

    def reduce(self, tensors, opts=None):
        opts = opts or dist.ReduceOptions()
        op, avg = _reduce_op(opts)

        def run():
            hosts = [_host(t) for t in tensors]
            o = dist.ReduceOptions()
            o.reduceOp, o.rootRank, o.rootTensor = op, opts.rootRank, opts.rootTensor
            self._gloo.reduce(hosts, o).wait()
            if self.rank() == opts.rootRank:
                for t, h in zip(tensors, hosts):
                    _put(t, h / self.size() if avg else h)
        return self._timed("reduce", tensors, _nbytes(tensors), run, root=opts.rootRank, result=tensors)

    def gather(self, output_tensors, input_tensors, opts=None):
        opts = opts or dist.GatherOptions()

        def run():
            root = self.rank() == opts.rootRank
            outs = [[torch.empty(o.shape, dtype=o.dtype) for o in output_tensors[0]]] if root else []
            o = dist.GatherOptions()
            o.rootRank = opts.rootRank
            self._gloo.gather(outs, [_host(i) for i in input_tensors], o).wait()
            if root:
                for t, h in zip(output_tensors[0], outs[0]):
                    _put(t, h)
        return self._timed("gather", input_tensors, _nbytes(input_tensors) * self.size(), run, root=opts.rootRank,
                           result=output_tensors)

    def scatter(self, output_tensors, input_tensors, opts=None):
        opts = opts or dist.ScatterOptions()

        def run():
            root = self.rank() == opts.rootRank
            outs = [torch.empty(o.shape, dtype=o.dtype) for o in output_tensors]
            o = dist.ScatterOptions()
            o.rootRank = opts.rootRank
            self._gloo.scatter(outs, [[_host(i) for i in input_tensors[0]]] if root else [], o).wait()
            for t, h in zip(output_tensors, outs):
                _put(t, h)
        return self._timed("scatter", output_tensors, _nbytes(output_tensors) * self.size(), run,
                           root=opts.rootRank, result=output_tensors)

    # ----------------------------------------------------- point to point
    def send(self, tensors, dst, tag):
        dev = next((t.device.index for t in tensors if _is_neuron(t)), None)
        clock = _clock(dev)
        meta = torch.tensor([sum(t.numel() for t in tensors), clock], dtype=torch.int64)
        self._gloo.send([meta], dst, tag).wait()
        self._gloo.send([torch.cat([_host(t).reshape(-1) for t in tensors])], dst, tag).wait()
        nbytes = _nbytes(tensors)
        return self._done(tensors, *self._charge("send_recv", dev, clock, nbytes, nbytes))

    def recv(self, tensors, src, tag):
        dev = next((t.device.index for t in tensors if _is_neuron(t)), None)
        meta = torch.empty(2, dtype=torch.int64)
        self._gloo.recv([meta], src, tag).wait()
        n = sum(t.numel() for t in tensors)
        if meta[0].item() != n:
            raise RuntimeError(f"neuron: recv of {n} elements from rank {src}, which sent {meta[0].item()}")
        flat = torch.empty(n, dtype=tensors[0].dtype)
        self._gloo.recv([flat], src, tag).wait()
        at = 0
        for t in tensors:
            _put(t, flat[at:at + t.numel()])
            at += t.numel()
        mine = _clock(dev)
        nbytes = _nbytes(tensors)
        return self._done(tensors, *self._charge("send_recv", dev, max(mine, meta[1].item()), nbytes, 0))


_SYMMETRIC_KEY = "__neuronsim_symmetric_ranks__"
_LIVE_STORES = []


class SymmetricStore(dist.Store):
    """The store of a timing-only run in which this process stands for every
    rank: `init_process_group("neuron", store=SymmetricStore(), rank=0,
    world_size=128)`.  Its groups (and DeviceMesh's sub-groups) move no
    data -- every rank is taken to hold what this one holds, as PyTorch's
    fake process group does -- and charge the collective model's time for
    their real size, so a 128-rank mesh's step time comes from one process
    (NEURON_SIM_MODE=timing: no values are computed anyway).  An in-memory
    key-value store (one process needs no other)."""

    def __init__(self):
        super().__init__()
        self._kv = {_SYMMETRIC_KEY: b"1"}
        # the process group keeps only the C++ side of a Python store: this
        # keeps the Python side (its methods) alive for the process
        _LIVE_STORES.append(self)

    def set(self, key, value):
        self._kv[key] = value.encode() if isinstance(value, str) else bytes(value)

    def get(self, key):
        if key not in self._kv:
            raise RuntimeError(f"SymmetricStore: no key {key!r} (one process holds every rank's)")
        return self._kv[key]

    def add(self, key, amount):
        v = int(self._kv.get(key, b"0")) + amount
        self._kv[key] = str(v).encode()
        return v

    def check(self, keys):
        return all(k in self._kv for k in keys)

    def wait(self, keys, timeout=None):
        self.get(next((k for k in keys if k not in self._kv), keys[0]) if keys else _SYMMETRIC_KEY)

    def compare_set(self, key, expected, desired):
        cur = self._kv.get(key)
        if cur is None and not expected or cur == (expected.encode() if isinstance(expected, str) else expected):
            self.set(key, desired)
        return self._kv.get(key, b"")

    def delete_key(self, key):
        return self._kv.pop(key, None) is not None

    def num_keys(self):
        return len(self._kv)


class SymmetricProcessGroup(NeuronProcessGroup):
    """A group of symmetric ranks in one process (SymmetricStore)."""

    def __init__(self, rank, size, group_name="", global_ranks=None):
        dist.ProcessGroup.__init__(self, rank, size)
        self._gloo_pg = None
        self._name, self._desc = group_name, ""
        self._set_ranks(global_ranks, size)

    def _begin(self, kind, tensors, root=-1, dev=None):
        if dev is None:
            dev = next((t.device.index for t in tensors if _is_neuron(t)), None)
        return dev, _clock(dev)            # every rank arrives when this one does

    def _timed(self, kind, tensors, nbytes, run, root=-1, result=None):
        dev, start = self._begin(kind, tensors, root)
        return self._done(result, *self._charge(kind, dev, start, nbytes, nbytes))   # no values move

    def send(self, tensors, dst, tag):
        return self._timed("send_recv", tensors, _nbytes(tensors), None, result=tensors)

    def recv(self, tensors, src, tag):
        return self._timed("send_recv", tensors, _nbytes(tensors), None, result=tensors)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        works = [self._timed("reduce_scatter", list(ins), _nbytes(ins), None, result=[out])
                 for out, ins in zip(output_tensors, input_tensors)]
        return _Done.joined(output_tensors, works)

    def shutdown(self):
        pass

    def abort(self):
        pass


def _symmetric(store):
    """the bottom of a chain of prefix stores is a SymmetricStore (pybind
    hands it back as a plain Store: asked for its marker key)"""
    while isinstance(store, dist.PrefixStore):
        store = store.underlying_store
    try:
        return isinstance(store, SymmetricStore) or store.check([_SYMMETRIC_KEY])
    except Exception:
        return False


def _create(opts, backend_options=None):
    """Backend.register_backend's creator (extended API: it receives the
    group's name, which functional collectives look groups up by)."""
    ranks = list(opts.global_ranks_in_group)
    if _symmetric(opts.store):
        return SymmetricProcessGroup(opts.group_rank, opts.group_size, opts.group_id, ranks)
    return NeuronProcessGroup(opts.store, opts.group_rank, opts.group_size, opts.timeout, opts.group_id, ranks)


def register():
    """`neuron` as a c10d backend name and the default backend for the
    device (torch_neuronsim's import calls this)."""
    if not dist.is_available() or "neuron" in dist.Backend.backend_list:
        return
    dist.Backend.register_backend("neuron", _create, extended_api=True, devices=["neuron"])
