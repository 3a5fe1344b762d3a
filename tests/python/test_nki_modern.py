"""The NKI 0.8+ language surface the public NKI library (aws-neuron/nki-library)
relies on: NKIObject classes, dtypes as NKI prints them, the NeuronCore
version queries, nki.isa.constants and enum values given as numbers,
num_programs(axes=), and the activations nkilib names; each against the SDK's
documented semantics or NumPy."""
import dataclasses

import numpy as np
import pytest

import neuronsim_nki as nki
from nsim_util import nki_run
import neuronsim_nki.isa as nisa
import neuronsim_nki.language as nl


def test_nki_object_classes_are_data_classes_with_or_without_dataclass():
    """SDK nki-language-guide.rst, "Class Support": the compiler's __init__
    fills annotated fields positionally or by keyword (None when left out),
    keywords may set any attribute, __post_init__ runs; a class's own
    __init__ wins; @dataclass(frozen=True) classes construct."""
    @dataclasses.dataclass
    class C(nl.NKIObject):
        x: int
        y: bool = False

        def toggle(self):
            self.y = not self.y
    c = C(1)
    c.toggle()
    assert (c.x, c.y) == (1, True)
    assert C().x is None and C(y=True).y is True

    class Base(nl.NKIObject):
        a: int
        b: int = 7

    class Derived(Base):
        c: str

        def __post_init__(self):
            self.total = (self.a or 0) + self.b
    d = Derived(1, 2, "z", extra=5)
    assert (d.a, d.b, d.c, d.extra, d.total) == (1, 2, "z", 5, 3)
    assert Derived(a=4).total == 11

    class Own(nl.NKIObject):
        x: int = 1

        def __init__(self, x):
            self.x = 10 * x
    assert Own(2).x == 20

    @dataclasses.dataclass(frozen=True)
    class Frozen(nl.NKIObject):
        p: int
        q: list = dataclasses.field(default_factory=list)
    f = Frozen(3)
    assert f.p == 3 and f.q == []
    with pytest.raises(nki.NKIError, match="takes 2 positional arguments"):
        Frozen(1, 2, 3)


def test_dtypes_print_and_compare_as_nki_names():
    """A tensor's dtype prints its NKI name and equals the nl dtype
    (nkilib's str(t.dtype) == str(nl.float32)); nl dtypes are distinct dict
    keys ({nl.float8_e4m3fn: 448.0}), which a tensor's dtype finds
    (kernel_helpers' fp8 range lookup), and NumPy dtypes; packed MX dtypes
    are tile dtypes of their packed size (test_nki_mx.py runs them)."""
    seen = {}
    fp8_max = {nl.float8_e4m3: 240.0, nl.float8_e4m3fn: 448.0, nl.float8_e5m2: 57344.0}

    @nki.jit
    def k(a):
        seen["str"] = str(a.dtype)
        seen["eq"] = a.dtype == nl.float32 and a.dtype != nl.bfloat16
        t = nl.ndarray((128, 4), dtype=nl.float8_e4m3fn, buffer=nl.sbuf)
        seen["fp8"] = (str(t.dtype), t.dtype == nl.float8_e4m3fn)
        seen["max"] = [fp8_max.get(nl.ndarray((1, 1), dtype=d, buffer=nl.sbuf).dtype)
                       for d in (nl.float8_e4m3, nl.float8_e4m3fn, nl.float8_e5m2, nl.bfloat16)]
        seen["keys"] = {a.dtype: 1, nl.float32: 2, "float32": 3}
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out
    k(np.zeros((128, 4), np.float32))
    assert seen == {"str": "float32", "eq": True, "fp8": ("float8_e4m3fn", True),
                    "max": [240.0, 448.0, 57344.0, None], "keys": {"float32": 3}}
    assert np.zeros(2, dtype=nl.bfloat16).dtype.name == "bfloat16"       # NumPy takes nl dtypes (ml_dtypes)
    assert str(nl.float8_e4m3fn_x4) == "float8_e4m3fn_x4" and nl.float8_e4m3fn != nl.float8_e4m3
    assert len({nl.float8_e4m3: 240.0, nl.float8_e4m3fn: 448.0, nl.float8_e5m2: 57344.0}) == 3
    assert nki.dtype is type(nl.float32) and nl.bool == nl.uint8 and nl.fp32.min == -nl.fp32.max

    @nki.jit
    def packed(a):
        t = nl.ndarray((128, 4), dtype=nl.float4_e2m1fn_x4, buffer=nl.sbuf)
        seen["x4"] = (str(t.dtype), t.dtype == nl.float4_e2m1fn_x4, t.itemsize if hasattr(t, "itemsize") else None)
        return a
    packed(np.zeros((128, 4), np.float32))
    assert seen["x4"][:2] == ("float4_e2m1fn_x4", True)


