"""One compiled FX graph on the `neuron` device: capture, link, replay.

The first call runs the graph node by node through the native kernels while
the plugin records every program a node runs and the device bytes its
tensors were bound to (torch.ops.neuronsim.capture_*).  A node that touched
device memory from the host -- a CPU fallback, a host transfer, a random seed
drawn on the host -- is host-bound: it splits the graph and runs eagerly at
every call (counted; NEURON_STRICT=1 makes it an error naming the node).
Each maximal run of other nodes becomes a segment, and the C graph compiler
(backend/programs/link.c) links the segment's programs into ONE program over
the segment's memory: inputs bound per call, intermediates in the program's
scratch, outputs allocated per call.  Later calls run one program per
segment: one launch, one slice in traces.

Python only walks the FX graph here; what runs on the device is what the
kernel generators emitted, linked in C."""
import operator
import os
import warnings

import torch
import torch.fx
from torch.utils import _pytree as pytree

from . import records

# the records this module builds for graph_link / graph_run (the library's
# layout, compile/records.h: a field changed there fails here, at import)
records.expect("in_span", ("lo", "hi"))
records.expect("out_span", ("lo", "hi", "element_size"))
records.expect("out_meta", ("rank", "sizes", "strides"))

aten = torch.ops.aten

# counters merged into torch_neuronsim.stats()["compile"]
COUNTERS = dict.fromkeys(("graphs_compiled", "compile_cache_hits", "compile_cache_misses", "disk_cache_hits",
                          "disk_cache_writes", "graph_calls", "segments_linked", "segment_runs",
                          "fallback_nodes", "fallback_node_runs", "host_node_runs", "replay_mismatches"), 0)

# why a node runs on the host every call without splitting the graph
_HOST_ONLY = "computes on host tensors only"

# the dtypes a linked segment may return (graph_run takes them as
# ScalarType[]: no numeric codes cross to the library)
_RETURNED_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.float32,
                    torch.float64, torch.bool, torch.bfloat16, torch.complex64)


def reset_counters():
    for k in COUNTERS:
        COUNTERS[k] = 0


def strict():
    return os.environ.get("NEURON_STRICT", "0") not in ("", "0")


def _call_device(args):
    """the core a graph call runs on: its first neuron tensor's, else the
    current device (a graph that only makes tensors)"""
    for t in args:
        if isinstance(t, torch.Tensor) and t.device.type == "neuron":
            return t.device.index if t.device.index is not None else torch.accelerator.current_device_index()
    return torch.accelerator.current_device_index()


def _ops():
    return torch.ops.neuronsim


def _view_or_reshape(x, shape):
    # AOTAutograd traced `view` where the meta strides allowed one; a native
    # kernel may have produced another layout of the same values
    try:
        return aten.view.default(x, shape)
    except RuntimeError:
        return aten.reshape.default(x, shape)


def _like_meta(x, meta):
    """x with the strides the traced graph assumed (for ops that read raw
    strides: as_strided), copied when a kernel chose another layout"""
    if not isinstance(meta, torch.Tensor) or not isinstance(x, torch.Tensor) or x.stride() == meta.stride():
        return x
    return torch.empty_strided(meta.shape, meta.stride(), dtype=x.dtype, device=x.device).copy_(x)


def run_node(gm, node, env):
    """one FX node's value from its inputs' values in env"""
    args = torch.fx.node.map_arg(node.args, lambda n: env[n])
    kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
    if node.op == "get_attr":
        obj = gm
        for part in node.target.split("."):
            obj = getattr(obj, part)
        return obj
    if node.op == "call_method":
        return getattr(args[0], node.target)(*args[1:], **kwargs)
    if node.op == "call_module":
        return gm.get_submodule(node.target)(*args, **kwargs)
    fn = node.target
    if fn in (aten.view.default, aten._unsafe_view.default):
        return _view_or_reshape(args[0], args[1])
    if fn in (aten.as_strided.default, aten.as_strided_scatter.default) and isinstance(node.args[0], torch.fx.Node):
        args = (_like_meta(args[0], node.args[0].meta.get("val")),) + tuple(args[1:])
    return fn(*args, **kwargs)


