"""The graph compiler's FX pass: chains of pointwise ATen nodes become one
torch.ops.neuronsim.fused_pointwise node each, whose kernel (fused.c) keeps
the chain's intermediates in SBUF: inputs in from HBM once, output out once.

A node joins the region of an operand when that operand is the region's
last node, has no other user and has the node's shape, so everything but a
region's last node is used only inside it and every step has the region's
shape.  Taken: float nodes whose tensor operands are float (any float dtype:
the steps compute in fp32) and have the node's shape, or, for a binary
op, broadcast to it as the kernel reads them (a row's one value, the
trailing dims repeated: fused_input_mode); float-to-float casts (a step
that rounds to its dtype); Python numbers as immediates.
NEURON_SIM_FUSION=0 turns the pass off."""
import math
import operator
import os

import torch
from torch.utils import _pytree as pytree

from . import records

aten = torch.ops.aten

# the fused program's step kinds and limits, from the library (kernels.h's
# NK_FUSED_*: the library is loaded before this module)
_FUSED = torch.ops.neuronsim.fused_constants()
TT, TS, ACT = _FUSED["TT"], _FUSED["TS"], _FUSED["ACT"]
MAX_IN, MAX_STEPS = _FUSED["MAX_IN"], _FUSED["MAX_STEPS"]
FULL = _FUSED["FULL"]
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)
# a step's record layout (compile/records.h), checked here at import
records.expect("fused_step", ("kind", "op", "op2", "a", "b", "reverse", "dtype"))
records.expect("fused_imm", ("imm", "imm2"))

_ALU = {}
_ACT = {}


def _codes():
    """ALU and activation enum values: their index in the ISA's tables"""
    if not _ALU:
        import neuronsim
        t = neuronsim.tables()
        _ALU.update({name: i for i, name in enumerate(t.ALU_OPS)})
        _ACT.update({name: i for i, name in enumerate(t.ACTIVATIONS)})
    return _ALU, _ACT


_BINARY = {aten.add.Tensor: "add", aten.sub.Tensor: "subtract", aten.mul.Tensor: "multiply",
           aten.div.Tensor: "divide", aten.maximum.default: "max", aten.minimum.default: "min"}
# the ATen ops that are one ScalarE activation: the table the eager kernels
# are registered from (aten/pointwise/activations.def), from the library
_UNARY_ACT = {getattr(aten, name).default: code
              for name, code in torch.ops.neuronsim.unary_activations().items()}


def enabled():
    return os.environ.get("NEURON_SIM_FUSION", "1") != "0"


def _finish(gm, changes):
    """a pass's end: the rewritten graph checked and its code regenerated"""
    if changes:
        gm.graph.lint()
        gm.recompile()
    return changes


def _retire(gm, node, by, *dead):
    """node's uses go to `by`; node and the (now unused) dead nodes go"""
    node.replace_all_uses_with(by)
    for n in (node,) + dead:
        if n is not None:
            gm.graph.erase_node(n)


def _val(n):
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else None


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _mode(v, out):
    """how the value v lines up with the node value out, as the fused kernel
    reads its inputs (FULL, ROW, PERIOD), or -1"""
    if not isinstance(v, torch.Tensor) or v.device != out.device or v.dtype not in _FLOATS:
        return -1
    if v.shape == out.shape:
        return FULL
    if not all(isinstance(d, int) for d in tuple(v.shape) + tuple(out.shape)):
        return -1     # (symbolic sizes: no broadcast)
    return torch.ops.neuronsim.fused_input_mode(list(v.shape), list(out.shape))


def _cast_dtype(node):
    """the float dtype a float-to-float cast node converts to, else None"""
    t, args, kw = node.target, node.args, node.kwargs
    if t is aten._to_copy.default and len(args) == 1 and set(kw) <= {"dtype", "layout", "device"} and \
            kw.get("layout", torch.strided) == torch.strided:
        dev = kw.get("device")
        if dev is not None and torch.device(dev) != _val(args[0]).device:
            return None
        return kw.get("dtype")
    if t is torch.ops.prims.convert_element_type.default and len(args) == 2 and not kw:
        return args[1]
    return None


