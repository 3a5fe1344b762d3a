#!/usr/bin/env bash
# The main job.  Sets up what is missing, builds, then runs example programs
# on the simulated NeuronCore (`neuronsim run`), checks their outputs against
# NumPy/torch, and prints each run's timing summary.  (The PyTorch model on
# the `neuron` device replaces this job with the plugin issues.)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export NSIM_BUILD_DIR="${NSIM_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"
"$NSIM_BUILD_DIR/bin/neuronsim" --version
python3 "$ROOT/scripts/main_job.py"
