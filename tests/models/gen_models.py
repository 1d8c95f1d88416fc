#!/usr/bin/python3
"""Small architecture replicas for kiln's model suite: a MobileNetV2-like CNN, a transformer
encoder, a fully convolutional segmenter and an audio classifier on a log-mel spectrogram front end
(STFT, MelWeightMatrix: PyTorch 1.13 cannot export torch.stft), each with symbolic dims, plus inputs
and ONNX Runtime reference outputs at several sizes per symbol.

Run with Debian's python (it sees python3-onnx and python3-numpy):

    /usr/bin/python3 tests/models/gen_models.py --out DIR [--no-ref] [--force] [--node NODE]

Writes into DIR/nets/ (see tests/models/README.md):

  mobilenetv2_like.onnx       input f32 [N,3,64,64] -> output `logits` f32 [N,10]
  mobilenetv2_like.input_n{N}.bin, mobilenetv2_like.ref_n{N}.bin                 N in {1,3}
  transformer_encoder.onnx    input_ids i64 [B,S] -> `last_hidden_state` f32 [B,S,32]
  transformer_encoder.ids_b{B}_s{S}.bin, transformer_encoder.ref_b{B}_s{S}.bin  B in {1,2,3}, S in {5,7,16}
  fcn_segmenter.onnx          input f32 [N,3,H,W] -> `mask` f32 [N,1,H,W] (H, W multiples of 4)
  fcn_segmenter.input_n{N}_h{H}_w{W}.bin, fcn_segmenter.ref_n{N}_h{H}_w{W}.bin  N in {1,2}, H in {32,48}, W in {32,64}
  spectrogram_frontend.onnx   waveform f32 [N,L] -> `logits` f32 [N,4] (L >= 64)
  spectrogram_frontend.waveform_n{N}_l{L}.bin, spectrogram_frontend.ref_n{N}_l{L}.bin  N in {1,2}, L in {400,1000}
  manifest.json               shapes, sizes, per-reference ORT-vs-float64 agreement

Files are raw little-endian data (f32, or i64 for input_ids). Every size combination of a model's
symbols has a file, because `kiln test-suite` runs the Cartesian product of a manifest's dims.

Each model is built node by node with onnx.helper; a small float64 numpy interpreter of the ONNX
ops used here evaluates every node as it is added (to calibrate weights so activations stay O(1))
and then runs the finished graph at every size. ONNX Runtime's outputs (tools/ort/run_ort.js) are
the references, and the script fails unless they agree with the float64 forward pass within
CHECK_ATOL + CHECK_RTOL * |x| everywhere. Seeded, deterministic. The run is cached by a stamp file
(SHA-256 of this script and of the ORT runner).
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_outputs import ORT_LOCK, REPO, RUN_ORT, file_sha256, require_ort, run_ort  # noqa: E402

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    sys.exit(f"gen_models.py: cannot import onnx ({e}); run it with /usr/bin/python3")

SUBDIR = "nets"
STAMP = ".gen_models.stamp"
GEN_VERSION = 1

# ORT (float32) against the float64 forward pass: fail the generator beyond this.
CHECK_ATOL = 1e-4
CHECK_RTOL = 0.0

MOBILENET_N = (1, 3)
TRANSFORMER_B = (1, 2, 3)
TRANSFORMER_S = (5, 7, 16)
FCN_N = (1, 2)
FCN_H = (32, 48)
FCN_W = (32, 64)

SPECTRO_N = (1, 2)
SPECTRO_L = (400, 1000)
SPECTRO_FRAME = 64      # STFT frame and DFT length: 33 onesided bins
SPECTRO_STEP = 16
SPECTRO_MELS = 16
SPECTRO_RATE = 16000

BN_EPS = 1e-5
LN_EPS = 1e-5


def log(msg):
    print(f"[gen_models] {msg}", flush=True)


# ----------------------------------------------------------------------------------------------
# float64 numpy interpreter for the ONNX ops these models use
# ----------------------------------------------------------------------------------------------

def _attrs(node):
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def np_conv(x, w, b, strides, pads, group):
    """NCHW conv with groups, dilation 1; pads = [top, left, bottom, right]."""
    n, c, _, _ = x.shape
    co, cig, kh, kw = w.shape
    assert c == cig * group and co % group == 0, (x.shape, w.shape, group)
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    sh, sw = strides
    oh = (xp.shape[2] - kh) // sh + 1
    ow = (xp.shape[3] - kw) // sw + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    win = win[:, :, ::sh, ::sw][:, :, :oh, :ow]  # n, c, oh, ow, kh, kw
    win = win.reshape(n, group, cig, oh, ow, kh, kw)
    wg = w.reshape(group, co // group, cig, kh, kw)
    y = np.einsum("ngchwkl,gockl->ngohw", win, wg, optimize=True).reshape(n, co, oh, ow)
    if b is not None:
        y = y + b.reshape(1, co, 1, 1)
    return np.ascontiguousarray(y)


def np_conv_naive(x, w, b, strides, pads, group):
    n, c, h, wd = x.shape
    co, cig, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (xp.shape[2] - kh) // strides[0] + 1
    ow = (xp.shape[3] - kw) // strides[1] + 1
    y = np.zeros((n, co, oh, ow))
    cpg = co // group
    for o in range(co):
        g = o // cpg
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cig:(g + 1) * cig, i * strides[0]:i * strides[0] + kh,
                           j * strides[1]:j * strides[1] + kw]
                y[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    return y + (b.reshape(1, co, 1, 1) if b is not None else 0)


def np_resize_axis(x, axis, scale, mode):
    """Resize one axis by `scale` (half_pixel; nearest rounds half down, linear clamps the edge)."""
    n_in = x.shape[axis]
    n_out = int(math.floor(n_in * scale))
    o = np.arange(n_out, dtype=np.float64)
    src = (o + 0.5) / scale - 0.5
    if mode == "nearest":
        # round_prefer_floor: ties go down.
        idx = np.where(src - np.floor(src) > 0.5, np.floor(src) + 1, np.floor(src))
        idx = np.clip(idx, 0, n_in - 1).astype(np.int64)
        return np.take(x, idx, axis=axis)
    assert mode == "linear", mode
    src = np.clip(src, 0, n_in - 1)
    lo = np.floor(src).astype(np.int64)
    hi = np.minimum(lo + 1, n_in - 1)
    frac = src - lo
    shape = [1] * x.ndim
    shape[axis] = n_out
    frac = frac.reshape(shape)
    return np.take(x, lo, axis=axis) * (1 - frac) + np.take(x, hi, axis=axis) * frac


_erf = np.vectorize(math.erf, otypes=[np.float64])


def run_node(node, vals):
    """Evaluates one node on float64 (float) / int64 (integer) numpy values."""
    op = node.op_type
    a = _attrs(node)
    ins = [vals[i] if i else None for i in node.input]
    x = ins[0] if ins else None
    if op == "Conv":
        assert a.get("dilations", [1, 1]) == [1, 1]
        return [np_conv(x, ins[1], ins[2] if len(ins) > 2 else None, a.get("strides", [1, 1]),
                        a.get("pads", [0, 0, 0, 0]), a.get("group", 1))]
    if op == "BatchNormalization":
        g, b, m, v = (t.reshape(1, -1, 1, 1) for t in ins[1:5])
        return [(x - m) / np.sqrt(v + a.get("epsilon", 1e-5)) * g + b]
    if op == "Clip":
        lo = ins[1] if len(ins) > 1 and ins[1] is not None else -np.inf
        hi = ins[2] if len(ins) > 2 and ins[2] is not None else np.inf
        return [np.minimum(np.maximum(x, lo), hi)]
    if op == "Relu":
        return [np.maximum(x, 0.0)]
    if op == "Sigmoid":
        return [1.0 / (1.0 + np.exp(-x))]
    if op == "Erf":
        return [_erf(x)]
    if op == "Sqrt":
        return [np.sqrt(x)]
    if op in ("Add", "Sub", "Mul", "Div", "Pow"):
        f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Pow": np.power}[op]
        return [f(ins[0], ins[1])]
    if op == "GlobalAveragePool":
        return [x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)]
    if op == "Flatten":
        ax = a.get("axis", 1)
        return [x.reshape(int(np.prod(x.shape[:ax])), -1)]
    if op == "Gemm":
        A = ins[0].T if a.get("transA", 0) else ins[0]
        B = ins[1].T if a.get("transB", 0) else ins[1]
        y = a.get("alpha", 1.0) * (A @ B)
        if len(ins) > 2 and ins[2] is not None:
            y = y + a.get("beta", 1.0) * ins[2]
        return [y]
    if op == "MatMul":
        return [np.matmul(ins[0], ins[1])]
    if op == "Gather":
        idx = ins[1]
        ax = a.get("axis", 0)
        idx = np.where(idx < 0, idx + x.shape[ax], idx)
        return [np.take(x, idx, axis=ax)]
    if op == "Shape":
        return [np.array(x.shape, dtype=np.int64)]
    if op == "Unsqueeze":
        y = x
        for ax in sorted(int(v) for v in ins[1]):
            y = np.expand_dims(y, ax)
        return [y]
    if op == "Slice":
        starts, ends = ins[1], ins[2]
        axes = ins[3] if len(ins) > 3 and ins[3] is not None else np.arange(len(starts))
        steps = ins[4] if len(ins) > 4 and ins[4] is not None else np.ones(len(starts), np.int64)
        sl = [slice(None)] * x.ndim
        for s, e, ax, st in zip(starts, ends, axes, steps):
            assert st == 1
            sl[int(ax)] = slice(int(s), int(e))
        return [x[tuple(sl)]]
    if op == "Concat":
        return [np.concatenate(ins, axis=a["axis"])]
    if op == "Reshape":
        shape = [int(v) for v in ins[1]]
        assert not a.get("allowzero", 0)
        shape = [x.shape[i] if v == 0 else v for i, v in enumerate(shape)]
        return [x.reshape(shape)]
    if op == "Transpose":
        return [np.transpose(x, a["perm"])]
    if op == "Softmax":
        ax = a.get("axis", -1)
        e = np.exp(x - x.max(axis=ax, keepdims=True))
        return [e / e.sum(axis=ax, keepdims=True)]
    if op == "ReduceMean":
        return [x.mean(axis=tuple(a["axes"]), keepdims=bool(a.get("keepdims", 1)))]
    if op == "LayerNormalization":
        ax = a.get("axis", -1)
        axes = tuple(range(ax % x.ndim, x.ndim))
        m = x.mean(axis=axes, keepdims=True)
        v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
        return [(x - m) / np.sqrt(v + a.get("epsilon", 1e-5)) * ins[1] + ins[2]]
    if op == "Resize":
        scales = ins[2]
        assert a.get("coordinate_transformation_mode", "half_pixel") == "half_pixel"
        assert a.get("nearest_mode", "round_prefer_floor") == "round_prefer_floor"
        y = x
        for ax, s in enumerate(scales):
            if s != 1.0:
                y = np_resize_axis(y, ax, float(s), a.get("mode", "nearest"))
        return [y]
    if op == "Log":
        return [np.log(x)]
    if op == "ReduceSumSquare":
        return [np.sum(x * x, axis=tuple(a["axes"]), keepdims=bool(a.get("keepdims", 1)))]
    if op == "HannWindow":
        assert a.get("output_datatype", 1) == 1
        n = int(x)
        period = n if a.get("periodic", 1) else n - 1
        return [0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / period)]
    if op == "STFT":
        assert x.shape[-1] == 1 and a.get("onesided", 1) == 1, "real signals, onesided"
        step, window = int(ins[1]), ins[2]
        length = int(ins[3]) if len(ins) > 3 and ins[3] is not None else window.shape[0]
        assert window.shape[0] == length
        sig = x[..., 0]
        frames = (sig.shape[1] - length) // step + 1
        framed = np.stack([sig[:, f * step:f * step + length] * window for f in range(frames)], axis=1)
        spec = np.fft.rfft(framed, axis=-1)
        return [np.stack([spec.real, spec.imag], axis=-1)]
    if op == "MelWeightMatrix":
        return [np_mel_weight_matrix(*(v.item() for v in ins))]
    raise NotImplementedError(op)


def np_mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz):
    """MelWeightMatrix as the ONNX reference implementation (onnx/reference/ops) defines it: mel
    points spaced by (mel(upper) - mel(lower)) / (num_mel_bins + 2), bins floor((dft_length + 1) * hz
    // sample_rate), triangles with peak 1."""
    to_mel = lambda hz: 2595 * np.log10(1 + hz / 700)
    points = np.arange(num_mel_bins + 2) * ((to_mel(upper_edge_hertz) - to_mel(lower_edge_hertz)) / (num_mel_bins + 2))
    hz = 700 * (np.power(10, (points + to_mel(lower_edge_hertz)) / 2595) - 1)
    bins = (((dft_length + 1) * hz) // sample_rate).astype(int)
    out = np.zeros((dft_length // 2 + 1, num_mel_bins))
    for i in range(num_mel_bins):
        left, center, right = bins[i:i + 3]
        if center == left:
            out[center, i] = 1
        else:
            out[left:center + 1, i] = (np.arange(left, center + 1) - left) / (center - left)
        if right > center:
            out[center:right, i] = (right - np.arange(center, right)) / (right - center)
    return out


def as_compute(arr):
    """float tensors compute in float64, integer tensors stay int64."""
    return arr.astype(np.float64) if arr.dtype.kind == "f" else arr.astype(np.int64)


def forward(model, feeds):
    vals = {t.name: as_compute(numpy_helper.to_array(t)) for t in model.graph.initializer}
    vals.update({k: as_compute(v) for k, v in feeds.items()})
    for node in model.graph.node:
        for name, v in zip(node.output, run_node(node, vals)):
            vals[name] = v
    return {o.name: vals[o.name] for o in model.graph.output}


def self_test():
    rng = np.random.default_rng(123)
    for (c, co, h, k, s, p, g) in [(3, 5, 11, 3, 2, 1, 1), (4, 6, 9, 3, 2, 1, 2), (4, 4, 8, 3, 1, 1, 4),
                                   (6, 6, 9, 3, 2, 1, 6), (5, 7, 8, 1, 1, 0, 1)]:
        x = rng.standard_normal((2, c, h, h + 1))
        w = rng.standard_normal((co, c // g, k, k))
        b = rng.standard_normal(co)
        got = np_conv(x, w, b, [s, s], [p] * 4, g)
        want = np_conv_naive(x, w, b, [s, s], [p] * 4, g)
        assert got.shape == want.shape and np.allclose(got, want, rtol=1e-12, atol=1e-12), (c, co, g)
    x = rng.standard_normal((1, 1, 3, 4))
    y = np_resize_axis(np_resize_axis(x, 2, 2.0, "nearest"), 3, 2.0, "nearest")
    assert np.array_equal(y, x.repeat(2, axis=2).repeat(2, axis=3))
    y = np_resize_axis(x, 3, 2.0, "linear")  # half_pixel: out 1 = 0.75 x0 + 0.25 x1, edges copied
    assert np.allclose(y[..., 0], x[..., 0]) and np.allclose(y[..., 7], x[..., 3])
    assert np.allclose(y[..., 1], 0.75 * x[..., 0] + 0.25 * x[..., 1])
    assert np.allclose(y[..., 2], 0.25 * x[..., 0] + 0.75 * x[..., 1])
    assert abs(_erf(np.array([0.5]))[0] - 0.5204998778130465) < 1e-15
    # The ONNX backend case test_melweightmatrix: (8, 16, 8192, 0, 4096) puts single ones at these
    # (bin, band) places.
    want = np.zeros((9, 8))
    for row, col in ((0, 0), (0, 1), (1, 2), (1, 3), (2, 4), (3, 5), (4, 6), (5, 7)):
        want[row, col] = 1
    assert np.array_equal(np_mel_weight_matrix(8, 16, 8192, 0.0, 4096.0), want)


# ----------------------------------------------------------------------------------------------
# Graph builder: every node is evaluated on the calibration inputs as it is added
# ----------------------------------------------------------------------------------------------

class Builder:
    def __init__(self, name, seed, calib_feeds):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = {}  # name -> np.ndarray (as stored)
        self.vals = {k: as_compute(v) for k, v in calib_feeds.items()}
        self.stats = []

    def init(self, name, arr):
        assert name not in self.inits and name not in self.vals, name
        self.inits[name] = arr
        self.vals[name] = as_compute(arr)
        return name

    def f32(self, name, arr):
        return self.init(name, np.asarray(arr, dtype=np.float32))

    def i64(self, name, arr):
        return self.init(name, np.asarray(arr, dtype=np.int64))

    def op(self, op_type, inputs, out, **attrs):
        node = helper.make_node(op_type, inputs, [out], name=out, **attrs)
        assert out not in self.vals, out
        self.vals[out] = run_node(node, self.vals)[0]
        self.nodes.append(node)
        return out

    def record(self, label, name):
        v = self.vals[name]
        self.stats.append({"at": label, "std": round(float(v.std()), 4), "mean": round(float(v.mean()), 4),
                           "max_abs": round(float(np.abs(v).max()), 4)})

    # --- layers with calibrated weights
    def conv(self, x, name, cout, k, stride, group=1, bias=False, out_std=1.0):
        """He-initialised conv, each output channel rescaled to `out_std` on the calibration data."""
        cin = self.vals[x].shape[1]
        pad = k // 2
        fan_in = cin // group * k * k
        w = self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)
        attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, group=group)
        y = np_conv(self.vals[x], w.astype(np.float32).astype(np.float64), None, [stride] * 2, [pad] * 4, group)
        w = w * (out_std / np.maximum(y.std(axis=(0, 2, 3)), 1e-3)).reshape(-1, 1, 1, 1)
        ins = [x, self.f32(name + "_w", w)]
        if bias:
            ins.append(self.f32(name + "_b", self.rng.uniform(-0.1, 0.1, cout)))
        return self.op("Conv", ins, name, **attrs)

    def bn(self, x, name, gamma_range=(0.8, 1.2)):
        xv = self.vals[x]
        c = xv.shape[1]
        mean = xv.mean(axis=(0, 2, 3)) + self.rng.normal(0.0, 0.1, c)
        var = xv.var(axis=(0, 2, 3)) * self.rng.uniform(0.5, 1.5, c)
        gamma = self.rng.uniform(*gamma_range, c)
        beta = self.rng.uniform(-0.1, 0.1, c)
        ins = [x] + [self.f32(f"{name}_{s}", v) for s, v in
                     (("scale", gamma), ("bias", beta), ("mean", mean), ("var", var))]
        return self.op("BatchNormalization", ins, name, epsilon=BN_EPS)

    def model(self, inputs, outputs, opset, doc):
        graph = helper.make_graph(
            self.nodes, self.name, inputs, outputs,
            initializer=[numpy_helper.from_array(v, k) for k, v in self.inits.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                  producer_name="kiln-gen_models", producer_version=str(GEN_VERSION),
                                  doc_string=doc)
        model.ir_version = 8
        onnx.checker.check_model(model, full_check=True)
        return model


# ----------------------------------------------------------------------------------------------
# The models
# ----------------------------------------------------------------------------------------------

def mobilenet_input(n):
    return np.random.default_rng(0).random((3, 3, 64, 64), dtype=np.float32)[:n].copy()


def build_mobilenet():
    """MobileNetV2-like: stem, four inverted residual blocks (two with residual Add, two with a
    stride-2 depthwise conv), a 1x1 head conv, GlobalAveragePool, Flatten, Gemm."""
    b = Builder("mobilenetv2_like", 2, {"input": mobilenet_input(3)})
    zero = b.f32("clip_min", np.array(0.0))
    six = b.f32("clip_max", np.array(6.0))

    def conv_bn(x, name, cout, k, stride, group=1, act=True, gamma=(0.8, 1.2)):
        y = b.conv(x, name + "_conv", cout, k, stride, group)
        # Before Clip, std ~3 (BN gamma): the 6 cap clips ~3% of the values, as in trained nets.
        y = b.bn(y, name + "_bn", gamma_range=(2.5, 3.5) if act else gamma)
        return b.op("Clip", [y, zero, six], name + "_relu6") if act else y

    x = conv_bn("input", "stem", 16, 3, 2)
    b.record("stem", x)
    cin = 16
    for i, (t, cout, stride) in enumerate([(4, 16, 1), (4, 24, 2), (4, 24, 1), (4, 32, 2)]):
        p = f"block{i}"
        h = conv_bn(x, p + "_expand", cin * t, 1, 1)
        h = conv_bn(h, p + "_dw", cin * t, 3, stride, group=cin * t)
        residual = stride == 1 and cin == cout
        # Residual branches end small (as trained nets' zero-init last BN), so float32 rounding
        # is not amplified block after block.
        h = conv_bn(h, p + "_project", cout, 1, 1, act=False, gamma=(0.2, 0.4) if residual else (0.8, 1.2))
        x = b.op("Add", [x, h], p + "_add") if residual else h
        b.record(p, x)
        cin = cout
    x = conv_bn(x, "head", 64, 1, 1)
    x = b.op("GlobalAveragePool", [x], "gap")
    x = b.op("Flatten", [x], "flatten", axis=1)
    w = b.rng.standard_normal((10, 64)) / 8.0
    z = b.vals[x] @ w.T
    w = w / max(z.std(), 1e-3)
    x = b.op("Gemm", [x, b.f32("fc_w", w), b.f32("fc_b", b.rng.uniform(-0.1, 0.1, 10))], "logits", transB=1)
    b.record("logits", x)
    model = b.model([helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 64, 64])],
                    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], 13,
                    "MobileNetV2-like CNN, random calibrated weights (tests/models/gen_models.py)")
    return model, b.stats


VOCAB, D_MODEL, HEADS, FFN, MAX_POS = 100, 32, 4, 64, 64
HEAD_DIM = D_MODEL // HEADS


def transformer_ids(bsz, seq):
    return np.random.default_rng(1000 * bsz + seq).integers(0, VOCAB, (bsz, seq), dtype=np.int64)


def build_transformer():
    """Two post-LN encoder layers (BERT style) over token + positional embeddings. Layer 0 uses
    LayerNormalization, layer 1 its decomposed form; the head split/merge Reshapes take shapes
    computed from Shape(x) as PyTorch exports them."""
    b = Builder("transformer_encoder", 3, {"input_ids": transformer_ids(2, 7)})
    rng = b.rng
    tok = b.op("Gather", [b.f32("tok_emb", rng.standard_normal((VOCAB, D_MODEL))), "input_ids"], "tok_embed", axis=0)
    # Positions 0..S-1: Slice of the table with ends = Unsqueeze(Gather(Shape(input_ids), 1)).
    ids_shape = b.op("Shape", ["input_ids"], "ids_shape")
    one = b.i64("const_1", np.array(1))
    zero = b.i64("const_0", np.array(0))
    axes0 = b.i64("axes_0", [0])
    seq = b.op("Gather", [ids_shape, one], "seq_len", axis=0)
    seq1 = b.op("Unsqueeze", [seq, axes0], "seq_len_1d")
    pos = b.op("Slice", [b.f32("pos_table", rng.standard_normal((MAX_POS, D_MODEL)) * 0.5), b.i64("pos_start", [0]),
                         seq1, axes0], "pos_embed")
    x = b.op("Add", [tok, pos], "embed")
    b.record("embed", x)

    heads = b.i64("const_heads", [HEADS])
    head_dim = b.i64("const_head_dim", [HEAD_DIM])
    minus1 = b.i64("const_minus1", [-1])
    keep_shape = b.i64("const_0_0_d", [0, 0, D_MODEL])
    inv_sqrt2 = b.f32("const_sqrt2", np.array(math.sqrt(2.0)))
    half = b.f32("const_half", np.array(0.5))
    onef = b.f32("const_onef", np.array(1.0))
    two = b.f32("const_two", np.array(2.0))
    eps = b.f32("const_eps", np.array(LN_EPS))
    scale = b.f32("const_sqrt_hd", np.array(math.sqrt(HEAD_DIM)))

    def linear(x, name, nin, nout, gain=1.0):
        w = rng.standard_normal((nin, nout)) * gain / math.sqrt(nin)
        y = b.op("MatMul", [x, b.f32(name + "_w", w)], name + "_mm")
        return b.op("Add", [y, b.f32(name + "_b", rng.uniform(-0.1, 0.1, nout))], name)

    def layer_norm(x, name, decomposed):
        gamma = b.f32(name + "_gamma", rng.uniform(0.8, 1.2, D_MODEL))
        beta = b.f32(name + "_beta", rng.uniform(-0.1, 0.1, D_MODEL))
        if not decomposed:
            return b.op("LayerNormalization", [x, gamma, beta], name, axis=-1, epsilon=LN_EPS)
        m = b.op("ReduceMean", [x], name + "_mean", axes=[-1], keepdims=1)
        d = b.op("Sub", [x, m], name + "_centered")
        v = b.op("ReduceMean", [b.op("Pow", [d, two], name + "_sq")], name + "_var", axes=[-1], keepdims=1)
        s = b.op("Sqrt", [b.op("Add", [v, eps], name + "_var_eps")], name + "_std")
        n = b.op("Div", [d, s], name + "_norm")
        return b.op("Add", [b.op("Mul", [n, gamma], name + "_scaled"), beta], name)

    for li in range(2):
        p = f"layer{li}"
        # [B, S, H, Dh] from Shape(x): Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x), 1)), [H], [Dh])
        xs = b.op("Shape", [x], p + "_shape")
        bdim = b.op("Unsqueeze", [b.op("Gather", [xs, zero], p + "_batch", axis=0), axes0], p + "_batch_1d")
        sdim = b.op("Unsqueeze", [b.op("Gather", [xs, one], p + "_seq", axis=0), axes0], p + "_seq_1d")
        split = b.op("Concat", [bdim, sdim, heads, head_dim], p + "_split_shape", axis=0)

        def heads_of(t, name, perm):
            return b.op("Transpose", [b.op("Reshape", [t, split], name + "_split")], name + "_heads", perm=perm)

        q = heads_of(linear(x, p + "_q", D_MODEL, D_MODEL), p + "_q", [0, 2, 1, 3])   # B,H,S,Dh
        k = heads_of(linear(x, p + "_k", D_MODEL, D_MODEL), p + "_k", [0, 2, 3, 1])   # B,H,Dh,S
        v = heads_of(linear(x, p + "_v", D_MODEL, D_MODEL), p + "_v", [0, 2, 1, 3])   # B,H,S,Dh
        scores = b.op("Div", [b.op("MatMul", [q, k], p + "_qk"), scale], p + "_scores")
        probs = b.op("Softmax", [scores], p + "_probs", axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [probs, v], p + "_ctx_heads")], p + "_ctx_t", perm=[0, 2, 1, 3])
        if li == 0:
            merge = b.op("Concat", [bdim, sdim, minus1], p + "_merge_shape", axis=0)
        else:
            merge = keep_shape
        ctx = b.op("Reshape", [ctx, merge], p + "_ctx")
        attn = linear(ctx, p + "_o", D_MODEL, D_MODEL, gain=0.5)
        x = layer_norm(b.op("Add", [x, attn], p + "_attn_res"), p + "_ln1", decomposed=li == 1)
        b.record(p + " attention", x)
        h = linear(x, p + "_ffn1", D_MODEL, FFN, gain=1.5)
        # GELU as PyTorch exports it: x * 0.5 * (1 + Erf(x / sqrt(2)))
        e = b.op("Erf", [b.op("Div", [h, inv_sqrt2], p + "_gelu_div")], p + "_gelu_erf")
        g = b.op("Mul", [h, b.op("Add", [e, onef], p + "_gelu_add")], p + "_gelu_mul")
        g = b.op("Mul", [g, half], p + "_gelu")
        h = linear(g, p + "_ffn2", FFN, D_MODEL, gain=0.5)
        name = "last_hidden_state" if li == 1 else p + "_out"
        x = layer_norm(b.op("Add", [x, h], p + "_ffn_res"), name, decomposed=li == 1)
        b.record(p, x)
    model = b.model([helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["B", "S"])],
                    [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["B", "S", D_MODEL])], 17,
                    "Two-layer transformer encoder, random weights (tests/models/gen_models.py)")
    return model, b.stats