def _step(node):
    """(kind, op, op2, operands, imm, imm2, reverse, dtype) for a fusable
    node, or None; operands are FX nodes, dtype the ISA dtype a cast rounds
    to (0: none)"""
    out = _val(node)
    if not isinstance(out, torch.Tensor) or out.device.type != "neuron" or \
            out.dtype not in _FLOATS or out.numel() == 0:
        return None
    alu, act = _codes()

    def same(n):
        return isinstance(n, torch.fx.Node) and _mode(_val(n), out) == FULL

    t, args = node.target, node.args
    if t in _BINARY and not node.kwargs.get("alpha", 1) != 1 and len(args) == 2:
        a, b = args
        op = alu.get(_BINARY[t])
        if op is None or not isinstance(a, torch.fx.Node):
            return None
        if isinstance(b, torch.fx.Node) and _mode(_val(a), out) >= 0 and _mode(_val(b), out) >= 0:
            return (TT, op, 0, [a, b], 0.0, 0.0, False, 0)
        if _number(b) and same(a):
            return (TS, op, alu["bypass"], [a], float(b), 0.0, False, 0)
        return None
    if t in (aten.rsub.Scalar,) and len(args) >= 2 and same(args[0]) and _number(args[1]) and \
            node.kwargs.get("alpha", 1) == 1 and (len(args) < 3 or args[2] == 1):
        return (TS, alu["subtract"], alu["bypass"], [args[0]], float(args[1]), 0.0, True, 0)
    if t in (aten.add.Scalar, aten.sub.Scalar, aten.mul.Scalar, aten.div.Scalar) and len(args) == 2 and \
            same(args[0]) and _number(args[1]) and node.kwargs.get("alpha", 1) == 1:
        name = {aten.add.Scalar: "add", aten.sub.Scalar: "subtract", aten.mul.Scalar: "multiply",
                aten.div.Scalar: "divide"}[t]
        return (TS, alu[name], alu["bypass"], [args[0]], float(args[1]), 0.0, False, 0)
    if t is aten.pow.Tensor_Scalar and len(args) == 2 and same(args[0]) and not node.kwargs and \
            args[1] in (2, -1) and not isinstance(args[1], bool):
        # the exponents CPU's kernel computes as x * x and 1 / x
        if args[1] == 2:
            return (TT, alu["multiply"], 0, [args[0], args[0]], 0.0, 0.0, False, 0)
        return (TS, alu["divide"], alu["bypass"], [args[0]], 1.0, 0.0, True, 0)
    if t in (aten._to_copy.default, torch.ops.prims.convert_element_type.default):
        if args and same(args[0]) and _cast_dtype(node) == out.dtype:
            # x in its own dtype, rounded to the cast's (exactly the copy's value)
            return (TS, alu["bypass"], alu["bypass"], [args[0]], 0.0, 0.0, False,
                    _FUSED["dtype:" + str(out.dtype).split(".")[1]])
        return None
    if len(args) != 1 or node.kwargs and t is not aten.gelu.default or not same(args[0]):
        return None
    if t is aten.neg.default:
        return (TS, alu["multiply"], alu["bypass"], [args[0]], -1.0, 0.0, False, 0)
    if t is aten.relu.default:
        return (TS, alu["max"], alu["bypass"], [args[0]], 0.0, 0.0, False, 0)
    if t is aten.gelu.default:
        name = "gelu_tanh" if node.kwargs.get("approximate", "none") == "tanh" else "gelu"
        return (ACT, act[name], 0, [args[0]], 1.0, 0.0, False, 0)
    if t in _UNARY_ACT:
        return (ACT, _UNARY_ACT[t], 0, [args[0]], 1.0, 0.0, False, 0)
    return None


class _Region:
    def __init__(self, node, step):
        self.nodes = [node]
        self.steps = {node: step}

    @property
    def root(self):
        return self.nodes[-1]

    def inputs(self):
        ins = []
        for n in self.nodes:
            for a in self.steps[n][3]:
                if a not in self.steps and a not in ins:
                    ins.append(a)
        return ins


