"""Shared by the fixture generators: ONNX Runtime outputs through tools/ort/run_ort.js, and file
hashes for their caches. numpy only, so a generator can import it before torch or onnx."""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RUN_ORT = os.path.join(REPO, "tools", "ort", "run_ort.js")
ORT_LOCK = os.path.join(REPO, "tools", "ort", "package-lock.json")
DTYPE_CODE = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.int64): "i64"}


def require_ort(node, who):
    """Ends the process, naming `who`, unless onnxruntime-node and the `node` executable exist."""
    if not os.path.exists(os.path.join(REPO, "tools", "ort", "node_modules", "onnxruntime-node")):
        sys.exit(f"{who}: onnxruntime-node is not installed; run "
                 "`cd tools/ort && ONNXRUNTIME_NODE_INSTALL=skip npm install` or pass --no-ref")
    if shutil.which(node) is None and not os.path.exists(node):
        sys.exit(f"{who}: node executable '{node}' not found; pass --node or --no-ref")


def run_ort(node, model_path, feeds, threads, who, output_dtype=None):
    """feeds: name -> (array, file path). Returns output name -> array for every model output, in
    `output_dtype` when given, else in ORT's type of that output (int64, float16; float32
    otherwise). `who` names the calling generator in the error that ends the process."""
    with tempfile.TemporaryDirectory(prefix=f"{who}_ort_") as td:
        cmd = [node, RUN_ORT, "run", model_path, "--output-dir", td, "--threads", str(threads)]
        for name, (arr, path) in feeds.items():
            cmd += ["--input", f"{name}={'x'.join(map(str, arr.shape))}:{DTYPE_CODE[arr.dtype]}:{path}"]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(f"{who}: ORT failed ({' '.join(cmd)}):\n{r.stdout}{r.stderr}")
        # run_ort.js names each output's ORT type on stderr: "run_ort: NAME TYPE [DIMS] -> FILE.bin".
        types = {}
        for line in r.stderr.splitlines():
            parts = line.split()
            if len(parts) >= 6 and parts[0] == "run_ort:" and parts[-1].endswith(".bin"):
                types[os.path.basename(parts[-1])[:-4]] = parts[2]
        out = {}
        for f in os.listdir(td):
            if f.endswith(".bin"):
                stem = f[:-4]
                with open(os.path.join(td, stem + ".shape")) as fh:
                    text = fh.read().strip()
                shape = [] if text == "scalar" else [int(d) for d in text.split("x")]
                dtype = output_dtype or {"int64": "<i8", "float16": "<f2"}.get(types.get(stem), "<f4")
                out[stem] = np.fromfile(os.path.join(td, f), dtype=dtype).reshape(shape)
        return out


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()
