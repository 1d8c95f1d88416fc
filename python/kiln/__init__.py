"""kiln for Python: compile ONNX models to kiln modules and run them.

    import kiln
    module = kiln.compile("model.onnx")                 # the module's bytes (or output=PATH)
    session = kiln.Session(module, threads=2)           # or kiln.Session("model.kmod")
    print(session.inputs, session.outputs)              # names, numpy dtypes, shapes ("N" symbolic)
    probs, = session.run([batch])                       # or session.run({"data": batch})

    sess = kiln.InferenceSession("model.onnx")          # ONNX Runtime's API, modules cached
    out = sess.run(None, {"data": batch})

The package wraps kiln's C API (include/kiln/kiln.h, libkiln.so). See docs/python.md.
"""

import os as _os

# libgomp (OpenMP, under kiln's CPU kernels) spins ~11 ms in every wait before it sleeps, which
# makes runs 2-3x slower when other processes share the cores. The `kiln` command sets a short
# spin unless the user chose a wait policy or a binding; do the same here, before libkiln.so (and
# libgomp) load. Has no effect when another library loaded libgomp first.
if not any(v in _os.environ for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND",
                                      "OMP_PLACES", "GOMP_CPU_AFFINITY")):
    _os.environ["GOMP_SPINCOUNT"] = "3000"

from . import _kiln  # noqa: E402
from ._errors import (  # noqa: E402,F401
    DataLossError, FailedPreconditionError, InternalError, InvalidArgumentError, KilnError,
    NotFoundError, OutOfRangeError, StatusCode, UnimplementedError)
from ._compile import compile  # noqa: E402,F401
from ._ort import (  # noqa: E402,F401
    InferenceSession, NodeArg, RunOptions, SessionOptions, get_available_providers, get_device)
from . import testing  # noqa: E402,F401

__version__ = _kiln.version()

Session = _kiln.Session
Session.__doc__ = """Session(module, device="cpu", threads=0, trust_module=False, max_memory_bytes=0)

A compiled kiln module loaded on a device, ready to run at any size its symbols allow.

module: a path to a .kmod file, or the module's bytes (kiln.compile's result).
device: "cpu" (or "null", which computes nothing: for tests). threads: cores per run, 0 for all.
trust_module: skip the module's whole-file checksum (its structure is still verified).
max_memory_bytes: refuse runs needing more activation and output memory (0: 3/4 of RAM).

Attributes: inputs, outputs (lists of ValueInfo: name, dtype (numpy), shape with static dims as
ints and symbolic ones as strings such as "N"), name (the model's), device, threads.

run(inputs): inputs is a list of numpy arrays in the module's input order, or a dict by input
name; each array must be C-contiguous, of the input's dtype, rank and static dims. Returns a list
of numpy arrays, one per output, which share kiln's memory (no copy). The GIL is released while
kiln runs, and one Session may be shared by any number of threads: each call runs on its own run
state, so its outputs equal bit for bit those of the same call made alone. Errors raise
kiln.KilnError subclasses (InvalidArgumentError, a ValueError, for a wrong input) whose message
names the input and what is wrong.
"""


def version():
    """The version of the kiln library in use, e.g. "0.1.0"."""
    return _kiln.version()


def device_names():
    """The devices this kiln can create, e.g. ["cpu", "null"]."""
    return [d.strip() for d in _kiln.device_names().split(",") if d.strip()]


__all__ = [
    "compile", "Session", "InferenceSession", "SessionOptions", "RunOptions", "NodeArg",
    "get_available_providers", "get_device", "KilnError", "InvalidArgumentError", "NotFoundError",
    "OutOfRangeError", "UnimplementedError", "DataLossError", "FailedPreconditionError",
    "InternalError", "StatusCode", "testing", "version", "device_names",
]
