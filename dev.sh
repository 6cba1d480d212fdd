#!/usr/bin/env bash
# The README's two commands:
#   ./dev.sh run    build, then run the main job on the embedded default data (results in build/results)
#   ./dev.sh test   build, then run every test (what .ci/run calls)
# Both install missing Debian packages first (apt-get, with sudo when not root).
set -euo pipefail
cd "$(dirname "$0")"

BUILD_DIR=${LOWBIT_BUILD_DIR:-build}
PACKAGES="cmake ninja-build g++ git libeigen3-dev libboost-dev catch2 libcli11-dev libfmt-dev nlohmann-json3-dev zlib1g-dev
          python3 python3-venv python3-matplotlib"

install_packages() {
  local missing=()
  for p in $PACKAGES; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "dev.sh: installing ${missing[*]}"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Under CI=true every oracle must be there (PyPI is reachable, the CUDA headers are installed):
# a missing one fails the run instead of turning its tests into skips (LOWBIT_REQUIRE_ORACLES).
if [ "${CI:-}" = true ]; then REQUIRE_ORACLES=ON; else REQUIRE_ORACLES=OFF; fi

# Independent implementations the cross-check tests compare against (PyPI); outside CI the tests
# that need them report themselves skipped when this fails (no network).
python_oracles() {
  local venv="$BUILD_DIR/oracle-venv"
  [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import numpy, ml_dtypes, gfloat" 2>/dev/null && return
  { python3 -m venv "$venv" && "$venv/bin/pip" install -q "ml_dtypes==0.6.0" "gfloat==0.5.2" "numpy<3"; } && return
  if [ "$REQUIRE_ORACLES" = ON ]; then
    echo "dev.sh: error: could not install ml_dtypes/gfloat into $venv, and CI=true requires them" >&2
    exit 1
  fi
  echo "dev.sh: could not install ml_dtypes/gfloat; their cross-checks will be skipped"
}

build() {
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOWBIT_PYTHON="$BUILD_DIR/oracle-venv/bin/python" \
    -DLOWBIT_REQUIRE_ORACLES="$REQUIRE_ORACLES"
  cmake --build "$BUILD_DIR" --parallel "$(nproc)"
}

case "${1:-}" in
  run)
    install_packages
    build
    out="$BUILD_DIR/results"
    mkdir -p "$out"
    echo "== 1/3 formats: a tour of the number formats and their rounding rules"
    "$BUILD_DIR/experiments/lowbit" tour
    echo "== 2/3 tensor cores: every recorded GPU tile recomputed by the emulator, bit for bit"
    "$BUILD_DIR/experiments/lowbit" verify-vectors results/vectors/*.jsonl.gz results/vectors/*/*.jsonl.gz |
      tee "$out/verify-vectors.txt" | tail -n 1
    echo "== 3/3 SageAttention2 Tables 3 and 9 on the embedded synthetic data (a few minutes)"
    "$BUILD_DIR/experiments/exp_granularity" --out "$out/granularity"
    /usr/bin/python3 plots/plot_granularity.py "$out/granularity"
    echo "dev.sh: results in $out (verify-vectors.txt, granularity/)"
    ;;
  test)
    install_packages
    python_oracles
    build
    # --no-tests=error: a run that finds no tests fails. The console output is kept in
    # Testing/ctest-console.log, beside Testing/Temporary/LastTest.log (every test's output).
    ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error --parallel "$(nproc)" \
      --output-log "$BUILD_DIR/Testing/ctest-console.log"
    ;;
  *)
    echo "usage: ./dev.sh run | test" >&2
    exit 2
    ;;
esac
