"""Every opcode's values on the simulated core against a NumPy / torch CPU
reference, over the dtypes it takes (bf16 and fp8 rounding included) and
partition counts 1, 64, 128 with odd free sizes.  Each case is a small
program: DMA inputs HBM -> SBUF, the instruction under test, DMA back."""
import numpy as np
import pytest
import torch

from nsim_util import run

PARTS = [1, 64, 128]
FREES = [1, 37, 301]
SHAPES = [(p, f) for p in PARTS for f in FREES if not (p == 1 and f == 1)] + [(1, 1)]
OFF_B, OFF_C, OFF_O, OFF_R = 32768, 65536, 98304, 131072   # SBUF byte offsets (< 192 KiB)
TORCH = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
         "fp8_e4m3fn": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2, "int32": torch.int32,
         "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8}


def q(a, dt):
    """NumPy float32 values rounded to dtype dt (RNE), back as float32."""
    if dt in ("int32", "int16", "int8", "uint8", "tf32"):
        return a          # tf32: the simulator rounds float32 input itself
    if dt == "fp8_e4m3":  # NKI's float8_e4m3 (IEEE-like, max 240): torch has no such type
        import ml_dtypes
        return np.asarray(a, dtype=np.float32).astype(ml_dtypes.float8_e4m3).astype(np.float32)
    return torch.tensor(np.asarray(a, dtype=np.float32)).to(TORCH[dt]).float().numpy()


def program(target, ins, out_dt, out_shape, engine, body, nsem=2, extra_outs=()):
    """ins: [(name, dtype, (P, F), sbuf_offset)]; output 'o' at OFF_O."""
    lines = [f".target {target}", f".semaphores {nsem}"]
    for name, dt, (p, f), _ in ins:
        lines.append(f".tensor {name} input {dt} [{p},{f}]")
    op, of = out_shape
    lines.append(f".tensor o output {out_dt} [{op},{of}]")
    for name, dt, shape, off in extra_outs:
        lines.append(f".tensor {name} output {dt} [{shape[0]},{shape[1]}]")
    for name, dt, (p, f), off in ins:
        lines.append(f".dma l{name} direct dst=sbuf:{dt}[0:{p}]+{off}{{1x{f}}} "
                     f"src=hbm({name}):{dt}[{f}x{p}]{{1x{f}}}")
    lines.append(f".dma so direct dst=hbm(o):{out_dt}[{of}x{op}]{{1x{of}}} "
                 f"src=sbuf:{out_dt}[0:{op}]+{OFF_O}{{1x{of}}}")
    for name, dt, (p, f), off in extra_outs:
        lines.append(f".dma s{name} direct dst=hbm({name}):{dt}[{f}x{p}]{{1x{f}}} "
                     f"src=sbuf:{dt}[0:{p}]+{off}{{1x{f}}}")
    nin = len(ins)
    nout = 1 + len(extra_outs)
    lines.append(".engine sync")
    for i, (name, *_rest) in enumerate(ins):
        lines.append(f"    dma_copy desc=l{name} queue={i} sem=0 value=1")
    lines.append("    sem_wait sem=1 cond=is_ge value=1")
    lines.append("    dma_copy desc=so queue=0 sem=0 value=1")
    for i, (name, *_rest) in enumerate(extra_outs):
        lines.append(f"    dma_copy desc=s{name} queue={i + 1} sem=0 value=1")
    lines.append(f"    sem_wait sem=0 cond=is_ge value={nin + nout}")
    lines.append("    end")
    lines.append(f".engine {engine}")
    lines.append(f"    sem_wait sem=0 cond=is_ge value={nin}")
    lines += ["    " + b for b in body]
    lines.append("    sem_signal sem=1 op=add value=1")
    lines.append("    end")
    return "\n".join(lines) + "\n"


def execute(neuronsim, tmp_path, text, inputs):
    path = tmp_path / "p.nsasm"
    path.write_text(text)
    res, _ = run(neuronsim, path, inputs, tmp_path)
    return res


def sb(dt, p, f, off):
    return f"sbuf:{dt}[0:{p}]+{off}{{1x{f}}}"