def fcn_input(n, h, w):
    return np.random.default_rng(100 * h + w).random((2, 3, h, w), dtype=np.float32)[:n].copy()


def build_fcn():
    """Encoder: conv (full res), two stride-2 convs; decoder: Resize x2 (linear) + Concat skip +
    conv, Resize x2 (nearest) + Concat skip + conv, 1x1 conv to one channel, Sigmoid."""
    b = Builder("fcn_segmenter", 4, {"input": fcn_input(2, 48, 64)})
    up = b.f32("up_scales", [1.0, 1.0, 2.0, 2.0])
    roi = b.f32("roi_empty", np.zeros((0,), dtype=np.float32))

    def conv_relu(x, name, cout, k, stride):
        return b.op("Relu", [b.conv(x, name, cout, k, stride, bias=True)], name + "_relu")

    f0 = conv_relu("input", "enc0", 8, 3, 1)           # H
    f1 = conv_relu(f0, "enc1", 16, 3, 2)               # H/2
    f2 = conv_relu(f1, "enc2", 32, 3, 2)               # H/4
    b.record("encoder", f2)
    u1 = b.op("Resize", [f2, roi, up], "up1", mode="linear")                     # H/2
    d1 = conv_relu(b.op("Concat", [u1, f1], "cat1", axis=1), "dec1", 16, 3, 1)
    u2 = b.op("Resize", [d1, "", up], "up2", mode="nearest")                     # H
    d2 = conv_relu(b.op("Concat", [u2, f0], "cat2", axis=1), "dec2", 8, 3, 1)
    b.record("decoder", d2)
    logit = b.conv(d2, "head", 1, 1, 1, bias=True, out_std=2.0)
    y = b.op("Sigmoid", [logit], "mask")
    b.record("mask", y)
    model = b.model([helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                    [helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["N", 1, "H", "W"])], 13,
                    "Fully convolutional segmenter, random calibrated weights (tests/models/gen_models.py)")
    return model, b.stats


