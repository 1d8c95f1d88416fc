#!/usr/bin/env bash
# kiln vs ONNX Runtime (onnxruntime-node), alternating on the same model files, inputs and thread
# count; see bench/vs_onnxruntime.py for what is measured. Builds kiln and bench/fma_peak first.
# Usage: bench/vs_onnxruntime.sh [BUILD_DIR] [MODEL_DIR] [PAIRS] [THREADS] [-- extra args]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
models=${2:-$build/models}
pairs=${3:-10}
threads=${4:-2}
shift $(( $# < 4 ? $# : 4 ))
[ "${1:-}" = "--" ] && shift
# Configure again: a build tree made before bench/CMakeLists.txt existed lacks fma_peak.
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j"${JOBS:-2}" --target kiln fma_peak >/dev/null
exec /usr/bin/python3 bench/vs_onnxruntime.py --build "$build" --models "$models" \
  --pairs "$pairs" --threads "$threads" --json "$build/bench-work/summary.json" "$@"
