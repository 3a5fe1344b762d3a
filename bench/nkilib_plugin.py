"""pytest plugin: nki-library's own integration tests, unmodified, in the
library's own simulation mode (`--test-mode=simulation`), with neuronsim
as the simulator.  Loaded by bench/nkilib_tests.py (`-p nkilib_plugin`).

The library's harness (test/utils/simulation_setup.py) runs a kernel as
`nki.cpu_simulate(kernel)[lnc](**inputs)` from AWS's NkiCpuSimulator
package (`nki_cpu_simulator`), which is not public.  This plugin provides
that import name over neuronsim_nki: `cpu_simulate(kernel)[lnc]` simulates
the kernel on one core, or as an LNC=2 launch (kernel[2]).  It also
stands in for what a public checkout of the library lacks:
- `neuron_dtypes` (AWS's, not public): the calls the tests make of it --
  static_cast, sizeinbytes, is_float_type, finfo, bfloat16 -- over NumPy
  and ml_dtypes; its packed MX types (float8_e4m3fn_x4, ...) are named but
  refuse to be cast to, so those tests fail saying so;
- test/utils/scripts/remote_lock_scripts.py and perf_analysis_private.py,
  which the harness imports for hardware hosts and profiles and the
  repository does not hold: empty stand-ins;
- the harness's simulation path reads Orchestrator._compiled_kernel, which
  only its compile path sets (an AttributeError on every test at
  d2ad3a5): None.
Nothing of the library's kernels or tests is changed."""
import importlib
import importlib.abc
import importlib.machinery
import sys
import types

import ml_dtypes
import numpy as np

import neuronsim_nki
import neuronsim_nki.language

# harness modules the public repository does not hold (hardware hosts, profiles)
PRIVATE = ("test.utils.scripts", "test.utils.scripts.remote_lock_scripts", "test.utils.perf_analysis_private")


class _Empty(types.ModuleType):
    """A module whose every name is a class that does nothing."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {"__init__": lambda self, *a, **k: None})


class _PrivateFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name not in PRIVATE:
            return None
        for finder in sys.meta_path:
            if finder is not self and finder.find_spec(name, path, target) is not None:
                return None              # present after all: the real one
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        module = _Empty(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _PrivateFinder())


# ---------------------------------------------------------- neuron_dtypes

def _np_dtype(dtype):
    name = getattr(dtype, "name", None) or str(dtype)
    if name.endswith("_x4"):
        raise NotImplementedError(f"neuron_dtypes.{name}: AWS's packed MX types are not public; the "
                                  "simulator binds arrays of them when they come from neuron_dtypes itself")
    return {"bfloat16": ml_dtypes.bfloat16, "float8_e4m3": ml_dtypes.float8_e4m3fn,
            "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}.get(name) or np.dtype(dtype)


class _MxName(str):
    """A packed MX type's name; casting to it is refused (_np_dtype)."""

    @property
    def name(self):
        return str(self)


def _neuron_dtypes():
    dt = types.ModuleType("neuron_dtypes")
    dt.__doc__ = "stand-in for AWS's neuron_dtypes (bench/nkilib_plugin.py)"
    dt.bfloat16 = ml_dtypes.bfloat16
    dt.float = np.float32
    dt.static_cast = lambda a, dtype: np.asarray(a).astype(_np_dtype(dtype))
    dt.sizeinbytes = lambda dtype: np.dtype(_np_dtype(dtype)).itemsize
    dt.is_float_type = lambda dtype: np.dtype(dtype).kind == "f" or np.dtype(dtype).name in (
        "bfloat16", "float8_e4m3fn", "float8_e4m3", "float8_e5m2")
    dt.finfo = lambda dtype: ml_dtypes.finfo(_np_dtype(dtype))
    for name in ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4"):
        setattr(dt, name, _MxName(name))
    return dt


# ------------------------------------------------------- nki_cpu_simulator

class _Proxy(types.ModuleType):
    """A module that is `target` plus a few names of its own."""

    def __init__(self, name, target, **own):
        super().__init__(name)
        self.__dict__.update(own)
        self._target = target

    def __getattr__(self, name):
        return getattr(self.__dict__["_target"], name)


def cpu_simulate(kernel):
    """NkiCpuSimulator's launch: cpu_simulate(kernel)[lnc](**inputs) -> the
    kernel's outputs (NumPy), one core or an LNC=2 pair."""
    k = kernel if isinstance(kernel, neuronsim_nki.Kernel) else neuronsim_nki.jit(kernel)

    class Launch:
        def __getitem__(self, lnc):
            kk = k[lnc] if lnc and int(lnc) > 1 else k
            return lambda *args, **kwargs: kk.simulate(*args, **kwargs)[0]
    return Launch()


def _install():
    if "neuron_dtypes" not in sys.modules and importlib.util.find_spec("neuron_dtypes") is None:
        sys.modules["neuron_dtypes"] = _neuron_dtypes()
    language = _Proxy("nki_cpu_simulator.nki.language", neuronsim_nki.language)
    language.dtypes = language
    nki = _Proxy("nki_cpu_simulator.nki", neuronsim_nki, cpu_simulate=cpu_simulate, language=language,
                 builtin=types.ModuleType("nki_cpu_simulator.nki.builtin"))
    package = types.ModuleType("nki_cpu_simulator")
    package.__path__ = []
    package.nki = nki
    modules = {"nki_cpu_simulator": package, "nki_cpu_simulator.nki": nki,
               "nki_cpu_simulator.nki.language": language, "nki_cpu_simulator.nki.language.dtypes": language,
               "nki_cpu_simulator.nki.builtin": nki.builtin}
    for sub in ("isa", "isa.constants", "compiler", "typing", "tensor"):
        target = {"isa.constants": "isa_constants"}.get(sub, sub)
        modules[f"nki_cpu_simulator.nki.{sub}"] = importlib.import_module(f"neuronsim_nki.{target}")
    sys.modules.update(modules)


_install()


def pytest_configure(config):
    try:
        from test.utils.test_orchestrator import Orchestrator
    except ImportError:
        return
    if not hasattr(Orchestrator, "_compiled_kernel"):
        Orchestrator._compiled_kernel = None
