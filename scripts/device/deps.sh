# Sourced by the GPU scripts (from the repository root): the build dependencies the lent machine
# lacks, carried in .device-deps/ (../shared/device/stage-deps, then
# scripts/device_deps_boost_subset.sh), unpacked into /tmp/deps, and the CMake arguments that find
# them in LOWBIT_DEPS_CMAKE_ARGS. Where there is no .device-deps/, it sets nothing.
LOWBIT_DEPS_CMAKE_ARGS=""
if [[ -d .device-deps ]]; then
  mkdir -p /tmp/deps
  for f in .device-deps/*.deb; do [[ -e $f ]] && dpkg -x "$f" /tmp/deps; done
  for f in .device-deps/*.tar.xz; do [[ -e $f ]] && tar -xJf "$f" -C /tmp/deps; done
  export CMAKE_PREFIX_PATH=/tmp/deps/usr LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  LOWBIT_DEPS_CMAKE_ARGS="-DZLIB_LIBRARY=/tmp/deps/usr/lib/x86_64-linux-gnu/libz.a -DZLIB_INCLUDE_DIR=/tmp/deps/usr/include"
fi
# Python wheels carried in .whl/ (e.g. PyPI's fa3-fwd: FlashAttention-3's forward), installed from the
# files (no network there) into /tmp/site, which PYTHONPATH then names.
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl &&
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
