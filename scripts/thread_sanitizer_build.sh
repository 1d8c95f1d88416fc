#!/usr/bin/env bash
# Builds the programs that share one kiln session between threads with clang and
# ThreadSanitizer, then runs them: `make sanitize` calls it after the ASan + UBSan tests.
# Only the runtime's side is built (libkiln_runtime.so and what it links: runtime, HAL, CPU
# backend, kernels), at -O0 with line tables: reports still name file and line, and build and run
# take 3.2 minutes on 2 cores where the build alone took 7 at -O1 (the run, a few hundred runs of
# a tiny model, is seconds either way).
# Each session runs with 1 thread per run, so every concurrent access comes from the callers'
# threads (OpenMP's own workers are not instrumented).
# Usage: scripts/thread_sanitizer_build.sh BUILD_DIR KILN_BINARY MODEL_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/thread_sanitizer_build.sh BUILD_DIR KILN_BINARY MODEL_DIR}
kiln=${2:?} models=${3:?}
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only" -DKILN_TSAN=ON >/dev/null
cmake --build "$build" -j"${JOBS:-2}" --target kiln_c_threads_test
"$kiln" compile "$models/small/tiny_cnn.onnx" -o "$build/tiny_cnn.kmod" >/dev/null
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
"$build/tests/embed/kiln_c_threads_test" "$build/tiny_cnn.kmod" \
  "$models/small/tiny_input_b3.bin" 8 "${TSAN_RUNS:-200}"
