"""kiln.compile: an ONNX model (a path, an onnx.ModelProto or its bytes) to a kiln module."""

import os
import tempfile

from . import _kiln


def bind_strings(bind):
    """{"N": 3} (or ["N=3"]) -> ["N=3"], as `kiln compile --bind` takes them."""
    if bind is None:
        return []
    if isinstance(bind, dict):
        out = []
        for name, value in bind.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"bind: the value of {name!r} must be an int, got {value!r}")
            out.append(f"{name}={value}")
        return out
    if isinstance(bind, str):
        return [bind]
    return [str(b) for b in bind]


def model_bytes(model):
    """The serialized ModelProto of an onnx.ModelProto or of bytes-like data; None for a path."""
    if isinstance(model, (str, os.PathLike)):
        return None
    if hasattr(model, "SerializeToString"):
        return model.SerializeToString()
    if isinstance(model, (bytes, bytearray, memoryview)):
        return model
    raise TypeError("kiln.compile: model must be a path, an onnx.ModelProto or the model's bytes, "
                    f"got {type(model).__name__}")


def write_atomically(path, data):
    """Writes data to path through a temporary file in the same folder and a rename."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".kiln-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def compile(model, output=None, bind=None, opset_version=17, target="cpu"):
    """Compiles an ONNX model into a kiln module, as `kiln compile` does.

    model: a path to a .onnx (or .kir) file, an onnx.ModelProto, or a serialized ModelProto.
    output: where to write the module (atomically); None to return the module's bytes.
    bind: symbols fixed to values, {"N": 3} (as `--bind N=3`): the module then equals, byte for
      byte, the module of the model with that dim written in.
    opset_version: the opset the model is upgraded to before compiling (17).
    target: the device the module is for ("cpu").

    Returns the module's bytes (ready for kiln.Session), or output's path when output is given.
    Raises kiln.KilnError (its message names the node and what is wrong) when the model cannot
    be compiled.
    """
    binds = bind_strings(bind)
    data = model_bytes(model)
    if data is None:
        path = os.fspath(model)
        if output is not None:
            _kiln.compile_file(path, output, binds, target, opset_version)
            return os.fspath(output)
        with tempfile.TemporaryDirectory(prefix="kiln-compile-") as folder:
            module_path = os.path.join(folder, "module.kmod")
            _kiln.compile_file(path, module_path, binds, target, opset_version)
            with open(module_path, "rb") as f:
                return f.read()
    module = _kiln.compile_memory(data, binds, target, opset_version)
    if output is None:
        return module
    write_atomically(output, module)
    return os.fspath(output)