def _product(n):
    """(mm or addmm node, view node or None, bias) when n is a product (seen
    through one view) whose value has one use; else None"""
    view = None
    if isinstance(n, torch.fx.Node) and n.op == "call_function" and \
            n.target in (aten.view.default, aten._unsafe_view.default) and len(n.users) == 1 and \
            isinstance(n.args[0], torch.fx.Node):
        view, n = n, n.args[0]
    if not isinstance(n, torch.fx.Node) or n.op != "call_function" or len(n.users) != 1 or n.kwargs:
        return None
    if n.target is aten.mm.default and len(n.args) == 2:
        return n, view, None
    if n.target is aten.addmm.default and len(n.args) == 3:
        bv = _val(n.args[0])
        if isinstance(bv, torch.Tensor) and bv.dim() == 1:
            return n, view, n.args[0]
    return None


# the whole-op activations matmul_epilogue applies (its table, from the
# library); gelu's two forms are matched by their approximate argument
_EPILOGUE = {op: code for op, code in _UNARY_ACT.items()
             if code in set(torch.ops.neuronsim.epilogue_activations())}


def fuse_matmul_epilogues(gm):
    """act(mm(a, b)) and act(addmm(bias, a, b)) -> neuronsim.matmul_epilogue:
    the activation applied as the product leaves PSUM (ScalarE), no HBM round
    trip and no program of its own.  Returns how many it fused."""
    if not enabled():
        return 0
    _, act = _codes()
    done = 0
    for u in list(gm.graph.nodes):
        if u.op != "call_function" or len(u.args) != 1 or not isinstance(u.args[0], torch.fx.Node):
            continue
        if u.target is aten.gelu.default:
            code = act["gelu_tanh" if u.kwargs.get("approximate", "none") == "tanh" else "gelu"]
        elif u.target in _EPILOGUE and not u.kwargs:
            code = _EPILOGUE[u.target]
        else:
            continue
        got = _product(u.args[0])   # act(view(mm)): Llama's [b*s, n] product seen as [b, s, n]
        if got is None:
            continue
        m, view, bias = got
        a, b = m.args[-2], m.args[-1]
        out = _val(m)
        if not isinstance(out, torch.Tensor) or out.device.type != "neuron" or \
                out.dtype not in (torch.float32, torch.bfloat16, torch.float16):
            continue
        with gm.graph.inserting_before(u):
            f = gm.graph.call_function(torch.ops.neuronsim.matmul_epilogue.default, (a, b, bias, code))
            f.meta["val"] = out
            f.meta["fused_from"] = [m.name, u.name]
            r = f
            if view is not None:
                r = gm.graph.call_function(view.target, (f, view.args[1]))
                r.meta["val"] = _val(u)
        _retire(gm, u, r, view, m)
        done += 1
    return _finish(gm, done)


def fuse_residual_epilogues(gm):
    """r + mm(a, b) (a transformer's o_proj / down_proj and its residual):
    neuronsim.matmul_epilogue with the residual added as the product leaves
    PSUM.  Returns how many it fused."""
    if not enabled():
        return 0
    done = 0
    for u in list(gm.graph.nodes):
        if u.op != "call_function" or u.target is not aten.add.Tensor or len(u.args) != 2 or \
                u.kwargs.get("alpha", 1) != 1:
            continue
        for k in (1, 0):
            p, r = u.args[k], u.args[1 - k]
            got = _product(p)
            if got is None or not isinstance(r, torch.fx.Node):
                continue
            m, view, bias = got
            out, rv, uv = _val(m), _val(r), _val(u)
            if not (isinstance(out, torch.Tensor) and isinstance(rv, torch.Tensor) and isinstance(uv, torch.Tensor)) \
                    or out.device.type != "neuron" or rv.dtype != out.dtype or uv.dtype != out.dtype or \
                    rv.shape != uv.shape or rv.numel() != out.numel() or \
                    out.dtype not in (torch.float32, torch.bfloat16, torch.float16):
                continue
            with gm.graph.inserting_before(u):
                r2 = gm.graph.call_function(aten.reshape.default, (r, list(out.shape)))
                f = gm.graph.call_function(torch.ops.neuronsim.matmul_epilogue.default,
                                           (m.args[-2], m.args[-1], bias, 0, r2))
                f.meta["val"] = out
                f.meta["fused_from"] = [m.name, u.name]
                res = gm.graph.call_function(aten.view.default, (f, list(uv.shape)))
                res.meta["val"] = uv
            _retire(gm, u, res, view, m)
            done += 1
            break
    return _finish(gm, done)


