"""The plugin's rooms (backend/csrc, after OpenReg): runtime/ (the device),
aten/ (ATen kernels grouped by what they compute), compile/ (torch.compile's
device side), and programs/ (the C program generators).  Each room's ops.def
lists its native ATen registrations, a list per file, and generates the
try-native-else-fallback wrappers; program-cache keys come from the
generators' parameter structs."""
import collections
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
BACKEND = ROOT / "backend"
CSRC = BACKEND / "csrc"
PROGRAMS = BACKEND / "programs"

ROOMS = {"runtime", "aten", "compile"}
ATEN_ROOMS = {"pointwise", "compare", "reduction", "indexing", "linalg", "nn", "random", "complex", "optim"}


def _sources():
    """{path relative to backend/: text} of every plugin source file."""
    files = [p for p in CSRC.rglob("*") if p.suffix in (".cpp", ".h", ".def")]
    files += [p for p in PROGRAMS.iterdir() if p.suffix in (".c", ".h")]
    return {str(p.relative_to(BACKEND)): p.read_text() for p in sorted(files)}


def _tables():
    """{list macro: (ops.def path, [ATen op name of each row])}"""
    tables = {}
    for path in sorted(CSRC.rglob("ops.def")):
        cur = None
        for line in path.read_text().splitlines():
            m = re.match(r"#define (NEURON_OPS_\w+)\(OP, OP0, DEV, DEV0\)", line)
            if m:
                cur = m.group(1)
                assert cur not in tables, f"{cur} defined twice"
                tables[cur] = (path, [])
                continue
            if cur:
                tables[cur][1].extend(m.group(2) for m in re.finditer(r"\b(OP|OP0|DEV|DEV0)\((\w+)", line))
                # sub-tables expand to rows of their own (activations, comparisons)
                tables[cur][1].extend(f"<{m.group(1)}>" for m in re.finditer(r"\b(NEURON_[A-Z_]+)\(NEURON_", line))
                if not line.rstrip().endswith("\\"):
                    cur = None
    return tables


def _subtable_ops(name):
    for path in CSRC.rglob("*.def"):
        text = path.read_text()
        m = re.search(r"#define " + name + r"\(X\)((?:.*\\\n)*.*)", text)
        if m:
            return re.findall(r"X\((\w+)", m.group(1))
    raise AssertionError(f"no sub-table {name}")


def test_backend_csrc_is_in_rooms():
    assert {p.name for p in CSRC.iterdir()} == ROOMS, "backend/csrc holds the rooms and nothing else"
    # aten/ holds its rooms and the headers they share
    assert {p.name for p in (CSRC / "aten").iterdir() if p.is_dir()} == ATEN_ROOMS
    for p in CSRC.rglob("*"):
        # names inside a folder drop the prefix the folder already says
        assert not p.name.startswith("neuron_"), p
    assert not (BACKEND / "kernels").exists(), "program generators live in backend/programs"


def test_every_aten_registration_is_a_row_of_a_table():
    src = _sources()
    tables = _tables()
    assert len(tables) >= 20
    registered = collections.defaultdict(list)
    for name, text in src.items():
        if name.endswith("registration.h"):
            continue
        # aten kernels are registered only through the tables (autocast's
        # policy, the fallback itself and the launch batching of the
        # `_foreach_*` family, runtime/batch.cpp, are not kernels)
        for block in re.findall(r"TORCH_LIBRARY_IMPL\((\w+), (\w+), m\)", text):
            if name.endswith("runtime/batch.cpp"):
                assert text.count("TORCH_LIBRARY_IMPL(") == 1 and "aten::_foreach_" in text, name
                continue
            assert block[0] != "aten" or block[1] != "PrivateUse1", f"{name} registers aten kernels by hand"
        assert "call_fallback_fn" not in text, f"{name} calls the CPU fallback itself (return neuron::declined)"
        for lst in re.findall(r"NEURON_REGISTER_OPS\((NEURON_OPS_\w+)\)", text):
            registered[lst].append(name)
            # a file registers a list of its own room's table
            assert pathlib.Path(name).parent == tables[lst][0].parent.relative_to(BACKEND), (name, lst)
            # and the list is named after the file
            assert lst == "NEURON_OPS_" + pathlib.Path(name).stem.upper(), (name, lst)
    assert sorted(registered) == sorted(tables), "every list of the ops.def tables registered"
    assert all(len(files) == 1 for files in registered.values()), registered


def _base(op):
    # an op's in-place form (add_) is an overload of the same op for this
    # purpose: its kernel shares the functional one's dtype routing
    return op if op.startswith("__") else op.rstrip("_")


def test_every_overload_of_an_op_sits_in_one_file():
    owner = collections.defaultdict(set)
    for lst, (path, ops) in _tables().items():
        for op in ops:
            names = _subtable_ops(op[1:-1]) if op.startswith("<") else [op]
            for name in names:
                owner[_base(name)].add(lst)
    split = {op: sorted(lsts) for op, lsts in owner.items() if len(lsts) > 1}
    assert not split, f"overloads of one ATen op registered from several files: {split}"


def test_no_header_is_included_by_more_than_half_of_the_files():
    src = _sources()
    included = collections.Counter()
    for text in src.values():
        for h in set(re.findall(r'#include "([^"]+\.h)"', text)):
            included[pathlib.Path(h).name] += 1
    limit = len(src) / 2
    assert included, "the count found no includes"
    heavy = {h: n for h, n in included.items() if n > limit}
    assert not heavy, f"headers included by more than half of the {len(src)} plugin files: {heavy}"


def test_program_cache_keys_come_from_parameter_structs():
    src = _sources()
    keys = src["csrc/runtime/program_keys.h"]
    structs = set(re.findall(r"typedef struct (nk_\w+) \{", (PROGRAMS / "programs.h").read_text()))
    keyed = set(re.findall(r"NEURON_KEY\((nk_\w+),", keys))
    assert structs == keyed, f"parameter structs without a key: {structs - keyed}; keys of no struct: {keyed - structs}"
    for name, text in src.items():
        # no hand-packed keys: cached_program(generator name, params, dev, generator function)
        for call in re.findall(r"cached_program\(([^,]*),", text):
            assert call.strip().startswith('"') or name.endswith(".h"), (name, call)
