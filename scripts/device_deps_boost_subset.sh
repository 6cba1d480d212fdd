#!/usr/bin/env bash
# The Boost headers the project includes (Boost.Multiprecision, through two headers), with their
# closure and Boost's CMake package files, from this machine's libboost1.74-dev, as
# .device-deps/boost-subset.tar.xz (0.35 MB against the package's 9.5 MB). The device tool carries at
# most 64 MiB with the tracked files (55 MB), so the whole package no longer fits beside them.
# Run from the repository root after ../shared/device/stage-deps; it moves the full Boost package
# out of .device-deps/ (to .device-deps-full/). The GPU scripts unpack .device-deps/*.tar.xz into
# /tmp/deps beside the packages.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
mkdir -p .device-deps .device-deps-full
grep -qx '/.device-deps-full/' .git/info/exclude 2>/dev/null || echo '/.device-deps-full/' >> .git/info/exclude
includes=$(git grep -h '#include <boost/' -- '*.cpp' '*.hpp' '*.cu' '*.cuh' | sed 's|//.*||' | sort -u)
headers=$(printf '%s\n' "$includes" | g++ -std=c++20 -I/usr/include/eigen3 -x c++ -M - |
  tr ' \\' '\n\n' | grep '^/usr/include/boost/' | sort -u | sed 's|^/||')
cmake_files=$(cd / && ls -d usr/lib/x86_64-linux-gnu/cmake/Boost-1.74.0 usr/lib/x86_64-linux-gnu/cmake/boost_headers-1.74.0 \
  usr/lib/x86_64-linux-gnu/cmake/BoostDetectToolset-1.74.0.cmake)
printf '%s\n' $headers $cmake_files | tar -cJf .device-deps/boost-subset.tar.xz -C / -T -
mv -f .device-deps/libboost1.74-dev_*.deb .device-deps-full/ 2>/dev/null || true
echo "$(printf '%s\n' $headers | wc -l) headers: $(du -h .device-deps/boost-subset.tar.xz | cut -f1); .device-deps: $(du -sh .device-deps | cut -f1)"
