"""examples/python/classify.py on a generated image: the top 5 of the module's softmax."""

import importlib.util
import os
import subprocess
import sys

import numpy as np
from PIL import Image

import kiln
from conftest import RESNETS, SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "examples", "python", "classify.py")


def load_example():
    spec = importlib.util.spec_from_file_location("classify", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_classify_prints_the_top_5(resnet_modules, tmp_path):
    rng = np.random.default_rng(5)
    image_path = tmp_path / "picture.png"
    Image.fromarray(rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)).save(image_path)
    labels_path = tmp_path / "labels.txt"
    labels_path.write_text("".join(f"class {i}\n" for i in range(1000)))
    module = resnet_modules[RESNETS[0]]

    result = subprocess.run(
        [sys.executable, SCRIPT, str(image_path), "--module", module, "--labels",
         str(labels_path)],
        capture_output=True, text=True, env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 5, result.stdout
    printed = []
    for rank, line in enumerate(lines, 1):
        fields = line.split()
        assert fields[0] == str(rank) and fields[3:] == ["class", fields[1]], line
        printed.append((int(fields[1]), float(fields[2])))

    # The same top 5 from the example's own steps, run here.
    example = load_example()
    batch = example.preprocess(image_path)
    assert batch.shape == (1, 3, 224, 224) and batch.dtype == np.float32
    (logits,) = kiln.Session(module).run([batch])
    probabilities = example.softmax(logits)[0]
    assert abs(probabilities.sum() - 1) < 1e-9
    expected = example.top_k(probabilities, 5)
    assert [i for i, _ in printed] == [i for i, _ in expected]
    for (_, p), (_, q) in zip(printed, expected):
        assert abs(p - q) <= 5e-7
    assert all(p >= q for (_, p), (_, q) in zip(printed, printed[1:]))


def test_classify_reports_a_missing_image(resnet_modules, tmp_path):
    result = subprocess.run(
        [sys.executable, SCRIPT, str(tmp_path / "missing.png"), "--module",
         resnet_modules[RESNETS[0]]], capture_output=True, text=True)
    assert result.returncode == 2 and "missing.png" in result.stderr
