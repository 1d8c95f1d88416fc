#!/usr/bin/env bash
# Builds kiln's libFuzzer targets (scripts/hardened_build.sh: clang, ASan + UBSan) and runs each
# for SECONDS seconds on a seed corpus made from kiln's test models. A crash, leak, timeout or sanitizer report fails the
# run and leaves the reproducer in BUILD/artifacts/.
# Usage: scripts/fuzz.sh BUILD_DIR MODEL_DIR KILN_BINARY [SECONDS]
set -euo pipefail
build=${1:-build-fuzz}
models=${2:-build/models}
kiln=${3:-build/tools/kiln}
seconds=${4:-60}
targets=(fuzz_onnx_import fuzz_module_load fuzz_tensor_spec fuzz_npy fuzz_kir fuzz_tensor_proto
         fuzz_manifest)

scripts/hardened_build.sh "$build" "${targets[@]}"

seeds="$build/seeds"
rm -rf "$seeds"
for target in "${targets[@]}"; do mkdir -p "$seeds/$target"; done
mkdir -p "$build/artifacts"
cp "$models"/small/*.onnx "$seeds/fuzz_onnx_import/"
for t in test_relu test_conv_with_strides_padding test_gemm_default_no_bias test_maxpool_2d_pads \
         test_softmax_axis_1 test_batchnorm_example test_reshape_negative_dim test_nonzero_example \
         test_top_k test_compress_0; do
  f=/usr/share/libonnx-testdata/data/node/$t/model.onnx
  [ -f "$f" ] && cp "$f" "$seeds/fuzz_onnx_import/$t.onnx"
done
"$kiln" compile "$models/small/tiny_cnn.onnx" -o "$seeds/fuzz_module_load/tiny_cnn.kmod" >/dev/null
"$kiln" compile "$models/small/weights_in_inputs.onnx" -o "$seeds/fuzz_module_load/weights.kmod" >/dev/null
# A module whose convs run by kiln's Winograd kernel on AVX2 (3x3 stride 1, 8 -> 16 -> 16
# channels, odd sizes, residual + relu), so the mutated shapes, pads and weights reach it.
/usr/bin/python3 - "$seeds/winograd.onnx" <<'PY'
import sys, numpy as np
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
w1, w2 = (numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
          for n, s in (("w1", (16, 8, 3, 3)), ("w2", (16, 16, 3, 3))))
b = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")
nodes = [helper.make_node("Conv", ["x", "w1", "b"], ["c1"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
         helper.make_node("Add", ["c2", "r1"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
graph = helper.make_graph(nodes, "winograd",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 5, 7])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 5, 7])],
                          [w1, w2, b])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
open(sys.argv[1], "wb").write(model.SerializeToString())
PY
"$kiln" compile "$seeds/winograd.onnx" -o "$seeds/fuzz_module_load/winograd.kmod" >/dev/null
# Modules whose sizes are bound from data at run time (staged sessions).
for t in test_nonzero_example test_top_k test_compress_0; do
  "$kiln" compile "$seeds/fuzz_onnx_import/$t.onnx" -o "$seeds/fuzz_module_load/$t.kmod" >/dev/null
done
"$kiln" import "$seeds/fuzz_onnx_import/test_top_k.onnx" -o "$seeds/fuzz_kir/top_k.kir" >/dev/null
"$kiln" import "$models/small/tiny_cnn.onnx" -o "$seeds/fuzz_kir/tiny_cnn.kir" >/dev/null
"$kiln" import "$models/small/weights_in_inputs.onnx" -o "$seeds/fuzz_kir/weights.kir" >/dev/null
i=0
for spec in '2x2xf32=1 2 3 4' 'f32=5' '0x3xf32=' '2xi64=-1 7' '3xbool=1 0 true' '1x2xf64=nan -inf' \
            '-' '[N,3,floor((N + 1)/2),224]' '2*N + 3' 'floor((H + 6 - 7)/2) + 1' '"batch size"*4'; do
  printf '%s' "$spec" > "$seeds/fuzz_tensor_spec/seed$((i++))"
done
"$kiln" run --module="$seeds/fuzz_module_load/tiny_cnn.kmod" \
  --input="1x3x8x8xf32=@$models/small/tiny_input_b1.bin" --output="@$seeds/fuzz_npy/prob.npy" >/dev/null
/usr/bin/python3 - "$seeds/fuzz_npy" <<'PY'
import sys, numpy as np
d = sys.argv[1]
for name, a in {"f64": np.arange(6.0).reshape(2, 3), "i64": np.array([1, -2], dtype=np.int64),
                "bool": np.array([True, False]), "u8": np.zeros((0, 4), np.uint8),
                "scalar": np.float32(1.5)}.items():
    np.save(f"{d}/{name}.npy", a)
PY
# .pb tensors of the ONNX backend tests: every dtype kiln reads, raw and typed-field encodings.
testdata=/usr/share/libonnx-testdata/data
for t in node/test_relu node/test_cast_FLOAT_to_FLOAT16 node/test_cast_FLOAT_to_BFLOAT16 \
         node/test_argmax_default_axis_example node/test_and2d node/test_gather_0 \
         node/test_castlike_FLOAT_to_DOUBLE node/test_reshape_negative_dim \
         pytorch-converted/test_Conv2d simple/test_shrink; do
  for f in "$testdata/$t"/test_data_set_0/*.pb; do
    [ -f "$f" ] && cp "$f" "$seeds/fuzz_tensor_proto/$(basename "$t")-$(basename "$f")"
  done
done
# Test-suite manifests: kiln's own, the conformance manifest's head, and small hand-made ones.
cp tests/suite/*.json "$seeds/fuzz_manifest/"
head -c 4096 tests/conformance/onnx_backend.json > "$seeds/fuzz_manifest/conformance-head.json"
printf '%s' '{"suite":"s","root":"model-dir","defaults":{"tolerance":{"atol":1e-5,"rtol":0,"nan":"fail"},"dims":{"N":[1,2]}},"models":[{"name":"m","path":"small/tiny_cnn.onnx","dims":{"N":[1,4]},"reference":"kiln-reference","inputs":{"data":{"generate":{"distribution":"normal","seed":1}}},"expect":{"cpu":"fail"}}]}' \
  > "$seeds/fuzz_manifest/generated.json"
printf '%s' '{"suite":"s","root":"model-dir","models":[{"path":"small/tiny_cnn.onnx","inputs":{"data":{"file":"small/tiny_input_b{N}.bin"}},"outputs":{"prob":{"file":"small/tiny_cnn.ref_b{N}.bin","rtol":0.1}}}]}' \
  > "$seeds/fuzz_manifest/files.json"

# The reproducers of bugs found earlier (replayed by ctest too).
for target in "${targets[@]}"; do
  if [ -d "tests/fuzz/regressions/$target" ]; then cp tests/fuzz/regressions/"$target"/* "$seeds/$target/"; fi
done
# fuzz_manifest resolves model-dir manifests against the generated models.
export KILN_MODEL_DIR
KILN_MODEL_DIR=$(realpath "$models")
for target in "${targets[@]}"; do
  echo "== $target: ${seconds}s"
  work="$build/corpus/$target"
  mkdir -p "$work"
  "$build/tests/fuzz/$target" "$work" "$seeds/$target" -max_total_time="$seconds" -timeout=20 \
    -rss_limit_mb=3072 -max_len=1048576 -print_final_stats=1 -artifact_prefix="$build/artifacts/$target-" \
    2>&1 | grep -E "stat::number_of_executed_units|stat::peak_rss|ERROR|SUMMARY|Done" || true
  if ls "$build/artifacts/$target-"* >/dev/null 2>&1; then
    echo "fuzz: $target found a failure: $(ls "$build/artifacts/$target-"*)" >&2
    exit 1
  fi
done
echo "fuzz: all targets ran ${seconds}s without a failure"