def spectrogram_input(n, length):
    return np.random.default_rng(1000 + length).standard_normal((2, length)).astype(np.float32)[:n].copy()


def build_spectrogram():
    """Audio classifier on a log-mel spectrogram: waveform [N,L] -> Unsqueeze [N,L,1] -> STFT (Hann
    window from HannWindow, frame 64, step 16, onesided) [N,F,33,2] with F = floor((L - 64) / 16) + 1
    -> magnitude (ReduceSumSquare over re/im, Sqrt) -> MatMul by MelWeightMatrix (16 bands, 20 Hz to
    8 kHz at 16 kHz) -> Log(x + 0.01) -> [N,1,F,16] -> conv 3x3 (8) + Relu -> GlobalAveragePool ->
    Gemm to 4 logits."""
    b = Builder("spectrogram_frontend", 5, {"waveform": spectrogram_input(2, 1000)})
    signal = b.op("Unsqueeze", ["waveform", b.i64("signal_axes", [2])], "signal")
    frame = b.i64("frame_length", SPECTRO_FRAME)
    window = b.op("HannWindow", [frame], "hann_window")
    stft = b.op("STFT", [signal, b.i64("frame_step", SPECTRO_STEP), window, frame], "stft")
    magnitude = b.op("Sqrt", [b.op("ReduceSumSquare", [stft], "power", axes=[3], keepdims=0)], "magnitude")
    mel_weights = b.op("MelWeightMatrix", [b.i64("num_mel_bins", SPECTRO_MELS), frame,
                                           b.i64("sample_rate", SPECTRO_RATE), b.f32("lower_edge_hertz", 20.0),
                                           b.f32("upper_edge_hertz", 8000.0)], "mel_weights")
    mel = b.op("MatMul", [magnitude, mel_weights], "mel")
    log_mel = b.op("Log", [b.op("Add", [mel, b.f32("log_floor", 0.01)], "mel_floor")], "log_mel")
    b.record("log_mel", log_mel)
    image = b.op("Unsqueeze", [log_mel, b.i64("image_axes", [1])], "log_mel_image")
    h = b.op("Relu", [b.conv(image, "head_conv", 8, 3, 1, bias=True)], "head_relu")
    pooled = b.op("Flatten", [b.op("GlobalAveragePool", [h], "head_pool")], "head_flat", axis=1)
    w = b.rng.standard_normal((4, 8)) / np.sqrt(8)
    y = b.op("Gemm", [pooled, b.f32("fc_w", w), b.f32("fc_b", b.rng.uniform(-0.1, 0.1, 4))], "logits", transB=1)
    b.record("logits", y)
    model = b.model([helper.make_tensor_value_info("waveform", TensorProto.FLOAT, ["N", "L"])],
                    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 4])], 17,
                    "Log-mel spectrogram front end and a small conv head, random calibrated weights "
                    "(tests/models/gen_models.py)")
    return model, b.stats


