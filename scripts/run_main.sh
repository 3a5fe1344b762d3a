#!/usr/bin/env bash
# The main job.  Sets up what is missing (system packages, torch, transformers),
# builds, then runs a small Llama-architecture model on the simulated `neuron`
# device (examples/llama_generate.py): logits checked against CPU PyTorch,
# greedy generation with a static KV cache, host speed, simulated time per
# token and per-engine utilization.  Extra arguments go to the example.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export NSIM_BUILD_DIR="${NSIM_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"
"$NSIM_BUILD_DIR/bin/neuronsim" --version
NEURON_SIM=1 python3 -W ignore::UserWarning "$ROOT/examples/llama_generate.py" --strict "$@"
