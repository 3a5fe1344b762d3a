"""The C tables are the only description of the ISA: the bindings read them
from libneuronsim.so (checked here against the .def files themselves), and
no Python file in the tree keeps a copy of one (an AST scan for collection
literals made of a table's names)."""
import ast
import pathlib
import re

import neuronsim
import pytest
from neuronsim.program import decode

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "include" / "neuronsim"


def _rows(deffile, macro):
    text = re.sub(r"/\*.*?\*/", "", (INCLUDE / deffile).read_text(), flags=re.S)
    return [m.group(1) for m in re.finditer(rf"^\s*{macro}\(\s*(\w+)\s*,", text, flags=re.M)]


def test_tables_are_the_def_files():
    assert list(neuronsim.OPCODES) == _rows("isa.def", "ISA_OP")
    assert list(neuronsim.TARGETS) == _rows("isa_targets.def", "ISA_TARGET")
    assert list(neuronsim.ACTIVATIONS) == _rows("isa_act.def", "ISA_ACT")
    assert list(neuronsim.ALU_OPS) == _rows("isa_alu.def", "ISA_ALU")
    assert list(neuronsim.DTYPE_SIZES) == _rows("isa_dtype.def", "ISA_DTYPE")
    assert neuronsim.DTYPE_SIZES["bf16"] == 2 and neuronsim.DTYPE_SIZES["fp8_e4m3"] == 1
    header = (INCLUDE / "isa.h").read_text()
    engines = re.findall(r"ISA_ENGINE_(\w+)\s*[=,]", header.split("typedef enum isa_engine")[1].split("}")[0])
    assert list(neuronsim.ENGINES) == [e.lower() for e in engines]
    assert set(neuronsim.ENGINE_TRACKS.values()) == set(neuronsim.ENGINES)


def test_stats_fields_cover_the_struct():
    runtime = (INCLUDE / "exec.h").read_text()
    body = runtime.split("typedef struct nsim_exec_stats")[1].split("} nsim_exec_stats;")[0]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    declared = [re.sub(r"\[.*", "", n).strip() for decl in re.findall(r"uint64_t\s+([^;]+);", body)
                for n in decl.split(",")]
    assert [n for n, _ in neuronsim.tables().STAT_FIELDS] == declared


def test_chip_rows_and_targets_agree():
    for t in neuronsim.TARGETS:
        chip = neuronsim.chip_info(t)
        assert chip["target"] == t and chip["core_name"] == f"NeuronCore-v{neuronsim.target_info(t)['core_version']}"
        assert chip["hbm_standard"].startswith("HBM") and chip["hbm_bytes_per_second"] > 0
    with pytest.raises(neuronsim.NeuronSimError, match="unknown target 'trn0'.*" + ", ".join(neuronsim.TARGETS)):
        neuronsim.chip_info("trn0")


def test_decoder_gives_operand_roles_from_the_format_table():
    prog = decode(""".target trn2
.semaphores 1
.scratch 0
.engine tensor
    load_stationary stationary=sbuf:bf16[0:128]{1x128}
    multiply_moving dst=psum:fp32[0:128]{1x512} moving=sbuf:bf16[0:128]+256{1x512} accumulate
    multiply_moving dst=psum:fp32[0:128]{1x512} moving=sbuf:bf16[0:128]+256{1x512}
    end
""")
    ls, acc, plain, end = prog.streams["tensor"]
    assert [(o.key, o.reads, o.writes) for o in ls.operands] == [("stationary", True, False)]
    assert [(o.key, o.reads, o.writes) for o in acc.operands] == [("dst", True, True), ("moving", True, False)]
    assert [(o.key, o.reads, o.writes) for o in plain.operands] == [("dst", False, True), ("moving", True, False)]
    assert acc.values["accumulate"] and not plain.values["accumulate"] and acc.line == 6
    assert acc.operands[0].ap.space == "psum" and acc.operands[0].ap.byte_range(4) == (0, 2048)
    with pytest.raises(neuronsim.NeuronSimError, match="line 4"):
        decode(".target trn2\n.semaphores 1\n.engine tensor\n    bogus x=1\n")


# ------------------------------------------------------- no Python copies

def _python_files():
    for base in ("sim", "nki", "backend", "traces", "examples", "bench", "tests", "scripts", "docs"):
        for p in sorted((ROOT / base).rglob("*.py")) if (ROOT / base).exists() else []:
            yield p


