#!/usr/bin/python3
"""A small CRNN-style text recognizer whose input width is symbolic, for bench/plan_cache_rss.sh:
every width gives the session a new set of sizes (a new plan).

    /usr/bin/python3 bench/text_recognizer_model.py OUT.onnx

input f32 [1,1,32,W] -> `probs` f32 [1,floor(W/4),37]:
  Conv 3x3 (1->32) Relu, MaxPool 2x2 | Conv 3x3 (32->64) Relu, MaxPool 2x2 |
  Conv 3x3 (64->128) Relu, MaxPool (2,1) | Conv (4,1) (128->128) Relu -> height 1 |
  Squeeze, Transpose -> [1,W/4,128] | MatMul 128->64 + bias, Relu | MatMul 64->37, Softmax.
Random He-scaled weights, seeded; the model is for memory and timing, not for its outputs.
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(14)
inits = []
nodes = []


def weight(name, shape, fan_in):
    w = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    inits.append(numpy_helper.from_array(w, name))
    return name


def conv_relu(x, name, cin, cout, kernel, pads):
    w = weight(name + "_w", (cout, cin) + kernel, cin * kernel[0] * kernel[1])
    b = weight(name + "_b", (cout,), 100.0)
    nodes.append(helper.make_node("Conv", [x, w, b], [name], name=name, kernel_shape=list(kernel),
                                  pads=pads))
    nodes.append(helper.make_node("Relu", [name], [name + "_relu"], name=name + "_relu"))
    return name + "_relu"


def pool(x, name, kernel):
    nodes.append(helper.make_node("MaxPool", [x], [name], name=name, kernel_shape=list(kernel),
                                  strides=list(kernel)))
    return name


x = conv_relu("input", "conv1", 1, 32, (3, 3), [1, 1, 1, 1])
x = pool(x, "pool1", (2, 2))
x = conv_relu(x, "conv2", 32, 64, (3, 3), [1, 1, 1, 1])
x = pool(x, "pool2", (2, 2))
x = conv_relu(x, "conv3", 64, 128, (3, 3), [1, 1, 1, 1])
x = pool(x, "pool3", (2, 1))
x = conv_relu(x, "conv4", 128, 128, (4, 1), [0, 0, 0, 0])
inits.append(numpy_helper.from_array(np.array([2], dtype=np.int64), "squeeze_axes"))
nodes.append(helper.make_node("Squeeze", [x, "squeeze_axes"], ["seq_cw"], name="squeeze"))
nodes.append(helper.make_node("Transpose", ["seq_cw"], ["seq"], name="to_seq", perm=[0, 2, 1]))
nodes.append(helper.make_node("MatMul", ["seq", weight("fc1_w", (128, 64), 128)], ["fc1"], name="fc1"))
nodes.append(helper.make_node("Add", ["fc1", weight("fc1_b", (64,), 100.0)], ["fc1_b_out"],
                              name="fc1_bias"))
nodes.append(helper.make_node("Relu", ["fc1_b_out"], ["fc1_relu"], name="fc1_relu"))
nodes.append(helper.make_node("MatMul", ["fc1_relu", weight("fc2_w", (64, 37), 64)], ["logits"],
                              name="fc2"))
nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1))

graph = helper.make_graph(
    nodes, "text_recognizer",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 32, "W"])],
    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, None, 37])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="kiln bench/text_recognizer_model.py")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
