#!/usr/bin/env bash
# Issue 16's checks on a machine with more cores (and AVX-512), from the repository root:
#   scripts/device/convert_checks.sh OUT_DIR [all|build|tests|bench]
#   build  configure (Release, Ninja, no CUDA kernels) and build only the conversion targets
#   tests  test_fastconv_api, test_fastconv_boundaries (every bf16 input too), then every
#          exhaustive_fastconv combination of tests/fastconv/CMakeLists.txt (ctest label
#          "exhaustive"): all 2^32 float32 inputs against the scalar encode (its committed digests,
#          tests/fastconv/reference/) through every ISA the CPU has, both algorithms, each output
#          width and streaming stores; each run uses every core
#   bench  bench_convert with the Python peers (torch, ml_dtypes where importable) into OUT_DIR
#   all    the three in turn (default), then the summary
# Environment: LOWBIT_BUILD_DIR (default build), LOWBIT_CMAKE_ARGS (extra cmake arguments, e.g.
# -DCMAKE_PREFIX_PATH=...), LOWBIT_PEER_PYTHON (default python3), LOWBIT_BENCH_ARGS (extra
# bench_convert arguments).
# Time on 16 cores: build 2-3 min, tests 2-4 min (the scalar reference is computed in full only
# for the two RECOMPUTE combinations), bench 2-3 min. Each phase can run in a call of its own; the
# summary covers whatever OUT_DIR holds.
# OUT_DIR receives: machine.txt (lscpu, compiler, Python peers), build.log, fastconv_api.log,
# fastconv_boundaries.log, exhaustive.log, bench_convert.{md,csv,log}, bench_convert_peers.csv,
# summary.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: scripts/device/convert_checks.sh OUT_DIR [all|build|tests|bench]}
phase=${2:-all}
build=${LOWBIT_BUILD_DIR:-build}
python=${LOWBIT_PEER_PYTHON:-python3}
mkdir -p "$out"
out=$(cd "$out" && pwd)
status=0

machine() {
  {
    echo "date: $(date -u +%FT%TZ)   commit: ${LOWBIT_GIT_SHA:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}"
    echo "nproc: $(nproc)"
    lscpu | grep -E "Model name|Socket|Core|Thread|L2|L3|Flags" | sed -E 's/^(Flags:).*/\1 (AVX-512: '"$(grep -o -w -E 'avx512f|avx512bw|avx512vl' /proc/cpuinfo | sort -u | tr '\n' ' ')"')/'
    c++ --version | head -1
    "$python" -c "import sys, numpy; print('python', sys.version.split()[0], 'numpy', numpy.__version__)" 2>&1
    for m in torch ml_dtypes; do "$python" -c "import $m; print('$m', $m.__version__)" 2>&1 | tail -1; done
  } > "$out/machine.txt"
  cat "$out/machine.txt"
}

do_build() {
  local started=$SECONDS
  # shellcheck disable=SC2086  # LOWBIT_CMAKE_ARGS is a list of arguments
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOWBIT_CUDA=OFF ${LOWBIT_CMAKE_ARGS:-} > "$out/build.log" 2>&1 &&
    cmake --build "$build" --parallel "$(nproc)" --target bench_convert lowbit_c_api exhaustive_fastconv \
      test_fastconv_api test_fastconv_boundaries >> "$out/build.log" 2>&1
  local rc=$?
  echo "build: exit $rc in $((SECONDS - started)) s (log: build.log)"
  [ $rc -eq 0 ] || { tail -30 "$out/build.log"; status=1; return 1; }
}

do_tests() {
  local started=$SECONDS
  "$build/tests/fastconv/test_fastconv_api" > "$out/fastconv_api.log" 2>&1
  echo "test_fastconv_api: exit $? ($(tail -1 "$out/fastconv_api.log"))"
  "$build/tests/fastconv/test_fastconv_boundaries" > "$out/fastconv_boundaries.log" 2>&1
  local rc=$?
  echo "test_fastconv_boundaries: exit $rc"
  grep -E "combinations|passed|failed" "$out/fastconv_boundaries.log"
  [ $rc -eq 0 ] || status=1
  # One combination at a time, each on every core (exhaustive_fastconv splits the range itself).
  ctest --test-dir "$build" -L exhaustive -V --parallel 1 > "$out/exhaustive.log" 2>&1
  rc=$?
  echo "exhaustive: ctest exit $rc in $((SECONDS - started)) s (log: exhaustive.log)"
  [ $rc -eq 0 ] || status=1
}

do_bench() {
  local started=$SECONDS
  # shellcheck disable=SC2086
  "$build/experiments/bench_convert" --out-dir "$out" --python "$python" ${LOWBIT_BENCH_ARGS:-} \
    > "$out/bench_convert.log" 2>&1
  local rc=$?
  echo "bench_convert: exit $rc in $((SECONDS - started)) s (log: bench_convert.log)"
  [ $rc -eq 0 ] || { tail -20 "$out/bench_convert.log"; status=1; }
}

summary() {
  {
    echo "== summary ($(head -1 "$out/machine.txt" 2>/dev/null))"
    grep -m1 "Model name" "$out/machine.txt" 2>/dev/null
    grep -m1 "AVX-512" "$out/machine.txt" 2>/dev/null
    if [ -f "$out/exhaustive.log" ]; then
      echo "-- exhaustive (all 2^32 float32 inputs): combination | result | variants x outputs with 0 mismatches"
      awk '/^[0-9]+: .*: (PASS|FAIL), / {
             line = $0; sub(/^[0-9]+: /, "", line); split(line, parts, ": "); name = parts[1]; result = parts[2]
             printf "%-45s %s  %d clean\n", name, result, clean[name]; next }
           /^[0-9]+: .*: 0 mismatches in 4294967296 inputs/ {
             line = $0; sub(/^[0-9]+: /, "", line); split(line, parts, ", "); clean[parts[1]]++ }
           /^[0-9]+: SKIPPED/ { line = $0; sub(/^[0-9]+: /, "", line); print line }' "$out/exhaustive.log"
      grep -E "tests passed|tests failed|Total Test time" "$out/exhaustive.log"
    fi
    if [ -f "$out/bench_convert.md" ]; then
      echo "-- bench_convert targets"
      sed -n '/^## Targets/,$p' "$out/bench_convert.md"
    fi
  } | tee "$out/summary.txt"
}

case "$phase" in
  build) machine; do_build ;;
  tests) do_tests ;;
  bench) do_bench ;;
  all) machine; do_build && { do_tests; do_bench; } ;;
  *) echo "unknown phase '$phase' (all, build, tests, bench)" >&2; exit 2 ;;
esac
summary
exit $status