def _strings(nodes):
    return [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _copies(tree):
    """(line, what) for collection literals that restate a C table: every
    engine, target or trace track name (a full enumeration; a test's
    expected subset is not one), half or more of the opcodes, activations,
    ALU operators or stats fields (as elements, dict keys or values, or keys
    mapped to themselves) in a collection made mostly (4/5) of them -- torch
    op names that happen to match are not a copy -- or a dict of dtype names
    to sizes."""
    t = neuronsim.tables()

    def half(names):
        return set(names), max(4, len(names) // 2)
    sets = {"engine": (set(t.ENGINES), len(t.ENGINES)), "target": (set(t.TARGETS), len(t.TARGETS)),
            "track": (set(t.ENGINE_TRACKS), len(t.ENGINE_TRACKS)),
            "stats field": half([n for n, _ in t.STAT_FIELDS]), "opcode": half(t.OPCODES),
            "activation": half(t.ACTIVATIONS), "ALU": half(t.ALU_OPS)}
    every = tuple(sets)
    plain = ("engine", "target", "track", "stats field")   # names that are never translated
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            groups = [(_strings(node.elts), every)]
        elif isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]
            same = [k.value for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)
                    and isinstance(v, ast.Constant) and k.value == v.value]
            groups = [(same, every), (_strings(keys), plain), (_strings(node.values), plain)]
            ks = _strings(keys)
            if (len([k for k in ks if k in t.DTYPE_SIZES]) >= 3
                    and all(isinstance(v, ast.Constant) and isinstance(v.value, int) for v in node.values)):
                yield node.lineno, "dtype sizes"
        else:
            continue
        for strings, kinds in groups:
            for what in kinds:
                names, least = sets[what]
                hit = set(strings) & names
                if len(hit) >= least and 5 * len(hit) >= 4 * len(set(strings)):
                    yield node.lineno, f"{what} names {sorted(set(strings) & names)}"


def test_no_python_file_copies_a_c_table():
    found = []
    for path in _python_files():
        tree = ast.parse(path.read_text(), str(path))
        found += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in _copies(tree)]
    assert not found, "copies of the ISA's tables (read them from neuronsim instead):\n" + "\n".join(found)


def test_the_scan_finds_copies():
    """The scan above is not vacuous: each kind of copy it knows is caught."""
    src = '''
ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync")
SIZES = {"fp32": 4, "bf16": 2, "int8": 1}
TRACKS = {"TensorE": 0, "VectorE": 1, "ScalarE": 2, "GpSimdE": 3, "SyncE": 4}
'''
    t = neuronsim.tables()
    src += f"T = {list(t.TARGETS)!r}\n"
    src += f"ACT = {dict(zip(t.ACTIVATIONS, t.ACTIVATIONS))!r}\n"
    got = [what for _, what in _copies(ast.parse(src))]
    for kind in ("engine", "target", "dtype sizes", "activation", "track"):
        assert any(w.startswith(kind) for w in got), (kind, got)
    # a translation table (NKI names to ISA names) or an expected subset is not a copy
    assert not list(_copies(ast.parse('A = {"copy": "identity", "gelu_apprx_tanh": "gelu_tanh"}')))
    assert not list(_copies(ast.parse('E = {"TensorE", "SyncE"}')))


def test_dtypes_cross_to_the_library_as_dtypes():
    """graph_run takes its outputs' dtypes as ScalarType[] (no numeric codes
    cross the boundary), and no Python file in the package writes dtype ->
    number literals"""
    import torch
    from torch_neuronsim import graph

    schema = torch.ops.neuronsim.graph_run.default._schema
    assert "ScalarType[] out_dtypes" in str(schema), str(schema)
    pkg = pathlib.Path(graph.__file__).parent
    literal = re.compile(r"torch\.(u?int\d+|float\d+|bfloat16|bool|complex\d+)\s*:\s*\d+")
    for path in pkg.rglob("*.py"):
        assert not literal.search(path.read_text()), f"{path.name} writes a dtype code as a literal"


def test_fused_step_constants_come_from_the_library():
    """the fuser's step kinds and limits are kernels.h's NK_FUSED_* as the
    library reports them, not numbers in fusion.py"""
    import torch
    from torch_neuronsim import fusion

    lib = torch.ops.neuronsim.fused_constants()
    assert (fusion.TT, fusion.TS, fusion.ACT) == (lib["TT"], lib["TS"], lib["ACT"])
    assert (fusion.MAX_IN, fusion.MAX_STEPS) == (lib["MAX_IN"], lib["MAX_STEPS"])
    text = pathlib.Path(fusion.__file__).read_text()
    assert not re.search(r"^(TT|TS|ACT|MAX_IN|MAX_STEPS)\b[^=\n]*=\s*[\d(]", text, re.M)


# ------------------------------------------------ chip constants, activation map, records

def _chip_values():
    """{(field tokens, value)} of every target's numeric chip facts, with
    the time fields also in ns and us (a restatement may change the unit)"""
    out = set()
    for t in neuronsim.TARGETS:
        for k, v in neuronsim.chip_info(t).items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v in (0, 1):
                continue
            toks = set(k.split("_")) - {"ps", "per", "second", "bytes", "mhz"}
            out.add((frozenset(toks), float(v)))
            if k.endswith("_ps"):
                out.add((frozenset(toks), v / 1e3))
                out.add((frozenset(toks), v / 1e6))
    return out


