"""PyTorch's OpInfo database on `neuron` against the CPU.

    python3 bench/opinfo.py [--ops a,b] [--dtypes float32,bfloat16] [--samples 3]
                            [--reference] [--error-inputs] [--jobs 1] [--timeout 120]
                            [--json out.json] [--shard I/N] [--from-json a.json,b.json]

For every OpInfo of `torch.testing._internal.common_methods_invocations.op_db`
(less the random and uninitialised ones, see `excluded`) and every dtype the op
supports on the CPU, up to N of its sample inputs (`op.sample_inputs`), with
--reference N of its reference inputs and with --error-inputs all of its error
inputs run on the CPU and on `neuron`:

- samples: every tensor of input/args/kwargs is moved to `neuron` as the same
  view of a copy of its storage (`to_device`: non-contiguous, expanded and
  aliasing samples stay so), both results go through the sample's
  `output_process_fn_grad` (as PyTorch's own test_compare_cpu does) and must
  agree in structure, dtype, shape and values within `tolerance`.  A values
  mismatch is looked at again: when a second CPU run differs from the first
  it is the CPU's ("cpu_nondet", not counted); when neuron's result is as
  close to the op evaluated in float64 as the CPU's is (`fp64_referee`), it
  is a match (column fp64).  The plugin's CPU-fallback counter
  (`torch_neuronsim.stats()["cpu_fallbacks"]`, per op in `["fallback_ops"]`)
  is read around the neuron run: a sample is *native* when it used none.
  A sample the CPU rejects is not run ("cpu_error"); one where only `neuron`
  raises is an "error".
- error inputs: both devices must raise, with the same exception type.

Crash safety: ops run in worker processes (`--jobs`, default 1, OMP_NUM_THREADS=1)
that stream one result per sample; a worker killed by a signal records "crash"
for the sample it was running and a fresh worker carries on after it; an op
running longer than --timeout seconds is killed and its sample recorded as
"timeout".  The table goes to stdout, progress to stderr.

tests/python/test_opinfo.py runs a fixed subset through `run_ops`.
"""
import argparse
import collections
import functools
import json
import os
import pathlib
import re
import signal
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import workers  # noqa: E402  (the crash-safe worker processes, shared with tile_sweep.py)

DTYPES = ("float32", "bfloat16")

# -- which ops --------------------------------------------------------------
# An op is left out when its outputs are not a function of its inputs:
#  1. OpInfo.has_nondeterministic_output (uninitialised memory: empty,
#     empty_like, new_empty, empty_strided, empty_permuted, ...);
#  2. its OpInfo wraps the op in wrapper_set_seed (PyTorch's tests reseed the
#     generator before every call: rand*, normal, bernoulli, multinomial,
#     dropout*, rrelu, fractional_max_pool*, svd/pca_lowrank, ...), except
#     `item` (wrapped for no random reason) and the attention ops, whose
#     samples with dropout_p > 0 are skipped instead (`random_sample`);
#  3. the last component of its name is a random sampler or an empty*
#     (RANDOM_NAME), except the deterministic signal.windows.* (such as
#     signal.windows.exponential) and native_dropout_backward (its mask is
#     an input).
RANDOM_NAME = re.compile(r"(^|\.)(\w*rand(n|int)?(_like)?|normal|bernoulli|multinomial|uniform|exponential|"
                         r"cauchy|geometric|log_normal|poisson|\w*dropout\w*|\w*empty\w*)$")
SEEDED_BUT_DETERMINISTIC = {"item", "nn.functional.scaled_dot_product_attention",
                            "nn.functional.multi_head_attention_forward"}


def op_key(op):
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _seeded(fn):
    if isinstance(fn, functools.partial):
        return _seeded(fn.func) or any(getattr(a, "__name__", "") == "wrapper_set_seed" for a in fn.args)
    if getattr(fn, "__name__", "") == "wrapper_set_seed":
        return True
    code = getattr(fn, "__code__", None)
    return code is not None and "wrapper_set_seed" in code.co_names


