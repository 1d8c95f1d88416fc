#!/usr/bin/env bash
# The seed repro on kiln: the zoo ResNet-50 v1-12 replica with a dynamic batch, imported, compiled
# once, run at batch 1 and batch 4, and compared with ONNX Runtime on the same inputs.
# Usage: scripts/demo.sh BUILD_DIR MODEL_DIR
set -euo pipefail
build=${1:-build}
models=${2:-$build/models}
kiln="$build/tools/kiln"
work="$build/demo"
mkdir -p "$work"
model="$models/resnet50-v1-12.onnx"

echo "== kiln import (opset upgrade to 17)"
"$kiln" import "$model" --opset-version 17 -o "$work/resnet50.kir"
echo "== kiln compile (dynamic batch, one module)"
"$kiln" compile "$work/resnet50.kir" --target=cpu -o "$work/resnet50.kmod"

for batch in 1 4; do
  echo "== batch $batch"
  bytes=$((batch * 3 * 224 * 224 * 4))
  head -c "$bytes" "$models/input_b8.bin" > "$work/input_b$batch.bin"
  node tools/ort/run_ort.js run "$model" --input "data=${batch}x3x224x224:f32:$work/input_b$batch.bin" \
    --output-dir "$work/ort_b$batch" >/dev/null
  "$kiln" run --module="$work/resnet50.kmod" --device=cpu \
    --input="${batch}x3x224x224xf32=@$work/input_b$batch.bin" --output="@$work/out_b$batch.npy" \
    --expected_output="${batch}x1000xf32=@$work/ort_b$batch/resnetv17_dense0_fwd.bin" --atol=2e-5 --rtol=1e-5
done
echo "== demo passed: one dynamic-batch module, batch 1 and 4, matching ONNX Runtime"
