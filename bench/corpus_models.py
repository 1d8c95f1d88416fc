#!/usr/bin/python3
"""Generates the models of kiln's benchmark corpus (bench/corpus_table.py) and their inputs.

    /usr/bin/python3 bench/corpus_models.py --out MODELS [--only NAME]... [--force]

Writes into MODELS/bench/ (`make bench-models`, which `make bench` runs): for each model marked
`generated` in bench/corpus_table.py, `<name>.onnx` and one raw little-endian file per input and
size (`<name>.<input>_n{N}.bin`, `<name>.<input>_b{B}_s{S}.bin`), plus manifest.json (parameters,
nodes, bytes and ops of each model).

- bert_base_op14/op17: tests/models/gen_torch_models.py's BertEncoder at BERT-base size (vocab
  30522, 768 wide, 12 heads, 12 layers, FFN 3072, erf GELU, attention mask input), B and S dynamic;
  opset 14 writes LayerNorm out (ReduceMean, Sub, Pow, ...), opset 17 as LayerNormalization.
- gpt2_small_op14/op17: its GptDecoder at GPT-2-small size (vocab 50257, 768, 12 heads, 12 layers,
  causal mask built from S, tanh GELU, tied LM head), B and S dynamic.
- vit_b_16, mobilenet_v2, efficientnet_b0: torchvision's models, random init (no pretrained
  weights offline), batch dynamic, 224x224, opset 17.
- nhwc_cnn: a tf2onnx-style NHWC CNN (bench/nhwc_cnn.py).
- yolo_s: a YOLOv5s-shaped detector (bench/yolo_s.py), batch dynamic, 640x640, opset 17.

Weights are random at realistic scale, seeded per model: the transformers as Hugging Face
initializes them (normal, std 0.02; biases and LayerNorm parameters perturbed so none is exactly 0
or 1); torchvision's own initialization for the CNNs and ViT (ViT's zero-initialized head is made
normal, std 0.02, so its logits are not all zero), with BatchNorm running statistics calibrated on
a random batch (gen_torch_models.calibrate) so activations stay O(1). Inputs: images standard
normal; token ids uniform over the vocabulary; BERT's attention mask pads sample b at its end
(b * S // 8 positions).

Cached per model: MODELS/bench/.corpus_models.stamp holds, for each model generated, the SHA-256
of this script, bench/nhwc_cnn.py, bench/yolo_s.py and tests/models/gen_torch_models.py, the torch/torchvision/onnx
versions and the model's entry in bench/corpus_table.py (inputs, files, sizes), and the files
written; a model whose key matches and whose files exist is not generated again. The whole corpus
takes 3 GB, and 10 to 25 minutes on 2 cores (the ViT and transformer exports dominate).
"""
import argparse
import hashlib
import importlib.metadata
import json
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
import corpus_table  # noqa: E402

STAMP = ".corpus_models.stamp"
SEEDS = {"bert_base_op14": 301, "bert_base_op17": 301, "gpt2_small_op14": 302, "gpt2_small_op17": 302,
         "vit_b_16": 303, "mobilenet_v2": 304, "efficientnet_b0": 305, "nhwc_cnn": 306,
         "yolo_s": 307}
GENERATED = [m for m in corpus_table.MODELS if m.generated]