def excluded(op):
    """Why OP is left out (random or uninitialised outputs), or None."""
    if op.has_nondeterministic_output:
        return "nondeterministic output"
    if _seeded(op.op) and op.name not in SEEDED_BUT_DETERMINISTIC:
        return "random (wrapper_set_seed)"
    if RANDOM_NAME.search(op.name) and not op.name.startswith("signal.windows.") \
            and op.name != "native_dropout_backward":
        return "random or empty (name)"
    return None


def random_sample(key, sample):
    """Samples of otherwise deterministic ops that draw random numbers:
    attention with dropout (multi_head_attention_forward's dropout_p is its
    10th positional argument and applies in training)."""
    if key == "nn.functional.multi_head_attention_forward":
        return sample.kwargs.get("training", True) and len(sample.args) > 9 and sample.args[9] > 0
    p = sample.kwargs.get("dropout_p", 0.0)
    return isinstance(p, (int, float)) and p > 0


# Tensor arguments a sample makes on the host on purpose (by position in
# sample.args): they stay on the CPU for the neuron run, as they would in
# PyTorch's own device tests (tensor_split takes its indices on the CPU).
HOST_ARGS = {"tensor_split": (0,)}


def op_db():
    from torch.testing._internal.common_methods_invocations import op_db as db
    return db


def select_ops(names=None):
    """[OpInfo] of op_db to run: NAMES (keys "name" or "name.variant"; a bare
    name takes all its variants) or every op not `excluded`."""
    ops = [op for op in op_db() if not excluded(op)]
    if names:
        want = set(names)
        ops = [op for op in ops if op_key(op) in want or op.name in want]
        missing = want - {op_key(op) for op in ops} - {op.name for op in ops}
        if missing:
            raise SystemExit(f"opinfo: no such (non-random) op: {', '.join(sorted(missing))}")
    return ops


# -- tolerances ---------------------------------------------------------------
# assert_close's defaults (fp32 rtol 1.3e-6 / atol 1e-5) assume the same
# summation order; the simulator's engines reduce in their own order (PSUM
# accumulation, per-partition partial sums) and evaluate transcendentals their
# own way, so fp32 gets rtol 1e-4 / atol 1e-4 and bf16 (8-bit mantissa, a
# rounding difference is one ulp = 2^-8 relative) rtol 1.6e-2 / atol 1e-2.
# atol is relative to the output's own scale -- multiplied by
# max(1, largest finite |value| of the CPU output) -- so a cancellation in a
# large-valued reduction is judged against the values it came from.  The
# looser of the sample dtype's and the output dtype's pair applies (a bf16
# op may return fp32), and so does an OpInfo's own toleranceOverride for
# test_compare_cpu (or for every test) where it is looser.  Integer, bool
# outputs must be equal.
TOL = {"float32": (1e-4, 1e-4), "float64": (1e-4, 1e-4), "complex64": (1e-4, 1e-4),
       "complex128": (1e-4, 1e-4), "float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2),
       "complex32": (1e-3, 1e-3)}


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


@functools.lru_cache(maxsize=None)
def _opinfo_overrides(key):
    """{dtype name: (rtol, atol)} from OP's toleranceOverride decorators."""
    from torch.testing._internal.common_device_type import toleranceOverride
    op = {op_key(o): o for o in op_db()}[key]
    out = {}
    for info in op.decorators:
        if getattr(info, "test_name", None) not in (None, "test_compare_cpu"):
            continue
        for dec in getattr(info, "decorators", ()):
            if isinstance(dec, toleranceOverride):
                for dtype, t in dec.d.items():
                    r, a = out.get(_dtype_name(dtype), (0.0, 0.0))
                    out[_dtype_name(dtype)] = (max(r, t.rtol), max(a, t.atol))
    return out


def tolerance(key, sample_dtype, out_dtype):
    """(rtol, atol) before atol's scaling, for OP's output of OUT_DTYPE."""
    over = _opinfo_overrides(key) if key else {}
    pairs = [TOL.get(n) for n in (sample_dtype, out_dtype)] + [over.get(n) for n in (sample_dtype, out_dtype)]
    pairs = [p for p in pairs if p]
    if not pairs:
        return 0.0, 0.0
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


