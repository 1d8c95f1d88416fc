#!/usr/bin/python3
"""Real dynamic models exported by PyTorch (torch.onnx.export, opset 17) for kiln's model suite:
torchvision segmentation nets, a ResNet + FPN detection backbone, a GPT-style decoder, a
BERT-style encoder, a U-Net, a CRNN-style text recognizer, an LSTM/GRU acoustic model, a spatial
transformer (GridSample), a tiny detector with NMS, a half-precision (f16) ResNet-18 and a
voice-activity detector with LSTMs in nested Ifs (exported scripted, as Silero VAD is), each with
named symbolic dims, plus inputs and ONNX Runtime reference outputs at several sizes.

Run with Debian's python (it sees python3-torch, python3-torchvision, python3-onnx, numpy):

    /usr/bin/python3 tests/models/gen_torch_models.py --out DIR [--no-ref] [--force] [--node NODE]
                                                       [--only NAME]...

Writes into DIR/torch/ (see tests/models/README.md): `<model>.onnx`, one raw little-endian input
file per input and size combination (`<model>.<input>_<sizes>.bin`, e.g.
`unet.input_n2_h31_w37.bin`), ONNX Runtime's output for each (`<model>.ref_<output>_<sizes>.bin`,
f32, or f16 for the f16 model) and manifest.json (shapes, ops, every reference's agreement with PyTorch in float64).

The idioms these exports carry are the ones PyTorch users hit: Resize to a size read from another
tensor's Shape (FCN, DeepLabV3, LRASPP, FPN), pads computed from shape differences (U-Net at odd
sizes), Range from a sequence length and a causal mask built from it (GPT), slices of position
and token-type buffers by the sequence length plus Expand (BERT), Reshape targets assembled from
Shape values (every attention), a variable-width sequence after Squeeze/Transpose (CRNN), LSTM and
GRU nodes whose initial states are zeros expanded to the run-time batch (speech_rnn).

Weights are random, seeded (torch.manual_seed per model); BatchNorm running statistics are
calibrated on a random batch so activations stay O(1). ONNX Runtime's outputs
(tools/ort/run_ort.js) are the references; the script fails unless they agree with the same
model run by PyTorch in float64 within CHECK_ATOL + CHECK_RTOL * max|x| of each output (a model's
own "check" bounds for the f16 model, whose weights and activations are rounded to f16). Cached
by a stamp file (SHA-256 of this script, of the ORT runner and the torch/torchvision versions).
"""

import argparse
import copy
import hashlib
import importlib.metadata
import itertools
import json
import math
import os
import sys
import time
import warnings
from typing import Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_outputs import ORT_LOCK, REPO, RUN_ORT, file_sha256, require_ort, run_ort  # noqa: E402

SUBDIR = "torch"
STAMP = ".gen_torch_models.stamp"
OPSET = 17

# ORT (float32) against PyTorch in float64, per output: fail beyond CHECK_ATOL + CHECK_RTOL * max|ref|.
CHECK_ATOL = 1e-4
CHECK_RTOL = 1e-4


