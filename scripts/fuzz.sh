#!/usr/bin/env bash
# Fuzz the untrusted-input paths of isa/ with libFuzzer under ASan + UBSan.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default: 600 s, targets isa_load isa_asm compile_cache
#
# compile_cache is the Python target tests/fuzz/fuzz_compile_cache.py (atheris, the
# same libFuzzer engine) over the compile cache's artifact and entry readers; its
# corpus lives in build-fuzz/corpus/compile_cache (tests/python/test_compile.py replays
# a seeded mutation sweep of the same readers in CI).
#
# Builds build-fuzz/ with clang (-DNSIM_FUZZ=ON), seeds a work corpus from the
# checked-in corpus and the example programs, runs each target for SECONDS,
# prints libFuzzer's final statistics (exec count), and merges inputs that add
# coverage into tests/fuzz/corpus/TARGET (replayed by CTest on every build).
# Exit status is non-zero if any target found a crash or property violation;
# the crashing input is left in build-fuzz/artifacts/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_EACH="${1:-600}"
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(isa_load isa_asm compile_cache)
BUILD="$ROOT/build-fuzz"

"$ROOT/scripts/setup.sh" --deps
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DNSIM_FUZZ=ON -DNSIM_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j "$(nproc)"

mkdir -p "$BUILD/artifacts"
status=0
# run_target NAME COMMAND...: fuzz with libFuzzer's flags, report its statistics
run_target() {
    local t="$1" log="$BUILD/$1.log"
    shift
    echo "== fuzzing $t for ${SECONDS_EACH}s" >&2
    if ! "$@" -max_total_time="$SECONDS_EACH" -timeout=10 -print_final_stats=1 \
            -artifact_prefix="$BUILD/artifacts/$t-" >"$log" 2>&1; then
        status=1
        echo "!! $t failed; see $log and $BUILD/artifacts" >&2
        tail -40 "$log" >&2
    fi
    grep -E "^(Done|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb)" "$log" | sed "s/^/$t: /"
}
for t in "${TARGETS[@]}"; do
    if [[ "$t" == compile_cache ]]; then
        work="$BUILD/corpus/$t"
        mkdir -p "$work"
        run_target "$t" env NEURON_SIM=1 python3 "$ROOT/tests/fuzz/fuzz_compile_cache.py" "$work" \
            -dict="$ROOT/tests/fuzz/compile_cache.dict" -max_len=4096 -rss_limit_mb=4096
        continue
    fi
    work="$BUILD/corpus/$t"
    keep="$ROOT/tests/fuzz/corpus/$t"
    mkdir -p "$work" "$keep"
    cp -n "$keep"/* "$work"/ 2>/dev/null || true
    # seeds: the example programs in the form each target reads
    for f in "$ROOT"/examples/programs/*.nsasm; do
        b="$(basename "$f" .nsasm)"
        if [[ "$t" == isa_load ]]; then
            "$BUILD/bin/neuronsim" asm "$f" -o "$work/seed_$b.nsp"
        else
            cp "$f" "$work/seed_$b.nsasm"
        fi
    done
    dict=()
    [[ -f "$ROOT/tests/fuzz/$t.dict" ]] && dict=(-dict="$ROOT/tests/fuzz/$t.dict")
    run_target "$t" "$BUILD/bin/fuzz_$t" "$work" "${dict[@]}" -max_len=8192 -rss_limit_mb=2048
    # keep a minimal corpus covering what the checked-in and work corpora cover
    fresh="$BUILD/corpus-min/$t"
    rm -rf "$fresh" && mkdir -p "$fresh"
    if "$BUILD/bin/fuzz_$t" -merge=1 "$fresh" "$keep" "$work" >/dev/null 2>&1 &&
            [[ -n "$(ls -A "$fresh")" ]]; then
        rm -f "$keep"/* && cp "$fresh"/* "$keep"/
    fi
    echo "$t: checked-in corpus now $(ls "$keep" | wc -l) inputs" >&2
done
exit $status
