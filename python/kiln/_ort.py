"""ONNX Runtime's Python API over kiln: `import kiln as onnxruntime` runs a program unchanged.

kiln.InferenceSession(path_or_bytes, sess_options=None, providers=None) compiles the ONNX model
on first load into the module cache (kiln/_cache.py) and loads the cached module afterwards:
a second load of the same model compiles nothing. get_inputs()/get_outputs() give NodeArgs as
onnxruntime does (name, type "tensor(float)", shape with symbolic dims as strings), and
run(output_names, input_feed) returns a list of numpy arrays in output_names' order.
"""

import os
import warnings

import numpy as np

from . import _kiln
from ._cache import cached_module
from ._compile import bind_strings
from ._errors import InvalidArgumentError, KilnError

_PROVIDER = "CPUExecutionProvider"
_MODULE_MAGIC = b"KILNMOD\0"

# kiln dtype name -> ONNX Runtime's type string.
_ORT_TYPES = {
    "f32": "tensor(float)", "f64": "tensor(double)", "f16": "tensor(float16)",
    "bf16": "tensor(bfloat16)", "i8": "tensor(int8)", "i16": "tensor(int16)",
    "i32": "tensor(int32)", "i64": "tensor(int64)", "u8": "tensor(uint8)",
    "u16": "tensor(uint16)", "u32": "tensor(uint32)", "u64": "tensor(uint64)",
    "bool": "tensor(bool)",
}


def get_available_providers():
    """The execution providers kiln offers: its CPU device, under ONNX Runtime's name."""
    return [_PROVIDER]


def get_device():
    return "CPU"


class SessionOptions:
    """ONNX Runtime's SessionOptions. kiln uses intra_op_num_threads (cores per run, 0: all) and
    add_free_dimension_override_by_name (a symbol fixed at compile time, as `kiln compile
    --bind`); the other attributes are accepted and have no effect."""

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = None
        self.execution_mode = None
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.enable_profiling = False
        self.optimized_model_filepath = ""
        self.use_deterministic_compute = False
        self._free_dimensions = {}

    def add_free_dimension_override_by_name(self, dim_name, dim_value):
        self._free_dimensions[str(dim_name)] = int(dim_value)

    def add_session_config_entry(self, key, value):
        pass

    def get_session_config_entry(self, key):
        return ""


class RunOptions:
    """ONNX Runtime's RunOptions: accepted, no effect."""

    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.run_tag = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False


class NodeArg:
    """A model input or output as ONNX Runtime describes it."""

    __slots__ = ("name", "type", "shape")

    def __init__(self, name, type, shape):
        self.name = name
        self.type = type
        self.shape = shape

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


def _node_arg(info):
    return NodeArg(info.name, _ORT_TYPES.get(info.dtype_name, f"tensor({info.dtype_name})"),
                   list(info.shape))


def _check_providers(providers):
    if providers is None:
        return
    for provider in providers:
        name = provider[0] if isinstance(provider, (tuple, list)) else provider
        if name != _PROVIDER:
            warnings.warn(f"Specified provider '{name}' is not in available provider names."
                          f"Available providers: '{_PROVIDER}'", RuntimeWarning, stacklevel=3)


def _read_head(path, size):
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""


class InferenceSession:
    """ONNX Runtime's InferenceSession, run by kiln.

    path_or_bytes: an ONNX model (a path or its serialized bytes), or a kiln module (.kmod path or
    bytes), which is loaded as it is. ONNX models are compiled once into the module cache
    ($KILN_CACHE_DIR or ~/.cache/kiln) and loaded from it afterwards.
    sess_options: a SessionOptions (intra_op_num_threads, free dimension overrides).
    providers: ONNX Runtime provider names; kiln runs on the CPU ("CPUExecutionProvider"), and
    warns about any other name, as onnxruntime does for a provider it lacks.

    kiln's additions: `cache_path` (the module file, None for a module given as bytes), `compiled`
    (True when this constructor compiled the model) and `session` (the kiln.Session).
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None,
                 **kwargs):
        _check_providers(providers)
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        threads = int(getattr(self._sess_options, "intra_op_num_threads", 0) or 0)
        if threads < 0:
            raise InvalidArgumentError(f"intra_op_num_threads must be 0 or more, got {threads}")
        bind = bind_strings(getattr(self._sess_options, "_free_dimensions", None) or None)

        if isinstance(path_or_bytes, (str, os.PathLike)):
            model = os.fspath(path_or_bytes)
            self._model_path = model
            is_module = _read_head(model, len(_MODULE_MAGIC)) == _MODULE_MAGIC
        elif isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            model = bytes(path_or_bytes)
            self._model_path = None
            is_module = model[:len(_MODULE_MAGIC)] == _MODULE_MAGIC
        else:
            raise TypeError("Unable to load from type '{0}'".format(type(path_or_bytes)))

        self.compiled = False
        self.cache_path = None
        if is_module:
            if bind:
                raise InvalidArgumentError(
                    "free dimension overrides need an ONNX model; this is a compiled kiln module")
            self.cache_path = model if self._model_path else None
            self.session = _kiln.Session(model, threads=threads)
        else:
            self.cache_path, self.compiled = cached_module(model, bind)
            try:
                self.session = _kiln.Session(self.cache_path, threads=threads)
            except KilnError:
                if self.compiled:
                    raise
                # A cached file that no longer loads (damaged on disk): compile it again, once.
                self.cache_path, self.compiled = cached_module(model, bind, refresh=True)
                self.session = _kiln.Session(self.cache_path, threads=threads)

        self._inputs = [_node_arg(i) for i in self.session.inputs]
        self._outputs = [_node_arg(o) for o in self.session.outputs]
        self._output_index = {o.name: i for i, o in enumerate(self._outputs)}

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        return []

    def get_providers(self):
        return [_PROVIDER]

    def get_provider_options(self):
        return {_PROVIDER: {}}

    def get_session_options(self):
        return self._sess_options

    def set_providers(self, providers=None, provider_options=None):
        _check_providers(providers)

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model on input_feed ({name: numpy array}) and returns the outputs named in
        output_names (None or []: all), in that order, as numpy arrays."""
        if output_names:
            try:
                indices = [self._output_index[name] for name in output_names]
            except KeyError as e:
                raise InvalidArgumentError(f"Invalid output name: {e.args[0]} (the model's "
                                           f"outputs: {', '.join(self._output_index)})") from None
        else:
            indices = None
        if not isinstance(input_feed, dict):
            raise TypeError("input_feed must be a dict of input name to numpy array")
        feed = input_feed
        for name, value in input_feed.items():
            # onnxruntime takes any array; kiln.Session reads only C-contiguous ones.
            if not isinstance(value, np.ndarray) or not value.flags.c_contiguous:
                if feed is input_feed:
                    feed = dict(input_feed)
                feed[name] = np.ascontiguousarray(value)
        outputs = self.session.run(feed)
        if indices is None:
            return outputs
        return [outputs[i] for i in indices]
