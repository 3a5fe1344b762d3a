"""The plugin's rooms (backend/csrc, after OpenReg): one table lists every
native ATen registration and generates the try-native-else-fallback
wrappers; program-cache keys come from the generators' parameter structs."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
CSRC = ROOT / "backend" / "csrc"


def _sources():
    return {p.name: p.read_text() for p in sorted(CSRC.glob("*.cpp")) + sorted(CSRC.glob("*.h"))}


def test_every_aten_registration_is_a_row_of_the_table():
    src = _sources()
    table = (CSRC / "neuron_ops.def").read_text()
    lists = re.findall(r"#define (NEURON_OPS_\w+)\(OP, OP0, DEV, DEV0\)", table)
    assert len(lists) >= 10
    registered = {}
    for name, text in src.items():
        if name == "neuron_ops.h":
            continue
        # aten kernels are registered only through the table (autocast's
        # policy and the fallback itself are not kernels)
        for block in re.findall(r"TORCH_LIBRARY_IMPL\((\w+), (\w+), m\)", text):
            assert block[0] != "aten" or block[1] != "PrivateUse1", f"{name} registers aten kernels by hand"
        assert "call_fallback_fn" not in text, f"{name} calls the CPU fallback itself (return neuron::declined)"
        for lst in re.findall(r"NEURON_REGISTER_OPS\((NEURON_OPS_\w+)\)", text):
            registered.setdefault(lst, []).append(name)
    assert sorted(registered) == sorted(lists), "every list of neuron_ops.def registered, by one file"
    assert all(len(files) == 1 for files in registered.values()), registered


def test_program_cache_keys_come_from_parameter_structs():
    src = _sources()
    keys = src["neuron_program_keys.h"]
    structs = set(re.findall(r"typedef struct (nk_\w+) \{", (ROOT / "backend" / "kernels" / "kernels.h").read_text()))
    keyed = set(re.findall(r"NEURON_KEY\((nk_\w+),", keys))
    assert structs == keyed, f"parameter structs without a key: {structs - keyed}; keys of no struct: {keyed - structs}"
    for name, text in src.items():
        # no hand-packed keys: cached_program(generator name, params, dev, generator function)
        for call in re.findall(r"cached_program\(([^,]*),", text):
            assert call.strip().startswith('"') or name == "neuron_kernels.h", (name, call)
