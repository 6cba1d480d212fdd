#!/usr/bin/env bash
# Issue 16: the split loops' input prefetch distance (fastconv::kPrefetchBytes in emulation/convert_fast.hpp)
# timed side by side on one machine, from the repository root:
#   scripts/device/convert_prefetch.sh OUT_DIR "DISTANCES"   (default "0 4096 1024"; bytes, 0 = none)
# Builds bench_convert once per distance (CPU only; the constant rewritten in the header for each
# build and restored after; bench_convert's memory probe prefetches as far), runs each without the
# peers in two rounds (the second in the reverse order, --repetitions 3), then bench_convert with
# the peers (torch, ml_dtypes) for the last distance, whose build stays in place. OUT_DIR gets machine.txt, bench-DIST-ROUND.md and peers-DIST-* (that
# run's bench_convert.md, .csv, .provenance.json, _peers.csv).
# Environment: LOWBIT_BUILD_DIR (default build), LOWBIT_CMAKE_ARGS, LOWBIT_PEER_PYTHON (python3).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: scripts/device/convert_prefetch.sh OUT_DIR [DISTANCES]}
distances=(${2:-0 4096 1024})
build=${LOWBIT_BUILD_DIR:-build}
python=${LOWBIT_PEER_PYTHON:-python3}
source_file=emulation/convert_fast.hpp
mkdir -p "$out" && out=$(cd "$out" && pwd)
bins=/tmp/convert-prefetch && rm -rf "$bins" && mkdir -p "$bins"
{ lscpu | grep -E "Model name|L2|L3"; grep -o -w -E 'avx512f|avx512bw|avx512vl' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
  c++ --version | head -1; "$python" -c "import torch; print('torch', torch.__version__)" 2>&1 | tail -1; } > "$out/machine.txt"
header="$bins/$(basename "$source_file")"
cp "$source_file" "$header"
trap 'cp "$header" "$source_file"' EXIT  # the header as it was, however the script ends
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOWBIT_CUDA=OFF ${LOWBIT_CMAKE_ARGS:-} > "$out/cmake.log" 2>&1 || { tail "$out/cmake.log"; exit 1; }
for d in "${distances[@]}"; do
  sed "s/inline constexpr std::size_t kPrefetchBytes = [0-9]*;/inline constexpr std::size_t kPrefetchBytes = $d;/" "$header" > "$source_file"
  grep -q "kPrefetchBytes = $d;" "$source_file" || { echo "no kPrefetchBytes in $source_file"; exit 1; }
  cmake --build "$build" --parallel "$(nproc)" --target bench_convert lowbit_c_api > "$out/build-$d.log" 2>&1 || { tail -20 "$out/build-$d.log"; exit 1; }
  cp "$build/experiments/bench_convert" "$bins/bench-$d"
  echo "built $d at +${SECONDS}s"
done
cp "$header" "$source_file"
for round in 1 2; do
  order=("${distances[@]}"); [[ $round == 2 ]] && order=($(printf '%s\n' "${distances[@]}" | tac))
  for d in "${order[@]}"; do
    "$bins/bench-$d" --no-peers --repetitions 3 --out-dir "$bins/out-$d-$round" > /dev/null 2>&1
    cp "$bins/out-$d-$round/bench_convert.md" "$out/bench-$d-$round.md"
    echo "round $round, $d bytes: $(grep -E '^\| float32 \| (e4m3|e5m2) \| (saturate|nan|inf) \| fast .* 8-bit' "$out/bench-$d-$round.md" | awk -F'|' '{printf "%s %s %s; ", $3, $4, $8}')"
  done
done
last=${distances[-1]}
"$build/experiments/bench_convert" --python "$python" --out-dir "$bins/peers" > "$out/peers.log" 2>&1
for f in "$bins"/peers/*; do cp "$f" "$out/peers-$last-$(basename "$f")"; done
grep -E "copy_" "$out/peers-$last-bench_convert.md" | head -12
echo "done at +${SECONDS}s"
