#!/usr/bin/env bash
# `make test-gpu`: the GPU checks too slow for `make test` on a machine without a GPU (lavapipe
# runs ResNet-50 at about 10 s per image), on the Vulkan device with the validation layer on:
#   1. both ResNet-50 replicas with a dynamic batch at N = 1, 2, 3 (tests/suite/kiln_models_gpu.json):
#      within atol 1e-4 + rtol 1e-4 of ONNX Runtime, no NaN, bit for bit equal to the --bind N=B
#      module and, per sample, to the sample run alone;
#   2. `kiln triage --device=vulkan --against=cpu` on ResNet-50: clean as it is, and with a fault
#      planted in one GPU convolution it names that dispatch and its ONNX nodes.
# Usage: scripts/test_gpu.sh BUILD MODELS [DEVICE]   (DEVICE: vulkan, or vulkan:N)
set -euo pipefail
build=${1:?usage: test_gpu.sh BUILD MODELS [DEVICE]}
models=${2:?usage: test_gpu.sh BUILD MODELS [DEVICE]}
device=${3:-vulkan}
kiln=$build/tools/kiln
export KILN_VULKAN_VALIDATION=1
"$kiln" devices

"$kiln" test-suite tests/suite/kiln_models_gpu.json --model-dir "$models" --backend "$device" -j 2 \
  --junit "$build/kiln_models_gpu.junit.xml" --report "$build/kiln_models_gpu_report.md"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
triage=(triage "$models/resnet50-v1-12.onnx" --device="$device" --against=cpu
        --input=1x3x224x224xf32=@"$models/input_b1.bin")
"$kiln" "${triage[@]}" -o "$work/clean" | tee "$work/clean.txt"
grep -q "verdict: CLEAN" "$work/clean.txt"
status=0
KILN_FAULT=dispatch:resnetv17_stage2_conv1_fwd:perturb=0.01 \
  "$kiln" "${triage[@]}" -o "$work/faulty" > "$work/faulty.txt" || status=$?
cat "$work/faulty.txt"
if [ "$status" -ne 1 ] || ! grep -q "verdict: DIVERGED at dispatch [0-9]* '[^']*resnetv17_stage2_conv1_fwd' (Conv), ONNX nodes: resnetv17_stage2_conv1_fwd" "$work/faulty.txt"; then
  echo "test-gpu: triage did not find the fault planted in resnetv17_stage2_conv1_fwd" >&2
  exit 1
fi
echo "test-gpu: ok"
