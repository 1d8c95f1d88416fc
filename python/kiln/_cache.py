"""The module cache behind kiln.InferenceSession: ONNX models compiled once, kept by content.

A module is stored as <cache dir>/<key>.kmod, where key is the SHA-256 of the model's bytes, the
kiln version and the compile options (target, opset, bound symbols), so a changed model, another
kiln or other options never reuse a stale module. The cache dir is $KILN_CACHE_DIR, else
$XDG_CACHE_HOME/kiln, else ~/.cache/kiln. Files are written atomically (a temporary file in the
cache dir, then a rename): a reader sees a whole module or none, and processes that compile the
same model at once each write a whole file. Deleting the folder (or any file in it) is safe.
"""

import hashlib
import json
import os

from . import _kiln
from ._compile import compile as _compile

# Bumped when the key's recipe changes.
_KEY_VERSION = 1
_CHUNK = 1 << 20


def cache_dir():
    """Where modules are cached: $KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln or ~/.cache/kiln."""
    folder = os.environ.get("KILN_CACHE_DIR")
    if folder:
        return folder
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kiln")


def cache_key(model, bind, target, opset_version):
    """The hex SHA-256 naming the module of `model` (a path or bytes) under these options."""
    header = json.dumps(
        {"key": _KEY_VERSION, "kiln": _kiln.version(), "target": target,
         "opset": int(opset_version), "bind": sorted(bind)},
        sort_keys=True).encode()
    digest = hashlib.sha256()
    digest.update(len(header).to_bytes(8, "little"))
    digest.update(header)
    if isinstance(model, (bytes, bytearray, memoryview)):
        digest.update(model)
    else:
        with open(model, "rb") as f:
            while True:
                chunk = f.read(_CHUNK)
                if not chunk:
                    break
                digest.update(chunk)
    return digest.hexdigest()


def cached_module(model, bind, target="cpu", opset_version=17, refresh=False):
    """The path of model's module in the cache, compiling it first when it is not there.

    model: a path to an ONNX model, or a serialized ModelProto. bind: ["N=3", ...].
    refresh: compile again even when the module is cached (a cached file that failed to load).
    Returns (path, compiled): compiled is True when this call compiled the model.
    """
    folder = cache_dir()
    path = os.path.join(folder, cache_key(model, bind, target, opset_version) + ".kmod")
    if not refresh and os.path.isfile(path):
        return path, False
    os.makedirs(folder, exist_ok=True)
    _compile(model, output=path, bind=bind, opset_version=opset_version, target=target)
    return path, True
