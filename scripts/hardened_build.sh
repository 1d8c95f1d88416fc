#!/usr/bin/env bash
# Configures and builds kiln with clang, AddressSanitizer + UndefinedBehaviorSanitizer and
# libFuzzer coverage (-DKILN_FUZZ=ON), the one build that `make sanitize` runs the tests in and
# `make fuzz` runs the fuzz targets from. -O1 with line tables: fast to build, and reports still
# name file and line. The line tables are zlib-compressed and executables are not position
# independent: that makes the build's 40-odd test and fuzz programs (each with all of kiln, under
# ASan) a third smaller on disk, 2.5 GB before, which a CI machine's disk has run out of.
# Each GoogleTest program is one CTest test here (cmake/kiln_helpers.cmake), run whole but for the
# cases KILN_GTEST_EXCLUDE names: those that run ResNet-50 (tens of minutes under ASan; the small
# models exercise the same code), the triage CLI's among them.
# Usage: scripts/hardened_build.sh BUILD_DIR [TARGET...]   (no target: everything)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/hardened_build.sh BUILD_DIR [TARGET...]}
shift
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -gz=zlib" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -gz=zlib" \
  -DCMAKE_EXE_LINKER_FLAGS="-no-pie -Wl,--compress-debug-sections=zlib" \
  -DCMAKE_SHARED_LINKER_FLAGS="-Wl,--compress-debug-sections=zlib" -DKILN_FUZZ=ON \
  -DKILN_GTEST_EXCLUDE="${KILN_GTEST_EXCLUDE:-*ResNet*:*Resnet*:*resnet*:*resNet*:TriageCli.*}" \
  >/dev/null
if (($#)); then
  cmake --build "$build" -j"${JOBS:-2}" --target "$@"
else
  cmake --build "$build" -j"${JOBS:-2}"
fi
