"""A static QDQ quantizer for float convolutional nets, writing the model the way ONNX Runtime's
quantizer (quantize_static, QuantFormat.QDQ, per_channel=True, u8 activations, s8 weights) writes
it after its pre-processing. onnxruntime's Python package is not available here, so the pairs are
inserted with onnx.helper. Used by gen_qdq_models.py (the suite's small QDQ CNN) and
gen_qdq_resnet.py (a QDQ ResNet-50 from the float replica).

What `quantize(model, calib)` does, in ORT's order:

- pre-processing: BatchNormalization after a Conv (its only consumer) is folded into the Conv's
  weights and bias;
- calibration: the float model runs in numpy (float64) on `calib`, and each activation's
  min/max gives an asymmetric u8 scale and zero point over [min(lo, 0), max(hi, 0)] (MinMax);
- a Relu whose input comes from a quantized Conv, Add or Gemm read by the Relu alone is removed
  and that op's output takes the Relu's range (zero point 0: the u8 range clips at 0, ORT's
  QDQRemovableActivation);
- each activation read by a quantized op gets one QuantizeLinear -> DequantizeLinear pair, and
  every consumer of the tensor reads the DequantizeLinear (not a dedicated pair per consumer);
- Conv and Gemm: weights int8 initializers, symmetric per output channel (scale max|w| / 127)
  through DequantizeLinear (axis 0; a Gemm's B with transB=0 along axis 1), biases int32
  initializers with scale x_scale * w_scale (computed in f32) through DequantizeLinear; the
  output quantized;
- Add and GlobalAveragePool (ORT's default QDQ operator): every input and the output quantized;
- MaxPool (ORT's QDQMaxPool / QDQDirect8BitOp): the input quantized, the output quantized with
  the input's scale and zero point;
- other ops (Flatten, Reshape) stay float: they read the DequantizeLinear of a quantized input.

The model's opset becomes 13 at least (per-channel DequantizeLinear); graph inputs that are
initializers are dropped (their float initializers are replaced); a graph output that is
quantized is the DequantizeLinear's output through an Identity keeping the output's name, so
results are multiples of that output's scale.
"""

import os

import numpy as np
from onnx import helper, numpy_helper

from gen_models import np_conv  # noqa: E402
from ort_outputs import ORT_LOCK, RUN_ORT, file_sha256  # noqa: E402

QUANTIZED_OPS = ("Conv", "Gemm", "Add", "GlobalAveragePool", "MaxPool")
RELU_PRODUCERS = ("Conv", "Add", "Gemm")


def generator_stamp(script, with_ref):
    """What a QDQ generator's cache stamp records: the SHA-256 of the generator `script` (a file
    name in this folder) and of this quantizer, and of the ONNX Runtime runner when it writes
    references."""
    here = os.path.dirname(os.path.abspath(__file__))
    key = {name: file_sha256(os.path.join(here, name)) for name in (script, "qdq_quantize.py")}
    if with_ref:
        key.update({"run_ort.js": file_sha256(RUN_ORT), "package-lock.json": file_sha256(ORT_LOCK)})
    return key


