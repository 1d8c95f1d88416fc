"""A small NHWC CNN as tf2onnx leaves a Keras model (for kiln's benchmark corpus).

build(seed) returns an onnx.ModelProto at opset 13: input `input` f32 [N,224,224,3] (NHWC, N
symbolic), output `probs` [N,1000]. What tf2onnx's output looks like and this model copies:
- a Transpose NHWC->NCHW right after the input, convolutions in NCHW after it;
- BatchNormalization folded into the convolution weights and bias (random here, He-scaled);
- ReLU6 as Clip(x, 0, 6) with min and max as initializer inputs;
- TF "SAME" padding written out: asymmetric pads (0 before, 1 after) for 3x3 stride 2;
- depthwise separable blocks (depthwise Conv with group = channels, then 1x1), residual Adds;
- squeeze-excite computed in NHWC (Keras' GlobalAveragePooling2D + Dense layers): Transpose to
  NHWC, ReduceMean over axes 1,2, MatMul + Add, Relu, MatMul + Add, Sigmoid, Mul, Transpose back
  (tf2onnx cannot push the Transposes through the MatMuls);
- one Transpose pair left around an elementwise op (NCHW->NHWC, Clip, NHWC->NCHW);
- the head in NHWC: Transpose, ReduceMean(1,2, keepdims 0), MatMul + Add, Softmax.
About 0.57 G multiply-adds per image (MobileNet-v1-sized).
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
SIDE = 224
CLASSES = 1000


class _Graph:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, prefix):
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, prefix, array):
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def node(self, op, inputs, prefix=None, **attrs):
        out = self.name(prefix or op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def relu6(self, x):
        return self.node("Clip", [x, self.clip_min, self.clip_max], "Relu6")

    def conv(self, x, cin, cout, k, stride, group=1):
        """Conv with BN folded in (weight and bias), TF SAME padding."""
        fan_in = (cin // group) * k * k
        w = self.rng.standard_normal((cout, cin // group, k, k)).astype(np.float32) * np.sqrt(2.0 / fan_in)
        b = (self.rng.standard_normal(cout) * 0.05).astype(np.float32)
        total = max(k - stride, 0)
        pads = [total // 2, total // 2, total - total // 2, total - total // 2]
        return self.node("Conv", [x, self.const("kernel", w), self.const("bias", b)], "Conv2D",
                         kernel_shape=[k, k], strides=[stride, stride], pads=pads, group=group,
                         dilations=[1, 1])

    def dense(self, x, cin, cout, scale):
        w = (self.rng.standard_normal((cin, cout)) * scale / np.sqrt(cin)).astype(np.float32)
        b = (self.rng.standard_normal(cout) * 0.05).astype(np.float32)
        return self.node("Add", [self.node("MatMul", [x, self.const("dense_kernel", w)]),
                                 self.const("dense_bias", b)], "BiasAdd")

    def separable(self, x, cin, cout, stride, residual=False, nhwc_pair=False):
        y = self.relu6(self.conv(x, cin, cin, 3, stride, group=cin))
        y = self.conv(y, cin, cout, 1, 1)
        if nhwc_pair:  # an activation tf2onnx left between a Transpose pair
            y = self.node("Transpose", [y], "Transpose", perm=[0, 2, 3, 1])
            y = self.relu6(y)
            y = self.node("Transpose", [y], "Transpose", perm=[0, 3, 1, 2])
        else:
            y = self.relu6(y)
        return self.node("Add", [x, y], "add") if residual else y

    def squeeze_excite(self, x, c):
        t = self.node("Transpose", [x], "Transpose", perm=[0, 2, 3, 1])
        s = self.node("ReduceMean", [t], "Mean", axes=[1, 2], keepdims=1)
        s = self.node("Relu", [self.dense(s, c, c // 4, np.sqrt(2.0))], "Relu")
        s = self.node("Sigmoid", [self.dense(s, c // 4, c, 1.0)], "Sigmoid")
        y = self.node("Mul", [t, s], "multiply")
        return self.node("Transpose", [y], "Transpose", perm=[0, 3, 1, 2])


def build(seed=2024):
    g = _Graph(seed)
    g.clip_min = g.const("relu6_min", np.array(0.0, np.float32))
    g.clip_max = g.const("relu6_max", np.array(6.0, np.float32))
    x = g.node("Transpose", ["input"], "Transpose", perm=[0, 3, 1, 2])
    x = g.relu6(g.conv(x, 3, 32, 3, 2))                                   # 112
    x = g.separable(x, 32, 64, 1)
    x = g.separable(x, 64, 128, 2)                                         # 56
    x = g.separable(x, 128, 128, 1, residual=True)
    x = g.separable(x, 128, 256, 2)                                        # 28
    x = g.separable(x, 256, 256, 1, residual=True)
    x = g.squeeze_excite(x, 256)
    x = g.separable(x, 256, 512, 2)                                        # 14
    for i in range(5):
        x = g.separable(x, 512, 512, 1, residual=True, nhwc_pair=(i == 2))
    x = g.squeeze_excite(x, 512)
    x = g.separable(x, 512, 1024, 2)                                       # 7
    x = g.separable(x, 1024, 1024, 1, residual=True)
    x = g.node("Transpose", [x], "Transpose", perm=[0, 2, 3, 1])
    x = g.node("ReduceMean", [x], "Mean", axes=[1, 2], keepdims=0)
    x = g.dense(x, 1024, CLASSES, 1.0)
    g.nodes.append(helper.make_node("Softmax", [x], ["probs"], name="Softmax", axis=-1))
    graph = helper.make_graph(
        g.nodes, "tf2onnx", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", SIDE, SIDE, 3])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", CLASSES])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="tf2onnx", producer_version="1.16.1")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model
