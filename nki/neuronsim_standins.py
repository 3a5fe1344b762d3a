"""The import names of AWS Neuron packages that TorchNeuron code imports, for
processes where those packages are not installed: `nki` (NKI 0.7+:
nki.language, nki.isa, nki.typing, nki.collectives, nki.lnc),
`neuronxcc.nki` (the older path, with its .language / .isa / .typing) and
`torch_neuronx` (device detection, `nki`, `nki_op`), resolved to neuronsim's
modules, plus `importlib.metadata` distributions for torch-neuronx and nki
so that libraries which check the package's metadata (diffusers'
is_torch_neuronx_available) take their Neuron paths.

Installed at interpreter start by the neuronsim-standins.pth file the
torch-neuronsim package puts in site-packages; this module imports nothing
heavy (the aliased modules load when first imported).  It never shadows a
real package: before it provides a name it asks every other finder, and an
installed `nki`, `neuronxcc` or `torch_neuronx` (anything but a bare
directory of that name) wins; a submodule is aliased only when its parent is
the stand-in; a distribution is reported only when no installed one has the
name.
NEURONSIM_STANDINS=0 (or NEURONSIM_TORCH_NEURONX=0 for torch_neuronx alone)
turns them off."""
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import sys
import types

# the NKI language level neuronsim_nki implements (NKI 0.8: dst-first
# nisa calls, the LNC=2 kernel[2] bracket)
NKI_VERSION = "0.8.0"

# stand-in name -> the module it is (None: a synthetic namespace package)
ALIASES = {
    "nki": "neuronsim_nki",
    "nki.language": "neuronsim_nki.language",
    "nki.isa": "neuronsim_nki.isa",
    "nki.isa.constants": "neuronsim_nki.isa_constants",
    "nki.typing": "neuronsim_nki.typing",
    "nki.collectives": "neuronsim_nki.collectives",
    "nki.lnc": "neuronsim_nki.lnc",
    "nki.compiler": "neuronsim_nki.compiler",
    "neuronxcc": None,
    "neuronxcc.nki": "neuronsim_nki",
    "neuronxcc.nki.language": "neuronsim_nki.language",
    "neuronxcc.nki.isa": "neuronsim_nki.isa",
    "neuronxcc.nki.isa.constants": "neuronsim_nki.isa_constants",
    "neuronxcc.nki.typing": "neuronsim_nki.typing",
    "neuronxcc.nki.compiler": "neuronsim_nki.compiler",
    "torch_neuronx": "torch_neuronsim.neuronx",
    "torch_neuronx.neuron_dynamo_backend": "torch_neuronsim.neuron_dynamo_backend",
}
# distribution name (normalized) -> (its Name as published, the top-level module it provides)
DISTRIBUTIONS = {"torch-neuronx": ("torch-neuronx", "torch_neuronx"), "nki": ("nki", "nki")}


def version(dist):
    """a stand-in distribution's version, with the local label +neuronsim:
    torch-neuronx follows torch's (TorchNeuron releases match PyTorch's),
    nki is the NKI language level implemented"""
    if dist == "torch-neuronx":
        try:
            base = importlib.metadata.version("torch").split("+")[0]
        except importlib.metadata.PackageNotFoundError:
            base = "0.0.0"
    else:
        base = NKI_VERSION
    return base + "+neuronsim"


_PROVIDED = {}      # stand-in name -> the module object it resolved to


def enabled(name):
    if os.environ.get("NEURONSIM_STANDINS", "1") == "0":
        return False
    return not (name.split(".")[0] == "torch_neuronx" and os.environ.get("NEURONSIM_TORCH_NEURONX", "1") == "0")


def is_standin(name):
    """whether sys.modules[name] is this module's stand-in"""
    m = sys.modules.get(name)
    return m is not None and _PROVIDED.get(name) is m