def log(msg):
    print(f"[gen_torch_models] {msg}", flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (files go to OUT/torch)")
    ap.add_argument("--no-ref", action="store_true", help="skip ONNX Runtime references")
    ap.add_argument("--force", action="store_true", help="ignore the cache stamp")
    ap.add_argument("--node", default=os.environ.get("NODE", "node"), help="node executable")
    ap.add_argument("--threads", type=int, default=2, help="ORT intra-op and torch threads")
    ap.add_argument("--only", action="append", default=[], help="only this model (repeatable)")
    return ap.parse_args()




def stamp_key(with_ref, only):
    """What the files depend on. Package versions come from metadata, so that checking the cache
    does not import torch (which takes seconds)."""
    key = {"gen_torch_models.py": file_sha256(os.path.abspath(__file__)), "refs": with_ref, "only": sorted(only)}
    for package in ("torch", "torchvision"):
        try:
            key[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            key[package] = None
    if with_ref:
        for p in (RUN_ORT, ORT_LOCK):
            key[os.path.relpath(p, REPO)] = file_sha256(p) if os.path.exists(p) else None
    return key


def up_to_date(args):
    """The stamp of the last complete run matches, and every file it lists is still there."""
    out = os.path.join(os.path.abspath(args.out), SUBDIR)
    try:
        with open(os.path.join(out, STAMP)) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return False
    return (isinstance(stamp, dict) and stamp.get("key") == stamp_key(not args.no_ref, args.only)
            and all(os.path.exists(os.path.join(out, f)) for f in stamp.get("files", [])))


if __name__ == "__main__":
    _args = parse_args()
    if not _args.force and up_to_date(_args):
        log(f"up to date: {os.path.join(os.path.abspath(_args.out), SUBDIR)}")
        sys.exit(0)

try:
    import onnx
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
    from torchvision.models import resnet as tv_resnet
    from torchvision.models import efficientnet as tv_efficientnet
    from torchvision.models import mobilenetv3 as tv_mobilenetv3
    from torchvision.models import segmentation as tv_seg
    from torchvision.models._utils import IntermediateLayerGetter
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.ops.feature_pyramid_network import LastLevelMaxPool
except ImportError as e:  # pragma: no cover
    sys.exit(f"gen_torch_models.py: cannot import {e.name} ({e}); run it with /usr/bin/python3 after "
             "scripts/setup.sh (Debian packages python3-torch, python3-torchvision, python3-onnx)")

# ----------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------

def narrow_resnet(block, layers, widths, replace_stride_with_dilation=(False, False, False)):
    """torchvision's ResNet (its own BasicBlock/Bottleneck and _make_layer) at reduced widths:
    the stem and the four stages get `widths` channels instead of 64/128/256/512."""
    m = tv_resnet.ResNet(block, [1, 1, 1, 1])
    m.inplanes, m.dilation = widths[0], 1
    m.conv1 = nn.Conv2d(3, widths[0], kernel_size=7, stride=2, padding=3, bias=False)
    m.bn1 = nn.BatchNorm2d(widths[0])
    m.layer1 = m._make_layer(block, widths[0], layers[0])
    m.layer2 = m._make_layer(block, widths[1], layers[1], stride=2, dilate=replace_stride_with_dilation[0])
    m.layer3 = m._make_layer(block, widths[2], layers[2], stride=2, dilate=replace_stride_with_dilation[1])
    m.layer4 = m._make_layer(block, widths[3], layers[3], stride=2, dilate=replace_stride_with_dilation[2])
    m.fc = nn.Linear(widths[3] * block.expansion, 10)
    for mod in m.modules():
        if isinstance(mod, nn.Conv2d):
            nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
    return m


def build_lraspp():
    # torchvision's own builder: LRASPP on a dilated MobileNetV3-Large, 4 classes.
    return tv_seg.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=4)


def build_deeplabv3():
    # torchvision's DeepLabV3 and ASPP on a dilated MobileNetV3-Large at width 0.5, ASPP with 64
    # channels instead of DeepLabHead's 256 (the full-size head alone is 8M parameters).
    backbone = tv_mobilenetv3.mobilenet_v3_large(weights=None, width_mult=0.5, dilated=True).features
    out_pos = len(backbone) - 1
    channels = backbone[out_pos].out_channels
    backbone = IntermediateLayerGetter(backbone, return_layers={str(out_pos): "out"})
    head = nn.Sequential(tv_seg.deeplabv3.ASPP(channels, [12, 24, 36], out_channels=64),
                         nn.Conv2d(64, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.Conv2d(64, 4, 1))
    return tv_seg.DeepLabV3(backbone, head, None)


def build_fcn():
    # torchvision's FCN and FCNHead on a ResNet-50-style backbone (Bottleneck [3,4,6,3], stages 2-3
    # dilated as torchvision's fcn_resnet50) at a quarter of the width.
    body = narrow_resnet(tv_resnet.Bottleneck, [3, 4, 6, 3], [16, 32, 64, 128], (False, True, True))
    backbone = IntermediateLayerGetter(body, return_layers={"layer4": "out"})
    return tv_seg.FCN(backbone, tv_seg.fcn.FCNHead(128 * 4, 4), None)


def build_efficientnet():
    # torchvision's EfficientNet-B0 layout (MBConv: expand conv, depthwise conv, squeeze-excitation,
    # project conv, SiLU after each, stochastic depth off in eval) at width 0.25 and depth 0.34.
    setting, last_channel = tv_efficientnet._efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.34)
    return tv_efficientnet.EfficientNet(setting, 0.2, num_classes=10, last_channel=last_channel)


def build_resnet18_fp16():
    # torchvision's ResNet-18 (BasicBlock [2,2,2,2]) at a quarter of the width, 10 classes; the
    # export is converted to f16 (to_float16).
    return narrow_resnet(tv_resnet.BasicBlock, [2, 2, 2, 2], [16, 32, 64, 128])


def to_float16(model):
    """The exported f32 graph in f16, as converting a model by hand with onnx.numpy_helper does:
    every f32 initializer, Constant and graph input/output becomes f16 (rounded to nearest), Casts
    to f32 cast to f16. The graph's ops (Conv with folded BatchNorm, Relu, MaxPool, Add,
    GlobalAveragePool, Flatten, Gemm) all take f16."""
    from onnx import TensorProto, numpy_helper

    def half(t):
        return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name)

    g = model.graph
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT:
            g.initializer[i].CopyFrom(half(t))
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(half(a.t))
            if node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    onnx.checker.check_model(model)
    return model


class FpnBackbone(nn.Module):
    """torchvision's BackboneWithFPN (FeaturePyramidNetwork + LastLevelMaxPool), as detection models
    use it, on a ResNet-18-style body at a quarter of the width; outputs the five levels."""

    def __init__(self):
        super().__init__()
        body = narrow_resnet(tv_resnet.BasicBlock, [2, 2, 2, 2], [16, 32, 64, 128])
        self.fpn = BackboneWithFPN(body, {"layer1": "0", "layer2": "1", "layer3": "2", "layer4": "3"},
                                   [16, 32, 64, 128], 32, extra_blocks=LastLevelMaxPool())

    def forward(self, x):
        return tuple(self.fpn(x).values())