def u8_params(lo, hi):
    """Asymmetric u8 scale and zero point of [min(lo, 0), max(hi, 0)] (the quantizer's MinMax)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    zero = int(np.clip(np.rint(-lo / scale), 0, 255))
    return scale, zero


def s8_per_channel(w, axis):
    """Symmetric int8 weights, one scale per index along `axis`: (q, scale)."""
    moved = np.moveaxis(w, axis, 0)
    scale = (np.abs(moved).reshape(moved.shape[0], -1).max(axis=1) / 127.0).astype(np.float32)
    scale = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.rint(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


class _Node:
    def __init__(self, proto):
        self.op = proto.op_type
        self.name = proto.name
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        self.attrs = {a.name: helper.get_attribute_value(a) for a in proto.attribute}


def _maxpool(x, attrs):
    k = attrs["kernel_shape"]
    s = attrs.get("strides", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])), constant_values=-np.inf)
    oh = (xp.shape[2] - k[0]) // s[0] + 1
    ow = (xp.shape[3] - k[1]) // s[1] + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, tuple(k), axis=(2, 3))
    return np.ascontiguousarray(win[:, :, ::s[0], ::s[1]][:, :, :oh, :ow].max(axis=(4, 5)))


def _evaluate(nodes, inits, feeds):
    """Every tensor's float64 value: the ops a float conv net uses (NCHW, 2-D spatial)."""
    vals = {k: np.asarray(v, np.float64) for k, v in inits.items()}
    vals.update({k: np.asarray(v, np.float64) for k, v in feeds.items()})
    for n in nodes:
        x = [vals[i] if i else None for i in n.inputs]
        a = n.attrs
        if n.op == "Conv":
            if any(d != 1 for d in a.get("dilations", [1, 1])) or a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
                raise ValueError(f"qdq_quantize: Conv {n.name}: dilations and auto_pad unsupported")
            y = np_conv(x[0], x[1], x[2] if len(x) > 2 else None, a.get("strides", [1, 1]),
                        a.get("pads", [0, 0, 0, 0]), a.get("group", 1))
        elif n.op == "Relu":
            y = np.maximum(x[0], 0.0)
        elif n.op == "Add":
            y = x[0] + x[1]
        elif n.op == "MaxPool":
            y = _maxpool(x[0], a)
        elif n.op == "GlobalAveragePool":
            y = x[0].mean(axis=(2, 3), keepdims=True)
        elif n.op == "Flatten":
            axis = a.get("axis", 1)
            y = x[0].reshape(int(np.prod(x[0].shape[:axis])), -1)
        elif n.op == "Reshape":
            shape = [x[0].shape[i] if d == 0 else int(d) for i, d in enumerate(x[1].astype(np.int64))]
            y = x[0].reshape(shape)
        elif n.op == "Gemm":
            aa = x[0].T if a.get("transA", 0) else x[0]
            bb = x[1].T if a.get("transB", 0) else x[1]
            y = a.get("alpha", 1.0) * aa @ bb
            if len(x) > 2 and x[2] is not None:
                y = y + a.get("beta", 1.0) * x[2]
        elif n.op == "Identity":
            y = x[0]
        else:
            raise ValueError(f"qdq_quantize: no numpy evaluation of {n.op} ({n.name})")
        vals[n.outputs[0]] = y
    return vals


def _consumers(nodes, outputs):
    uses = {}
    for n in nodes:
        for i in n.inputs:
            uses[i] = uses.get(i, 0) + 1
    for o in outputs:
        uses[o] = uses.get(o, 0) + 1
    return uses


def _fold_batchnorm(nodes, inits, outputs):
    uses = _consumers(nodes, outputs)
    producer = {o: n for n in nodes for o in n.outputs}
    kept = []
    for n in nodes:
        conv = producer.get(n.inputs[0]) if n.op == "BatchNormalization" else None
        if conv is None or conv.op != "Conv" or uses[n.inputs[0]] != 1 or conv.inputs[1] not in inits:
            kept.append(n)
            continue
        gamma, beta, mean, var = (inits[i].astype(np.float64) for i in n.inputs[1:5])
        s = gamma / np.sqrt(var + n.attrs.get("epsilon", 1e-5))
        w = inits[conv.inputs[1]].astype(np.float64)
        b = inits[conv.inputs[2]].astype(np.float64) if len(conv.inputs) > 2 and conv.inputs[2] else 0.0
        inits[conv.inputs[1]] = (w * s.reshape(-1, 1, 1, 1)).astype(np.float32)
        bias = conv.inputs[2] if len(conv.inputs) > 2 and conv.inputs[2] else conv.inputs[1] + "_bias"
        inits[bias] = ((b - mean) * s + beta).astype(np.float32)
        conv.inputs = conv.inputs[:2] + [bias]
        conv.outputs = list(n.outputs)
    return kept