def _inline_cheap_producers(gm):
    """A one-operand VectorE node (a cast, x * 2, -x) read by several
    pointwise nodes: each reader gets a copy of its own, which joins the
    reader's region -- the readers load the producer's operand and compute
    it in SBUF instead of loading its result, and the producer's own result
    goes to HBM only for readers that are not pointwise (inductor inlines
    pointwise producers into their consumers the same way).  Returns how
    many copies it made."""
    done = 0
    for x in list(gm.graph.nodes):
        if x.op != "call_function" or len(x.users) < 2:
            continue
        step = _step(x)
        if step is None or step[0] != TS:
            continue
        shape = tuple(_val(x).shape)
        readers = []
        for u in x.users:
            su = _step(u) if u.op == "call_function" else None
            if su is not None and x in su[3] and tuple(_val(u).shape) == shape:
                readers.append(u)
        for u in readers:
            with gm.graph.inserting_before(u):
                c = gm.graph.node_copy(x)
            u.replace_input_with(x, c)
            done += 1
        if not x.users:
            gm.graph.erase_node(x)
    return done


def fuse_pointwise(gm):
    """rewrites gm in place; returns how many regions it made"""
    if not enabled():
        return 0
    alu, act = _codes()
    if "bypass" not in alu:
        return 0
    _inline_cheap_producers(gm)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    region_of = {}
    regions = []
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        step = _step(node)
        if step is None:
            continue
        joined = []
        for a in step[3]:
            r = region_of.get(a)
            if r is not None and r.root is a and len(a.users) == 1 and r not in joined and \
                    tuple(_val(a).shape) == tuple(_val(node).shape):
                joined.append(r)
        merged = _Region(node, step)
        if joined:
            nodes = sorted({n for r in joined for n in r.nodes} | {node}, key=lambda n: order[n])
            trial = _Region(node, step)
            trial.nodes = nodes
            trial.steps = {n: s for r in joined for n, s in r.steps.items()}
            trial.steps[node] = step
            if len(trial.nodes) <= MAX_STEPS and len(trial.inputs()) <= MAX_IN:
                merged = trial
                for r in joined:
                    regions.remove(r)
        for n in merged.nodes:
            region_of[n] = merged
        regions.append(merged)
    return _rewrite(gm, [r for r in regions if len(r.nodes) >= 2])


def _rewrite(gm, regions):
    replaced = {}   # an earlier region's last node -> its fused node
    for r in regions:
        ins = [replaced.get(n, n) for n in r.inputs()]
        idx = {n: i for i, n in enumerate(r.inputs())}
        for k, n in enumerate(r.nodes):
            idx[n] = len(ins) + k
        spec, imms = [], []
        for n in r.nodes:
            kind, op, op2, operands, imm, imm2, rev, dt = r.steps[n]
            a = idx[operands[0]]
            b = idx[operands[1]] if len(operands) > 1 else -1
            spec += records.pack("fused_step", kind=kind, op=op, op2=op2, a=a, b=b, reverse=int(rev), dtype=dt)
            imms += records.pack("fused_imm", imm=imm, imm2=imm2)
        root = r.root
        with gm.graph.inserting_before(root):
            fused = gm.graph.call_function(torch.ops.neuronsim.fused_pointwise.default,
                                           (ins, spec, imms, root.meta["val"].dtype))
        fused.meta["val"] = root.meta.get("val")
        fused.meta["fused_from"] = [n.name for n in r.nodes]
        root.replace_all_uses_with(fused)
        replaced[root] = fused
        for n in reversed(r.nodes):
            gm.graph.erase_node(n)
    return _finish(gm, len(regions))


# functional updates of a graph input that AOTAutograd copies back into it
# at the end (copy_(input, update)): done in place instead, as the eager
# code did (a static KV cache written one row a step, not copied whole)
_INPLACE = {aten.index_copy.default: aten.index_copy_.default,
            aten.index_put.default: aten.index_put_.default}


