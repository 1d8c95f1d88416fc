#!/usr/bin/env bash
# Resident memory of one kiln session run at SIZES distinct input widths in one process, with the
# plan cache's default bound and without a bound (docs/dynamic-shapes.md, "Plan cache"). The model
# is a small CRNN-style text recognizer with a symbolic width (bench/text_recognizer_model.py),
# run at widths 16, 17, ..., 15+SIZES on one thread; each run prints RSS after loading, the peak
# and RSS after the last size, and checks that the first size, run again at the end (its plan
# prepared again after eviction), gives the same bits.
# Usage: bench/plan_cache_rss.sh [BUILD_DIR] [SIZES=1000]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
sizes=${2:-1000}
# Configure again: a build tree made before bench/CMakeLists.txt had plan_cache_rss lacks it.
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j"${JOBS:-2}" --target kiln plan_cache_rss >/dev/null
work="$build/bench-work/plan_cache"
mkdir -p "$work"
/usr/bin/python3 bench/text_recognizer_model.py "$work/text_recognizer.onnx"
"$build/tools/kiln" compile "$work/text_recognizer.onnx" -o "$work/text_recognizer.kmod" >/dev/null
run() { "$build/bench/plan_cache_rss" "$work/text_recognizer.kmod" --sizes="$sizes" --repeat-first "$@"; }
echo "== default bound (kDefaultMaxPlans, kDefaultMaxPlanBytes)"
run
echo "== no bound (every plan kept)"
run --max-plans=1000000000 --max-plan-bytes=1099511627776
echo "== default bound, oneDNN's own primitive cache off (DNNL_PRIMITIVE_CACHE_CAPACITY=0)"
DNNL_PRIMITIVE_CACHE_CAPACITY=0 run
