"""kiln's benchmark corpus (issue 19, scope 5): which models, where their files are, their inputs,
the sizes timed and checked, and the tolerance of the check against ONNX Runtime.

Read by bench/corpus_models.py (generates the files of the models marked `generated` into
MODELS/bench/) and bench/corpus_run.py (checks and times every model). Plain Python: importing it
never imports torch or numpy.

A model's `dims` maps each symbolic dim to the sizes used; every combination of them is timed
and checked (`kiln test-suite`'s cases are the same combinations). Input files follow `files`:
input name -> a path under the model dir with `{SYMBOL}` replaced by the size, the syntax of
`kiln test-suite` manifests (docs/test-suite.md), so the same strings go into the suite manifest.
"""
import itertools
from dataclasses import dataclass, field

SUBDIR = "bench"

# Tolerance of the check of kiln's outputs against ONNX Runtime's (`kiln test-suite`'s strict
# comparator: |kiln - ORT| <= atol + rtol * |ORT|, NaN/Inf where ORT is finite always fails).
# The suite's default, which tests/suite/kiln_models.json uses for the ResNets, the small nets and
# its small BERT/GPT models; on the full-size models here kiln's largest difference from ORT was
# 1e-5 (ResNet-50) and 8e-6 (BERT-base, GPT-2-small, ViT-B/16) when the corpus was made.
SUITE_TOLERANCE = {"atol": 2e-5, "rtol": 1e-5, "nan": "fail"}


@dataclass
class CorpusModel:
    name: str
    path: str                       # under the model dir
    inputs: dict                    # input name -> (kiln/ORT dtype code, [dims; str = symbol])
    files: dict                     # input name -> file template under the model dir
    dims: dict                      # symbol -> sizes timed and checked
    kind: str                       # "cnn" or "transformer" (the report groups by it)
    flops_dominate: bool            # convs/matmuls dominate: report % of FMA peak
    batch_dim: str = "N"
    generated: bool = True          # by bench/corpus_models.py (else by `make models`)
    ort_strip: bool = False         # weights also in graph.input: ORT's best case strips them
    tolerance: dict = field(default_factory=lambda: dict(SUITE_TOLERANCE))
    doc: str = ""

    def sizes(self):
        """Every combination of the dims' sizes, in order: [{symbol: size}, ...]."""
        names = list(self.dims)
        return [dict(zip(names, v)) for v in itertools.product(*(self.dims[n] for n in names))]

    def shape(self, input_name, sizes):
        return [sizes[d] if isinstance(d, str) else d for d in self.inputs[input_name][1]]

    def file(self, input_name, sizes):
        return self.files[input_name].format(**sizes)


def image(name, layout="nchw", batches=(1, 8), side=224):
    dims = ["N", 3, side, side] if layout == "nchw" else ["N", side, side, 3]
    return {"inputs": {"input": ("f32", dims)},
            "files": {"input": f"{SUBDIR}/{name}.input_n{{N}}.bin"}, "dims": {"N": list(batches)}}


def tokens(name, with_mask):
    inputs = {"input_ids": ("i64", ["B", "S"])}
    if with_mask:
        inputs["attention_mask"] = ("i64", ["B", "S"])
    return {"inputs": inputs, "files": {i: f"{SUBDIR}/{name}.{i}_b{{B}}_s{{S}}.bin" for i in inputs},
            "dims": {"B": [1, 4], "S": [128]}, "batch_dim": "B"}


def _transformers():
    out = []
    for opset in (14, 17):
        name = f"bert_base_op{opset}"
        out.append(CorpusModel(
            name=name, path=f"{SUBDIR}/{name}.onnx", kind="transformer", flops_dominate=True,
            **tokens(name, True),
            doc=f"BERT-base-style encoder (vocab 30522, 768, 12 heads, 12 layers, FFN 3072), opset {opset}"))
        name = f"gpt2_small_op{opset}"
        out.append(CorpusModel(
            name=name, path=f"{SUBDIR}/{name}.onnx", kind="transformer", flops_dominate=True,
            **tokens(name, False),
            doc=f"GPT-2-small-style decoder (vocab 50257, 768, 12 heads, 12 layers, causal, tanh GELU), opset {opset}"))
    return out


