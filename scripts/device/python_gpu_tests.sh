#!/usr/bin/env bash
# The Python package's GPU tests (tests/python/test_gpu.py: lowbit.gpu's kernels against
# lowbit.attention's emulated presets, every bit; tests/python/test_torch.py) on the lent GPU, whose
# Python (3.12, with torch) is not this machine's: lowbit._core is built there (nanobind, no CUDA,
# no tests, no programs) and the kernels' library comes from $PREBUILT (default build-call/, packed
# as bench_in_turn.sh says). Carry .device-deps/ (../shared/device/stage-deps, then
# scripts/device_deps_boost_subset.sh) and, in .whl/, the py3-none-any wheels of nanobind, pytest and
# pytest's dependencies, downloaded here:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#     -d .whl nanobind pytest pluggy iniconfig packaging pygments
#   OUT=/tmp/pytest-gpu scripts/device/python_gpu_tests.sh
# Writes $OUT/configure.log, build.log and pytest.log. Exit: pytest's, or 1 where the build failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$(realpath -m "${OUT:-build/results/python-gpu-tests}")
prebuilt=${PREBUILT:-build-call}
work=/tmp/python-gpu-tests
mkdir -p "$out" "$work/package" "$work/lib"
source scripts/device/deps.sh  # the Debian packages and the wheels
# The module is a shared object: the system's shared zlib, not the carried package's static one (not PIC).
zlib=$(ls /usr/lib/x86_64-linux-gnu/libz.so.1 /lib/x86_64-linux-gnu/libz.so.1 2>/dev/null | head -n 1)
cmake -S . -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOWBIT_PYTHON_MODULE=ON -DLOWBIT_CUDA=OFF \
  -DLOWBIT_TESTS=OFF -DLOWBIT_EXPERIMENTS=OFF $LOWBIT_DEPS_CMAKE_ARGS -DPython_EXECUTABLE="$(command -v python3)" \
  -Dnanobind_DIR="$(python3 -m nanobind --cmake_dir)" -DZLIB_LIBRARY="$zlib" > "$out/configure.log" 2>&1 ||
  { echo "python_gpu_tests: configure failed"; tail -n 20 "$out/configure.log"; exit 1; }
started=$(date +%s)
timeout 420 ninja -C "$work/build" _core > "$out/build.log" 2>&1 ||
  { echo "python_gpu_tests: the build failed"; tail -n 20 "$out/build.log"; exit 1; }
echo "python_gpu_tests: lowbit._core built in $(( $(date +%s) - started )) s"
cp -r python/lowbit "$work/package/"
cp "$(find "$work/build" -name '_core*.so' | head -n 1)" "$work/package/lowbit/"
source scripts/device/prebuilt.sh
unpack_prebuilt "$prebuilt" "$work/lib" liblowbit_sage2.so || exit 1
# From outside the source tree, so that the package built here is imported, not python/lowbit.
cd /tmp && LD_LIBRARY_PATH="$work/lib:${LD_LIBRARY_PATH:-}" PYTHONPATH="$work/package:${PYTHONPATH:-}" \
  LOWBIT_SAGE2_LIBRARY="$work/lib/liblowbit_sage2.so" timeout 300 python3 -m pytest -v -rs -p no:cacheprovider \
  "$root/tests/python/test_gpu.py" "$root/tests/python/test_torch.py" > "$out/pytest.log" 2>&1
status=$?
tail -n 40 "$out/pytest.log"
exit $status
