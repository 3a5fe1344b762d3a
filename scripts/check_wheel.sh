#!/usr/bin/env bash
# The wheel as a CI job would use it: scripts/build_wheel.sh, then a fresh
# virtual environment holding only torch==2.13.0 (no root, no Debian
# packages, no build tools), `pip install` of the wheel, and a tiny Llama
# forward on `neuron` against the CPU under NEURON_STRICT=1
# (examples/plain_llama.py), then an NKI kernel through `import nki`.
# Prints the wheel's size and what its libraries link against.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/neuronsim-wheel-check.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

bash "$ROOT/scripts/build_wheel.sh" "$WORK/dist" | sed 's/^/[wheel] /'
whl="$(ls "$WORK"/dist/*.whl)"
echo "[wheel] $(basename "$whl"): $(du -k "$whl" | cut -f1) KiB"
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q torch==2.13.0
"$WORK/venv/bin/python" -m pip install -q "$whl"
site="$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
for lib in "$site"/neuronsim/lib/libneuronsim.so "$site"/torch_neuronsim/lib/libtorch_neuronsim.so; do
    echo "[links] ${lib#"$site"/}: $(readelf -d "$lib" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
done
cd "$WORK"
NEURON_SIM=1 NEURON_STRICT=1 "$WORK/venv/bin/python" "$ROOT/examples/plain_llama.py"
NEURON_SIM=1 "$WORK/venv/bin/python" - <<'PYEOF'
import numpy as np, torch
import nki, nki.language as nl

@nki.jit
def add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
    return out

a, b = torch.randn(128, 256), torch.randn(128, 256)
r = add(a.to("neuron"), b.to("neuron"))
assert torch.equal(r.cpu(), a + b)
print("nki kernel on neuron: ok")
PYEOF
