#!/usr/bin/python3
"""A QDQ-quantized small CNN for kiln's model suite, written the way ONNX Runtime's static
quantizer (QuantFormat.QDQ, per-channel int8 weights, u8 activations) writes one, with inputs and
ONNX Runtime reference outputs at two batch sizes.

Run with Debian's python (it sees python3-onnx and python3-numpy):

    /usr/bin/python3 tests/models/gen_qdq_models.py --out DIR [--no-ref] [--force] [--node NODE]

Writes into DIR/qdq/:

  qdq_cnn.onnx                input f32 [N,3,32,32] -> output f32 [N,32,8,8], logits f32 [N,10]
  qdq_cnn.input_n{N}.bin, qdq_cnn.ref_n{N}.bin (output), qdq_cnn.logits_n{N}.bin    N in {1,3}
  manifest.json               scales, zero points, each output's quantization step

The float model: conv 3->16 (3x3, pad 1) + Relu, conv 16->32 (3x3, stride 2) + Relu, depthwise conv
32 (3x3, stride 2) + Relu, a residual block (conv 32->32 3x3, Add of the block's input, Relu:
`output`), MaxPool 2x2, GlobalAveragePool, Flatten, Gemm 32->10 (`logits`). qdq_quantize.py
quantizes it as ORT's quantizer does (u8 activations calibrated on the N=3 input, Relus after
Conv/Add dropped into the u8 range, int8 per-channel weights, int32 biases, QDQ around Add,
MaxPool with its input's parameters, GlobalAveragePool, Gemm). Each output is a
DequantizeLinear's output, so results are multiples of its scale: kiln (QLinearConv after its
fuse_qdq pass) and ONNX Runtime (its own QDQ fusion into int8 kernels) agree exactly or within
one quantization step (manifest `output_steps`).
Seeded, deterministic; cached by a stamp file (SHA-256 of this script, qdq_quantize.py and the
ORT runner).
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_outputs import require_ort, run_ort  # noqa: E402

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    sys.exit(f"gen_qdq_models.py: cannot import onnx ({e}); run it with /usr/bin/python3")

from qdq_quantize import generator_stamp, quantize  # noqa: E402

SUBDIR = "qdq"
STAMP = ".gen_qdq_models.stamp"
SIZES_N = (1, 3)
CLASSES = 10
# (name, out channels, kernel, stride, group: 0 means depthwise)
LAYERS = (("conv1", 16, 3, 1, 1), ("conv2", 32, 3, 2, 1), ("conv3", 32, 3, 2, 0))


def log(msg):
    print(f"[gen_qdq_models] {msg}", flush=True)


def model_input(n):
    return np.random.default_rng(7).standard_normal((3, 3, 32, 32)).astype(np.float32)[:n]


def build():
    """The float CNN, then quantized by qdq_quantize (calibrated on the N=3 input)."""
    rng = np.random.default_rng(2024)
    nodes, inits = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr.astype(np.float32), name))
        return name

    def conv(x, name, cin, cout, k, stride, group, relu=True):
        group = cin if group == 0 else group
        w = rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / (cin // group * k * k))
        b = rng.uniform(-0.1, 0.1, cout)
        nodes.append(helper.make_node("Conv", [x, init(f"{name}_w", w), init(f"{name}_b", b)], [name], name=name,
                                      kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group))
        if not relu:
            return name
        nodes.append(helper.make_node("Relu", [name], [f"{name}_relu"], name=f"{name}_relu"))
        return f"{name}_relu"

    cur, cin = "input", 3
    for name, cout, k, stride, group in LAYERS:
        cur = conv(cur, name, cin, cout, k, stride, group)
        cin = cout
    res = conv(cur, "conv4", cin, cin, 3, 1, 1, relu=False)
    nodes.append(helper.make_node("Add", [res, cur], ["residual"], name="residual"))
    nodes.append(helper.make_node("Relu", ["residual"], ["output"], name="residual_relu"))
    nodes.append(helper.make_node("MaxPool", ["output"], ["pool"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(helper.make_node("GlobalAveragePool", ["pool"], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flat", axis=1))
    w = rng.standard_normal((CLASSES, cin)) * np.sqrt(1.0 / cin)
    nodes.append(helper.make_node("Gemm", ["flat", init("dense_w", w), init("dense_b", rng.uniform(-0.1, 0.1, CLASSES))],
                                  ["logits"], name="dense", transB=1))
    graph = helper.make_graph(nodes, "qdq_cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 32, 32])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 32, 8, 8]),
                               helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln gen_qdq_models.py")
    model.ir_version = 7
    return quantize(model, {"input": model_input(3)})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (files go to OUT/qdq)")
    ap.add_argument("--no-ref", action="store_true", help="skip ONNX Runtime references")
    ap.add_argument("--force", action="store_true", help="ignore the cache stamp")
    ap.add_argument("--node", default=os.environ.get("NODE", "node"), help="node executable")
    ap.add_argument("--threads", type=int, default=2, help="ORT intra-op threads")
    args = ap.parse_args()

    out = os.path.join(os.path.abspath(args.out), SUBDIR)
    with_ref = not args.no_ref
    stamp_path = os.path.join(out, STAMP)
    files = ["qdq_cnn.onnx", "manifest.json"] + [f"qdq_cnn.input_n{n}.bin" for n in SIZES_N]
    if with_ref:
        files += [f"qdq_cnn.{kind}_n{n}.bin" for n in SIZES_N for kind in ("ref", "logits")]
    if not args.force and os.path.exists(stamp_path):
        with open(stamp_path) as f:
            if json.load(f) == generator_stamp("gen_qdq_models.py", with_ref) and all(os.path.exists(os.path.join(out, p)) for p in files):
                log(f"up to date: {out}")
                return 0
    if with_ref:
        require_ort(args.node, "gen_qdq_models.py")
    os.makedirs(out, exist_ok=True)
    if os.path.exists(stamp_path):
        os.remove(stamp_path)

    model, params = build()
    onnx.checker.check_model(onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True))
    path = os.path.join(out, "qdq_cnn.onnx")
    onnx.save(model, path)
    steps = {"output": params["output"]["scale"], "logits": params["logits"]["scale"]}
    manifest = {"generator": "tests/models/gen_qdq_models.py", "quantization": params, "output_steps": steps,
                "references": []}
    for n in SIZES_N:
        x = model_input(n)
        inp = os.path.join(out, f"qdq_cnn.input_n{n}.bin")
        x.astype("<f4").tofile(inp)
        if not with_ref:
            continue
        got = run_ort(args.node, path, {"input": (x, inp)}, args.threads, "gen_qdq_models.py")
        for name, kind, shape in (("output", "ref", (n, 32, 8, 8)), ("logits", "logits", (n, CLASSES))):
            levels = np.rint(got[name] / steps[name])
            if got[name].shape != shape or np.abs(got[name] - levels * steps[name]).max() > 1e-3 * steps[name]:
                sys.exit(f"gen_qdq_models.py: ORT {name} at N={n} is not on its quantization grid")
            got[name].astype("<f4").tofile(os.path.join(out, f"qdq_cnn.{kind}_n{n}.bin"))
            manifest["references"].append({"N": n, "output": name, "file": f"qdq_cnn.{kind}_n{n}.bin",
                                           "shape": list(shape), "nonzero_levels": int((levels != 0).sum()),
                                           "max_level": int(np.abs(levels).max())})
            log(f"qdq_cnn.{kind}_n{n}.bin: shape {list(shape)}, {int((levels != 0).sum())} non-zero levels, "
                f"max level {int(np.abs(levels).max())}")
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    with open(stamp_path, "w") as f:
        json.dump(generator_stamp("gen_qdq_models.py", with_ref), f)
    log(f"done -> {out} (output steps {steps})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