def _restated_chip_constants(tree, facts):
    """(line, name) for module-level NAME = <number> that restates a chip
    fact: the value is the fact's (in some unit) and the name shares a word
    with the fact's field (MIN_II = 64 for min_ii, DMA_LATENCY_NS = 1300.0
    for dma_issue_latency_ps)"""
    for node in tree.body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
            continue
        v = node.value.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name):
                words = set(target.id.lower().split("_")) - {"ns", "us", "ps", "mhz"}
                if any(float(v) == fv and words & toks for toks, fv in facts):
                    yield node.lineno, target.id


def test_no_python_file_restates_a_chip_constant():
    facts = _chip_values()
    found = []
    for base in ("sim/python", "nki", "backend/python"):
        for path in sorted((ROOT / base).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            found += [f"{path.relative_to(ROOT)}:{line}: {name}" for line, name in _restated_chip_constants(tree, facts)]
    assert not found, "chip facts restated in Python (read neuronsim.chip_info):\n" + "\n".join(found)
    # the scan is not vacuous: the constants schedule.py used to keep are caught
    old = ast.parse("MIN_II = 64\nOVERHEAD = 100\nDMA_LATENCY_NS = 1300.0\nTILE = 128\n")
    assert [n for _, n in _restated_chip_constants(old, facts)] == ["MIN_II", "OVERHEAD", "DMA_LATENCY_NS"]


def test_the_schedulers_costs_are_the_chip_rows():
    from neuronsim_nki import schedule
    chip = neuronsim.chip_info("trn2")
    assert {"min_ii", "static_overhead", "scalar_overhead", "dma_issue_latency_ps"} <= set(chip)
    assert chip["min_ii"] > 0 and chip["dma_issue_latency_ps"] > 0
    assert "chip" in schedule.schedule.__code__.co_varnames


def test_activation_map_comes_from_the_library():
    """the fuser's ATen -> activation map is the eager kernels' table
    (activations.def) as the library reports it, and no Python file maps
    aten ops to activation names itself"""
    import torch
    from torch_neuronsim import fusion

    lib = torch.ops.neuronsim.unary_activations()
    acts = neuronsim.tables().ACTIVATIONS
    assert {k._schema.name.split("::")[1] for k in fusion._UNARY_ACT} == set(lib) and lib["exp"] == list(acts).index("exp")
    assert "neg" not in lib   # the identity at scale -1: not one activation of its input
    for base in ("backend/python", "nki"):
        for path in sorted((ROOT / base).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Dict):
                    continue
                pairs = [(k, v) for k, v in zip(node.keys, node.values)
                         if isinstance(k, ast.Attribute) and isinstance(v, ast.Constant) and v.value in acts]
                assert len(pairs) < 3, f"{path.relative_to(ROOT)}:{node.lineno}: an op -> activation map"


def test_records_are_laid_out_by_the_library():
    """graph_link / graph_run / fused_pointwise records: the Python side
    packs by the library's field order and refuses a layout it does not fill"""
    import torch
    from torch_neuronsim import fusion, graph, records  # noqa: F401  (their import-time checks ran)

    lib = torch.ops.neuronsim.records()
    assert list(lib["out_meta"]) == ["rank", "sizes", "strides"]
    assert records.pack("out_span", element_size=4, hi=20, lo=10) == [
        {"lo": 10, "hi": 20, "element_size": 4}[f] for f in lib["out_span"]]
    assert records.pack("out_meta", rank=2, sizes=[3, 4], strides=[4, 1]) == [2, 3, 4, 4, 1]
    with pytest.raises(RuntimeError, match="different builds"):
        records.expect("out_span", ("lo", "hi"))            # a field the library has and Python does not fill
    with pytest.raises(RuntimeError, match="different builds"):
        records.expect("fused_step", tuple(lib["fused_step"]) + ("scale",))
    for text in (pathlib.Path(graph.__file__).read_text(), pathlib.Path(fusion.__file__).read_text()):
        assert "graph_run(" not in text or "records.pack" in text


def test_core_versions_are_compared_only_by_the_feature_table():
    """a generation's features are rows of isa_features.def: nothing but the
    table's reader (isa_target_has) compares core versions"""
    pattern = re.compile(r"core_version\W{0,3}\s*(<|>|<=|>=)\s*\w|\[\"core_version\"\]\s*(<|>)")
    found = []
    for base in ("isa", "device_model", "sim", "traces", "backend", "nki", "include"):
        for path in sorted((ROOT / base).rglob("*")):
            if path.suffix in (".c", ".h", ".cpp", ".py", ".def") and pattern.search(path.read_text()):
                found.append(str(path.relative_to(ROOT)))
    assert found == ["isa/tables.c"], found


def test_targets_have_the_features_of_their_core():
    feats = neuronsim.tables().FEATURES
    assert feats["exponential"] == 4 and feats["dma_transpose"] == 3
    for t in neuronsim.TARGETS:
        info = neuronsim.target_info(t)
        assert info["features"] == {f for f, first in feats.items() if info["core_version"] >= first}