# -- moving and comparing -----------------------------------------------------
def to_device(obj, device, memo=None):
    """OBJ with every CPU tensor (through lists, tuples, dicts) on DEVICE as
    the same view of a copy of its whole storage (a copy also when DEVICE is
    the CPU): strides, storage offset and the bytes outside the view
    (as_strided's partial views) are kept, and tensors sharing a storage
    share one on DEVICE (an `out=` aliasing an input still does).  Tensors
    on other devices (meta) stay where they are."""
    import torch
    memo = {} if memo is None else memo
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        if t.device.type != "cpu":
            return obj
        if t.layout != torch.strided:
            return t.to(device, copy=True)
        st = t.untyped_storage()
        if st._cdata not in memo:
            raw = torch.empty(0, dtype=torch.uint8).set_(st, 0, (st.nbytes(),), (1,))
            memo[st._cdata] = (st, raw.to(device, copy=True))   # st: keeps the key alive
        raw = memo[st._cdata][1]
        if t.dtype != torch.uint8 and raw.numel() % t.element_size():
            out = t.to(device, copy=True)                # a storage that is no whole number of elements
        else:
            out = (raw if t.dtype == torch.uint8 else raw.view(t.dtype)).as_strided(
                t.shape, t.stride(), t.storage_offset())
        return out.requires_grad_() if obj.requires_grad and obj.is_leaf else out
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(to_device(v, device, memo) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(v, device, memo) for v in obj)
    if isinstance(obj, dict):
        return {k: to_device(v, device, memo) for k, v in obj.items()}
    return obj


def to_cpu(obj):
    import torch
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return tuple(to_cpu(v) for v in obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    return obj


def compare(want, got, sample_dtype, key=None, where="out"):
    """None when GOT (neuron's result, on the CPU) matches WANT (the CPU's),
    else a one-line reason."""
    import torch
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{where}: {type(got).__name__}, expected a tensor"
        if got.dtype != want.dtype:
            return f"{where}: dtype {_dtype_name(got.dtype)}, expected {_dtype_name(want.dtype)}"
        if got.shape != want.shape:
            return f"{where}: shape {list(got.shape)}, expected {list(want.shape)}"
        if want.layout != torch.strided or got.layout != torch.strided:
            want, got = want.to_dense(), got.to_dense()
        rtol, atol = tolerance(key, sample_dtype, _dtype_name(want.dtype))
        if want.is_floating_point() or want.is_complex():
            finite = want[torch.isfinite(want)].abs() if want.numel() else want
            scale = max(1.0, float(finite.max())) if finite.numel() else 1.0
            atol *= scale
        try:
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True,
                                       check_stride=False, check_device=False)
        except AssertionError as e:
            lines = [ln.strip() for ln in str(e).splitlines()[1:] if ln.strip()]
            return f"{where}: " + "; ".join(lines)
        return None
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return f"{where}: {type(got).__name__} of {len(got) if hasattr(got, '__len__') else '?'}, " \
                   f"expected {type(want).__name__} of {len(want)}"
        for i, (w, g) in enumerate(zip(want, got)):
            r = compare(w, g, sample_dtype, key, f"{where}[{i}]")
            if r:
                return r
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            have = sorted(got) if isinstance(got, dict) else type(got).__name__
            return f"{where}: keys {have}, expected {sorted(want)}"
        for k in want:
            r = compare(want[k], got[k], sample_dtype, key, f"{where}[{k!r}]")
            if r:
                return r
        return None
    if isinstance(want, (bool, int, float, complex)) and not isinstance(want, bool):
        if not isinstance(got, (int, float, complex)) or isinstance(got, bool):
            return f"{where}: {got!r}, expected {want!r}"
        rtol, atol = tolerance(key, sample_dtype, "float32" if isinstance(want, float) else "int64")
        try:
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol * max(1.0, abs(want)),
                                       equal_nan=True, check_dtype=False)
        except (AssertionError, TypeError, OverflowError) as e:
            return f"{where}: {got!r}, expected {want!r} ({str(e).splitlines()[0]})"
        return None
    if got != want:
        return f"{where}: {got!r}, expected {want!r}"
    return None


