#!/usr/bin/python3
"""Copies an ONNX model without the initializers that graph.input also lists.

The zoo's MXNet-converted models list every weight as a graph input too, so ONNX Runtime must treat
the weights as overridable inputs: no constant folding or prepacking. Without them in graph.input
the model is ORT's best case. kiln treats both forms alike.

Usage: /usr/bin/python3 bench/strip_initializer_inputs.py IN.onnx OUT.onnx
"""
import sys

import onnx


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    model = onnx.load(sys.argv[1])
    initializers = {t.name for t in model.graph.initializer}
    keep = [i for i in model.graph.input if i.name not in initializers]
    removed = len(model.graph.input) - len(keep)
    del model.graph.input[:]
    model.graph.input.extend(keep)
    onnx.save(model, sys.argv[2])
    print(f"{sys.argv[2]}: {removed} initializer inputs removed, inputs now "
          f"{[i.name for i in keep]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