# ----------------------------------------------------------------------------------------------
# ORT references, checks, caching
# ----------------------------------------------------------------------------------------------



def compare(ort, ref64):
    d = np.abs(ort.astype(np.float64) - ref64)
    bound = CHECK_ATOL + CHECK_RTOL * np.abs(ref64)
    return {"max_abs": float(d.max()), "max_abs_ref": float(np.abs(ref64).max()),
            "rel_l2": float(np.linalg.norm(d) / max(np.linalg.norm(ref64), 1e-300)),
            "within_check": bool((d <= bound).all() and np.isfinite(ort).all())}




def stamp_key(with_ref):
    key = {"gen_models.py": file_sha256(os.path.abspath(__file__)), "refs": with_ref}
    if with_ref:
        for p in (RUN_ORT, ORT_LOCK):
            key[os.path.relpath(p, REPO)] = file_sha256(p) if os.path.exists(p) else None
    return key


def cases():
    """(model stem, sizes label dict, feeds name -> array, input file stem, ref file stem)"""
    for n in MOBILENET_N:
        yield ("mobilenetv2_like", {"N": n}, {"input": mobilenet_input(n)}, f"input_n{n}", f"ref_n{n}")
    for bsz in TRANSFORMER_B:
        for seq in TRANSFORMER_S:
            yield ("transformer_encoder", {"B": bsz, "S": seq}, {"input_ids": transformer_ids(bsz, seq)},
                   f"ids_b{bsz}_s{seq}", f"ref_b{bsz}_s{seq}")
    for n in FCN_N:
        for h in FCN_H:
            for w in FCN_W:
                yield ("fcn_segmenter", {"N": n, "H": h, "W": w}, {"input": fcn_input(n, h, w)},
                       f"input_n{n}_h{h}_w{w}", f"ref_n{n}_h{h}_w{w}")
    for n in SPECTRO_N:
        for length in SPECTRO_L:
            yield ("spectrogram_frontend", {"N": n, "L": length}, {"waveform": spectrogram_input(n, length)},
                   f"waveform_n{n}_l{length}", f"ref_n{n}_l{length}")