@pytest.mark.parametrize("target, gen", [("trn1", 2), ("trn2", 3), ("trn3", 4)])
def test_nc_version_follows_the_target(target, gen, monkeypatch):
    seen = []

    @nki.jit
    def k(a):
        seen.append(nisa.get_nc_version())
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out
    # traced only: a process's simulator runtime runs one target, which the
    # other tests' torch plugin may have started already
    nki.Kernel(k.func, target).trace(np.zeros((4, 4), np.float32))
    assert set(seen) == {nisa.nc_version(gen)} and seen[0] >= nisa.nc_version.gen2
    assert nisa.get_nc_sub_version() == 0
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    assert nisa.get_nc_version() == gen


def test_isa_constants_module_and_enum_numbers(neuronsim, tmp_path):
    """`from nki.isa.constants import dge_mode, oob_mode` imports; enum
    members may be passed as the numbers NKI's enums carry (nkilib passes
    dge_mode=3, none); an unknown number is refused by name."""
    script = tmp_path / "k.py"
    script.write_text(
        "import numpy as np\n"
        "import nki, nki.language as nl, nki.isa as nisa\n"
        "from nki.isa.constants import dge_mode, oob_mode\n"
        "import nki.isa.constants as c\n"
        "assert c.dge_mode is dge_mode and nisa.constants.oob_mode is oob_mode\n"
        "@nki.jit\n"
        "def k(a):\n"
        "    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=t, src=a, dge_mode=3, engine=6)\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    nisa.dma_copy(dst=out, src=t, dge_mode=dge_mode.none)\n"
        "    return out\n"
        "a = np.arange(512, dtype=np.float32).reshape(128, 4)\n"
        "assert (k(a) == a).all()\n"
        "print('ok')\n")
    r = nki_run(neuronsim, script)
    assert "ok" in r.stdout

    @nki.jit
    def bad(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, dge_mode=9)
        return a
    with pytest.raises(nki.NKIError, match="dge_mode=9 is no nki.isa.dge_mode value"):
        bad(np.zeros((4, 4), np.float32))


def test_num_programs_takes_axes():
    seen = []

    @nki.jit
    def k(a):
        seen.append((nl.num_programs(axes=0), nl.num_programs(axes=1), nl.num_programs((0, 1)),
                     nl.num_programs(axes=None), nl.num_programs(axis=1)))
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out
    k[2, 3](np.zeros((4, 4), np.float32))
    assert set(seen) == {(2, 3, 6, 6, 3)}


@pytest.mark.parametrize("name, ref", [
    ("gelu_apprx_sigmoid", lambda x: x / (1 + np.exp(-1.702 * x))),
    ("gelu_apprx_sigmoid_dx", lambda x: (lambda s: s + 1.702 * x * s * (1 - s))(1 / (1 + np.exp(-1.702 * x)))),
    ("silu_dx", lambda x: (lambda s: s * (1 + x * (1 - s)))(1 / (1 + np.exp(-x)))),
    ("mish", lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    ("erf_dx", lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x)),
])
def test_activations_nkilib_names(name, ref):
    fn = getattr(nl, name)

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=fn(nl.load(a)))
        return out
    x = np.linspace(-6, 6, 128 * 64, dtype=np.float32).reshape(128, 64)
    np.testing.assert_allclose(k(x), ref(x.astype(np.float64)), rtol=2e-5, atol=2e-6)


def test_nisa_activation_takes_integer_data_and_casts_once_into_dst():
    """SDK nki.isa.activation: data "can be in any valid NKI data type", cast
    to fp32 by the engine; the result is cast once into dst's dtype (nkilib's
    selective-expert MoE turns int32 expert indices into fp32 so)."""
    import neuronsim_nki.isa as nisa

    @nki.jit
    def k(idx):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        f = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=f, op=nl.exp, data=nl.load(idx), scale=0.5)
        nl.store(out, value=f)
        return out
    idx = np.arange(1024, dtype=np.int32).reshape(128, 8) % 9
    np.testing.assert_allclose(k(idx), np.exp(0.5 * idx), rtol=1e-6)