def _leaves(value):
    return pytree.tree_flatten(value)[0]


def _meta(t):
    return (str(t.dtype), tuple(t.shape), tuple(t.stride()))


def overlaps(tensors):
    """how the tensors' bytes overlap: (i, j, start_j - start_i) for every
    pair whose [first, last] element ranges meet.  A linked program resolved
    each access against the inputs as they overlapped at capture; a call
    where they overlap differently (fn(x, x[1:]) compiled, fn(a, b) called)
    must not replay it."""
    spans = []
    for k, t in enumerate(tensors):
        if t.numel():
            lo = t.data_ptr()
            hi = lo + (1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))) * t.element_size()
            spans.append((lo, hi, k))
    spans.sort()
    out = []
    for a in range(len(spans)):
        for b in range(a + 1, len(spans)):
            if spans[b][0] >= spans[a][1]:
                break
            i, j = sorted((spans[a][2], spans[b][2]))
            out.append((i, j, tensors[j].data_ptr() - tensors[i].data_ptr()))
    return sorted(out)


def _device_leaves(value):
    return [t for t in _leaves(value) if isinstance(t, torch.Tensor) and t.device.type == "neuron"]


class NodeInfo:
    """what the capture saw of one node"""
    __slots__ = ("why", "programs", "spans", "spec", "kinds", "metas")
    # spans and metas: one per neuron tensor among the value's leaves

    def __init__(self, value, why, spans):
        self.why, self.programs, self.spans = why, 0, spans
        leaves, self.spec = pytree.tree_flatten(value)
        self.kinds, self.metas = [], []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor) and leaf.device.type == "neuron":
                self.kinds.append(("t", len(self.metas)))
                self.metas.append(_meta(leaf))
            else:
                self.kinds.append(("c", leaf))


class Segment:
    """graph nodes first..last (indices), linked into one program"""

    def __init__(self, first, last):
        self.first, self.last = first, last
        self.inputs = []       # node indices whose neuron tensors are bound, in order
        self.in_meta = []      # per bound tensor: _meta at capture
        self.in_overlaps = []  # overlaps() of the bound tensors at capture
        self.outputs = []      # node indices defined here and used later
        self.out_specs = []    # per output node: (treespec, [("t", k) | ("c", constant)])
        self.out_dtypes = []   # per output tensor, for graph_run
        self.out_meta = []     # out_meta records for graph_run
        self.program = None    # linked .nsp bytes (uint8 CPU tensor)
        self.plan = None
        self.device = 0
        self.handle = None

    def load(self):
        if self.handle is None:
            self.handle = _ops().graph_load(self.program, self.device)
        return self.handle

    def __del__(self):
        if self.handle is not None:
            try:
                _ops().graph_free(self.handle)
            except Exception:   # the interpreter is shutting down
                pass