def expected_files(with_ref):
    files = ["manifest.json"]
    for stem, _, _, inp, ref in cases():
        files += [f"{stem}.onnx", f"{stem}.{inp}.bin"] + ([f"{stem}.{ref}.bin"] if with_ref else [])
    return sorted(set(files))


def is_cached(out, with_ref):
    try:
        with open(os.path.join(out, STAMP)) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return False
    key = stamp_key(with_ref)
    if stamp != key and not (not with_ref and stamp.get("gen_models.py") == key["gen_models.py"]):
        return False
    return all(os.path.exists(os.path.join(out, f)) for f in expected_files(with_ref))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (files go to OUT/nets)")
    ap.add_argument("--no-ref", action="store_true", help="skip ONNX Runtime references")
    ap.add_argument("--force", action="store_true", help="ignore the cache stamp")
    ap.add_argument("--node", default=os.environ.get("NODE", "node"), help="node executable")
    ap.add_argument("--threads", type=int, default=2, help="ORT intra-op threads")
    args = ap.parse_args()

    out = os.path.join(os.path.abspath(args.out), SUBDIR)
    with_ref = not args.no_ref
    if not args.force and is_cached(out, with_ref):
        log(f"up to date: {out}")
        return 0
    if with_ref:
        require_ort(args.node, "gen_models.py")

    t0 = time.time()
    os.makedirs(out, exist_ok=True)
    if os.path.exists(os.path.join(out, STAMP)):
        os.remove(os.path.join(out, STAMP))
    for f in os.listdir(out):  # never leave stale references next to regenerated models
        if ".ref_" in f and f.endswith(".bin"):
            os.remove(os.path.join(out, f))
    self_test()

    manifest = {"generator": "tests/models/gen_models.py", "generator_version": GEN_VERSION,
                "check": {"atol": CHECK_ATOL, "rtol": CHECK_RTOL}, "models": {}, "references": []}
    models = {}
    for stem, build in (("mobilenetv2_like", build_mobilenet), ("transformer_encoder", build_transformer),
                        ("fcn_segmenter", build_fcn), ("spectrogram_frontend", build_spectrogram)):
        model, stats = build()
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        onnx.checker.check_model(inferred)
        path = os.path.join(out, f"{stem}.onnx")
        onnx.save(model, path)
        models[stem] = model
        ops = sorted({n.op_type for n in model.graph.node})
        nparams = int(sum(numpy_helper.to_array(t).size for t in model.graph.initializer))
        manifest["models"][stem] = {
            "file": f"{stem}.onnx", "opset": model.opset_import[0].version, "nodes": len(model.graph.node),
            "parameters": nparams, "ops": ops, "activation_stats": stats,
            "inputs": [{"name": i.name, "shape": [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]}
                       for i in model.graph.input],
            "outputs": [{"name": o.name, "shape": [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim]}
                        for o in model.graph.output]}
        log(f"{stem}: {len(model.graph.node)} nodes, {nparams} parameters, ops {ops}")
        for s in stats:
            log(f"    {s['at']:22s} std {s['std']:8.4f}  mean {s['mean']:8.4f}  max|x| {s['max_abs']:8.3f}")

    worst = {}
    for stem, sizes, feeds, inp, ref in cases():
        model = models[stem]
        paths = {}
        for name, arr in feeds.items():
            p = os.path.join(out, f"{stem}.{inp}.bin")
            arr.astype(arr.dtype.newbyteorder("<")).tofile(p)
            paths[name] = (arr, p)
        if not with_ref:
            continue
        label = ",".join(f"{k}={v}" for k, v in sizes.items())
        (oname,) = [o.name for o in model.graph.output]
        got = run_ort(args.node, os.path.join(out, f"{stem}.onnx"), paths, args.threads, "gen_models.py")[oname]
        want = forward(model, {k: v for k, (v, _) in paths.items()})[oname]
        if got.shape != want.shape:
            sys.exit(f"gen_models.py: {stem} {label}: ORT output {got.shape}, float64 forward {want.shape}")
        cmp = compare(got, want)
        fname = f"{stem}.{ref}.bin"
        got.astype("<f4").tofile(os.path.join(out, fname))
        manifest["references"].append({"model": stem, "sizes": sizes, "file": fname, "output": oname,
                                       "shape": list(got.shape), "ort_vs_float64": cmp})
        log(f"{fname}: shape {list(got.shape)}, ORT vs float64 max abs {cmp['max_abs']:.2e} "
            f"(max |ref| {cmp['max_abs_ref']:.2f}, rel l2 {cmp['rel_l2']:.1e})")
        if not cmp["within_check"]:
            sys.exit(f"gen_models.py: {stem} {label}: ONNX Runtime and the float64 forward pass disagree "
                     f"(max abs {cmp['max_abs']:.3e} > {CHECK_ATOL}); the reference cannot be trusted")
        worst[stem] = max(worst.get(stem, 0.0), cmp["max_abs"])
    if with_ref:
        ort_pkg = os.path.join(REPO, "tools", "ort", "node_modules", "onnxruntime-node", "package.json")
        with open(ort_pkg) as f:
            manifest["reference_source"] = f"onnxruntime-node {json.load(f)['version']} (CPU EP, optimization all)"
        manifest["worst_ort_vs_float64"] = worst
        log("worst ORT vs float64 max abs: " + ", ".join(f"{k} {v:.2e}" for k, v in worst.items()))

    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, STAMP), "w") as f:
        json.dump(stamp_key(with_ref), f)
    log(f"done in {time.time() - t0:.1f}s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