class SelfAttention(nn.Module):
    """Multi-head attention written as GPT-2/BERT implementations do: view to (B, S, heads, dim)
    from x.size(), transpose, scaled scores plus an additive mask, softmax, back."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.dim = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).split(self.heads * self.dim, dim=2)
        shape = x.size()[:-1] + (self.heads, self.dim)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.dim) + mask
        y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(x.size()))


class GptBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = SelfAttention(d, heads)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        x = x + self.attn(self.ln1(x), mask)
        return x + self.mlp(self.ln2(x))


class GptDecoder(nn.Module):
    """GPT-2-style decoder: token + position embeddings (positions = arange(S)), pre-LN blocks
    with a causal mask built from S (-inf above the diagonal), final LN, tied LM head."""

    def __init__(self, vocab=64, d=32, heads=4, layers=2, max_len=128):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(GptBlock(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, input_ids):
        seq = input_ids.size(1)
        pos = torch.arange(seq, dtype=torch.long, device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)[None]
        mask = torch.full((seq, seq), float("-inf"), device=input_ids.device).triu(1)
        for block in self.blocks:
            x = block(x, mask)
        return self.ln_f(x) @ self.wte.weight.t()


class BertLayer(nn.Module):
    def __init__(self, d, heads, inner):
        super().__init__()
        self.attn = SelfAttention(d, heads)
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.ffn = nn.Sequential(nn.Linear(d, inner), nn.GELU(), nn.Linear(inner, d))

    def forward(self, x, mask):
        x = self.ln1(x + self.attn(x, mask))
        return self.ln2(x + self.ffn(x))


class BertEncoder(nn.Module):
    """BERT-style encoder as Hugging Face writes it: position ids and token type ids are buffers
    sliced to S (the token types then expanded to (B, S)), the attention mask [B,S] of 0/1
    becomes an additive (1 - mask) * finfo.min, post-LN layers, a tanh pooler on token 0."""

    def __init__(self, vocab=100, d=32, heads=4, layers=2, inner=64, max_len=128):
        super().__init__()
        self.word, self.position, self.token_type = nn.Embedding(vocab, d), nn.Embedding(max_len, d), nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.register_buffer("position_ids", torch.arange(max_len).expand((1, -1)))
        self.register_buffer("token_type_ids", torch.zeros((1, max_len), dtype=torch.long))
        self.layers = nn.ModuleList(BertLayer(d, heads, inner) for _ in range(layers))
        self.pool = nn.Linear(d, d)

    def forward(self, input_ids, attention_mask):
        batch, seq = input_ids.size()
        types = self.token_type_ids[:, :seq].expand(batch, seq)
        x = self.word(input_ids) + self.token_type(types) + self.position(self.position_ids[:, :seq])
        x = self.ln(x)
        mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, mask)
        return x, torch.tanh(self.pool(x[:, 0]))


class DoubleConv(nn.Sequential):
    def __init__(self, cin, cout, mid=None):
        mid = mid or cout
        super().__init__(nn.Conv2d(cin, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
                         nn.Conv2d(mid, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class Up(nn.Module):
    """The U-Net up step as github.com/milesial/Pytorch-UNet writes it: bilinear x2 (align_corners),
    pad to the skip's size by the shape difference (odd sizes), concat, double conv."""

    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = DoubleConv(cin, cout, cin // 2)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        dy, dx = x2.size(2) - x1.size(2), x2.size(3) - x1.size(3)
        x1 = F.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([x2, x1], dim=1))