class CompiledGraph:
    """AOTAutograd's boxed calling convention (one list of arguments): an FX
    graph run as linked segments plus host-bound nodes.  `cache` finds and
    keeps compiled steps (compile.py: in memory and on disk)."""

    _boxed_call = True

    def __init__(self, gm, name, cache=None):
        self.gm = gm
        self.name = name
        self.cache = cache
        self.cache_key = None      # set by cache.find, used by cache.store
        self.nodes = list(gm.graph.nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.steps = None          # [("segment", Segment) | ("node", index)]
        self.fallbacks = {}        # node index -> why it runs eagerly
        self.last_use = {}
        for i, n in enumerate(self.nodes):
            for a in n.all_input_nodes:
                self.last_use[self.index[a]] = i
        self._free_after = None
        self.const = self._constant_nodes()
        self.const_values = {}     # node index -> value, computed once
        self.outside = set()       # host-only nodes: run every call, before their segment
        from .fusion import host_prelude
        # host work on graph inputs only (step counters, uploads of their
        # scalars): every call, first, so its device memory is never a
        # segment's
        self.prelude = sorted(self.index[n] for n in host_prelude(gm)) if gm is not None else []
        self.outside.update(self.prelude)
        self.prelude_set = set(self.prelude)

    def _constant_nodes(self):
        """nodes whose value depends on no graph input and nothing random
        (arange, masks, scalar_tensor, their views and casts: the rotary
        positions): computed once and kept, as a compiler folds constants"""
        const = set()
        for i, n in enumerate(self.nodes):
            if n.op == "get_attr":
                const.add(i)
                continue
            t = n.target
            if n.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
                if n.op == "call_function" and t is operator.getitem and self.index[n.args[0]] in const:
                    const.add(i)
                continue
            if torch.Tag.nondeterministic_seeded in t.tags or t._schema.is_mutable:
                continue   # random or in place
            # (a view of a constant is one too: the kept value holds its base)
            if all(self.index[a] in const for a in n.all_input_nodes):
                const.add(i)
        return const

    # ---------------------------------------------------------------- capture
    def _capture(self, args):
        """runs the graph once, recording; returns its result and a NodeInfo
        per node"""
        ops = _ops()
        env, info = {}, {}
        seg_start = 0
        deferred = []          # dead values defined before the current segment
        places = iter(args)
        result = None
        for i, node in enumerate(self.nodes):
            if node.op == "placeholder":
                env[node] = next(places)
                info[i] = NodeInfo(env[node], "", [ops.device_span(t) for t in _device_leaves(env[node])])
        for i in self.prelude:
            value = env[self.nodes[i]] = run_node(self.gm, self.nodes[i], env)
            info[i] = NodeInfo(value, "", [ops.device_span(t) for t in _device_leaves(value)])
        # constants first: their memory must not be memory a segment used
        # and freed before them
        for i in sorted(self.const):
            value = self.const_values[i] = env[self.nodes[i]] = run_node(self.gm, self.nodes[i], env)
            info[i] = NodeInfo(value, "", [ops.device_span(t) for t in _device_leaves(value)])
        ops.capture_begin()
        try:
            for i, node in enumerate(self.nodes):
                if node.op == "placeholder" or i in self.const or i in self.prelude_set:
                    continue
                if node.op == "output":
                    result = torch.fx.node.map_arg(node.args[0], lambda n: self._own(n, env[n]))
                    break
                fused = node.meta.get("fused_from")
                ops.capture_node(i, "fused_" + "_".join(fused) if fused else node.name)
                value = run_node(self.gm, node, env)
                env[node] = value
                why = ops.capture_reason(i)
                in_leaves = [t for a in node.all_input_nodes for t in _leaves(env.get(a)) if isinstance(t, torch.Tensor)]
                host_in = any(t.device.type != "neuron" for t in in_leaves)
                if not why and host_in and not any(t.device.type == "neuron" for t in in_leaves) and \
                        not _device_leaves(value):
                    # CPU work (an optimizer's step counters): no device memory
                    why = _HOST_ONLY
                if not why and host_in:
                    # its program may hold the host tensor's value as an immediate
                    why = "reads a host tensor"
                if not why and any(isinstance(t, torch.Tensor) and t.device.type != "neuron" for t in _leaves(value)):
                    why = "makes a tensor off the device"
                if not why and any(t.dtype not in _RETURNED_DTYPES for t in _device_leaves(value)):
                    why = "makes a tensor of a dtype the linker does not return"
                info[i] = NodeInfo(value, why, [ops.device_span(t) for t in _device_leaves(value)])
                for a in node.all_input_nodes:
                    ai = self.index[a]
                    if self.last_use.get(ai) == i and a.op != "placeholder" and ai not in self.prelude_set:
                        # a segment's own values may be reused at once; its
                        # inputs' memory must stay as it was until it ends
                        if ai >= seg_start:
                            del env[a]
                        else:
                            deferred.append(a)
                if why and why != _HOST_ONLY:   # the segment ends here (host work does not end it)
                    seg_start = i + 1
                    for a in deferred:
                        env.pop(a, None)
                    deferred.clear()
        finally:
            flat = ops.capture_end()
        for k in range(0, len(flat), 2):
            if flat[k] in info:
                info[flat[k]].programs = flat[k + 1]
        return result, info

    def _segments(self, info):
        """maximal runs of nodes that are not host-bound, holding a program"""
        steps, run = [("pre", i) for i in self.prelude], []

        def close():
            if any(info[i].programs for i in run):
                steps.append(("segment", Segment(run[0], run[-1])))
            else:
                steps.extend(("node", i) for i in run)
            run.clear()

        for i, node in enumerate(self.nodes):
            if node.op in ("placeholder", "output"):
                continue
            if i in self.const:
                steps.append(("const", i))
                continue
            if i in self.prelude_set:
                continue
            if info[i].why == _HOST_ONLY:
                # before the segment it sits in: it reads no device value
                steps.append(("host", i))
                self.outside.add(i)
                continue
            if info[i].why:
                close()
                steps.append(("node", i))
                self.fallbacks[i] = info[i].why
            else:
                run.append(i)
        close()
        return steps

    def _link(self, seg, info, device):
        """seg's inputs, outputs and linked program from the capture"""
        inside = [i for i in range(seg.first, seg.last + 1) if i not in self.const and i not in self.outside]
        ins = sorted({self.index[a] for i in inside for a in self.nodes[i].all_input_nodes} - set(inside))
        in_spans, spans = [], []
        for i in ins:
            seg.inputs.append(i)
            for span in info[i].spans:
                in_spans += records.pack("in_span", lo=span[0], hi=span[1])
                spans.append(span)
            seg.in_meta += info[i].metas
        seg.in_overlaps = sorted((a, b, spans[b][0] - spans[a][0]) for a in range(len(spans))
                                 for b in range(a + 1, len(spans))
                                 if spans[a][1] > spans[a][0] and spans[b][1] > spans[b][0] and
                                 spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1])
        out_spans = []
        for i in inside:
            if self.last_use.get(i, -1) <= seg.last:
                continue
            seg.outputs.append(i)
            seg.out_specs.append((info[i].spec, info[i].kinds))
            for (dtype, shape, stride), span in zip(info[i].metas, info[i].spans):
                t = getattr(torch, dtype.split(".")[1])
                out_spans += records.pack("out_span", lo=span[0], hi=span[1],
                                          element_size=torch.empty((), dtype=t).element_size())
                seg.out_dtypes.append(t)
                seg.out_meta += records.pack("out_meta", rank=len(shape), sizes=list(shape), strides=list(stride))
        seg.device = device
        label = f"{self.name} nodes {seg.first}..{seg.last}"
        seg.program, seg.plan = _ops().graph_link(seg.first, seg.last, in_spans, out_spans, label)
        seg.plan = list(seg.plan)

    def compile(self, args):
        """the first call: capture, split, link; returns the call's result"""
        device = _call_device(args)
        result, info = self._capture(args)
        steps = []
        for kind, x in self._segments(info):
            if kind == "segment":
                try:
                    self._link(x, info, device)
                except RuntimeError as e:
                    # cannot be one program: its nodes run eagerly, counted
                    for i in range(x.first, x.last + 1):
                        if i in self.const or i in self.outside:
                            continue
                        steps.append(("node", i))
                        self.fallbacks[i] = f"its segment was not linked: {e}"
                    continue
                COUNTERS["segments_linked"] += 1
            steps.append((kind, x))
        COUNTERS["fallback_nodes"] += len(self.fallbacks)
        if self.fallbacks and strict():
            # CPU fallbacks among them already raised (count_fallback); the
            # rest run on the device, each as its own program(s)
            warnings.warn(self.fallback_report(), stacklevel=2)
        return result, steps

    def fallback_report(self):
        lines = [f"torch.compile(backend='neuron'): {len(self.fallbacks)} node(s) of {self.name} cannot be "
                 "lowered into its linked program and run eagerly (NEURON_STRICT=1 names them):"]
        for i, why in sorted(self.fallbacks.items()):
            n = self.nodes[i]
            lines.append(f"  {n.name} = {getattr(n.target, '__name__', n.target)}: {why}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ calls
    def __call__(self, args):
        args = list(args)
        COUNTERS["graph_calls"] += 1
        if self.steps is None:
            steps = self.cache.find(self, args) if self.cache else None
            if steps is not None:
                # a linked program is the same on every core: it runs on this
                # call's (another rank may have compiled and cached it)
                device = _call_device(args)
                for kind, x in steps:
                    if kind == "segment":
                        x.device = device
            if steps is None:
                result, steps = self.compile(args)
                COUNTERS["graphs_compiled"] += 1
                if self.cache:
                    self.cache.store(self, args, steps)
                self._set_steps(steps)
                return result
            self._set_steps(steps)
        return self._replay(args)

    def _set_steps(self, steps):
        self.steps = steps
        # the host-only nodes come from the steps (a cache hit compiled elsewhere)
        self.outside = set(self.prelude) | {x for kind, x in steps if kind == "host"}
        # after which step each value dies
        step_of = {}
        for k, (kind, x) in enumerate(steps):
            for i in (range(x.first, x.last + 1) if kind == "segment" else (x,)):
                if kind == "segment" and (i in self.const or i in self.outside):
                    continue
                step_of[i] = k
        self._free_after = [[] for _ in steps]
        for i, lu in self.last_use.items():
            if lu in step_of:
                self._free_after[step_of[lu]].append(i)

    def _replay(self, args):
        env = {}
        places = iter(args)
        for node in self.nodes:
            if node.op != "placeholder":
                break
            env[node] = next(places)
        nodes = self.nodes
        for k, (kind, x) in enumerate(self.steps):
            if kind == "const":
                if x not in self.const_values:     # loaded from the disk cache
                    self.const_values[x] = run_node(self.gm, nodes[x], env)
                env[nodes[x]] = self.const_values[x]
            elif kind in ("host", "pre"):
                env[nodes[x]] = run_node(self.gm, nodes[x], env)
                COUNTERS["host_node_runs"] += 1
            elif kind == "node":
                env[nodes[x]] = run_node(self.gm, nodes[x], env)
                COUNTERS["fallback_node_runs"] += x in self.fallbacks
            else:
                self._run_segment(x, env)
            for i in self._free_after[k]:
                env.pop(nodes[i], None)
        # a folded constant handed out is the caller's to change: a copy
        return torch.fx.node.map_arg(nodes[-1].args[0], lambda n: self._own(n, env[n]))

    def _own(self, node, value):
        if self.index[node] not in self.const:
            return value
        return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, value)

    def _run_segment(self, seg, env):
        nodes = self.nodes
        tensors = [t for i in seg.inputs for t in _device_leaves(env[nodes[i]])]
        if [_meta(t) for t in tensors] != seg.in_meta or overlaps(tensors) != seg.in_overlaps:
            # another layout or aliasing than the capture's: the segment's
            # nodes run eagerly this time
            COUNTERS["replay_mismatches"] += 1
            for i in range(seg.first, seg.last + 1):
                if i not in self.const and i not in self.outside:
                    env[nodes[i]] = run_node(self.gm, nodes[i], env)
            return
        flat = _ops().graph_run(seg.load(), f"{self.name}", tensors, seg.plan, seg.out_dtypes, seg.out_meta)
        COUNTERS["segment_runs"] += 1
        k = 0
        for i, (spec, kinds) in zip(seg.outputs, seg.out_specs):
            leaves = []
            for kind, v in kinds:
                if kind == "t":
                    leaves.append(flat[k])
                    k += 1
                else:
                    leaves.append(v)
            env[nodes[i]] = pytree.tree_unflatten(leaves, spec)
