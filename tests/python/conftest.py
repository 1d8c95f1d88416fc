"""Fixtures for the kiln Python package's tests (run by the ctest `python_tests`).

Environment (python/CMakeLists.txt sets it; `make test` adds KILN_MODEL_DIR):
  PYTHONPATH      <build>/python, where the package is built
  KILN_BINARY     the `kiln` command, the reference the tests compare with bit for bit
  KILN_MODEL_DIR  the models of `make models` (else <build>/models)
  KILN_BUILD_DIR, KILN_SOURCE_DIR
Each test gets its own empty module cache ($KILN_CACHE_DIR): nothing is written to ~/.cache.
"""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("KILN_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BUILD_DIR = os.environ.get("KILN_BUILD_DIR") or os.path.join(SOURCE_DIR, "build")

RESNETS = ("resnet50-v1-12", "resnet50-v2-7")


def model_dir():
    folder = os.environ.get("KILN_MODEL_DIR") or os.path.join(BUILD_DIR, "models")
    return folder


def model_path(relative):
    path = os.path.join(model_dir(), relative)
    if not os.path.exists(path):
        pytest.fail(f"missing test model {path}: run `make models` (KILN_MODEL_DIR={model_dir()})")
    return path


def kiln_binary():
    path = os.environ.get("KILN_BINARY") or os.path.join(BUILD_DIR, "tools", "kiln")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no kiln binary at {path}: build the `kiln` target")
    return path


def run_kiln(*args):
    """Runs `kiln ARGS...`; fails the test with kiln's output when it exits non-zero."""
    result = subprocess.run([kiln_binary(), *args], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"kiln {' '.join(args)} exited {result.returncode}:\n"
                    f"{result.stdout}{result.stderr}")
    return result.stdout


def kiln_cli_run(module, inputs, work_dir, tag):
    """`kiln run --module=M --input=SPEC=@file ... --output=@out` -> the outputs as raw bytes.

    inputs: a list of numpy arrays, written to raw files in work_dir. Returns a list of bytes,
    one per output (the module's output count is read from the kiln.Session)."""
    import kiln

    count = len(kiln.Session(module).outputs)
    args = ["run", f"--module={module}"]
    for i, array in enumerate(inputs):
        path = os.path.join(work_dir, f"{tag}_in{i}.bin")
        array.tofile(path)
        shape = "x".join(str(d) for d in array.shape) or "scalar"
        args.append(f"--input={shape}x{DTYPE_CODES[array.dtype.name]}=@{path}")
    out_paths = [os.path.join(work_dir, f"{tag}_out{i}.bin") for i in range(count)]
    args += [f"--output=@{p}" for p in out_paths]
    run_kiln(*args)
    results = []
    for p in out_paths:
        with open(p, "rb") as f:
            results.append(f.read())
    return results


DTYPE_CODES = {
    "float32": "f32", "float64": "f64", "float16": "f16", "int8": "i8", "int16": "i16",
    "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "bool": "bool",
}


def ort_reference(jobs, work_dir):
    """Runs tests/python/ort_reference.js on jobs (see there); returns the per-job folders'
    parsed meta.json and outputs (a list of numpy arrays, or None without inputs)."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (scripts/setup.sh installs it with onnxruntime-node)")
    jobs_path = os.path.join(work_dir, "ort_jobs.json")
    with open(jobs_path, "w") as f:
        json.dump(jobs, f)
    result = subprocess.run([node, os.path.join(HERE, "ort_reference.js"), jobs_path],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"ort_reference.js failed:\n{result.stdout}{result.stderr}")
    answers = []
    for job in jobs:
        folder = job["output_dir"]
        error = os.path.join(folder, "error.txt")
        if os.path.exists(error):
            with open(error) as f:
                pytest.fail(f"onnxruntime on {job['model']}: {f.read()}")
        with open(os.path.join(folder, "meta.json")) as f:
            meta = json.load(f)
        outputs = None
        if job.get("inputs"):
            with open(os.path.join(folder, "outputs.json")) as f:
                described = json.load(f)
            outputs = [np.fromfile(o["file"], dtype=np.dtype(ORT_NUMPY[o["type"]]))
                       .reshape(o["shape"]) for o in described]
        answers.append((meta, outputs))
    return answers


ORT_NUMPY = {
    "float32": "float32", "float64": "float64", "float16": "float16", "int8": "int8",
    "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8", "uint16": "uint16",
    "uint32": "uint32", "uint64": "uint64", "bool": "bool",
}


def ort_job(model, output_dir, inputs=None):
    """An ort_reference job; inputs: {name: numpy array}, written next to the outputs."""
    os.makedirs(output_dir, exist_ok=True)
    job = {"model": model, "output_dir": output_dir}
    if inputs:
        job["inputs"] = []
        for i, (name, array) in enumerate(inputs.items()):
            path = os.path.join(output_dir, f"input{i}.bin")
            np.ascontiguousarray(array).tofile(path)
            job["inputs"].append({"name": name, "shape": list(array.shape),
                                  "type": array.dtype.name, "file": path})
    return job


def read_f32(path, shape):
    return np.fromfile(path, dtype=np.float32, count=int(np.prod(shape))).reshape(shape)


@pytest.fixture(autouse=True)
def _module_cache(tmp_path, monkeypatch):
    """Every test gets an empty module cache of its own."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "kiln-cache"))


@pytest.fixture(scope="session")
def resnet_modules(tmp_path_factory):
    """Each ResNet-50 replica (dynamic batch) compiled once by kiln.compile: {stem: path}."""
    import kiln

    folder = tmp_path_factory.mktemp("resnet_modules")
    modules = {}
    for stem in RESNETS:
        modules[stem] = kiln.compile(model_path(f"{stem}.onnx"),
                                     output=str(folder / f"{stem}.kmod"))
    return modules
