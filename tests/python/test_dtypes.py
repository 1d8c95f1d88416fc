"""Every numpy dtype kiln takes round-trips through kiln.Session: a tiny model per dtype (built
with onnx.helper, compiled from the ModelProto) returns its input unchanged and transposed."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln

DTYPES = {
    "float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16,
    "float64": TensorProto.DOUBLE, "int8": TensorProto.INT8, "int16": TensorProto.INT16,
    "int32": TensorProto.INT32, "int64": TensorProto.INT64, "uint8": TensorProto.UINT8,
    "uint16": TensorProto.UINT16, "uint32": TensorProto.UINT32, "uint64": TensorProto.UINT64,
    "bool": TensorProto.BOOL,
}


def round_trip_model(elem_type):
    """x [N, 3, 4] -> same = Identity(x), moved = Transpose(x, perm=[2, 0, 1])."""
    x = helper.make_tensor_value_info("x", elem_type, ["N", 3, 4])
    same = helper.make_tensor_value_info("same", elem_type, ["N", 3, 4])
    moved = helper.make_tensor_value_info("moved", elem_type, [4, "N", 3])
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["same"]),
         helper.make_node("Transpose", ["x"], ["moved"], perm=[2, 0, 1])],
        "round_trip", [x], [same, moved])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def sample(dtype, batch):
    rng = np.random.default_rng(7)
    shape = (batch, 3, 4)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith("float"):
        values = rng.standard_normal(shape).astype(dtype)
        flat = values.reshape(-1)
        flat[:4] = [np.nan, np.inf, -np.inf, -0.0]  # special values come back as they went
        return values
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    values.reshape(-1)[:2] = [info.min, info.max]
    return values


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_dtype_round_trips(dtype):
    model = round_trip_model(DTYPES[dtype])
    onnx.checker.check_model(model)
    session = kiln.Session(kiln.compile(model))
    assert [(i.name, i.dtype, i.shape) for i in session.inputs] == \
        [("x", np.dtype(dtype), ["N", 3, 4])]
    assert [(o.name, o.dtype, o.shape) for o in session.outputs] == \
        [("same", np.dtype(dtype), ["N", 3, 4]), ("moved", np.dtype(dtype), [4, "N", 3])]
    for batch in (1, 2, 5):
        x = sample(dtype, batch)
        same, moved = session.run([x])
        assert same.dtype == x.dtype and moved.dtype == x.dtype
        assert same.shape == x.shape and moved.shape == (4, batch, 3)
        assert same.tobytes() == x.tobytes()
        assert moved.tobytes() == np.ascontiguousarray(x.transpose(2, 0, 1)).tobytes()


def test_outputs_are_not_copied():
    """Outputs share kiln's memory: one capsule owning the run's outputs is every array's base,
    and the arrays outlive the session."""
    session = kiln.Session(kiln.compile(round_trip_model(TensorProto.FLOAT)))
    same, moved = session.run([sample("float32", 2)])
    assert type(same.base).__name__ == "PyCapsule"
    assert same.base is moved.base
    assert same.flags.c_contiguous and same.flags.writeable and not same.flags.owndata
    expected = same.copy()
    del session
    same += 1  # the memory is still alive and writable
    np.testing.assert_array_equal(same, expected + 1)


def test_empty_batch():
    session = kiln.Session(kiln.compile(round_trip_model(TensorProto.FLOAT)))
    x = np.zeros((0, 3, 4), np.float32)
    same, moved = session.run([x])
    assert same.shape == (0, 3, 4) and moved.shape == (4, 0, 3)