def quantize(model, calib):
    """The QDQ model of float `model` (onnx.ModelProto), calibrated on feeds `calib` (input name
    -> array). Returns (model, params): params maps each quantized activation to its scale and
    zero point."""
    g = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    outputs = [o.name for o in g.output]
    nodes = _fold_batchnorm([_Node(p) for p in g.node], inits, outputs)
    vals = _evaluate(nodes, inits, calib)

    # Relu after a quantized op read by it alone: removed, the op writes the Relu's output.
    uses = _consumers(nodes, outputs)
    producer = {o: n for n in nodes for o in n.outputs}
    kept = []
    for n in nodes:
        src = producer.get(n.inputs[0]) if n.op == "Relu" else None
        if src is not None and src.op in RELU_PRODUCERS and uses[n.inputs[0]] == 1:
            src.outputs = list(n.outputs)
            producer[n.outputs[0]] = src
            continue
        kept.append(n)
    nodes = kept

    out_nodes, out_inits, params, dq_of = [], [], {}, {}

    def init(name, arr):
        out_inits.append(numpy_helper.from_array(arr, name))
        return name

    def quantize_tensor(t, shared=None):
        """Q -> DQ on activation t (params of `shared` when given); consumers read dq_of[t]."""
        if t in dq_of:
            return
        scale, zero = params[shared] if shared else u8_params(vals[t].min(), vals[t].max())
        params[t] = (scale, zero)
        s, z = init(f"{t}_scale", np.float32(scale)), init(f"{t}_zero_point", np.uint8(zero))
        out_nodes.append(helper.make_node("QuantizeLinear", [t, s, z], [f"{t}_quantized"],
                                          name=f"{t}_QuantizeLinear"))
        dq_of[t] = f"{t}_dequantized"
        out_nodes.append(helper.make_node("DequantizeLinear", [f"{t}_quantized", s, z],
                                          [dq_of[t]], name=f"{t}_DequantizeLinear"))

    def read(t):
        return dq_of.get(t, t)

    def weights(n, axis):
        """Per-channel int8 weights and the int32 bias of Conv/Gemm node n: new input names."""
        w = inits[n.inputs[1]]
        w_q, w_scale = s8_per_channel(w, axis)
        wn = n.inputs[1]
        zero = np.zeros(w_scale.shape, np.int8)
        out_nodes.append(helper.make_node(
            "DequantizeLinear", [init(f"{wn}_quantized", w_q), init(f"{wn}_scale", w_scale),
                                 init(f"{wn}_zero_point", zero)], [f"{wn}_dequantized"],
            name=f"{wn}_DequantizeLinear", axis=axis))
        ins = [read(n.inputs[0]), f"{wn}_dequantized"]
        if len(n.inputs) > 2 and n.inputs[2]:
            bn = n.inputs[2]
            b_scale = (params[n.inputs[0]][0] * w_scale).astype(np.float32)
            b_q = np.rint(inits[bn].astype(np.float64) / b_scale).astype(np.int32)
            out_nodes.append(helper.make_node(
                "DequantizeLinear", [init(f"{bn}_quantized", b_q), init(f"{bn}_scale", b_scale)],
                [f"{bn}_dequantized"], name=f"{bn}_DequantizeLinear", axis=0))
            ins.append(f"{bn}_dequantized")
        return ins

    for t in (i.name for i in g.input if i.name not in inits):
        if any(n.op in QUANTIZED_OPS and n.inputs[0] == t for n in nodes):
            quantize_tensor(t)
    for n in nodes:
        if n.op in ("Conv", "Gemm"):
            quantize_tensor(n.inputs[0])
            axis = 0 if n.op == "Conv" or n.attrs.get("transB", 0) else 1
            ins = weights(n, axis)
        elif n.op in ("Add", "GlobalAveragePool", "MaxPool"):
            for i in n.inputs:
                quantize_tensor(i)
            ins = [read(i) for i in n.inputs]
        else:
            ins = [read(i) for i in n.inputs]
        out_nodes.append(helper.make_node(n.op, ins, n.outputs, name=n.name or n.outputs[0], **n.attrs))
        if n.op in QUANTIZED_OPS:
            quantize_tensor(n.outputs[0], shared=n.inputs[0] if n.op == "MaxPool" else None)

    graph_outputs = []
    for o in g.output:
        if o.name in dq_of:
            # The op writes o's name: give the float tensor another name, keep o's for the output.
            inner = f"{o.name}_float"
            for nd in out_nodes:
                nd.output[:] = [inner if x == o.name else x for x in nd.output]
                nd.input[:] = [inner if x == o.name else x for x in nd.input]
            out_nodes.append(helper.make_node("Identity", [dq_of[o.name]], [o.name], name=f"{o.name}_output"))
        graph_outputs.append(o)
    # Float initializers still read (Reshape's shape, ...) stay.
    used = {i for nd in out_nodes for i in nd.input}
    have = {t.name for t in out_inits}
    for name, arr in inits.items():
        if name in used and name not in have:
            out_inits.append(numpy_helper.from_array(arr, name))
    inputs = [i for i in g.input if i.name not in inits]
    graph = helper.make_graph(out_nodes, g.name, inputs, graph_outputs, out_inits)
    opset = max([o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] + [13])
    qmodel = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                               producer_name="kiln qdq_quantize.py")
    qmodel.ir_version = max(model.ir_version, 7)
    return qmodel, {t: {"scale": float(s), "zero_point": int(z)} for t, (s, z) in params.items()}
