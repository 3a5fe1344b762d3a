#!/usr/bin/env bash
# The main job.  Sets up what is missing, builds, then takes the example
# programs through the `neuronsim` CLI: validate (with a summary of each),
# assemble to the binary form, disassemble back, and check the round trip.
# (Execution with timing arrives with the core-model issue; the PyTorch
# model on the `neuron` device replaces this job with the plugin issues.)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${NSIM_BUILD_DIR:-$ROOT/build}"
export NSIM_BUILD_DIR="$BUILD_DIR"
"$ROOT/scripts/setup.sh"

NSIM="$BUILD_DIR/bin/neuronsim"
OUT="$BUILD_DIR/examples"
mkdir -p "$OUT"
"$NSIM" --version
for src in "$ROOT"/examples/programs/*.nsasm; do
    name="$(basename "$src" .nsasm)"
    echo
    "$NSIM" validate "$src"
    "$NSIM" asm "$src" -o "$OUT/$name.nsp"
    "$NSIM" disasm "$OUT/$name.nsp" -o "$OUT/$name.nsasm"
    "$NSIM" asm "$OUT/$name.nsasm" -o "$OUT/$name.2.nsp"
    if cmp -s "$OUT/$name.nsp" "$OUT/$name.2.nsp"; then
        echo "  binary $(stat -c %s "$OUT/$name.nsp") bytes; asm -> disasm -> asm round trip: identical"
    else
        echo "  round trip differs for $name" >&2
        exit 1
    fi
done
echo
echo "first lines of $OUT/matmul_gelu.nsasm (disassembled):"
sed -n '1,20p' "$OUT/matmul_gelu.nsasm"