class UNet(nn.Module):
    def __init__(self, cin=3, classes=2, w=(8, 16, 32, 64)):
        super().__init__()
        self.inc = DoubleConv(cin, w[0])
        self.downs = nn.ModuleList(nn.Sequential(nn.MaxPool2d(2), DoubleConv(w[i], w[i + 1] // (2 if i == 2 else 1)))
                                   for i in range(3))
        self.ups = nn.ModuleList([Up(w[3], w[2] // 2), Up(w[2], w[1] // 2), Up(w[1], w[0])])
        self.outc = nn.Conv2d(w[0], classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(skips[-1]))
        x = skips.pop()
        for up in self.ups:
            x = up(x, skips.pop())
        return self.outc(x)


class Crnn(nn.Module):
    """CRNN-style recognizer for text lines [N,1,32,W]: a VGG-like conv stack takes the height to 1
    (pools 2x2, 2x2, 2x1, 2x1), the columns become a sequence of T = floor(W/4) steps. The sequence
    head is a transformer encoder layer (torch.nn.TransformerEncoderLayer; speech_rnn has the LSTM/GRU)
    with sinusoidal positions sliced to T, then per-step class log-probabilities [N,T,37]."""

    def __init__(self, classes=37, d=64, max_len=256):
        super().__init__()
        def conv(cin, cout, bn=False):
            return [nn.Conv2d(cin, cout, 3, padding=1, bias=not bn)] + ([nn.BatchNorm2d(cout)] if bn else []) + [nn.ReLU(True)]
        self.cnn = nn.Sequential(*conv(1, 16), nn.MaxPool2d(2), *conv(16, 32), nn.MaxPool2d(2),
                                 *conv(32, 64, True), *conv(64, 64), nn.MaxPool2d((2, 1)),
                                 *conv(64, d, True), nn.MaxPool2d((2, 1)),
                                 nn.Conv2d(d, d, (2, 1)), nn.BatchNorm2d(d), nn.ReLU(True))
        pos = torch.arange(max_len, dtype=torch.float32)[:, None]
        div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
        pe = torch.zeros(max_len, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe[None])
        self.seq = nn.TransformerEncoderLayer(d, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
        self.fc = nn.Linear(d, classes)

    def forward(self, x):
        f = self.cnn(x).squeeze(2).permute(0, 2, 1)  # [N, T, d]
        f = f + self.pe[:, :f.size(1)]
        return F.log_softmax(self.fc(self.seq(f)), dim=2)


class SpeechRnn(nn.Module):
    """Keyword-spotting-style acoustic model on features [N,T,20] (e.g. log-mel frames): a strided
    Conv1d front end (T -> U = floor((T - 1) / 2) + 1 frames), a bidirectional LSTM, a GRU over its
    outputs, then per-frame class log-probabilities [N,U,12]. Both recurrent layers run with
    batch_first and the exporter's zero initial states expanded to the run-time batch."""

    def __init__(self, features=20, channels=32, hidden=24, classes=12):
        super().__init__()
        self.front = nn.Sequential(nn.Conv1d(features, channels, 3, stride=2, padding=1), nn.ReLU(True))
        self.lstm = nn.LSTM(channels, hidden, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(2 * hidden, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        f = self.front(x.transpose(1, 2)).transpose(1, 2)  # [N, U, channels]
        f, _ = self.lstm(f)
        f, _ = self.gru(f)
        return F.log_softmax(self.fc(f), dim=2)


class VadPath(nn.Module):
    """One path of the voice-activity detector below: a strided Conv1d front end over the raw
    samples, a 2-layer LSTM continuing the caller's state (h, c), the speech probability of the
    last frame. The stride sets how many frames a chunk gives."""

    def __init__(self, stride: int, hidden: int = 32):
        super().__init__()
        self.front = nn.Sequential(nn.Conv1d(1, 16, 32, stride=stride), nn.ReLU(),
                                   nn.Conv1d(16, 32, 3, stride=2, padding=1), nn.ReLU())
        self.lstm = nn.LSTM(32, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x, h, c) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        f = self.front(x.unsqueeze(1)).transpose(1, 2)  # [N, frames, 32]
        f, (h1, c1) = self.lstm(f, (h, c))
        return torch.sigmoid(self.head(f[:, -1])), h1, c1


class SileroStyleVad(nn.Module):
    """Voice-activity detector laid out as the Silero VAD models are exported (TorchScript):
    `If(sr == 16000)` whose branches each hold an `If` on the chunk length (input shape), each of
    the four leaves a conv front end + 2-layer LSTM + head with weights of its own. Inputs: samples
    [N, L], the sample rate as an i64 scalar, LSTM state h and c [2, N, 32]; outputs the speech
    probability [N, 1] and the new state. Exported scripted, so the Ifs stay Ifs (153 nodes per
    leaf: far above kiln's inlining size, so only the taken leaf runs)."""

    def __init__(self):
        super().__init__()
        self.p16_long, self.p16_short = VadPath(16), VadPath(8)
        self.p8_long, self.p8_short = VadPath(8), VadPath(4)

    def forward(self, x, sr, h, c) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if bool(sr == 16000):
            if x.shape[1] >= 384:
                return self.p16_long(x, h, c)
            return self.p16_short(x, h, c)
        if x.shape[1] >= 384:
            return self.p8_long(x, h, c)
        return self.p8_short(x, h, c)


class SileroStyleVadAllPaths(nn.Module):
    """The same detector with every path computed on every call and the result selected by
    torch.where: what running both branches of each If costs (bench/if_taken_branch.py)."""

    def __init__(self, vad: SileroStyleVad):
        super().__init__()
        self.vad = vad

    def forward(self, x, sr, h, c):
        v = self.vad
        outs = [v.p16_long(x, h, c), v.p16_short(x, h, c), v.p8_long(x, h, c), v.p8_short(x, h, c)]
        is16k, is_long = sr == 16000, torch.tensor(x.shape[1]) >= 384
        return tuple(torch.where(is16k, torch.where(is_long, outs[0][k], outs[1][k]),
                                 torch.where(is_long, outs[2][k], outs[3][k])) for k in range(3))


def affine_grid(theta, h, w):
    """F.affine_grid(theta, [N, C, h, w], align_corners=False) written out with arange and a
    matmul, as exported spatial transformers do: torch.onnx has no AffineGrid before opset 20."""
    xs = (torch.arange(w, dtype=theta.dtype) * 2 + 1) / w - 1
    ys = (torch.arange(h, dtype=theta.dtype) * 2 + 1) / h - 1
    gx, gy = xs.view(1, -1).expand(h, w), ys.view(-1, 1).expand(h, w)
    base = torch.stack([gx, gy, torch.ones_like(gx)], dim=-1).reshape(1, -1, 3)  # [1, h*w, 3]
    return torch.matmul(base, theta.transpose(1, 2)).reshape(theta.shape[0], h, w, 2)


class SpatialTransformer(nn.Module):
    """Spatial transformer (Jaderberg et al.): a small localization net regresses an affine
    theta [N,2,3] per image (initialized near the identity), the sampling grid follows from it
    at the input's run-time size, F.grid_sample (bilinear, zeros, align_corners=False) warps the
    input, and a conv head classifies per pixel."""

    def __init__(self):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(True),
                                 nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(True), nn.AdaptiveAvgPool2d(1),
                                 nn.Flatten(), nn.Linear(16, 6))
        with torch.no_grad():
            self.loc[-1].weight.mul_(0.5)
            self.loc[-1].bias.copy_(torch.tensor([0.9, 0.1, 0.05, -0.1, 0.9, -0.05]))
        self.head = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(True), nn.Conv2d(8, 4, 1))

    def forward(self, x):
        theta = self.loc(x).view(-1, 2, 3)
        grid = affine_grid(theta, x.shape[2], x.shape[3])
        return self.head(F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False))


class TinyDetector(nn.Module):
    """A one-anchor detection head on a stride-4 conv body, for one image [1,3,H,W]: per feature
    cell a box (center offset and log-size from the cell's anchor, anchors from arange of the
    run-time feature size) and class scores (sigmoid, best class), then class-aware NMS as
    torchvision's batched_nms writes it when tracing (boxes offset per class, torchvision.ops.nms:
    NonMaxSuppression). Outputs the kept boxes, scores and labels, their count set by the data."""

    def __init__(self, classes=3, stride=4):
        super().__init__()
        self.stride = stride
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(True),
                                  nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.ReLU(True))
        self.box = nn.Conv2d(16, 4, 1)
        self.cls = nn.Conv2d(16, classes, 1)

    def forward(self, x):
        f = self.body(x)
        h, w = f.shape[2], f.shape[3]
        cy = ((torch.arange(h, dtype=x.dtype) + 0.5) * self.stride).view(-1, 1).expand(h, w).reshape(-1)
        cx = ((torch.arange(w, dtype=x.dtype) + 0.5) * self.stride).view(1, -1).expand(h, w).reshape(-1)
        d = self.box(f)[0].reshape(4, -1)
        bw = 4 * self.stride * torch.exp(d[2].clamp(max=2.0))
        bh = 4 * self.stride * torch.exp(d[3].clamp(max=2.0))
        px, py = cx + d[0] * self.stride, cy + d[1] * self.stride
        boxes = torch.stack([px - bw / 2, py - bh / 2, px + bw / 2, py + bh / 2], dim=1)
        logits = self.cls(f)[0].reshape(self.cls.out_channels, -1)
        scores, labels = torch.sigmoid(logits).max(dim=0)
        # torchvision.ops.batched_nms's coordinate trick, written out: batched_nms itself is
        # scripted when tracing and exports an If.
        offsets = labels.to(boxes.dtype) * (boxes.max() + 1)
        keep = torchvision.ops.nms(boxes + offsets[:, None], scores, 0.4)
        return boxes[keep], scores[keep], labels[keep]


# ----------------------------------------------------------------------------------------------
# Inputs, sizes, the model table
# ----------------------------------------------------------------------------------------------

def _rng(name, sizes):
    key = hashlib.sha256(f"{name}:{sorted(sizes.items())}".encode()).digest()
    return np.random.default_rng(int.from_bytes(key[:8], "little"))


def image_input(name, s, channels=3, height=None):
    h = height if height is not None else s["H"]
    return {"input": _rng(name, s).standard_normal((s["N"], channels, h, s["W"])).astype(np.float32)}


def feature_input(name, s, features=20):
    return {"features": _rng(name, s).standard_normal((s["N"], s["T"], features)).astype(np.float32)}


def vad_inputs(name, s):
    """A chunk of samples, the sample rate (s["SR"]: a generator-only size, it picks the branch)
    and an LSTM state carried over from an earlier chunk."""
    rng = _rng(name, s)
    state = lambda: (rng.standard_normal((2, s["N"], 32)) * 0.5).astype(np.float32)
    return {"input": rng.standard_normal((s["N"], s["L"])).astype(np.float32),
            "sr": np.array(s["SR"], dtype=np.int64), "h": state(), "c": state()}


def gpt_inputs(name, s):
    return {"input_ids": _rng(name, s).integers(0, 64, (s["B"], s["S"])).astype(np.int64)}


def bert_inputs(name, s):
    rng = _rng(name, s)
    ids = rng.integers(0, 100, (s["B"], s["S"])).astype(np.int64)
    mask = np.ones((s["B"], s["S"]), dtype=np.int64)
    for b in range(s["B"]):  # sample b is padded at the end: b*S//3 padding positions, never all
        mask[b, s["S"] - (b * s["S"]) // 3:] = 0
    return {"input_ids": ids, "attention_mask": mask}


SEG_DIMS = {"N": [1, 2], "H": [32, 45], "W": [32, 59]}

# name -> builder, seed, inputs (name -> symbolic shape), outputs (name -> {axis: symbol}; the
# exporter names the other dynamic dims), sizes per symbol for `make test`, input maker, doc.
MODELS = {
    "lraspp_mobilenet_v3": dict(
        build=build_lraspp, seed=101, inputs={"input": ["N", 3, "H", "W"]}, outputs={"out": {0: "N", 2: "H", 3: "W"}},
        dims=SEG_DIMS, make=image_input,
        doc="torchvision lraspp_mobilenet_v3_large(num_classes=4), random weights"),
    "deeplabv3_mobilenet_v3": dict(
        build=build_deeplabv3, seed=102, inputs={"input": ["N", 3, "H", "W"]}, outputs={"out": {0: "N", 2: "H", 3: "W"}},
        dims=SEG_DIMS, make=image_input,
        doc="torchvision DeepLabV3 + ASPP(rates 12/24/36, 64 ch) on dilated mobilenet_v3_large(width_mult=0.5), 4 classes"),
    "fcn_resnet": dict(
        build=build_fcn, seed=103, inputs={"input": ["N", 3, "H", "W"]}, outputs={"out": {0: "N", 2: "H", 3: "W"}},
        dims=SEG_DIMS, make=image_input,
        doc="torchvision FCN + FCNHead on a ResNet-50-style dilated backbone (Bottleneck [3,4,6,3]) at 1/4 width, 4 classes"),
    "resnet_fpn": dict(
        build=FpnBackbone, seed=104, inputs={"input": ["N", 3, "H", "W"]},
        outputs={k: {0: "N", 2: f"{k}_h", 3: f"{k}_w"} for k in ("p2", "p3", "p4", "p5", "pool")}, dims={"N": [1, 2], "H": [33, 64], "W": [47, 64]},
        make=image_input,
        doc="torchvision BackboneWithFPN(FeaturePyramidNetwork 32 ch, LastLevelMaxPool) on a ResNet-18-style body at 1/4 width"),
    "gpt_decoder": dict(
        build=GptDecoder, seed=105, inputs={"input_ids": ["B", "S"]}, outputs={"logits": {0: "B", 1: "S"}},
        dims={"B": [1, 2], "S": [1, 5, 16]}, make=gpt_inputs,
        doc="GPT-2-style decoder: vocab 64, d 32, 4 heads, 2 pre-LN blocks, causal mask from S, tanh GELU"),
    "bert_encoder": dict(
        build=BertEncoder, seed=106, inputs={"input_ids": ["B", "S"], "attention_mask": ["B", "S"]},
        outputs={"last_hidden_state": {0: "B", 1: "S"}, "pooler_output": {0: "B"}}, dims={"B": [1, 3], "S": [4, 9, 16]}, make=bert_inputs,
        doc="BERT-style encoder: vocab 100, d 32, 4 heads, 2 post-LN layers, attention mask input, pooler"),
    "unet": dict(
        build=UNet, seed=107, inputs={"input": ["N", 3, "H", "W"]}, outputs={"logits": {0: "N", 2: "H", 3: "W"}},
        dims={"N": [1, 2], "H": [31, 48], "W": [37, 64]}, make=image_input,
        doc="U-Net (milesial/Pytorch-UNet layout) widths 8-64, 3 downs, bilinear x2 + pad-by-difference skips, 2 classes"),
    "crnn": dict(
        build=Crnn, seed=108, inputs={"input": ["N", 1, 32, "W"]}, outputs={"log_probs": {0: "N", 1: "T"}},
        dims={"N": [1, 2], "W": [24, 63, 100]}, make=lambda name, s: image_input(name, s, 1, 32),
        doc="CRNN-style text recognizer: conv stack to height 1, transformer encoder layer over T=floor(W/4), 37 classes"),
    "speech_rnn": dict(
        build=SpeechRnn, seed=109, inputs={"features": ["N", "T", 20]}, outputs={"log_probs": {0: "N", 1: "U"}},
        dims={"N": [1, 2], "T": [9, 40]}, make=feature_input,
        doc="acoustic model: Conv1d(20->32, stride 2) front end, bidirectional LSTM(24), GRU(24), 12 classes per frame"),
    "spatial_transformer": dict(
        build=SpatialTransformer, seed=110, inputs={"input": ["N", 3, "H", "W"]}, outputs={"out": {0: "N", 2: "H", 3: "W"}},
        dims={"N": [1, 2], "H": [16, 23], "W": [16, 30]}, make=image_input,
        doc="spatial transformer: localization net -> affine theta -> grid (arange, matmul) -> GridSample bilinear, conv head"),
    # Outputs of data-dependent length: references as .npy (they carry their shape and dtype).
    "tiny_detector": dict(
        build=TinyDetector, seed=111, inputs={"input": [1, 3, "H", "W"]}, outputs={"boxes": {}, "scores": {}, "labels": {}},
        dims={"H": [32, 45], "W": [40, 64]}, make=lambda name, s: image_input(name, dict(s, N=1)), ref_format="npy",
        doc="one-anchor detection head (stride 4, 3 classes), class-aware NMS via torchvision.ops.nms (NonMaxSuppression)"),
    # Nested Ifs on an input's value and an input's shape around LSTMs. SR is not a dim of the
    # model: it names the input files of each sample rate (the suite lists one entry per rate).
    "silero_style_vad": dict(
        build=SileroStyleVad, seed=113, script=True,
        inputs={"input": ["N", "L"], "sr": [], "h": [2, "N", 32], "c": [2, "N", 32]},
        outputs={"prob": {0: "N"}, "hn": {1: "N"}, "cn": {1: "N"}},
        dims={"N": [1, 2], "L": [256, 512], "SR": [8000, 16000]}, make=vad_inputs,
        doc="Silero-VAD-style detector: If(sr == 16000) > If(chunk length >= 384) > conv front end + 2-layer LSTM"),
    "efficientnet": dict(
        build=build_efficientnet, seed=114, inputs={"input": ["N", 3, "H", "W"]}, outputs={"logits": {0: "N"}},
        dims={"N": [1, 2], "H": [32, 45], "W": [40]}, make=image_input,
        doc="torchvision EfficientNet-B0 layout (MBConv + squeeze-excitation, SiLU) at width 0.25, depth 0.34, 10 classes"),
    # f16 throughout: input, weights, activations and output (ORT computes its f16 Conv in f32 on
    # CPUs without f16 arithmetic, rounding each node's output). The float64 check compares with
    # the f32 model on the same (f16) input, so it bounds the effect of f16 storage: about 1e-2.
    "resnet18_fp16": dict(
        build=build_resnet18_fp16, seed=112, inputs={"input": ["N", 3, "H", "W"]}, outputs={"logits": {0: "N"}},
        dims={"N": [1, 2], "H": [64], "W": [64]}, make=image_input, half=True, check=(3e-2, 3e-2),
        doc="torchvision ResNet-18 (BasicBlock [2,2,2,2]) at 1/4 width, 10 classes, converted to f16"),
}


def size_combinations(dims):
    names = list(dims)
    for values in itertools.product(*(dims[n] for n in names)):
        yield dict(zip(names, values))


def size_suffix(sizes):
    return "_".join(f"{k.lower()}{v}" for k, v in sizes.items())


def unique_ops(model):
    return sorted({n.op_type for n in model.graph.node})


# ----------------------------------------------------------------------------------------------
# Building, exporting, references
# ----------------------------------------------------------------------------------------------

def calibrate(model, spec):
    """Random BN affine parameters, running statistics of a random batch (cumulative average)."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
        with torch.no_grad():
            m.weight.uniform_(0.8, 1.2)
            m.bias.uniform_(-0.1, 0.1)
    sizes = {k: max(v) for k, v in spec["dims"].items()}
    sizes["N"] = 4
    feeds = spec["make"]("calibration", sizes)
    model.train()
    with torch.no_grad():
        model(*[torch.from_numpy(v) for v in feeds.values()])
    model.eval()


def build(name, spec):
    torch.manual_seed(spec["seed"])
    model = spec["build"]()
    for m in model.modules():  # transformers: weights larger than the default so attention is not uniform
        if isinstance(m, (nn.Linear, nn.Embedding)) and name in ("gpt_decoder", "bert_encoder", "crnn"):
            nn.init.normal_(m.weight, std=0.2)
            if getattr(m, "bias", None) is not None:
                nn.init.normal_(m.bias, std=0.05)
    calibrate(model, spec)
    return model.eval()


def export(name, spec, model, path):
    sizes = {k: v[-1] for k, v in spec["dims"].items()}
    feeds = spec["make"](name, sizes)
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    dynamic_axes = {k: {i: d for i, d in enumerate(shape) if isinstance(d, str)} for k, shape in spec["inputs"].items()}
    # Not under no_grad: with gradients off, TransformerEncoderLayer takes its fused fast path,
    # which has no ONNX export.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for oname, axes in spec["outputs"].items():  # other output dims: named by the exporter
            dynamic_axes[oname] = axes
        exported = torch.jit.script(model) if spec.get("script") else model  # scripted: Ifs stay Ifs
        torch.onnx.export(exported, args, path, input_names=list(spec["inputs"]), output_names=list(spec["outputs"]),
                          dynamic_axes=dynamic_axes, opset_version=OPSET, do_constant_folding=True)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    if spec.get("half"):
        m = to_float16(m)
        onnx.save(m, path)
    return m


def torch_forward64(model, feeds):
    m64 = copy.deepcopy(model).double()
    args = [torch.from_numpy(v.astype(np.float64) if v.dtype in (np.float32, np.float16) else v)
            for v in feeds.values()]
    with torch.no_grad():
        outs = m64(*args)
    outs = [outs["out"]] if isinstance(outs, dict) else list(outs) if isinstance(outs, tuple) else [outs]
    return [o.numpy() for o in outs]




def compare(ort, ref64, check=(CHECK_ATOL, CHECK_RTOL)):
    d = np.abs(ort.astype(np.float64) - ref64)
    scale = float(np.abs(ref64).max()) if ref64.size else 0.0
    bound = check[0] + check[1] * scale
    return {"max_abs": float(d.max()) if d.size else 0.0, "max_abs_ref": scale,
            "within_check": bool((d <= bound).all() and np.isfinite(ort).all())}


def ref_file(name, spec, output, sfx):
    """Raw f32 by default; .npy (shape and dtype inside) for outputs of data-dependent length."""
    return f"{name}.ref_{output}_{sfx}.{spec.get('ref_format', 'bin')}"


def expected_files(names, with_ref):
    files = ["manifest.json"]
    for name in names:
        spec = MODELS[name]
        files.append(f"{name}.onnx")
        for sizes in size_combinations(spec["dims"]):
            sfx = size_suffix(sizes)
            files += [f"{name}.{i}_{sfx}.bin" for i in spec["inputs"]]
            if with_ref:
                files += [ref_file(name, spec, o, sfx) for o in spec["outputs"]]
    return files


def main():
    args = parse_args()
    unknown = sorted(set(args.only) - set(MODELS))
    if unknown:
        sys.exit(f"gen_torch_models.py: --only {unknown[0]}: no such model (one of {', '.join(MODELS)})")

    out = os.path.join(os.path.abspath(args.out), SUBDIR)
    with_ref = not args.no_ref
    names = args.only or list(MODELS)
    stamp_path = os.path.join(out, STAMP)
    if with_ref:
        require_ort(args.node, "gen_torch_models.py")

    t0 = time.time()
    torch.set_num_threads(max(1, args.threads))
    os.makedirs(out, exist_ok=True)
    if os.path.exists(stamp_path):
        os.remove(stamp_path)
    for f in os.listdir(out):  # never leave stale references next to regenerated models
        if ".ref_" in f and f.endswith((".bin", ".npy")):
            os.remove(os.path.join(out, f))

    manifest = {"generator": "tests/models/gen_torch_models.py", "opset": OPSET,
                "torch": torch.__version__, "torchvision": torchvision.__version__,
                "check": {"atol": CHECK_ATOL, "rtol_of_max": CHECK_RTOL}, "models": {}, "references": []}
    for name in names:
        spec = MODELS[name]
        t_model = time.time()
        model = build(name, spec)
        path = os.path.join(out, f"{name}.onnx")
        onnx_model = export(name, spec, model, path)
        nparams = sum(p.numel() for p in model.parameters())
        shapes = lambda vs: {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in vs}
        entry = {"file": f"{name}.onnx", "doc": spec["doc"], "parameters": int(nparams),
                 "nodes": len(onnx_model.graph.node), "bytes": os.path.getsize(path), "ops": unique_ops(onnx_model),
                 "inputs": shapes(onnx_model.graph.input), "outputs": shapes(onnx_model.graph.output),
                 "dims": spec["dims"], "worst_ort_vs_float64": 0.0}
        manifest["models"][name] = entry
        log(f"{name}: {nparams} parameters, {len(onnx_model.graph.node)} nodes, {entry['bytes'] / 1e6:.1f} MB; "
            f"ops {' '.join(entry['ops'])}")
        for sizes in size_combinations(spec["dims"]):
            sfx = size_suffix(sizes)
            feeds = spec["make"](name, sizes)
            if spec.get("half"):
                feeds = {k: v.astype(np.float16) for k, v in feeds.items()}
            paths = {}
            for iname, arr in feeds.items():
                p = os.path.join(out, f"{name}.{iname}_{sfx}.bin")
                arr.astype(arr.dtype.newbyteorder("<")).tofile(p)
                paths[iname] = (arr, p)
            if not with_ref:
                continue
            # f16 references stay f16; otherwise ORT's own output types (int64 labels, f32).
            out_dtype = "<f2" if spec.get("half") else None
            got = run_ort(args.node, path, paths, args.threads, "gen_torch_models.py", out_dtype)
            want = torch_forward64(model, feeds)
            for oname, w in zip(spec["outputs"], want):
                g = got[oname]
                if list(g.shape) != list(w.shape):
                    sys.exit(f"gen_torch_models.py: {name} {sfx}: ORT output '{oname}' {g.shape}, PyTorch {w.shape}")
                cmp = compare(g, w, spec.get("check", (CHECK_ATOL, CHECK_RTOL)))
                fname = ref_file(name, spec, oname, sfx)
                if fname.endswith(".npy"):
                    np.save(os.path.join(out, fname), g.astype(g.dtype.newbyteorder("<")))
                else:
                    g.astype(out_dtype or "<f4").tofile(os.path.join(out, fname))
                manifest["references"].append({"model": name, "sizes": sizes, "output": oname, "file": fname,
                                               "shape": list(g.shape), "ort_vs_float64": cmp})
                entry["worst_ort_vs_float64"] = max(entry["worst_ort_vs_float64"], cmp["max_abs"])
                if not cmp["within_check"]:
                    sys.exit(f"gen_torch_models.py: {name} {sfx} '{oname}': ONNX Runtime and PyTorch (float64) "
                             f"disagree (max abs {cmp['max_abs']:.3e}, max |x| {cmp['max_abs_ref']:.3g}); "
                             "the reference cannot be trusted")
        log(f"    {len(list(size_combinations(spec['dims'])))} sizes, ORT vs PyTorch float64 max abs "
            f"{entry['worst_ort_vs_float64']:.2e}, {time.time() - t_model:.1f} s")

    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    with open(stamp_path, "w") as f:
        json.dump({"key": stamp_key(with_ref, args.only), "files": expected_files(names, with_ref)}, f)
    log(f"done in {time.time() - t0:.1f}s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
