#!/usr/bin/env bash
# Builds a self-contained wheel of torch-neuronsim into OUT_DIR (default
# dist/): the committed sources (git archive HEAD, so the build cannot pick
# up or overwrite the working tree's libraries) built in Release by
# `pip wheel --no-build-isolation` (torch comes from this environment, never
# resolved by pip), then scripts/wheel_repair.py: the libraries a plain
# system lacks bundled beside libneuronsim.so, RUNPATHs relative, debug
# information stripped, tagged for this Python and platform.  Install it into
# any environment that has torch==2.13.0:  pip install dist/torch_neuronsim-*.whl
# Needs what scripts/setup.sh installs (cmake, ninja, the Debian libraries
# the build links, patchelf).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/dist}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/neuronsim-wheel.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

mkdir -p "$WORK/src" "$WORK/raw"
git -C "$ROOT" archive --format=tar HEAD | tar -x -C "$WORK/src"
(cd "$WORK/src" && NSIM_BUILD_DIR="$WORK/build" NSIM_BUILD_TYPE=Release \
    python3 -m pip wheel -q --no-build-isolation --no-deps -w "$WORK/raw" .)
mkdir -p "$OUT"
python3 "$ROOT/scripts/wheel_repair.py" "$WORK"/raw/*.whl "$OUT"
