#!/usr/bin/env bash
# Side-by-side timing of kiln and ONNX Runtime (onnxruntime-node) on the same model file, inputs
# and thread count, alternating kiln / ORT so both see the same machine conditions.
# Usage: bench/vs_onnxruntime.sh BUILD_DIR MODEL_DIR [PAIRS] [THREADS]
set -euo pipefail
build=${1:-build}
models=${2:-$build/models}
pairs=${3:-5}
threads=${4:-2}
kiln="$build/tools/kiln"
work="$build/bench"
mkdir -p "$work"

median() { /usr/bin/python3 -c 'import json,sys,statistics; print(statistics.median(json.loads(sys.argv[1])))' "$1"; }

for model in resnet50-v1-12; do
  "$kiln" compile "$models/$model.onnx" --target=cpu -o "$work/$model.kmod" >/dev/null
  for batch in 1 8; do
    head -c $((batch * 3 * 224 * 224 * 4)) "$models/input_b8.bin" > "$work/in_b$batch.bin"
    kiln_times=() ; ort_times=()
    for _ in $(seq "$pairs"); do
      "$kiln" bench --module="$work/$model.kmod" --input="${batch}x3x224x224xf32=@$work/in_b$batch.bin" \
        --threads="$threads" --warmup=1 --repeat=3 --json="$work/kiln.json" >/dev/null
      kiln_times+=("$(/usr/bin/python3 -c 'import json;print(json.load(open("'"$work/kiln.json"'"))["median_ms"])')")
      ort_json=$(node tools/ort/run_ort.js time "$models/$model.onnx" \
        --input "data=${batch}x3x224x224:f32:$work/in_b$batch.bin" --threads "$threads" --warmup 1 --repeat 3)
      ort_times+=("$(echo "$ort_json" | /usr/bin/python3 -c 'import json,sys;print(json.load(sys.stdin)["median_ms"])')")
    done
    k=$(median "[$(IFS=,; echo "${kiln_times[*]}")]")
    o=$(median "[$(IFS=,; echo "${ort_times[*]}")]")
    /usr/bin/python3 -c "print(f'$model batch $batch threads $threads: kiln {float($k):.1f} ms, onnxruntime {float($o):.1f} ms, kiln/ORT {float($k)/float($o):.3f}')"
  done
done