MODELS = [
    CorpusModel(name="resnet50-v1-12", path="resnet50-v1-12.onnx", inputs={"data": ("f32", ["N", 3, 224, 224])},
                files={"data": "input_b{N}.bin"}, dims={"N": [1, 8]}, kind="cnn", flops_dominate=True,
                generated=False, ort_strip=True, doc="ResNet-50 v1 replica (tests/models/gen_resnet.py)"),
    CorpusModel(name="resnet50-v2-7", path="resnet50-v2-7.onnx", inputs={"data": ("f32", ["N", 3, 224, 224])},
                files={"data": "input_b{N}.bin"}, dims={"N": [1, 8]}, kind="cnn", flops_dominate=True,
                generated=False, ort_strip=True, doc="ResNet-50 v2 replica (tests/models/gen_resnet.py)"),
    CorpusModel(name="mobilenet_v2", path=f"{SUBDIR}/mobilenet_v2.onnx", kind="cnn", flops_dominate=False,
                **image("mobilenet_v2"), doc="torchvision mobilenet_v2, random init, opset 17"),
    CorpusModel(name="efficientnet_b0", path=f"{SUBDIR}/efficientnet_b0.onnx", kind="cnn", flops_dominate=False,
                **image("efficientnet_b0"), doc="torchvision efficientnet_b0, random init, opset 17"),
    CorpusModel(name="nhwc_cnn", path=f"{SUBDIR}/nhwc_cnn.onnx", kind="cnn", flops_dominate=False,
                **image("nhwc_cnn", "nhwc"), doc="tf2onnx-style NHWC CNN (bench/nhwc_cnn.py), opset 13"),
    # Its 11 3x3 stride-1 convs (SiLU, 7 of them then a residual) run kiln's Winograd F(4x4, 3x3),
    # whose transforms add about 1e-5 of a layer's largest value to its error (kiln triage against
    # the float64 evaluator: 3e-6 to 1.3e-5 per layer, where the direct convs add 5e-7 to 1e-6);
    # its outputs (up to 8 in magnitude) came within 3.8e-4 of ORT's at batch 4 when it joined the
    # corpus: a tolerance of 1e-3 + 1e-4 |ORT|.
    CorpusModel(name="yolo_s", path=f"{SUBDIR}/yolo_s.onnx", kind="cnn", flops_dominate=True,
                **image("yolo_s", batches=(1, 4), side=640),
                tolerance={"atol": 1e-3, "rtol": 1e-4, "nan": "fail"},
                doc="YOLOv5s-shaped detector (bench/yolo_s.py), 640x640, opset 17"),
    CorpusModel(name="vit_b_16", path=f"{SUBDIR}/vit_b_16.onnx", kind="transformer", flops_dominate=True,
                **image("vit_b_16", batches=(1, 4)),
                doc="torchvision vit_b_16, random init, opset 17"),
    *_transformers(),
    # kiln's suite models (tests/models/gen_small.py, gen_models.py), at the sizes they have files for.
    CorpusModel(name="tiny_cnn", path="small/tiny_cnn.onnx", inputs={"data": ("f32", ["N", 3, 8, 8])},
                files={"data": "small/tiny_input_b{N}.bin"}, dims={"N": [1, 3]}, kind="cnn",
                flops_dominate=False, generated=False, doc="suite: tiny CNN"),
    CorpusModel(name="mobilenetv2_like", path="nets/mobilenetv2_like.onnx",
                inputs={"input": ("f32", ["N", 3, 64, 64])}, files={"input": "nets/mobilenetv2_like.input_n{N}.bin"},
                dims={"N": [1, 3]}, kind="cnn", flops_dominate=False, generated=False,
                doc="suite: MobileNetV2-like at 64x64"),
    CorpusModel(name="transformer_encoder", path="nets/transformer_encoder.onnx",
                inputs={"input_ids": ("i64", ["B", "S"])}, files={"input_ids": "nets/transformer_encoder.ids_b{B}_s{S}.bin"},
                dims={"B": [1, 3], "S": [16]}, batch_dim="B", kind="transformer", flops_dominate=False,
                generated=False, doc="suite: 2-layer transformer encoder, d 32"),
    CorpusModel(name="fcn_segmenter", path="nets/fcn_segmenter.onnx", inputs={"input": ("f32", ["N", 3, "H", "W"])},
                files={"input": "nets/fcn_segmenter.input_n{N}_h{H}_w{W}.bin"}, dims={"N": [1, 2], "H": [48], "W": [64]},
                kind="cnn", flops_dominate=False, generated=False, doc="suite: FCN segmenter at 48x64"),
]

BY_NAME = {m.name: m for m in MODELS}
# Timed at their first size only in --quick (the opset-14 forms are timed at every size).
QUICK_ONE_SIZE = {"bert_base_op17", "gpt2_small_op17"}