RNG = np.random.default_rng(1234)


def rand(shape, dt, low=-3.0, high=3.0):
    if dt.startswith("int") or dt.startswith("uint"):
        lo = 0 if dt.startswith("uint") else -1000
        return RNG.integers(lo, 1000, size=shape).astype(np.dtype(dt.replace("int", "int")))
    return q(RNG.uniform(low, high, size=shape).astype(np.float32), dt)


def close(got, want, dt):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if dt in ("int32", "int16", "int8", "uint8"):
        np.testing.assert_array_equal(got, want)
    else:
        # results are rounded to dt once: allow that rounding (and libm ulps in fp32)
        rtol = {"fp32": 2e-6, "bf16": 8e-3, "fp16": 1e-3, "fp8_e4m3": 0.07, "fp8_e4m3fn": 0.07, "fp8_e5m2": 0.13}[dt]
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-3, equal_nan=True)


# ------------------------------------------------------------------ vector ops

TT_FLOAT = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
            "divide": np.divide, "max": np.maximum, "min": np.minimum,
            "is_lt": lambda a, b: (a < b).astype(np.float32),
            "is_equal": lambda a, b: (a == b).astype(np.float32),
            "absmax": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
            "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(np.float32)}


@pytest.mark.parametrize("dt", ["fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("shape", SHAPES)
def test_tensor_tensor_float(neuronsim, tmp_path, dt, shape):
    p, f = shape
    a, b = rand(shape, dt), rand(shape, dt, 0.5, 3.0)
    b[0, 0] = a[0, 0]                      # one equal pair for the comparisons
    for op, ref in TT_FLOAT.items():
        text = program("trn2", [("a", dt, shape, 0), ("b", dt, shape, OFF_B)], dt, shape, "vector",
                       [f"tensor_tensor dst={sb(dt, p, f, OFF_O)} src0={sb(dt, p, f, 0)} "
                        f"src1={sb(dt, p, f, OFF_B)} op={op}"])
        got = execute(neuronsim, tmp_path, text, {"a": a, "b": b})["o"]
        close(got, q(ref(a.astype(np.float32), b.astype(np.float32)), dt), dt)


INT_OPS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
           "max": np.maximum, "min": np.minimum, "bitwise_and": np.bitwise_and,
           "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
           "divide": lambda a, b: np.floor_divide(a, b), "mod": np.mod}


@pytest.mark.parametrize("dt", ["int16", "int8", "uint8", "uint16", "uint32"])
def test_tensor_tensor_narrow_integers_wrap(neuronsim, tmp_path, dt):
    p, f = 64, 37
    info = np.iinfo(np.dtype(dt))
    a = RNG.integers(info.min, info.max, size=(p, f), endpoint=True).astype(dt)
    b = RNG.integers(1, min(info.max, 100), size=(p, f)).astype(dt)
    for op, ref in (("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
                    ("bitwise_xor", np.bitwise_xor), ("max", np.maximum)):
        text = program("trn2", [("a", dt, (p, f), 0), ("b", dt, (p, f), OFF_B)], dt, (p, f),
                       "vector",
                       [f"tensor_tensor dst={sb(dt, p, f, OFF_O)} src0={sb(dt, p, f, 0)} "
                        f"src1={sb(dt, p, f, OFF_B)} op={op}"])
        got = execute(neuronsim, tmp_path, text, {"a": a, "b": b})["o"]
        want = ref(a.astype(np.int64), b.astype(np.int64)).astype(dt)   # wraps to the width
        np.testing.assert_array_equal(got, want, err_msg=op)


@pytest.mark.parametrize("shape", [(1, 1), (64, 37), (128, 301)])
def test_tensor_tensor_int32_exact(neuronsim, tmp_path, shape):
    p, f = shape
    a = RNG.integers(-(1 << 30), 1 << 30, size=shape).astype(np.int32)   # beyond fp32's 2^24
    b = RNG.integers(1, 1 << 12, size=shape).astype(np.int32)
    for op, ref in INT_OPS.items():
        text = program("trn1", [("a", "int32", shape, 0), ("b", "int32", shape, OFF_B)], "int32",
                       shape, "gpsimd",
                       [f"tensor_tensor dst={sb('int32', p, f, OFF_O)} src0={sb('int32', p, f, 0)} "
                        f"src1={sb('int32', p, f, OFF_B)} op={op}"])
        got = execute(neuronsim, tmp_path, text, {"a": a, "b": b})["o"]
        want = ref(a.astype(np.int64), b.astype(np.int64)).astype(np.int32)   # wraps like int32
        np.testing.assert_array_equal(got, want, err_msg=op)


@pytest.mark.parametrize("dt", ["fp32", "bf16"])
@pytest.mark.parametrize("shape", [(1, 37), (64, 1), (128, 301)])
def test_tensor_scalar(neuronsim, tmp_path, dt, shape):
    p, f = shape
    a = rand(shape, dt)
    cases = [
        ("op0=multiply scalar0=2.5 op1=add scalar1=-1.0", lambda x: x * 2.5 + -1.0),
        ("op0=subtract scalar0=1.5 reverse0", lambda x: 1.5 - x),
        ("op0=divide scalar0=3.0 reverse0 op1=max scalar1=0.25", lambda x: np.maximum(3.0 / x, 0.25)),
        ("op0=is_ge scalar0=0.0", lambda x: (x >= 0).astype(np.float32)),
        ("op0=pow scalar0=2", lambda x: np.power(x, 2)),
    ]
    for spec, ref in cases:
        text = program("trn2", [("a", dt, shape, 0)], dt, shape, "vector",
                       [f"tensor_scalar dst={sb(dt, p, f, OFF_O)} src={sb(dt, p, f, 0)} {spec}"])
        got = execute(neuronsim, tmp_path, text, {"a": a})["o"]
        close(got, q(ref(a.astype(np.float32)), dt), dt)


def test_tensor_scalar_per_partition_scalars(neuronsim, tmp_path):
    p, f = 64, 37
    a, s = rand((p, f), "fp32"), rand((p, 1), "fp32", 1.0, 2.0)
    text = program("trn2", [("a", "fp32", (p, f), 0), ("s", "fp32", (p, 1), OFF_B)], "fp32",
                   (p, f), "scalar",
                   [f"tensor_scalar dst={sb('fp32', p, f, OFF_O)} src={sb('fp32', p, f, 0)} "
                    f"op0=multiply scalar0={sb('fp32', p, 1, OFF_B)} op1=subtract "
                    f"scalar1={sb('fp32', p, 1, OFF_B)} reverse1"])
    got = execute(neuronsim, tmp_path, text, {"a": a, "s": s})["o"]
    close(got, s - a * s, "fp32")


ACTS = {
    "identity": lambda x: x, "relu": torch.relu, "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "silu": torch.nn.functional.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    "exp": torch.exp, "square": torch.square, "abs": torch.abs, "sign": torch.sign,
    "softplus": torch.nn.functional.softplus, "sin": torch.sin, "cos": torch.cos,
    "erf": torch.erf,
    "gelu_backward": lambda x: torch.autograd.functional.jacobian(
        lambda v: torch.nn.functional.gelu(v).sum(), x),
}
POSITIVE_ACTS = {"log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
                 "reciprocal": torch.reciprocal}


@pytest.mark.parametrize("dt", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("shape", [(1, 1), (64, 37), (128, 301)])
def test_activation_functions(neuronsim, tmp_path, dt, shape):
    p, f = shape
    for funcs, low, high in ((ACTS, -4.0, 4.0), (POSITIVE_ACTS, 0.1, 8.0)):
        a = rand(shape, dt, low, high)
        for func, ref in funcs.items():
            text = program("trn2", [("a", dt, shape, 0)], dt, shape, "scalar",
                           [f"activation dst={sb(dt, p, f, OFF_O)} src={sb(dt, p, f, 0)} "
                            f"func={func} scale=0.5 bias=0.25"])
            got = execute(neuronsim, tmp_path, text, {"a": a})["o"]
            x = torch.tensor(a.astype(np.float32)) * 0.5 + 0.25
            want = ref(x).float().numpy()
            if dt == "fp32":
                np.testing.assert_allclose(got, want, rtol=3e-6, atol=3e-6, err_msg=func)
            else:
                close(got, q(want, dt), dt)


def test_activation_with_reduce_and_per_partition_scale(neuronsim, tmp_path):
    p, f = 128, 301
    a, s = rand((p, f), "fp32"), rand((p, 1), "fp32", 0.5, 1.5)
    text = program("trn2", [("a", "fp32", (p, f), 0), ("s", "fp32", (p, 1), OFF_B)], "fp32",
                   (p, f), "scalar",
                   [f"activation dst={sb('fp32', p, f, OFF_O)} src={sb('fp32', p, f, 0)} func=exp "
                    f"scale={sb('fp32', p, 1, OFF_B)} bias=-1.0 reduce=add "
                    f"reduce_dst={sb('fp32', p, 1, OFF_R)}"],
                   extra_outs=[("r", "fp32", (p, 1), OFF_R)])
    res = execute(neuronsim, tmp_path, text, {"a": a, "s": s})
    want = np.exp(a * s - 1.0)
    np.testing.assert_allclose(res["o"], want, rtol=3e-6)
    np.testing.assert_allclose(res["r"], want.sum(axis=1, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize("op,ref", [("add", np.sum), ("max", np.max), ("min", np.min),
                                    ("absmax", lambda x, axis: np.max(np.abs(x), axis=axis))])
@pytest.mark.parametrize("p", PARTS)
@pytest.mark.parametrize("dt", ["fp32", "bf16"])
def test_tensor_reduce(neuronsim, tmp_path, op, ref, p, dt):
    f1, f2 = 7, 13                          # src free dims [7, 13], reduce the inner one
    a = rand((p, f1 * f2), dt)
    text = program("trn2", [("a", dt, (p, f1 * f2), 0)], "fp32", (p, f1), "vector",
                   [f"tensor_reduce dst={sb('fp32', p, f1, OFF_O)} "
                    f"src=sbuf:{dt}[0:{p}]{{{f2}x{f1},1x{f2}}} op={op} axes=2"])
    got = execute(neuronsim, tmp_path, text, {"a": a})["o"]
    # fp32 sums in index order vs NumPy's pairwise sums: cancellation-sized slack
    atol = 4e-7 * f1 * f2 * 3.0 if op == "add" else 0.0
    np.testing.assert_allclose(got, ref(a.reshape(p, f1, f2), axis=2), rtol=1e-5, atol=atol)
    # both axes, negated, on GpSimd
    text = program("trn2", [("a", dt, (p, f1 * f2), 0)], "fp32", (p, 1), "gpsimd",
                   [f"tensor_reduce dst={sb('fp32', p, 1, OFF_O)} "
                    f"src=sbuf:{dt}[0:{p}]{{{f2}x{f1},1x{f2}}} op={op} axes=3 negate"])
    got = execute(neuronsim, tmp_path, text, {"a": a})["o"]
    np.testing.assert_allclose(got, -ref(a, axis=1)[:, None], rtol=1e-5, atol=atol)


@pytest.mark.parametrize("p", PARTS)
def test_tensor_partition_reduce(neuronsim, tmp_path, p):
    f = 37
    a = rand((p, f), "fp32")
    for op, ref in (("add", np.sum), ("max", np.max)):
        text = program("trn2", [("a", "fp32", (p, f), 0)], "fp32", (1, f), "gpsimd",
                       [f"tensor_partition_reduce dst={sb('fp32', 1, f, OFF_O)} "
                        f"src={sb('fp32', p, f, 0)} op={op}"])
        got = execute(neuronsim, tmp_path, text, {"a": a})["o"]
        np.testing.assert_allclose(got, ref(a, axis=0, keepdims=True), rtol=1e-5, atol=4e-7 * p * 3)


@pytest.mark.parametrize("src", ["bf16", "fp16", "fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2", "int8", "uint8", "int16",
                                 "int32", "bool"])
def test_tensor_copy_widens_exactly(neuronsim, tmp_path, src):
    p, f = 64, 37
    if src == "bool":
        a = RNG.integers(0, 2, size=(p, f)).astype(np.bool_)
    elif src.startswith(("int", "uint")):
        info = np.iinfo(np.dtype(src))
        a = RNG.integers(info.min, info.max, size=(p, f), endpoint=True).astype(src)
    else:
        a = rand((p, f), src, -100, 100)
    text = program("trn2", [("a", src, (p, f), 0)], "fp32", (p, f), "gpsimd",
                   [f"tensor_copy dst={sb('fp32', p, f, OFF_O)} src={sb(src, p, f, 0)}"])
    got = execute(neuronsim, tmp_path, text, {"a": a})["o"]
    np.testing.assert_array_equal(got, a.astype(np.float32))


@pytest.mark.parametrize("dst", ["bf16", "fp16", "fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2", "int32", "fp32"])
@pytest.mark.parametrize("shape", [(1, 37), (128, 301)])
def test_tensor_copy_casts_round_to_nearest_even(neuronsim, tmp_path, dst, shape):
    p, f = shape
    a = RNG.uniform(-200, 200, size=shape).astype(np.float32)
    if dst.startswith("fp8_e4m3"):
        a = np.clip(a, -239, 239) if dst == "fp8_e4m3" else np.clip(a, -440, 440)
    text = program("trn2", [("a", "fp32", shape, 0)], dst, shape, "vector",
                   [f"tensor_copy dst={sb(dst, p, f, OFF_O)} src={sb('fp32', p, f, 0)}"])
    got = execute(neuronsim, tmp_path, text, {"a": a})["o"]
    if dst == "int32":
        np.testing.assert_array_equal(got, np.trunc(a).astype(np.int32))
    else:
        np.testing.assert_array_equal(got.astype(np.float32), q(a, dst))   # bit-exact RNE


@pytest.mark.parametrize("shape", [(1, 1), (64, 37), (128, 301)])
@pytest.mark.parametrize("dt", ["fp32", "bf16", "int32"])
def test_select_and_memset(neuronsim, tmp_path, shape, dt):
    p, f = shape
    pred = (RNG.uniform(size=shape) > 0.5).astype(np.uint8)
    a, b = rand(shape, dt), rand(shape, dt)
    text = program("trn2", [("m", "uint8", shape, 0), ("a", dt, shape, OFF_B),
                            ("b", dt, shape, OFF_C)], dt, shape, "vector",
                   [f"select dst={sb(dt, p, f, OFF_O)} pred={sb('uint8', p, f, 0)} "
                    f"on_true={sb(dt, p, f, OFF_B)} on_false={sb(dt, p, f, OFF_C)}"])
    got = execute(neuronsim, tmp_path, text, {"m": pred, "a": a, "b": b})["o"]
    np.testing.assert_array_equal(got, np.where(pred != 0, a, b))
    for dt, val, want in (("bf16", "1.5", 1.5), ("int32", "-7", -7), ("fp32", "-inf", -np.inf)):
        text = program("trn2", [("a", "fp32", shape, 0)], dt, shape, "gpsimd",
                       [f"memset dst={sb(dt, p, f, OFF_O)} value={val}"])
        got = execute(neuronsim, tmp_path, text, {"a": rand(shape, "fp32")})["o"]
        np.testing.assert_array_equal(got, np.full(shape, want, dtype=got.dtype))


@pytest.mark.parametrize("p", PARTS)
def test_iota_and_affine_select(neuronsim, tmp_path, p):
    f = 37
    a = rand((p, f), "fp32")
    text = program("trn2", [("a", "fp32", (p, f), 0)], "int32", (p, f), "gpsimd",
                   [f"iota dst={sb('int32', p, f, OFF_O)} base=5 pmul=100 mul=-3"])
    got = execute(neuronsim, tmp_path, text, {"a": a})["o"]
    pp, jj = np.meshgrid(np.arange(p), np.arange(f), indexing="ij")
    np.testing.assert_array_equal(got, 5 + 100 * pp - 3 * jj)
    text = program("trn2", [("a", "fp32", (p, f), 0)], "fp32", (p, f), "gpsimd",
                   [f"affine_select dst={sb('fp32', p, f, OFF_O)} src={sb('fp32', p, f, 0)} "
                    f"cmp=is_ge base=0 pmul=1 mul=-1 fill=-9.0"])
    got = execute(neuronsim, tmp_path, text, {"a": a})["o"]
    np.testing.assert_array_equal(got, np.where(pp - jj >= 0, a, -9.0))


@pytest.mark.parametrize("engine,shape", [("vector", (32, 17)), ("vector", (1, 32)),
                                          ("tensor", (128, 37)), ("tensor", (64, 128))])
def test_nc_transpose(neuronsim, tmp_path, engine, shape):
    p, f = shape
    a = rand(shape, "bf16")
    if engine == "tensor":
        body = [f"nc_transpose dst=psum:fp32[0:{f}]{{1x{p}}} src={sb('bf16', p, f, 0)}"]
        # TensorE writes PSUM; a vector copy brings it back to SBUF
        text = program("trn2", [("a", "bf16", shape, 0)], "fp32", (f, p), "tensor", body)
        text = text.replace("sem_wait sem=1 cond=is_ge value=1\n    dma_copy desc=so",
                            "sem_wait sem=1 cond=is_ge value=2\n    dma_copy desc=so")
        text += (".engine vector\n    sem_wait sem=1 cond=is_ge value=1\n"
                 f"    tensor_copy dst={sb('fp32', f, p, OFF_O)} src=psum:fp32[0:{f}]{{1x{p}}}\n"
                 "    sem_signal sem=1 op=add value=1\n    end\n")
    else:
        text = program("trn2", [("a", "bf16", shape, 0)], "bf16", (f, p), "vector",
                       [f"nc_transpose dst={sb('bf16', f, p, OFF_O)} src={sb('bf16', p, f, 0)}"])
    got = execute(neuronsim, tmp_path, text, {"a": a})["o"]
    np.testing.assert_array_equal(got, a.T)


# ----------------------------------------------------------------- matmul

@pytest.mark.parametrize("dt", ["bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2", "tf32"])
@pytest.mark.parametrize("kmn", [(128, 128, 512), (64, 37, 301), (1, 1, 1), (128, 1, 17)])
def test_matmul_accumulates_fp32(neuronsim, tmp_path, dt, kmn):
    k, m, n = kmn
    st, mv = rand((k, m), dt, -2, 2), rand((k, n), dt, -2, 2)
    st2, mv2 = rand((k, m), dt, -2, 2), rand((k, n), dt, -2, 2)
    psum = f"psum:fp32[0:{m}]{{1x{n}}}"
    body = [f"load_stationary stationary={sb(dt, k, m, 0)}",
            f"multiply_moving dst={psum} moving={sb(dt, k, n, OFF_B)}",
            f"load_stationary stationary={sb(dt, k, m, OFF_C)}",
            f"multiply_moving dst={psum} moving={sb(dt, k, n, OFF_R)} accumulate"]
    text = program("trn2", [("s", dt, (k, m), 0), ("x", dt, (k, n), OFF_B),
                            ("s2", dt, (k, m), OFF_C), ("x2", dt, (k, n), OFF_R)],
                   "fp32", (m, n), "tensor", body)
    text = text.replace("sem_wait sem=1 cond=is_ge value=1\n    dma_copy desc=so",
                        "sem_wait sem=1 cond=is_ge value=2\n    dma_copy desc=so")
    text += (".engine vector\n    sem_wait sem=1 cond=is_ge value=1\n"
             f"    tensor_copy dst={sb('fp32', m, n, OFF_O)} src={psum}\n"
             "    sem_signal sem=1 op=add value=1\n    end\n")
    got = execute(neuronsim, tmp_path, text, {"s": st, "x": mv, "s2": st2, "x2": mv2})["o"]
    if dt == "tf32":
        r = lambda a: (torch.tensor(a).view(torch.int32) + 0xfff +
                       ((torch.tensor(a).view(torch.int32) >> 13) & 1)) & ~0x1fff
        st, mv, st2, mv2 = (r(v).view(torch.float32).numpy() for v in (st, mv, st2, mv2))
    want = st.astype(np.float64).T @ mv + st2.astype(np.float64).T @ mv2
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4 * max(1, k))


# -------------------------------------------------------------------- DMA

def test_dma_cast_reshape_gather_scatter(neuronsim, tmp_path):
    table = rand((50, 16), "fp32")
    ids = np.array([3, 49, 0, 7, 3], dtype=np.int32)
    text = f""".target trn2
.semaphores 1
.tensor table input fp32 [50,16]
.tensor ids input int32 [5]
.tensor g output bf16 [5,16]
.tensor s output fp32 [50,16]
.tensor flat output fp32 [1,80]
.dma lid direct dst=sbuf:int32[0:5]{{1x1}} src=hbm(ids):int32[1x5]{{1x1}}
.dma gat gather dst=sbuf:bf16[0:5]+64{{1x16}} src=hbm(table):fp32[16x50]{{1x16}} index=sbuf:int32[0:5]{{1x1}}
.dma sg direct dst=hbm(g):bf16[16x5]{{1x16}} src=sbuf:bf16[0:5]+64{{1x16}}
.dma sct scatter dst=hbm(s):fp32[16x50]{{1x16}} src=hbm(table):fp32[16x5]{{1x16}} index=sbuf:int32[0:5]{{1x1}}
.dma flat direct dst=hbm(flat):fp32[80x1]{{1x80}} src=hbm(table):fp32[16x5]{{1x16}}
.engine sync
    dma_copy desc=lid queue=0 sem=0 value=1
    sem_wait sem=0 cond=is_ge value=1
    dma_copy desc=gat queue=0 sem=0 value=1
    dma_copy desc=sct queue=1 sem=0 value=1
    dma_copy desc=flat queue=2 sem=0 value=1
    sem_wait sem=0 cond=is_ge value=4
    dma_copy desc=sg queue=0 sem=0 value=1
    sem_wait sem=0 cond=is_ge value=5
    end
"""
    res = execute(neuronsim, tmp_path, text, {"table": table, "ids": ids})
    np.testing.assert_array_equal(res["g"], q(table[ids], "bf16"))
    want = np.zeros((50, 16), np.float32)
    want[ids] = table[:5]           # later rows win (id 3 appears twice: row 4)
    np.testing.assert_array_equal(res["s"], want)
    np.testing.assert_array_equal(res["flat"], table[:5].reshape(1, 80))


@pytest.mark.parametrize("dt", ["fp32", "bf16", "int32", "int8"])
def test_dma_strided_transposing_and_reshaping(neuronsim, tmp_path, dt):
    """Element-strided DMA on both sides, runs of different lengths on each
    side (a 2-d source walked against a 1-d destination), a cast, and a
    transfer whose partition counts differ (flattened order)."""
    table = rand((50, 16), dt)
    ct = "fp32" if dt.startswith(("fp", "bf")) else dt    # DMA casts only between floats
    text = f""".target trn2
.semaphores 1
.tensor table input {dt} [50,16]
.tensor tt output {dt} [16,50]
.tensor tc output {ct} [16,50]
.tensor flat output {dt} [8,100]
.dma tr direct dst=hbm(tt):{dt}[50x16]{{1x50}} src=hbm(table):{dt}[1x16]{{80x10,16x5}}
.dma tcast direct dst=hbm(tc):{ct}[50x16]{{5x10,1x5}} src=hbm(table):{dt}[1x16]{{16x50}}
.dma fl direct dst=hbm(flat):{dt}[100x8]{{1x100}} src=hbm(table):{dt}[1x16]{{16x50}}
.engine sync
    dma_copy desc=tr queue=0 sem=0 value=1
    dma_copy desc=tcast queue=1 sem=0 value=1
    dma_copy desc=fl queue=2 sem=0 value=1
    sem_wait sem=0 cond=is_ge value=3
    end
"""
    res = execute(neuronsim, tmp_path, text, {"table": table})
    np.testing.assert_array_equal(res["tt"], table.T)
    np.testing.assert_array_equal(res["tc"], table.T)
    np.testing.assert_array_equal(res["flat"], table.T.reshape(8, 100))


@pytest.mark.parametrize("dt", ["fp32", "bf16"])
def test_tensor_reduce_outer_axis(neuronsim, tmp_path, dt):
    """Reducing a dim that is not innermost (the kept dim varies fastest)."""
    p, f1, f2 = 64, 7, 13
    a = rand((p, f1 * f2), dt)
    for op, ref in (("add", np.sum), ("max", np.max)):
        text = program("trn2", [("a", dt, (p, f1 * f2), 0)], "fp32", (p, f2), "vector",
                       [f"tensor_reduce dst={sb('fp32', p, f2, OFF_O)} "
                        f"src=sbuf:{dt}[0:{p}]{{{f2}x{f1},1x{f2}}} op={op} axes=1"])
        got = execute(neuronsim, tmp_path, text, {"a": a})["o"]
        np.testing.assert_allclose(got, ref(a.reshape(p, f1, f2), axis=1), rtol=1e-5,
                                   atol=4e-7 * f1 * 3.0 if op == "add" else 0.0)


@pytest.mark.parametrize("dt", ["fp32", "bf16", "int32"])
def test_dma_scatter_add_accumulates_repeated_rows(neuronsim, tmp_path, dt):
    """scatter_add: table[ids[p]] += src[p], rows in order, so a repeated
    index adds every row sent to it; other rows keep their values."""
    table = rand((50, 16), dt)
    src = rand((6, 16), dt)
    ids = np.array([3, 49, 3, 0, 3, 7], dtype=np.int32)
    text = f""".target trn2
.semaphores 1
.tensor t output {dt} [50,16]
.tensor init input {dt} [50,16]
.tensor src input {dt} [6,16]
.tensor ids input int32 [6]
.dma cp direct dst=hbm(t):{dt}[16x50]{{1x16}} src=hbm(init):{dt}[16x50]{{1x16}}
.dma lid direct dst=sbuf:int32[0:6]{{1x1}} src=hbm(ids):int32[1x6]{{1x1}}
.dma add scatter_add dst=hbm(t):{dt}[16x50]{{1x16}} src=hbm(src):{dt}[16x6]{{1x16}} index=sbuf:int32[0:6]{{1x1}}
.engine sync
    dma_copy desc=cp queue=0 sem=0 value=1
    dma_copy desc=lid queue=1 sem=0 value=1
    sem_wait sem=0 cond=is_ge value=2
    dma_copy desc=add queue=0 sem=0 value=1
    sem_wait sem=0 cond=is_ge value=3
    end
"""
    res = execute(neuronsim, tmp_path, text, {"init": table, "src": src, "ids": ids})
    want = table.astype(np.float64 if dt != "int32" else np.int64).copy()
    for p, i in enumerate(ids):
        want[i] = q(want[i] + src[p], dt) if dt != "int32" else want[i] + src[p]
    if dt == "int32":
        np.testing.assert_array_equal(res["t"], want.astype(np.int32))
    else:
        np.testing.assert_allclose(res["t"], want, rtol=1e-6 if dt == "fp32" else 8e-3)


def test_dma_scatter_add_casts_floats_only(neuronsim, tmp_path):
    """the DMA engines' adds take floats of any two types (cast to fp32, SDK
    nki.isa.dma_compute) or one integer type: int32 into fp32 is refused"""
    text = """.target trn2
.semaphores 1
.tensor t output fp32 [4,2]
.tensor src input int32 [2,2]
.dma add scatter_add dst=hbm(t):fp32[2x4]{1x2} src=hbm(src):int32[2x2]{1x2} index=sbuf:int32[0:2]{1x1}
.engine sync
    dma_copy desc=add queue=0 sem=0 value=1
    end
"""
    path = tmp_path / "p.nsasm"
    path.write_text(text)
    _, r = run(neuronsim, path, {"src": np.zeros((2, 2), np.int32)}, tmp_path, check=False)
    assert r.returncode != 0 and "casts between float types only (int32 -> fp32)" in r.stderr.decode()
