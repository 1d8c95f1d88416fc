#!/usr/bin/python3
"""A QDQ ResNet-50 (int8) from the float resnet50-v1-12 replica that gen_resnet.py writes,
quantized by qdq_quantize.py the way ONNX Runtime's static quantizer writes it (u8 activations,
asymmetric, calibrated on input_b2.bin; int8 weights symmetric per output channel; int32 biases;
BatchNormalization folded into the convolutions; QDQ around every Conv, the residual Adds,
MaxPool, GlobalAveragePool and the final Gemm), with ONNX Runtime int8 reference outputs.

Run with Debian's python (it sees python3-onnx and python3-numpy), after gen_resnet.py:

    /usr/bin/python3 tests/models/gen_qdq_resnet.py --models DIR [--no-ref] [--force] [--node NODE]

Reads DIR/resnet50-v1-12.onnx and DIR/input_b{1,2}.bin; writes into DIR/qdq/:

  resnet50-v1-12-qdq.onnx       data f32 [N,3,224,224] -> resnetv17_dense0_fwd f32 [N,1000]
  resnet50-v1-12-qdq.ref_b{B}.bin    ONNX Runtime's int8 run, B in {1,2}
  resnet50-v1-12-qdq.json       scales and zero points, the output's quantization step

Outputs are multiples of the output's step (the last DequantizeLinear's scale). Not part of
`make models` (about a minute, most of it the numpy calibration of the float model): `make
models-qdq-resnet` runs it, and bench/vs_onnxruntime.py --part int8 uses it. Cached by a stamp
file (SHA-256 of this script, qdq_quantize.py, the float model and the ORT runner).
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_outputs import file_sha256, require_ort, run_ort  # noqa: E402

try:
    import onnx
except ImportError as e:  # pragma: no cover
    sys.exit(f"gen_qdq_resnet.py: cannot import onnx ({e}); run it with /usr/bin/python3")

from qdq_quantize import generator_stamp, quantize  # noqa: E402

SOURCE = "resnet50-v1-12.onnx"
STEM = "resnet50-v1-12-qdq"
OUTPUT = "resnetv17_dense0_fwd"
BATCHES = (1, 2)
CALIB_BATCH = 2
IMAGE = (3, 224, 224)
STAMP = ".gen_qdq_resnet.stamp"


def log(msg):
    print(f"[gen_qdq_resnet] {msg}", flush=True)


def image_input(models, batch):
    path = os.path.join(models, f"input_b{batch}.bin")
    return np.fromfile(path, "<f4").reshape((batch,) + IMAGE), path


def stamp_key(models, with_ref):
    key = generator_stamp("gen_qdq_resnet.py", with_ref)
    key[SOURCE] = file_sha256(os.path.join(models, SOURCE))
    return key


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", required=True, help="gen_resnet.py's output directory (files go to MODELS/qdq)")
    ap.add_argument("--no-ref", action="store_true", help="skip ONNX Runtime references")
    ap.add_argument("--force", action="store_true", help="ignore the cache stamp")
    ap.add_argument("--node", default=os.environ.get("NODE", "node"), help="node executable")
    ap.add_argument("--threads", type=int, default=2, help="ORT intra-op threads")
    args = ap.parse_args()

    models = os.path.abspath(args.models)
    if not os.path.exists(os.path.join(models, SOURCE)):
        sys.exit(f"gen_qdq_resnet.py: {os.path.join(models, SOURCE)} missing; run gen_resnet.py --out {models}")
    out = os.path.join(models, "qdq")
    with_ref = not args.no_ref
    stamp_path = os.path.join(out, STAMP)
    files = [f"{STEM}.onnx", f"{STEM}.json"] + ([f"{STEM}.ref_b{b}.bin" for b in BATCHES] if with_ref else [])
    key = stamp_key(models, with_ref)
    if not args.force and os.path.exists(stamp_path):
        with open(stamp_path) as f:
            if json.load(f) == key and all(os.path.exists(os.path.join(out, p)) for p in files):
                log(f"up to date: {out}")
                return 0
    if with_ref:
        require_ort(args.node, "gen_qdq_resnet.py")
    os.makedirs(out, exist_ok=True)
    if os.path.exists(stamp_path):
        os.remove(stamp_path)

    start = time.perf_counter()
    model, params = quantize(onnx.load(os.path.join(models, SOURCE)), {"data": image_input(models, CALIB_BATCH)[0]})
    onnx.checker.check_model(model)
    path = os.path.join(out, f"{STEM}.onnx")
    onnx.save(model, path)
    step = params[OUTPUT]["scale"]
    log(f"{STEM}.onnx: {len(model.graph.node)} nodes, {len(params)} quantized activations, output step "
        f"{step:.6g} ({time.perf_counter() - start:.1f} s)")
    info = {"generator": "tests/models/gen_qdq_resnet.py", "source": SOURCE, "calibration": f"input_b{CALIB_BATCH}.bin",
            "output": OUTPUT, "output_step": step, "quantization": params, "references": []}
    for b in BATCHES if with_ref else ():
        x, inp = image_input(models, b)
        got = run_ort(args.node, path, {"data": (x, inp)}, args.threads, "gen_qdq_resnet.py")[OUTPUT]
        levels = np.rint(got / step)
        if got.shape != (b, 1000) or np.abs(got - levels * step).max() > 1e-3 * step:
            sys.exit(f"gen_qdq_resnet.py: ORT output at batch {b} is not on the output's quantization grid")
        got.astype("<f4").tofile(os.path.join(out, f"{STEM}.ref_b{b}.bin"))
        info["references"].append({"batch": b, "file": f"{STEM}.ref_b{b}.bin", "distinct_levels": int(np.unique(levels).size)})
        log(f"{STEM}.ref_b{b}.bin: {int(np.unique(levels).size)} distinct levels")
    with open(os.path.join(out, f"{STEM}.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    with open(stamp_path, "w") as f:
        json.dump(key, f)
    log(f"done -> {out} ({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
