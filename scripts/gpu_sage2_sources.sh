#!/usr/bin/env bash
# One device call timing versions of the attention kernel's source side by side (how the kernel
# changes of 2026-11-25 were chosen: f6dfbb2:results/attention-gpu/runs/variants/2026-11-25/). Run from the
# repository root on the GPU machine; it configures and builds there (CMake, sm_90a).
#   The working tree's kernel is variant $WT (default "tree"); each $SOURCES/NAME.cu (default
#   variants/*.cu) replaces kernels/attention/sage2_attention_kernel.cu for a build of its own, and each
#   directory $SOURCES/NAME/ holds files at their repository paths that replace the tree's for its
#   build (a variant of the recipe and the kernel together). Per variant:
#   the smoke test of the ex2 kernel (check_sage2_gpu --configs quick --exp2 sm90-ex2; a variant
#   that fails it is not timed), then bench_attention (ex2, d = 128 and 64, N = 8K and 16K, 10 runs)
#   in $ROUNDS non-causal rounds (default 2) and $CAUSAL_ROUNDS causal ones (default 0), every
#   second round in the reverse order (bench-CAUSAL-NAME-ROUND.txt; BENCH_TIMEOUT seconds a run,
#   default 100). ABLATIONS=1 times the variants that fail the smoke test too (ablations: a part of
#   the kernel removed or replaced, its bits knowingly wrong, to see what that part costs). NCU=NAME
#   adds Nsight Compute's per-instruction warp-state sampling of that variant (d = 128, N = 8K), as
#   CSV.
# The GPU's clock and power through the timing rounds: power-clocks.csv.
# Everything lands in $OUT/sources.tgz (the tool brings back few files).
set -uo pipefail
OUT=${OUT:-build/results/gpu-sources}
SOURCES=${SOURCES:-variants}
WT=${WT:-tree}
R=$OUT/sources; V=/tmp/sage2-sources
rm -rf "$V"; mkdir -p "$R" "$V"
trap 'tar -czf "$OUT/sources.tgz" -C "$OUT" sources && rm -rf "$R"' EXIT
source scripts/device/deps.sh
source scripts/device/power_log.sh
# shellcheck disable=SC2086  # a list of arguments
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a $LOWBIT_DEPS_CMAKE_ARGS > "$R/cmake.log" 2>&1
kernel=kernels/attention/sage2_attention_kernel.cu
cp "$kernel" "$V/tree.cu"
touch "$kernel"  # the tool copies the tree with its own times: a build left by an earlier call must not look newer
build() {  # $1: the variant's name; its binaries go to $V/$1/
  cmake --build build -j16 --target check_sage2_gpu bench_attention > "$R/build-$1.log" 2>&1 || { tail -20 "$R/build-$1.log"; return 1; }
  mkdir -p "$V/$1" && cp build/tests/attention_gpu/check_sage2_gpu build/experiments/bench_attention "$V/$1/"
}
build "$WT"
for source in "$SOURCES"/*.cu; do
  [[ -e $source ]] || continue
  cp "$source" "$kernel" && build "$(basename "$source" .cu)"
done
cp "$V/tree.cu" "$kernel"
for dir in "$SOURCES"/*/; do
  [[ -d $dir ]] || continue
  name=$(basename "$dir"); files=$(cd "$dir" && find . -type f | sed 's|^\./||')
  saved=/tmp/sage2-sources-tree; rm -rf "$saved"
  for f in $files; do
    [[ -e $f ]] && mkdir -p "$saved/$(dirname "$f")" && cp "$f" "$saved/$f"
    mkdir -p "$(dirname "$f")" && cp "$dir/$f" "$f"
  done
  build "$name"
  # The tree's files back (new times: the next build sees the change); a file the tree lacks goes.
  for f in $files; do if [[ -e $saved/$f ]]; then cp "$saved/$f" "$f"; else rm -f "$f"; fi; done
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$R/nvidia-smi.csv"
echo "built at +${SECONDS}s"
timed=()
for v in $(cd "$V" && ls -d */ | tr -d /); do
  timeout 120 "$V/$v/check_sage2_gpu" --configs quick --exp2 sm90-ex2 --out "/tmp/quick-$v" > "$R/quick-$v.log" 2>&1
  rc=$?; echo "$v: smoke test exit $rc, $(tail -1 "$R/quick-$v.log")"
  (( rc == 0 || ${ABLATIONS:-0} == 1 )) && timed+=("$v")
done
power_log_start "$R/power-clocks.csv"
rounds() {  # $1 causal yes|no, $2 rounds; odd rounds in name order, even ones reversed
  local round v order
  for ((round = 1; round <= $2; round++)); do
    order=("${timed[@]}"); (( round % 2 == 0 )) && mapfile -t order < <(printf '%s\n' "${timed[@]}" | sort -r)
    for v in "${order[@]}"; do
      timeout "${BENCH_TIMEOUT:-100}" "$V/$v/bench_attention" --tokens 8192,16384 --dims 128,64 --causal "$1" --exp2 sm90-ex2 --warmup 2 \
        --repeats 10 > "$R/bench-$1-$v-$round.txt" 2>&1
      echo "causal=$1 round $round $v: $(awk '$3 == "sm90-ex2" {printf "d=%s N=%s %s ms; ", $4, $6, $7}' "$R/bench-$1-$v-$round.txt")"
    done
  done
}
rounds no "${ROUNDS:-2}"
rounds yes "${CAUSAL_ROUNDS:-0}"
power_log_stop
if [[ -n "${NCU:-}" ]]; then
  timeout 200 ncu --clock-control none -k regex:sage2_attention_kernel -c 1 --set full --import-source no -o /tmp/sources-prof \
    "$V/$NCU/bench_attention" --tokens 8192 --dims 128 --causal no --exp2 sm90-ex2 --warmup 0 --repeats 1 > "$R/ncu-run.log" 2>&1
  ncu -i /tmp/sources-prof.ncu-rep --page source --csv --print-source sass > "$R/ncu-source-$NCU.csv" 2> "$R/ncu-source.err"
  ncu -i /tmp/sources-prof.ncu-rep --page details > "$R/ncu-details-$NCU.txt" 2>&1
fi
echo "done at +${SECONDS}s"
