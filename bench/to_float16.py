#!/usr/bin/python3
"""Copies a float32 ONNX model as float16: every f32 initializer (rounded to nearest), and the
graph's f32 inputs and outputs, become f16, as converting a model by hand with
onnx.numpy_helper does (onnxconverter-common is not installed). For ops that take every float
operand in one type (Conv, BatchNormalization, Relu, Add, MaxPool, GlobalAveragePool, Flatten,
Gemm: the ResNet-50 replicas); initializers listed in graph.input are dropped from it.
bench/vs_onnxruntime.py --part fp16 times the result against the f32 model.

Usage: /usr/bin/python3 bench/to_float16.py IN.onnx OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    model = onnx.load(sys.argv[1])
    g = model.graph
    inits = []
    for t in g.initializer:
        a = numpy_helper.to_array(t)
        inits.append(numpy_helper.from_array(a.astype(np.float16), t.name) if a.dtype == np.float32 else t)
    del g.initializer[:]
    g.initializer.extend(inits)
    names = {t.name for t in inits}
    keep = [i for i in g.input if i.name not in names]
    del g.input[:]
    g.input.extend(keep)
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    del g.value_info[:]
    onnx.save(model, sys.argv[2])
    print(f"{sys.argv[2]}: {len(inits)} initializers, inputs and outputs in f16", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
