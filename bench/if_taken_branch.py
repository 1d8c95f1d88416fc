#!/usr/bin/python3
"""What running only the taken branch of an If saves, on a model laid out as Silero VAD is.

The model suite's silero_style_vad (tests/models/gen_torch_models.py) is an If on the sample
rate holding an If on the chunk length, each of the four leaves a conv front end and a 2-layer
LSTM; kiln keeps both Ifs as If dispatches (each far above the inlining size) and runs only the
branch each condition takes. Its twin here, built from the same weights, computes all four leaves
on every call and selects with Where: what an engine that evaluates both branches of every If
pays. For each sample rate and chunk length, one `kiln bench --against` process alternates the
two modules on the same inputs (A B B A ...) and reports both medians and their ratio; the
table also gives each module's dispatch count at the top level (the If model's leaves are
bodies of its If dispatches, run one per call).

Usage: /usr/bin/python3 bench/if_taken_branch.py --kiln build/tools/kiln [--batch 1]
       [--repeat 200] [--threads 2] [--work DIR]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import gen_torch_models as gen  # noqa: E402  (imports torch)

NAME = "silero_style_vad"


def export_both(work):
    """The If model as the suite has it, and the all-leaves twin with the same weights."""
    spec = gen.MODELS[NAME]
    model = gen.build(NAME, spec)
    paths = {"taken": os.path.join(work, "vad_if.onnx"), "all": os.path.join(work, "vad_all.onnx")}
    gen.export(NAME, spec, model, paths["taken"])
    sizes = {k: v[-1] for k, v in spec["dims"].items()}
    args = tuple(gen.torch.from_numpy(v) for v in spec["make"](NAME, sizes).values())
    axes = {"input": {0: "N", 1: "L"}, "h": {1: "N"}, "c": {1: "N"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gen.torch.onnx.export(gen.SileroStyleVadAllPaths(model), args, paths["all"],
                              input_names=list(spec["inputs"]), output_names=list(spec["outputs"]),
                              dynamic_axes=axes, opset_version=gen.OPSET)
    return paths


def compile_module(kiln, onnx_path):
    kmod = onnx_path.replace(".onnx", ".kmod")
    out = subprocess.run([kiln, "compile", onnx_path, "--target=cpu", "-o", kmod],
                         capture_output=True, text=True, check=True).stdout
    dispatches = int(re.search(r"(\d+) dispatches", out).group(1))
    return kmod, dispatches


def write_inputs(work, batch, length, rate):
    feeds = gen.vad_inputs(NAME, {"N": batch, "L": length, "SR": rate})
    flags = []
    for name, arr in feeds.items():
        path = os.path.join(work, f"{name}_{batch}_{length}_{rate}.bin")
        arr.astype(arr.dtype.newbyteorder("<")).tofile(path)
        dims = "x".join(str(d) for d in arr.shape)
        dtype = {np.float32: "f32", np.int64: "i64"}[arr.dtype.type]
        flags.append(f"--input={dims + 'x' if dims else ''}{dtype}=@{path}")
    return flags


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "tools", "kiln"))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", help="folder for the models and modules (default: a temporary one)")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="kiln-if-bench-")
    os.makedirs(work, exist_ok=True)
    paths = export_both(work)
    modules = {k: compile_module(args.kiln, p) for k, p in paths.items()}
    print(f"top-level dispatches: taken-branch model {modules['taken'][1]}, "
          f"all-leaves model {modules['all'][1]}; N={args.batch}, {args.threads} threads, "
          f"{args.repeat} runs each, alternating")
    print("| sample rate | L | leaf taken | taken only (ms) | all leaves (ms) | taken/all |")
    print("| --- | --- | --- | --- | --- | --- |")
    for rate in (16000, 8000):
        for length in (512, 256):
            flags = write_inputs(work, args.batch, length, rate)
            out = subprocess.run(
                [args.kiln, "bench", f"--module={modules['taken'][0]}",
                 f"--against={modules['all'][0]}", "--device=cpu", f"--threads={args.threads}",
                 f"--repeat={args.repeat}", *flags],
                capture_output=True, text=True, check=True).stdout
            taken = float(re.search(r"median ([\d.]+) ms", out).group(1))
            m = re.search(r"against .*: median ([\d.]+) ms; .*?([\d.]+) \(median of", out)
            leaf = f"{rate // 1000}k {'long' if length >= 384 else 'short'}"
            print(f"| {rate} | {length} | {leaf} | {taken:.3f} | {float(m.group(1)):.3f} | "
                  f"{float(m.group(2)):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
