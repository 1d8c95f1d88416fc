#!/usr/bin/python3
"""Classify an image with a ResNet-50 kiln module (or ONNX model): the top-5 classes.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/classify.py IMAGE \\
        (--module resnet50.kmod | --model resnet50-v1-12.onnx) [--labels labels.txt] [--top 5]

The image is resized (shorter side 256), center-cropped to 224x224, scaled to [0, 1], normalized
with ImageNet's mean and standard deviation and laid out NCHW; the module's output goes through
a softmax. Prints one line per class: rank, class index, probability and, with --labels (one
label per line, line i for class i), its label. kiln's test ResNet-50 replicas
(tests/models/gen_resnet.py) have random weights, so their classes mean nothing: use them to see
the pipeline work, and a trained model for real labels.
"""

import argparse
import sys

import numpy as np
from PIL import Image

import kiln

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
SIZE = 224


def preprocess(path, size=SIZE):
    """The image at path as a [1, 3, size, size] float32 array, normalized as ImageNet models
    expect."""
    image = Image.open(path).convert("RGB")
    scale = 256 / min(image.size)
    image = image.resize((max(size, round(image.width * scale)),
                          max(size, round(image.height * scale))), Image.BILINEAR)
    left, top = (image.width - size) // 2, (image.height - size) // 2
    image = image.crop((left, top, left + size, top + size))
    pixels = np.asarray(image, np.float32) / 255.0  # [H, W, 3]
    pixels = (pixels - MEAN) / STD
    return np.ascontiguousarray(pixels.transpose(2, 0, 1)[np.newaxis])  # [1, 3, H, W]


def softmax(logits):
    shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


def top_k(probabilities, k):
    """(index, probability) of the k most likely classes, most likely first."""
    order = np.argsort(-probabilities, kind="stable")[:k]
    return [(int(i), float(probabilities[i])) for i in order]


def load_session(args):
    if args.module:
        return kiln.Session(args.module, threads=args.threads)
    return kiln.Session(kiln.compile(args.model), threads=args.threads)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("image", help="an image file PIL can read (JPEG, PNG, ...)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--module", help="a compiled ResNet-50 module (.kmod)")
    source.add_argument("--model", help="a ResNet-50 ONNX model, compiled on the fly")
    parser.add_argument("--labels", help="a text file with one class label per line")
    parser.add_argument("--top", type=int, default=5, help="how many classes to print (5)")
    parser.add_argument("--threads", type=int, default=0, help="cores per run (0: all)")
    args = parser.parse_args(argv)

    labels = None
    if args.labels:
        with open(args.labels, encoding="utf-8") as f:
            labels = [line.strip() for line in f]
    try:
        batch = preprocess(args.image)
        session = load_session(args)
        (logits,) = session.run([batch])
    except (kiln.KilnError, OSError) as e:
        print(f"classify: {e}", file=sys.stderr)
        return 2
    probabilities = softmax(logits.reshape(logits.shape[0], -1))[0]
    for rank, (index, p) in enumerate(top_k(probabilities, args.top), 1):
        label = ""
        if labels is not None:
            label = "  " + (labels[index] if index < len(labels) else "?")
        print(f"{rank}  {index:5d}  {p:.6f}{label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