class _Alias(importlib.abc.Loader):
    """loads `name` as the module `target` already is: one module object
    under both names, so no state is ever duplicated"""

    def __init__(self, name, target):
        self.name, self.target = name, target

    def create_module(self, spec):
        if self.target is None:          # a namespace holding stand-ins only
            m = types.ModuleType(spec.name)
            m.__path__ = []
            return m
        return importlib.import_module(self.target)

    def exec_module(self, module):
        _PROVIDED[self.name] = module
        # the package's stand-in submodules at once: `import nki.language`
        # must find nki.language in sys.modules, not load neuronsim_nki's
        # language.py a second time through the package's __path__
        for sub in sorted(n for n in ALIASES if n.startswith(self.name + ".")):
            if sub not in sys.modules:
                sys.modules[sub] = _PROVIDED[sub] = importlib.import_module(ALIASES[sub])
            parent, _, last = sub.rpartition(".")
            if not hasattr(sys.modules[parent], last):
                setattr(sys.modules[parent], last, sys.modules[sub])


def _namespace(spec):
    """a directory without __init__.py that happens to have the name (the
    source tree's own nki/ folder, run from the checkout): no package"""
    return spec.submodule_search_locations is not None and spec.origin in (None, "namespace")


def _origin(target):
    """the file of the module `target`, found without importing it or its
    package (so find_spec("torch_neuronx") does not import torch)"""
    if target is None:
        return None
    top, _, rest = target.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not rest:
        return spec.origin if spec is not None else None
    sub = importlib.machinery.PathFinder.find_spec(target, spec.submodule_search_locations)
    return sub.origin if sub is not None else None


class StandinFinder(importlib.abc.MetaPathFinder):
    """First in sys.meta_path, so that it is asked before a namespace
    directory of the same name can claim the name; it defers to every other
    finder that knows a real module of that name."""

    def __init__(self):
        self.forced = False          # `neuronsim nki run`: ours, whatever is installed

    def find_spec(self, name, path=None, target=None):
        if name not in ALIASES or not enabled(name):
            return None
        parent = name.rpartition(".")[0]
        if parent and not is_standin(parent):
            return None      # a real package's submodule it lacks: not ours to provide
        if not self.forced and not parent:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None and not _namespace(spec):
                    return None      # installed for real
        real = ALIASES[name]
        spec = importlib.machinery.ModuleSpec(name, _Alias(name, real), origin=_origin(real),
                                              is_package=real is None or "." not in real)
        spec.has_location = spec.origin is not None
        return spec

    def find_distributions(self, context=importlib.metadata.DistributionFinder.Context()):
        """a stand-in's distribution, asked for by name only (an
        unnamed listing -- pip's -- never sees it)"""
        want = getattr(context, "name", None)
        if not want:
            return iter(())
        key = want.lower().replace("_", "-").replace(".", "-")
        if key not in DISTRIBUTIONS or not enabled(DISTRIBUTIONS[key][1]):
            return iter(())
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_distributions"):
                continue
            if any(True for _ in finder.find_distributions(context)):
                return iter(())      # installed for real
        return iter((_Distribution(*DISTRIBUTIONS[key]),))


class _Distribution(importlib.metadata.Distribution):
    def __init__(self, name, module):
        self._name, self._module = name, module

    def read_text(self, filename):
        if filename == "METADATA":
            return (f"Metadata-Version: 2.1\nName: {self._name}\nVersion: {version(self._name)}\n"
                    f"Summary: neuronsim's stand-in for {self._name} (the simulated Trainium device)\n")
        if filename == "top_level.txt":
            return self._module + "\n"
        return None

    def locate_file(self, path):
        return path


_FINDER = StandinFinder()


# the site-packages file that runs this module at interpreter start
PTH_FILE = "neuronsim-standins.pth"


def write_pth(directory):
    """writes PTH_FILE into `directory` (a wheel's root, or site-packages
    for an editable install); returns its path"""
    path = os.path.join(directory, PTH_FILE)
    with open(path, "w") as f:
        f.write(f"import {__name__}\n")
    return path


def install(force=False):
    """the finder, first in sys.meta_path (once); force (`neuronsim nki
    run`: this process simulates whatever it imports): the stand-ins even
    where the real packages are installed"""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    sys.meta_path.insert(0, _FINDER)
    _FINDER.forced = _FINDER.forced or force


install()