def log(msg):
    print(f"[corpus_models] {msg}", flush=True)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def stamp_key(model):
    """What a model's files depend on: the generators, the package versions and the model's entry
    in bench/corpus_table.py (its inputs, files and sizes; not the rest of the table)."""
    key = {os.path.relpath(p, REPO): sha256(p) for p in (
        os.path.abspath(__file__), os.path.join(HERE, "nhwc_cnn.py"), os.path.join(HERE, "yolo_s.py"),
        os.path.join(REPO, "tests", "models", "gen_torch_models.py"))}
    for package in ("torch", "torchvision", "onnx"):
        try:
            key[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            key[package] = None
    key["entry"] = repr((model.path, sorted(model.inputs.items()), sorted(model.files.items()), model.sizes()))
    return key


def model_files(model):
    files = [os.path.basename(model.path)]
    for sizes in model.sizes():
        files += [os.path.basename(model.file(i, sizes)) for i in model.inputs]
    return files


def read_stamp(out):
    try:
        with open(os.path.join(out, STAMP)) as f:
            stamp = json.load(f)
        return stamp if isinstance(stamp, dict) else {}
    except (OSError, ValueError):
        return {}


def up_to_date(out, stamp, model):
    entry = stamp.get(model.name)
    return (isinstance(entry, dict) and entry.get("key") == stamp_key(model)
            and all(os.path.exists(os.path.join(out, f)) for f in entry.get("files", [])))


# ---------------------------------------------------------------------------------------------
# Builders (torch imported only when something is out of date)
# ---------------------------------------------------------------------------------------------

def hf_init(torch, nn, model):
    """Hugging Face's initialization (normal, std 0.02), with nonzero biases and LayerNorm
    parameters near but not at 1 and 0."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
            if getattr(m, "bias", None) is not None:
                nn.init.normal_(m.bias, std=0.02)
        elif isinstance(m, nn.LayerNorm):
            nn.init.uniform_(m.weight, 0.9, 1.1)
            nn.init.normal_(m.bias, std=0.02)


def build_torch(name):
    """(module, example args, input names, output names, dynamic axes, opset) for a torch model."""
    import numpy as np
    import torch
    import torch.nn as nn
    import torchvision
    import gen_torch_models as gtm

    torch.manual_seed(SEEDS[name])
    model = corpus_table.BY_NAME[name]
    if name.startswith("bert_base"):
        net = gtm.BertEncoder(vocab=30522, d=768, heads=12, layers=12, inner=3072, max_len=512)
        hf_init(torch, nn, net)
        args = (torch.randint(0, 30522, (2, 128)), torch.ones(2, 128, dtype=torch.long))
        outputs = {"last_hidden_state": {0: "B", 1: "S"}, "pooler_output": {0: "B"}}
    elif name.startswith("gpt2_small"):
        net = gtm.GptDecoder(vocab=50257, d=768, heads=12, layers=12, max_len=1024)
        hf_init(torch, nn, net)
        args = (torch.randint(0, 50257, (2, 128)),)
        outputs = {"logits": {0: "B", 1: "S"}}
    elif name == "yolo_s":
        import yolo_s
        net = yolo_s.YoloS()
        rng = np.random.default_rng(SEEDS[name])
        gtm.calibrate(net, {"dims": {"N": [4]}, "make": lambda _, s: {
            "input": rng.standard_normal((s["N"], 3, 640, 640)).astype(np.float32)}})
        args = (torch.from_numpy(rng.standard_normal((2, 3, 640, 640)).astype(np.float32)),)
        outputs = {f"p{level}": {0: "N"} for level in (3, 4, 5)}
    else:
        net = {"vit_b_16": torchvision.models.vit_b_16, "mobilenet_v2": torchvision.models.mobilenet_v2,
               "efficientnet_b0": torchvision.models.efficientnet_b0}[name](weights=None)
        if name == "vit_b_16":
            nn.init.normal_(net.heads.head.weight, std=0.02)
            nn.init.normal_(net.heads.head.bias, std=0.02)
        rng = np.random.default_rng(SEEDS[name])
        gtm.calibrate(net, {"dims": {"N": [4]}, "make": lambda _, s: {
            "input": rng.standard_normal((s["N"], 3, 224, 224)).astype(np.float32)}})
        args = (torch.from_numpy(rng.standard_normal((2, 3, 224, 224)).astype(np.float32)),)
        outputs = {"logits": {0: "N"}}
    dynamic = {i: {a: d for a, d in enumerate(dims) if isinstance(d, str)} for i, (_, dims) in model.inputs.items()}
    dynamic.update(outputs)
    opset = 14 if name.endswith("_op14") else 17
    return net.eval(), args, list(model.inputs), list(outputs), dynamic, opset


def export_torch(name, path):
    import torch
    net, args, inputs, outputs, dynamic, opset = build_torch(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Not under no_grad: with gradients off, attention takes its fused fast path (no export).
        torch.onnx.export(net, args, path, input_names=inputs, output_names=outputs, dynamic_axes=dynamic,
                          opset_version=opset, do_constant_folding=True)
    return sum(p.numel() for p in net.parameters())


def write_inputs(out, model):
    import numpy as np
    for sizes in model.sizes():
        seed = int.from_bytes(hashlib.sha256(f"{model.name}:{sorted(sizes.items())}".encode()).digest()[:8], "little")
        rng = np.random.default_rng(seed)
        for iname, (dtype, _) in model.inputs.items():
            shape = model.shape(iname, sizes)
            if iname == "input_ids":
                vocab = 30522 if model.name.startswith("bert") else 50257
                arr = rng.integers(0, vocab, shape).astype("<i8")
            elif iname == "attention_mask":
                arr = np.ones(shape, "<i8")
                for b in range(shape[0]):
                    arr[b, shape[1] - (b * shape[1]) // 8:] = 0
            else:
                arr = rng.standard_normal(shape).astype("<f4")
            arr.tofile(os.path.join(out, os.path.basename(model.file(iname, sizes))))


def generate(out, model):
    import numpy as np
    import onnx
    path = os.path.join(out, os.path.basename(model.path))
    if model.name == "nhwc_cnn":
        import nhwc_cnn
        proto = nhwc_cnn.build(SEEDS[model.name])
        onnx.save(proto, path)
        params = sum(int(np.prod(t.dims)) for t in proto.graph.initializer)
    else:
        params = export_torch(model.name, path)
    proto = onnx.load(path)
    onnx.checker.check_model(path)
    inits = {t.name for t in proto.graph.initializer}
    if any(i.name in inits for i in proto.graph.input):
        sys.exit(f"corpus_models: {path} lists weights in graph.input; ONNX Runtime's best case needs them out")
    write_inputs(out, model)
    return {"file": os.path.basename(path), "doc": model.doc, "parameters": int(params),
            "nodes": len(proto.graph.node), "bytes": os.path.getsize(path),
            "opset": [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")][0],
            "ops": sorted({n.op_type for n in proto.graph.node})}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the model dir (files go to OUT/bench)")
    ap.add_argument("--only", action="append", default=[], help="only this model (repeatable)")
    ap.add_argument("--force", action="store_true", help="ignore the stamp")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    args = ap.parse_args()
    names = {m.name for m in GENERATED}
    for n in args.only:
        if n not in names:
            sys.exit(f"corpus_models: --only {n}: no such generated model (one of {', '.join(sorted(names))})")
    out = os.path.join(os.path.abspath(args.out), corpus_table.SUBDIR)
    os.makedirs(out, exist_ok=True)
    stamp = read_stamp(out)
    todo = [m for m in GENERATED if (not args.only or m.name in args.only)
            and (args.force or not up_to_date(out, stamp, m))]
    if not todo:
        log(f"up to date: {out}")
        return 0
    import torch
    torch.set_num_threads(max(1, args.threads))
    manifest_path = os.path.join(out, "manifest.json")
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        manifest = {}
    for model in todo:
        t0 = time.time()
        stamp.pop(model.name, None)  # an interrupted run leaves this model out of date
        with open(os.path.join(out, STAMP), "w") as f:
            json.dump(stamp, f, indent=1)
        entry = generate(out, model)
        manifest[model.name] = entry
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
        stamp[model.name] = {"key": stamp_key(model), "files": model_files(model)}
        with open(os.path.join(out, STAMP), "w") as f:
            json.dump(stamp, f, indent=1)
        log(f"{model.name}: {entry['parameters'] / 1e6:.1f} M parameters, {entry['nodes']} nodes, "
            f"{entry['bytes'] / 1e6:.0f} MB, opset {entry['opset']}, {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
