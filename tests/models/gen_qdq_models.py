#!/usr/bin/python3
"""A QDQ-quantized small CNN for kiln's model suite, written the way ONNX Runtime's static
quantizer (QuantFormat.QDQ, per-channel int8 weights, u8 activations) writes one, with inputs and
ONNX Runtime reference outputs at two batch sizes.

Run with Debian's python (it sees python3-onnx and python3-numpy):

    /usr/bin/python3 tests/models/gen_qdq_models.py --out DIR [--no-ref] [--force] [--node NODE]

Writes into DIR/qdq/:

  qdq_cnn.onnx                input f32 [N,3,32,32] -> output f32 [N,32,8,8]
  qdq_cnn.input_n{N}.bin, qdq_cnn.ref_n{N}.bin          N in {1,3}
  manifest.json               scales, zero points, the output's quantization step

The float model: conv 3->16 (3x3, pad 1) + Relu, conv 16->32 (3x3, stride 2) + Relu, depthwise conv
32 (3x3, stride 2) + Relu. Quantized as the quantizer does it (onnxruntime's Python package is not
available here, so the pairs are inserted with onnx.helper): the input and every activation get
QuantizeLinear -> DequantizeLinear (u8, asymmetric min/max ranges calibrated on the N=3 input;
after a Relu the range starts at 0, zero point 0, and the Relu is dropped since the u8 range clips
at 0, as the quantizer's Conv+Relu fusion does); weights are int8 initializers, symmetric per
output channel, through DequantizeLinear(axis=0); biases int32 initializers with scale
x_scale * w_scale. The output is the last activation's DequantizeLinear, so results are
multiples of its scale: kiln (QLinearConv after its fuse_qdq pass) and ONNX Runtime (its own QDQ
fusion into int8 kernels) agree exactly or within one quantization step (`output_step`).
Seeded, deterministic; cached by a stamp file (SHA-256 of this script and of the ORT runner).
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_outputs import ORT_LOCK, RUN_ORT, file_sha256, require_ort, run_ort  # noqa: E402

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    sys.exit(f"gen_qdq_models.py: cannot import onnx ({e}); run it with /usr/bin/python3")

from gen_models import np_conv  # noqa: E402

SUBDIR = "qdq"
STAMP = ".gen_qdq_models.stamp"
SIZES_N = (1, 3)
# (name, out channels, kernel, stride, group: 0 means depthwise)
LAYERS = (("conv1", 16, 3, 1, 1), ("conv2", 32, 3, 2, 1), ("conv3", 32, 3, 2, 0))


def log(msg):
    print(f"[gen_qdq_models] {msg}", flush=True)


def model_input(n):
    return np.random.default_rng(7).standard_normal((3, 3, 32, 32)).astype(np.float32)[:n]


def u8_params(lo, hi):
    """Asymmetric u8 scale and zero point of [min(lo, 0), max(hi, 0)] (the quantizer's MinMax)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    zero = int(np.clip(np.rint(-lo / scale), 0, 255))
    return scale, zero


def build():
    rng = np.random.default_rng(2024)
    nodes, inits = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def qdq(value, scale, zero, tag):
        q = f"{tag}_q"
        nodes.append(helper.make_node("QuantizeLinear", [value, init(f"{tag}_scale", np.float32(scale)),
                                                        init(f"{tag}_zero", np.uint8(zero))], [q], name=q))
        dq = f"{tag}_dq"
        nodes.append(helper.make_node("DequantizeLinear", [q, f"{tag}_scale", f"{tag}_zero"], [dq], name=dq))
        return dq

    calib = model_input(3).astype(np.float64)
    x_scale, x_zero = u8_params(calib.min(), calib.max())
    params = {"input": {"scale": float(x_scale), "zero_point": x_zero}}
    cur = qdq("input", x_scale, x_zero, "input")
    act = calib
    cin = 3
    for name, cout, k, stride, group in LAYERS:
        group = cin if group == 0 else group
        w = rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / (cin // group * k * k))
        b = rng.uniform(-0.1, 0.1, cout)
        w_scale = (np.abs(w).reshape(cout, -1).max(axis=1) / 127.0).astype(np.float32)
        w_q = np.clip(np.rint(w / w_scale.reshape(-1, 1, 1, 1)), -127, 127).astype(np.int8)
        b_scale = (np.float32(x_scale) * w_scale).astype(np.float32)
        b_q = np.rint(b / b_scale).astype(np.int32)
        nodes.append(helper.make_node("DequantizeLinear", [init(f"{name}_w_q", w_q), init(f"{name}_w_scale", w_scale),
                                                          init(f"{name}_w_zero", np.zeros(cout, np.int8))],
                                      [f"{name}_w"], name=f"{name}_w_dq", axis=0))
        nodes.append(helper.make_node("DequantizeLinear", [init(f"{name}_b_q", b_q), init(f"{name}_b_scale", b_scale)],
                                      [f"{name}_b"], name=f"{name}_b_dq", axis=0))
        pad = k // 2
        nodes.append(helper.make_node("Conv", [cur, f"{name}_w", f"{name}_b"], [name], name=name,
                                      kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, group=group))
        # Calibrate on the float model (dequantized weights), after the Relu the quantizer fuses.
        wd = w_q.astype(np.float64) * w_scale.reshape(-1, 1, 1, 1)
        act = np.maximum(np_conv(act, wd, b_q * b_scale.astype(np.float64), [stride] * 2, [pad] * 4, group), 0)
        x_scale, x_zero = u8_params(0.0, act.max())
        params[name] = {"scale": float(x_scale), "zero_point": x_zero}
        cur = qdq(name, x_scale, x_zero, f"{name}_out")
        cin = cout
    nodes.append(helper.make_node("Identity", [cur], ["output"], name="output"))
    graph = helper.make_graph(nodes, "qdq_cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 32, 32])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 32, 8, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln gen_qdq_models.py")
    model.ir_version = 7
    return model, params, float(x_scale)


def stamp_key(with_ref):
    key = {"gen_qdq_models.py": file_sha256(os.path.abspath(__file__))}
    if with_ref:
        key.update({"run_ort.js": file_sha256(RUN_ORT), "package-lock.json": file_sha256(ORT_LOCK)})
    return key


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
        files += [f"qdq_cnn.ref_n{n}.bin" for n in SIZES_N]
    if not args.force and os.path.exists(stamp_path):
        with open(stamp_path) as f:
            if json.load(f) == stamp_key(with_ref) and all(os.path.exists(os.path.join(out, p)) for p in files):
                log(f"up to date: {out}")
                return 0
    if with_ref:
        require_ort(args.node, "gen_qdq_models.py")
    os.makedirs(out, exist_ok=True)
    if os.path.exists(stamp_path):
        os.remove(stamp_path)

    model, params, step = build()
    onnx.checker.check_model(onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True))
    path = os.path.join(out, "qdq_cnn.onnx")
    onnx.save(model, path)
    manifest = {"generator": "tests/models/gen_qdq_models.py", "quantization": params, "output_step": step,
                "references": []}
    for n in SIZES_N:
        x = model_input(n)
        inp = os.path.join(out, f"qdq_cnn.input_n{n}.bin")
        x.astype("<f4").tofile(inp)
        if not with_ref:
            continue
        got = run_ort(args.node, path, {"input": (x, inp)}, args.threads, "gen_qdq_models.py")["output"]
        levels = np.rint(got / step)
        if got.shape != (n, 32, 8, 8) or np.abs(got - levels * step).max() > 1e-3 * step:
            sys.exit(f"gen_qdq_models.py: ORT output at N={n} is not on the output's quantization grid")
        got.astype("<f4").tofile(os.path.join(out, f"qdq_cnn.ref_n{n}.bin"))
        manifest["references"].append({"N": n, "file": f"qdq_cnn.ref_n{n}.bin", "shape": list(got.shape),
                                       "nonzero_levels": int((levels != 0).sum()), "max_level": int(levels.max())})
        log(f"qdq_cnn.ref_n{n}.bin: shape {list(got.shape)}, {int((levels != 0).sum())} non-zero levels, "
            f"max level {int(levels.max())}")
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    with open(stamp_path, "w") as f:
        json.dump(stamp_key(with_ref), f)
    log(f"done -> {out} (output step {step:.6g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
