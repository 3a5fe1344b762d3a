#!/usr/bin/env bash
# Sets up what is missing, builds, and runs every test suite:
#   1. GoogleTest suites and fuzz-corpus replays through CTest
#   2. Python suites under pytest (tests/python)
# Fails if any suite fails or runs no test.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${NSIM_BUILD_DIR:-$ROOT/build}"
export NSIM_BUILD_DIR="$BUILD_DIR"

"$ROOT/scripts/setup.sh"

echo "== CTest (C/C++ suites, fuzz corpus replay)"
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error -j "$(nproc)"

echo "== pytest (Python suites)"
# pytest exits 5 when it collects nothing: that is a failure here too.
NEURONSIM_BIN="$BUILD_DIR/bin/neuronsim" python3 -m pytest -q "$ROOT/tests/python"
