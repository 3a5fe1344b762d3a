"""Integer value bounds in a compiled graph, and the casts they make cheap.

An int64 -> float cast is exact on the device for values within int32 only
(a larger value's two words round twice), so the eager kernel reads the
values on the host to choose; in a compiled graph that read makes the node
host-bound and splits the graph.  Many int64 values have a bound the graph
itself proves: a loss's token count is a sum of booleans (at most the
element count), positions are an arange.  narrow_bounded_casts() rewrites
`_to_copy(x, float)` of an int64 x whose bound fits int32 as
`_to_copy(_to_copy(x, int32), float)`: the same value (x is within int32),
with no host read -- as a compiler's value-range analysis lets it pick the
narrow conversion.  Bounds are |value| <= B, from the graph's ops and the
traced shapes; anything not understood has no bound and is left alone.
Float arithmetic with such an int64 operand (a loss divided by its token
count) takes the operand through int32 the same way, and a backward graph
knows the bounds of the values its forward saved for it (by name: AOTAutograd
keeps a saved value's name across the two graphs of one joint graph)."""
import torch

aten = torch.ops.aten

_INT32_MAX = 2 ** 31 - 1
# the integer types whose range bounds every value (int64's does not help)
_NARROW = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32)
# types whose values keep their magnitude through a conversion that fits
_SIGNED = (torch.int8, torch.int16, torch.int32, torch.int64)

# ops whose result is elements of their first input (views, copies, moves)
_SAME = {aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.unsqueeze.default,
         aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.expand.default, aten.clone.default,
         aten.permute.default, aten.t.default, aten.transpose.int, aten.slice.Tensor, aten.select.int,
         aten.alias.default, aten.contiguous.default}
_SUM = {aten.sum.dim_IntList, aten.sum.default}


def _val(n):
    v = n.meta.get("val") if hasattr(n, "meta") else None
    return v if isinstance(v, torch.Tensor) else None


def _dtype_bound(dtype):
    """max |value| of a narrow integer type (bool: 1), else None"""
    if dtype == torch.bool:
        return 1
    if dtype in _NARROW:
        info = torch.iinfo(dtype)
        return max(info.max, -info.min)
    return None


def _within(v, b):
    """bound b for a value of v's type: a signed integer type's range caps it
    (an overflow wraps into the range), an unsigned type's whole range
    stands (0 - 1 wraps to its maximum)"""
    if v is None:
        return b
    d = _dtype_bound(v.dtype)
    if d is None:
        return b if v.dtype == torch.int64 else None
    return min(b, d) if v.dtype in _SIGNED else d


def bound(n, memo, known=None):
    """max |value| of node n's elements, or None when unknown; `known`:
    bounds of placeholders by name"""
    if not hasattr(n, "op"):
        return abs(n) if isinstance(n, (int, bool)) else None
    if n in memo:
        return memo[n]
    memo[n] = None                      # cycles cannot happen in an FX graph; this guards recursion
    v = _val(n)
    b = _dtype_bound(v.dtype) if v is not None else None
    t = n.target if n.op == "call_function" else None
    if n.op == "placeholder" and known and n.name in known:
        b = known[n.name] if b is None else min(b, known[n.name])
    elif t in _SAME:
        inner = bound(n.args[0], memo, known)
        b = inner if b is None else (b if inner is None else min(b, inner))
    elif t == aten._to_copy.default:
        # a conversion keeps the magnitude when the target is signed and
        # wide enough (or int64); an unsigned target wraps (-1 -> 255)
        inner = bound(n.args[0], memo, known)
        if inner is not None and v is not None and v.dtype in _SIGNED and (b is None or inner < b):
            b = inner
    elif t in _SUM:
        src = _val(n.args[0])
        inner = bound(n.args[0], memo, known)
        if src is not None and inner is not None:
            count = src.numel() // max(1, v.numel()) if v is not None else src.numel()
            b = _within(v, inner * count)
    elif t in (aten.add.Tensor, aten.sub.Tensor):
        a, c = bound(n.args[0], memo, known), bound(n.args[1], memo, known)
        alpha = n.kwargs.get("alpha", 1)
        if a is not None and c is not None and isinstance(alpha, int):
            b = _within(v, a + abs(alpha) * c)
    elif t == aten.mul.Tensor:
        a, c = bound(n.args[0], memo, known), bound(n.args[1], memo, known)
        if a is not None and c is not None:
            b = _within(v, a * c)
    elif t == aten.clamp.default:
        lo = n.args[1] if len(n.args) > 1 else n.kwargs.get("min")
        hi = n.args[2] if len(n.args) > 2 else n.kwargs.get("max")
        ends = [x for x in (lo, hi) if x is not None]
        inner = bound(n.args[0], memo, known)
        if all(isinstance(x, int) and not isinstance(x, bool) for x in ends):
            if len(ends) == 2:
                b = _within(v, max(abs(x) for x in ends))
            elif inner is not None:
                b = _within(v, max([inner] + [abs(x) for x in ends]))
    elif t in (aten.arange.start_step, aten.arange.start, aten.arange.default):
        if all(isinstance(x, int) and not isinstance(x, bool) for x in n.args) and n.args:
            b = _within(v, max(abs(x) for x in n.args))
    memo[n] = b
    return b


# float arithmetic whose int64 tensor operand is promoted inside the kernel
_ARITH = {aten.div.Tensor, aten.mul.Tensor, aten.add.Tensor, aten.sub.Tensor}


def _narrow(gm, node, pos):
    """node's argument `pos` (an int64 node) through an int32 cast"""
    x = node.args[pos]
    with gm.graph.inserting_before(node):
        narrow = gm.graph.call_function(aten._to_copy.default, (x,), {"dtype": torch.int32})
        narrow.meta["val"] = _val(x).new_empty(_val(x).shape, dtype=torch.int32)
    args = list(node.args)
    args[pos] = narrow
    node.args = tuple(args)


def output_bounds(gm):
    """{name: bound} of the int64 values gm returns (a forward's saved
    values), for the backward graph of the same joint graph"""
    memo, out = {}, {}
    for n in gm.graph.find_nodes(op="output"):
        for x in n.all_input_nodes:
            v = _val(x)
            if v is not None and v.dtype == torch.int64:
                b = bound(x, memo)
                if b is not None:
                    out[x.name] = b
    return out


def narrow_bounded_casts(gm, known=None):
    """int64 -> float casts of values a bound keeps within int32 go through
    int32, and so do int64 operands of float arithmetic (see the module's
    doc); `known`: bounds of placeholders by name.  Returns how many were
    rewritten"""
    memo, changed = {}, 0
    for n in list(gm.graph.nodes):
        if n.op != "call_function":
            continue
        out = _val(n)
        if out is None or not out.dtype.is_floating_point:
            continue
        if n.target == aten._to_copy.default:
            candidates = [0]
        elif n.target in _ARITH:
            candidates = [i for i in (0, 1) if i < len(n.args)]
        else:
            continue
        for pos in candidates:
            x = n.args[pos]
            src = _val(x) if hasattr(x, "op") else None
            if src is None or src.dtype != torch.int64:
                continue
            b = bound(x, memo, known)
            if b is None or b > _INT32_MAX:
                continue
            _narrow(gm, n, pos)
            changed += 1
    if changed:
        gm.graph.lint()
        gm.recompile()
    return changed
