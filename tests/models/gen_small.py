"""Small ONNX fixtures for kiln's CLI and error-path tests.

Usage: /usr/bin/python3 tests/models/gen_small.py --out DIR

Writes into DIR/small/:
  tiny_input_b{1,3}.bin, tiny_cnn.ref_b{1,3}.bin   inputs and ONNX Runtime outputs
  tiny_cnn.onnx            input `data` f32 [N,3,8,8] -> Conv+bias, BN, Relu, MaxPool, a residual
                           block, GlobalAveragePool, Flatten, Gemm, Softmax -> `prob` [N,10]
  two_inputs.onnx          y = a + b, both [N,4] (one symbol bound from two inputs)
  weights_in_inputs.onnx   a Conv whose weight initializer is also a graph input
  unsupported.onnx         a valid model using ops kiln does not support (Bernoulli twice, Multinomial once)
  external/model.onnx      a Conv whose weight lives in external/weights.bin (allowed)
  escape_dotdot/model.onnx external data at "../outside.bin" (must be refused)
  escape_abs/model.onnx    external data at an absolute path (must be refused)
  external_range/model.onnx external data whose offset+length run past the file (must be refused)
"""
import argparse
import hashlib
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_relu_model(rng):
    def init(name, arr):
        return numpy_helper.from_array(arr.astype(np.float32), name)

    inits = [
        init("c0_w", rng.standard_normal((8, 3, 3, 3)) * 0.3),
        init("c0_b", rng.standard_normal(8) * 0.1),
        init("bn_s", rng.uniform(0.8, 1.2, 8)),
        init("bn_b", rng.uniform(-0.1, 0.1, 8)),
        init("bn_m", rng.standard_normal(8) * 0.1),
        init("bn_v", rng.uniform(0.5, 1.5, 8)),
        init("c1_w", rng.standard_normal((8, 8, 3, 3)) * 0.15),
        init("c2_w", rng.standard_normal((8, 8, 1, 1)) * 0.3),
        init("fc_w", rng.standard_normal((10, 8)) * 0.5),
        init("fc_b", rng.standard_normal(10) * 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["data", "c0_w", "c0_b"], ["c0"], name="conv0", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c0", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn0"],
                         name="bn0", epsilon=1e-5),
        helper.make_node("Relu", ["bn0"], ["r0"], name="relu0"),
        helper.make_node("MaxPool", ["r0"], ["p0"], name="pool0", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p0", "c1_w"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "c2_w"], ["c2"], name="conv2"),
        helper.make_node("Add", ["c2", "p0"], ["s0"], name="add0"),
        helper.make_node("Relu", ["s0"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g0"], name="gap0"),
        helper.make_node("Flatten", ["g0"], ["f0"], name="flatten0"),
        helper.make_node("Gemm", ["f0", "fc_w", "fc_b"], ["logits"], name="fc0", transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax0", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", 10])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    return model


def unsupported_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    nodes = [
        helper.make_node("Bernoulli", ["x"], ["b0"], name="bernoulli_a"),
        helper.make_node("Multinomial", ["x"], ["u0"], name="multinomial_a"),
        helper.make_node("Bernoulli", ["x"], ["b1"], name="bernoulli_b"),
        helper.make_node("Relu", ["b1"], ["y"], name="relu_ok"),
    ]
    graph = helper.make_graph(nodes, "unsupported", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def external_model(location, offset=0, length=None):
    w = TensorProto()
    w.name = "w"
    w.data_type = TensorProto.FLOAT
    w.dims.extend([2, 1, 1, 1])
    w.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": str(offset)}
    entries["length"] = str(8 if length is None else length)
    for key, value in entries.items():
        e = w.external_data.add()
        e.key, e.value = key, value
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv_ext")
    graph = helper.make_graph(
        [node], "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 2, 2])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


RUN_ORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "ort",
                       "run_ort.js")


def ort_reference(model, input_path, batch, out_path):
    """Runs ONNX Runtime (tools/ort/run_ort.js) and saves the `prob` output as raw f32."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["node", RUN_ORT, "run", model, "--input", f"data={batch}x3x8x8:f32:{input_path}",
               "--output-dir", tmp]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        os.replace(os.path.join(tmp, "prob.bin"), out_path)


def weights_in_inputs_model():
    """A 1x1 Conv whose weight is an initializer also listed in graph.input (MXNet style)."""
    w = numpy_helper.from_array(np.array([1.5, -2.0], dtype=np.float32).reshape(2, 1, 1, 1), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv_w")], "weights_in_inputs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 2, 2]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 1, 1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 2, 2])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def two_inputs_model():
    """y = a + b with a and b both [N, 4]: N must bind to one value from both inputs."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"], name="add_ab")], "two_inputs",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = os.path.join(args.out, "small")
    stamp = os.path.join(out, ".stamp")
    digest = hashlib.sha256(open(__file__, "rb").read()).hexdigest()
    if os.path.exists(stamp) and open(stamp).read() == digest:
        return
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    onnx.save(conv_relu_model(rng), os.path.join(out, "tiny_cnn.onnx"))
    for b in (1, 3):
        x = np.random.default_rng(b).random((b, 3, 8, 8), dtype=np.float32)
        x.tofile(os.path.join(out, f"tiny_input_b{b}.bin"))
    for b in (1, 3):
        ort_reference(os.path.join(out, "tiny_cnn.onnx"), os.path.join(out, f"tiny_input_b{b}.bin"),
                      b, os.path.join(out, f"tiny_cnn.ref_b{b}.bin"))
    onnx.save(two_inputs_model(), os.path.join(out, "two_inputs.onnx"))
    onnx.save(weights_in_inputs_model(), os.path.join(out, "weights_in_inputs.onnx"))
    onnx.save(unsupported_model(), os.path.join(out, "unsupported.onnx"))

    ext = os.path.join(out, "external")
    os.makedirs(ext, exist_ok=True)
    np.array([1.5, -2.0], dtype=np.float32).tofile(os.path.join(ext, "weights.bin"))
    onnx.save(external_model("weights.bin"), os.path.join(ext, "model.onnx"))

    np.array([1.0, 1.0], dtype=np.float32).tofile(os.path.join(out, "outside.bin"))
    for name, location in (("escape_dotdot", "../outside.bin"),
                           ("escape_abs", os.path.abspath(os.path.join(out, "outside.bin")))):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        onnx.save(external_model(location), os.path.join(d, "model.onnx"))
    d = os.path.join(out, "external_range")
    os.makedirs(d, exist_ok=True)
    np.array([1.0, 1.0], dtype=np.float32).tofile(os.path.join(d, "weights.bin"))
    onnx.save(external_model("weights.bin", offset=4, length=8), os.path.join(d, "model.onnx"))
    with open(stamp, "w") as f:
        f.write(digest)


if __name__ == "__main__":
    sys.exit(main())