def describe(sample, limit=160):
    """A short description of SAMPLE's arguments: T[2,3] for tensors."""
    import torch

    def d(v):
        if isinstance(v, torch.Tensor):
            nc = "" if v.layout != torch.strided or v.is_contiguous() else ",nc"
            return f"T{list(v.shape)}{nc}".replace(" ", "")
        if isinstance(v, (list, tuple)):
            s = ",".join(d(x) for x in v)
            return f"[{s}]" if isinstance(v, list) else f"({s})"
        if isinstance(v, dict):
            return "{" + ",".join(f"{k}={d(x)}" for k, x in v.items()) + "}"
        return repr(v)
    if hasattr(sample, "sample_input"):
        sample = sample.sample_input
    parts = [d(sample.input)] + [d(a) for a in sample.args] + [f"{k}={d(v)}" for k, v in sample.kwargs.items()]
    s = ", ".join(parts)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _first_line(e):
    text = str(e).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(e).__name__}: {line}"[:300]


# -- one op in this process ---------------------------------------------------
def jobs(op, dtypes, samples=3, reference=False, errors=False):
    """Yields (dtype name or None, kind, index, SampleInput / ErrorInput) for OP:
    the first SAMPLES sample inputs per dtype, with REFERENCE as many
    reference inputs spread over the op's reference_inputs (their head
    repeats sample_inputs), with ERRORS every error input.  Each list is made
    with the generator seeded, so the same request yields the same inputs."""
    import torch
    for dt in dtypes:
        dtype = getattr(torch, dt)
        if not op.supports_dtype(dtype, "cpu"):
            continue
        kinds = [("sample", lambda: op.sample_inputs("cpu", dtype, requires_grad=False))]
        if reference and op.reference_inputs_func is not None:
            kinds.append(("reference", lambda: op.reference_inputs("cpu", dtype, requires_grad=False)))
        for kind, make in kinds:
            torch.manual_seed(0)
            chosen = []
            if kind == "sample":
                for s in make():
                    if not random_sample(op_key(op), s):
                        chosen.append(s)
                    if len(chosen) == samples:
                        break
            else:
                every = [s for s in make() if not random_sample(op_key(op), s)]
                picks = sorted({len(every) * (i + 1) // (samples + 1) for i in range(samples)})
                chosen = [every[i] for i in picks if i < len(every)]
            for i, s in enumerate(chosen):
                yield dt, kind, i, s
    if errors and op.error_inputs_func is not None:
        torch.manual_seed(0)
        for i, e in enumerate(op.error_inputs("cpu")):
            yield None, "error", i, e


def _fallbacks():
    import torch_neuronsim
    s = torch_neuronsim.stats()
    return s["cpu_fallbacks"], s["fallback_ops"]


def _run_neuron(op, sample):
    """(result on the CPU or the exception, fallback count, ops that fell back)"""
    host = HOST_ARGS.get(op_key(op), ())
    memo = {}
    args = (to_device(sample.input, "neuron", memo),
            [a if i in host else to_device(a, "neuron", memo) for i, a in enumerate(sample.args)],
            to_device(sample.kwargs, "neuron", memo))
    n0, ops0 = _fallbacks()
    try:
        out = to_cpu(op(args[0], *args[1], **args[2]))
    except Exception as e:  # noqa: BLE001  (any exception is a result here)
        out = e
    n1, ops1 = _fallbacks()
    used = sorted(k for k, v in ops1.items() if v > ops0.get(k, 0))
    return out, n1 - n0, used


def run_job(op, dtype, kind, index, sample):
    """The record of one sample: status match / mismatch / error / cpu_error
    / cpu_nondet (samples), match / type_mismatch / no_raise / cpu_no_raise
    (error inputs), with reason, fallbacks and the ops that fell back.  A
    mismatch is checked against a second CPU run ("cpu_nondet" when the CPU
    does not reproduce its own answer) and a float64 one (`fp64_referee`:
    a match with fp64=True when neuron is no further from it than the CPU)."""
    key = op_key(op)
    rec = {"op": key, "dtype": dtype, "kind": kind, "index": index, "sample": describe(sample)}
    if kind == "error":
        s = sample.sample_input
        got, nfb, fbops = _run_neuron(op, s)
        try:
            op(s.input, *s.args, **s.kwargs)
            cpu_exc = None
        except Exception as e:  # noqa: BLE001
            cpu_exc = e
        rec.update(fallbacks=nfb, fallback_ops=fbops)
        if cpu_exc is None:
            rec.update(status="cpu_no_raise", reason="the CPU does not raise")
        elif not isinstance(got, Exception):
            rec.update(status="no_raise", reason=f"neuron does not raise; CPU: {_first_line(cpu_exc)}")
        elif type(got) is not type(cpu_exc):
            rec.update(status="type_mismatch", reason=f"neuron {_first_line(got)} | CPU {_first_line(cpu_exc)}")
        else:
            rec.update(status="match")
        return rec
    # neuron's copy first (an op may write its inputs in place), and a spare
    # CPU copy for a second CPU run
    got, nfb, fbops = _run_neuron(op, sample)
    rec.update(fallbacks=nfb, fallback_ops=fbops)
    spare = to_device((sample.input, sample.args, sample.kwargs), "cpu")
    try:
        want = op(sample.input, *sample.args, **sample.kwargs)
    except Exception as e:  # noqa: BLE001
        rec.update(status="cpu_error", reason=f"CPU raised {_first_line(e)}"
                   + ("" if isinstance(got, Exception) else "; neuron did not"))
        return rec
    if isinstance(got, Exception):
        rec.update(status="error", reason=_first_line(got))
        return rec
    try:
        want = sample.output_process_fn_grad(want)
        got = sample.output_process_fn_grad(got)
    except Exception as e:  # noqa: BLE001
        rec.update(status="error", reason=f"output_process_fn_grad: {_first_line(e)}")
        return rec
    why = compare(want, got, dtype, key)
    if why:
        # does the CPU agree with itself?  (bf16 grid_sampler_2d does not)
        try:
            fresh = to_device(spare, "cpu")
            again = sample.output_process_fn_grad(op(fresh[0], *fresh[1], **fresh[2]))
            if compare(want, again, dtype, key):
                rec.update(status="cpu_nondet", reason=f"two CPU runs differ; neuron {why}")
                return rec
        except Exception:  # noqa: BLE001
            pass
        referee = fp64_referee(op, sample, spare, want, got)
        if referee:
            rec.update(status="match", fp64=True, reason=f"{referee}; {why}")
            return rec
    rec.update(status="mismatch" if why else "match", reason=why)
    return rec


def fp64_referee(op, sample, spare, want, got):
    """A reason when GOT is as close to OP evaluated in float64 on the CPU as
    the CPU's own WANT is (ill-conditioned samples in a low precision: bf16
    attention rounds differently, neither is right), else None.  Only for
    outputs of matching structure, shapes and dtypes, all floating point."""
    import torch
    from torch.utils._pytree import tree_leaves, tree_map

    def wide(v):
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return v.to(torch.float64)
        if isinstance(v, torch.Tensor) and v.is_complex():
            return v.to(torch.complex128)
        return v
    w, g = tree_leaves(want), tree_leaves(got)
    if len(w) != len(g) or not w or not all(isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                                            and a.shape == b.shape and a.dtype == b.dtype
                                            and (a.is_floating_point() or a.is_complex()) for a, b in zip(w, g)):
        return None
    try:
        args = tree_map(wide, to_device(spare, "cpu"))
        ref = tree_leaves(sample.output_process_fn_grad(op(args[0], *args[1], **args[2])))
    except Exception:  # noqa: BLE001  (no float64 evaluation)
        return None
    if len(ref) != len(w):
        return None
    errs = []
    for a, b, r in zip(w, g, ref):
        if not isinstance(r, torch.Tensor) or r.shape != a.shape:
            return None
        r = r.to(torch.complex128 if a.is_complex() else torch.float64)
        ea, eb = (a.to(r.dtype) - r).abs(), (b.to(r.dtype) - r).abs()
        if not torch.equal(ea.isnan(), eb.isnan()):
            return None
        ea, eb = ea.nan_to_num(0.0), eb.nan_to_num(0.0)
        if a.numel() and float(eb.max()) > float(ea.max()):
            return None
        errs.append((float(ea.max()) if a.numel() else 0.0, float(eb.max()) if a.numel() else 0.0))
    return "neuron as close to float64 as the CPU (max |err| " + \
        ", ".join(f"neuron {b:.3g} / CPU {a:.3g}" for a, b in errs) + ")"


def worker_main():
    """The worker's loop: requests on stdin (one JSON line: op, dtypes,
    samples, reference, errors, start), records on the original stdout (one
    JSON line per message: ready / begin / result / done); anything the ops
    print goes to stderr."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    import warnings
    warnings.simplefilter("ignore")
    import torch
    import torch_neuronsim  # noqa: F401
    torch.set_num_threads(1)
    ops = {op_key(op): op for op in op_db()}

    def send(**msg):
        out.write(json.dumps(msg) + "\n")

    send(ready=os.getpid())
    for line in sys.stdin:
        req = json.loads(line)
        op = ops[req["op"]]
        n = -1
        try:
            for n, (dt, kind, i, s) in enumerate(jobs(op, req["dtypes"], req["samples"], req["reference"],
                                                      req["errors"])):
                if n < req.get("start", 0):
                    continue
                send(begin=n, dtype=dt, kind=kind, index=i, sample=describe(s))
                try:
                    rec = run_job(op, dt, kind, i, s)
                except Exception as e:  # noqa: BLE001  (this script's own failure)
                    rec = {"op": req["op"], "dtype": dt, "kind": kind, "index": i, "sample": describe(s),
                           "status": "harness", "reason": _first_line(e), "fallbacks": None, "fallback_ops": []}
                send(result=n, record=rec)
        except Exception as e:  # noqa: BLE001  (making the inputs failed)
            send(failed=n + 1, reason=f"making the inputs: {_first_line(e)}")
        send(done=req["op"])


# -- workers --------------------------------------------------------------------
class Worker(workers.WorkerProcess):
    """A worker process; `run(request)` yields its records and survives a crash."""

    def __init__(self):
        super().__init__(pathlib.Path(__file__).resolve(), name="opinfo")

    def run(self, key, dtypes, samples, reference, errors, timeout):
        """Yields OP's records; a crash or timeout is a record of its own."""
        start, t0 = 0, time.monotonic()
        while True:
            if self.proc is None:
                t = time.monotonic()
                self.start()
                t0 += time.monotonic() - t          # starting a worker is not the op's time
            self.send(dict(op=key, dtypes=list(dtypes), samples=samples, reference=reference, errors=errors,
                           start=start))
            begun = None
            while True:
                msg = self.get(timeout - (time.monotonic() - t0))
                if msg == "timeout" or msg is None:
                    if msg is None:
                        self.proc.wait()
                    rc = self.proc.returncode if msg is None else None
                    tail = self.stderr_tail()
                    self.stop()
                    where = begun or {"begin": start, "dtype": None, "kind": "inputs", "index": 0, "sample": ""}
                    if msg == "timeout":
                        status, reason = "timeout", f"no result after {timeout:g} s"
                    else:
                        try:
                            sig = signal.Signals(-rc).name if rc < 0 else f"exit {rc}"
                        except ValueError:
                            sig = f"signal {-rc}"
                        status, reason = "crash", f"{sig}" + (f": {tail}" if tail else "")
                    yield {"op": key, "dtype": where["dtype"], "kind": where["kind"], "index": where["index"],
                           "sample": where["sample"], "status": status, "reason": reason,
                           "fallbacks": None, "fallback_ops": []}
                    if status == "timeout" or begun is None:
                        return                      # a timeout ends the op; so does a crash making inputs
                    start = begun["begin"] + 1
                    break
                if "begin" in msg:
                    begun = msg
                elif "result" in msg:
                    begun = None
                    yield msg["record"]
                elif "failed" in msg:
                    yield {"op": key, "dtype": None, "kind": "inputs", "index": msg["failed"], "sample": "",
                           "status": "harness", "reason": msg["reason"], "fallbacks": None, "fallback_ops": []}
                elif "done" in msg:
                    return


def run_ops(keys, dtypes=DTYPES, samples=3, reference=False, errors=False, jobs=1, timeout=120.0,
            progress=None):
    """Runs the ops named by KEYS (op_key) in JOBS worker processes; returns
    their records in KEYS' order.  PROGRESS(key, records) is called per op."""
    def work(w, key):
        t0 = time.monotonic()
        recs = list(w.run(key, dtypes, samples, reference, errors, timeout))
        return {"op": key, "seconds": round(time.monotonic() - t0, 2), "records": recs}

    report = (lambda i, r: progress(keys[i], r)) if progress else None
    return [r for r in workers.run_pool(keys, Worker, work, jobs, report) if r is not None]


# -- the report -----------------------------------------------------------------
SAMPLE_RUN = ("match", "mismatch", "error", "crash", "timeout")


def _row(r):
    """The table row of record R: its dtype, "error inputs", or None (a
    failure making an op's inputs, listed with the failures only)."""
    return "error inputs" if r["kind"] == "error" else r["dtype"]


def summarize(results):
    """[(row, ops, Counter of statuses and "native")]: one row per dtype,
    "total" over them, and "error inputs"."""
    rows = collections.defaultdict(collections.Counter)
    ops = collections.defaultdict(set)
    for res in results:
        for r in res["records"]:
            row = _row(r)
            if row is None:
                continue
            for name in (row,) if row == "error inputs" else (row, "total"):
                rows[name][r["status"]] += 1
                rows[name]["native"] += r["status"] in SAMPLE_RUN and r.get("fallbacks") == 0
                rows[name]["fp64"] += bool(r.get("fp64"))
                ops[name].add(res["op"])
    order = [d for d in DTYPES if d in rows] + sorted(set(rows) - set(DTYPES) - {"total", "error inputs"}) \
        + [r for r in ("total", "error inputs") if r in rows]
    return [(name, len(ops[name]), rows[name]) for name in order]


def table(results):
    lines = []
    head = f"{'':14} {'ops':>5} {'samples':>8} {'match%':>7} {'mismatch':>9} {'error':>6} {'crash':>6} " \
           f"{'timeout':>8} {'native%':>8} {'cpu_err':>8} {'cpu_nd':>7} {'fp64':>5}"
    lines.append(head)
    err_row = None
    for name, nops, c in summarize(results):
        if name == "error inputs":
            err_row = (nops, c)
            continue
        run = sum(c[s] for s in SAMPLE_RUN)
        pct = lambda n: f"{100.0 * n / run:.1f}" if run else "-"  # noqa: E731
        lines.append(f"{name:14} {nops:5d} {run:8d} {pct(c['match']):>7} {c['mismatch']:9d} {c['error']:6d} "
                     f"{c['crash']:6d} {c['timeout']:8d} {pct(c['native']):>8} {c['cpu_error']:8d} "
                     f"{c['cpu_nondet']:7d} {c['fp64']:5d}")
    if err_row:
        nops, c = err_row
        run = sum(c[s] for s in ("match", "type_mismatch", "no_raise", "crash", "timeout"))
        lines.append(f"error inputs: {nops} ops, {run} inputs: same exception type {c['match']}, "
                     f"type mismatch {c['type_mismatch']}, neuron does not raise {c['no_raise']}, "
                     f"crash {c['crash']}, timeout {c['timeout']} (CPU does not raise: {c['cpu_no_raise']})")
    lines.append("samples: run = match + mismatch + error + crash + timeout; error = neuron raised where the "
                 "CPU did not; native% = samples with zero CPU fallbacks / samples run (a crash counts as not "
                 "native); cpu_err = samples the CPU rejects, cpu_nd = samples where two CPU runs "
                 "differ (neither counted as run); fp64 = matches out of "
                 "tolerance where neuron is as close to a float64 CPU evaluation as the CPU is")
    harness = sum(r["status"] == "harness" for res in results for r in res["records"])
    if harness:
        lines.append(f"harness: {harness} samples this script could not run (listed below)")
    bad = collections.OrderedDict()
    for res in results:
        for r in res["records"]:
            if r["status"] in ("cpu_error", "cpu_no_raise") or (r["status"] == "match" and not r.get("fp64")):
                continue
            k = (res["op"], "match(fp64)" if r.get("fp64") else r["status"])
            if k not in bad:
                bad[k] = [collections.Counter(), r["reason"], r.get("sample", "")]
            bad[k][0][r["dtype"] or r["kind"]] += 1
    if bad:
        lines.append("")
        lines.append("failures (op, status, count per dtype / kind: first reason [sample]); cpu_nondet is "
                     "the CPU's own, not counted above:")
        for (key, status), (cnt, reason, sample) in sorted(bad.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            counts = " ".join(f"{k}:{v}" for k, v in cnt.items())
            lines.append(f"  {key:40} {status:13} {counts:24} {reason} [{sample}]")
    fb = collections.Counter()
    for res in results:
        for r in res["records"]:
            for o in r.get("fallback_ops") or ():
                fb[o] += 1
    if fb:
        lines.append("")
        lines.append("CPU fallbacks: samples using each op's fallback (top 40):")
        lines.append("  " + ", ".join(f"{o} {n}" for o, n in fb.most_common(40)))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", help="comma-separated op keys (name or name.variant); default every op")
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--samples", type=int, default=3, help="sample (and reference) inputs per op and dtype")
    ap.add_argument("--reference", action="store_true", help="also reference inputs")
    ap.add_argument("--error-inputs", action="store_true", help="also every error input")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per op")
    ap.add_argument("--shard", help="I/N: the I-th (from 0) of N slices of the op list")
    ap.add_argument("--json", help="write the records here")
    ap.add_argument("--from-json", help="comma-separated JSON files of earlier runs: print their table")
    ap.add_argument("--list", action="store_true", help="print the ops (and those left out) and exit")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        return worker_main()
    if a.from_json:
        results = []
        for f in a.from_json.split(","):
            results += json.load(open(f))["results"]
        print(table(results))
        return 0
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")   # this process only lists ops
    if a.list:
        for op in op_db():
            why = excluded(op)
            print(f"{op_key(op):50} {'left out: ' + why if why else ''}")
        return 0
    keys = [op_key(op) for op in select_ops(a.ops.split(",") if a.ops else None)]
    if a.shard:
        i, n = map(int, a.shard.split("/"))
        keys = keys[i::n]
    dtypes = a.dtypes.split(",")
    t0 = time.monotonic()
    done = [0]

    def progress(key, res):
        done[0] += 1
        st = collections.Counter(r["status"] for r in res["records"])
        print(f"[{done[0]}/{len(keys)} {time.monotonic() - t0:6.0f}s] {key} {res['seconds']:.1f}s "
              + " ".join(f"{k}={v}" for k, v in sorted(st.items())), file=sys.stderr, flush=True)

    results = run_ops(keys, dtypes, a.samples, a.reference, a.error_inputs, a.jobs, a.timeout, progress)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "seconds": round(time.monotonic() - t0, 1), "results": results}, f,
                      indent=1)
    print(table(results))
    print(f"\n{len(keys)} ops in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