def reinplace_input_updates(gm):
    """rewrites gm in place; returns how many updates it made in-place"""
    nodes = list(gm.graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    outputs = set(nodes[-1].all_input_nodes) if nodes and nodes[-1].op == "output" else set()
    done = 0
    for c in nodes:
        if c.op != "call_function" or c.target is not aten.copy_.default or len(c.args) != 2 or c.users:
            continue
        p, n = c.args
        if not isinstance(n, torch.fx.Node) or p.op != "placeholder" or n.target not in _INPLACE or \
                not n.args or n.args[0] is not p or n in outputs:
            continue
        # after the update nothing but the copy may read the input's old value
        if any(order[u] > order[n] and u is not c for u in p.users):
            continue
        n.target = _INPLACE[n.target]
        gm.graph.erase_node(c)
        done += 1
    return _finish(gm, done)


def _cpu_only(v):
    leaves = pytree.tree_flatten(v)[0]
    return all(not isinstance(t, torch.Tensor) or t.device.type == "cpu" for t in leaves)


def _uploads_host_value(n):
    """a copy of a host value to the device (QwenImage's rotary tables, a
    Python attribute left on the CPU and moved in forward)"""
    if n.target is not aten._to_copy.default or not n.args or not isinstance(n.args[0], torch.fx.Node):
        return False
    v = _val(n)
    return isinstance(v, torch.Tensor) and v.device.type == "neuron" and _cpu_only(_val(n.args[0]))


def host_prelude(gm):
    """nodes that compute on host tensors only from graph inputs (an
    optimizer's step counters and bias corrections), and the copies of such
    values to the device (a transfer each call, as any host input costs),
    none reading an input an earlier node mutates: they can run first, before
    any device work"""
    nodes = list(gm.graph.nodes)
    mutated_at = {}
    for i, n in enumerate(nodes):
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable \
                and n.args and isinstance(n.args[0], torch.fx.Node):
            mutated_at.setdefault(n.args[0], i)
    pre = set()
    for i, n in enumerate(nodes):
        if n.op == "placeholder":
            if _cpu_only(_val(n)):
                pre.add(n)
            continue
        if n.op != "call_function":
            continue
        t = n.target
        if isinstance(t, torch._ops.OpOverload):
            if torch.Tag.nondeterministic_seeded in t.tags or t._schema.is_mutable:
                continue
        elif t is not operator.getitem:
            continue
        if not all(a in pre and mutated_at.get(a, len(nodes)) > i for a in n.all_input_nodes):
            continue
        v = _val(n)
        if _cpu_only(v) or n.meta.get("neuron_upload") or _uploads_host_value(n):
            pre.add(n)
    return {n for n in pre if n.op != "placeholder"}


def upload_host_scalars(gm):
    """a device op reading 0-dim host tensors computed first on the host (an
    optimizer's bias corrections): they are uploaded (a transfer each, in the
    prelude) so the op itself stays on the device and in its segment.
    Returns how many it uploaded."""
    pre = host_prelude(gm)
    done = 0

    def scalar_node(a):
        v = _val(a)
        return isinstance(a, torch.fx.Node) and a in pre and isinstance(v, torch.Tensor) and \
            v.device.type == "cpu" and v.dim() == 0 and v.dtype in (torch.float32, torch.float64)

    for n in list(gm.graph.nodes):
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload) or n in pre:
            continue
        leaves = pytree.tree_flatten(_val(n))[0]
        dev = next((t.device for t in leaves if isinstance(t, torch.Tensor) and t.device.type == "neuron"), None)
        if dev is None:
            continue

        def upload(a):
            nonlocal done
            with gm.graph.inserting_before(n):
                u = gm.graph.call_function(aten._to_copy.default, (a,), {"dtype": torch.float32, "device": dev})
            v = _val(a)
            u.meta["val"] = torch.empty((), dtype=torch.float32, device="meta") if v is not None else None
            u.meta["neuron_upload"] = True
            done += 1
            return u

        new_args = []
        changed = False
        for a in n.args:
            if scalar_node(a):
                new_args.append(upload(a))
                changed = True
            elif isinstance(a, (list, tuple)) and a and all(scalar_node(x) for x in a):
                new_args.append([upload(x) for x in a])
                changed = True
            else:
                new_args.append(a)
        if changed:
            n.args = tuple(new_args)
    return _finish(gm, done)
