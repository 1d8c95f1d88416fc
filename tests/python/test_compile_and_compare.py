"""kiln.compile from a path, a ModelProto or bytes, to bytes or a file, with bound symbols; and
kiln.testing, the strict comparator."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln
from conftest import model_path


def scale_model():
    """x [N, 4] -> y = x * 2 + 1."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["t"]), helper.make_node("Add", ["t", "one"],
                                                                        ["y"])],
        "scale",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        initializer=[helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
                     helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_compile_forms_agree(tmp_path):
    model = scale_model()
    onnx_path = tmp_path / "scale.onnx"
    onnx.save(model, onnx_path)
    from_proto = kiln.compile(model)
    from_bytes = kiln.compile(model.SerializeToString())
    from_path = kiln.compile(str(onnx_path))
    assert isinstance(from_proto, bytes) and from_proto[:8] == b"KILNMOD\0"
    assert from_bytes == from_proto
    out = kiln.compile(onnx_path, output=tmp_path / "scale.kmod")
    assert out == str(tmp_path / "scale.kmod") and os.path.isfile(out)
    with open(out, "rb") as f:
        assert f.read() == from_path
    out2 = kiln.compile(model, output=str(tmp_path / "proto.kmod"))
    with open(out2, "rb") as f:
        assert f.read() == from_proto
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    session = kiln.Session(out)
    (y,) = session.run([np.arange(8, dtype=np.float32).reshape(2, 4)])
    np.testing.assert_array_equal(y, np.arange(8).reshape(2, 4) * 2 + 1)


def test_compile_bind_matches_static(tmp_path):
    model = scale_model()
    bound = kiln.Session(kiln.compile(model, bind={"N": 3}))
    assert bound.inputs[0].shape == [3, 4] and bound.outputs[0].shape == [3, 4]
    with pytest.raises(kiln.KilnError, match="'x'"):
        bound.run([np.zeros((2, 4), np.float32)])
    assert kiln.compile(model, bind=["N=3"]) == kiln.compile(model, bind={"N": 3})
    with pytest.raises(TypeError):
        kiln.compile(model, bind={"N": "3"})
    with pytest.raises(kiln.KilnError):
        kiln.compile(model, bind={"NoSuchSymbol": 3})


def test_compile_options(tmp_path):
    with pytest.raises(kiln.KilnError, match="no-such-target"):
        kiln.compile(scale_model(), target="no-such-target")
    with pytest.raises(TypeError):
        kiln.compile(42)


def test_module_metadata_of_a_real_model():
    session = kiln.Session(kiln.compile(model_path("small/two_inputs.onnx")), threads=1)
    assert [i.name for i in session.inputs] == ["a", "b"]
    assert session.threads == 1 and session.device == "cpu"
    assert "ValueInfo(name='a'" in repr(session.inputs[0])
    assert kiln.version() == kiln.__version__ and kiln.version().count(".") == 2
    assert "cpu" in kiln.device_names()


def test_assert_allclose_passes_and_reports():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    result = kiln.testing.assert_allclose(a, a + 1e-6, atol=1e-5, rtol=0)
    assert result.passed and result.count == 3 and result.mismatches == 0
    assert result.report.startswith("PASS")
    with pytest.raises(AssertionError, match=r"FAIL: 1/3 mismatches"):
        kiln.testing.assert_allclose(a, [1.0, 2.0, 3.1])


def test_assert_allclose_is_strict_about_nan_and_inf():
    expected = np.array([1.0, np.nan, 3.0], np.float32)
    with pytest.raises(AssertionError, match="NaN"):
        kiln.testing.assert_allclose(np.array([1.0, 2.0, np.nan], np.float32),
                                     np.array([1.0, 2.0, 3.0], np.float32), atol=1e30)
    with pytest.raises(AssertionError):
        kiln.testing.assert_allclose(expected, expected)
    kiln.testing.assert_allclose(expected, expected, nan_equal=True)
    with pytest.raises(AssertionError, match="Inf"):
        kiln.testing.assert_allclose(np.array([np.inf], np.float32),
                                     np.array([1.0], np.float32), atol=1e30)


def test_assert_allclose_shape_dtype_and_tolerance_errors():
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(AssertionError):
        kiln.testing.assert_allclose(a, np.zeros((3, 2), np.float32))
    with pytest.raises(AssertionError):
        kiln.testing.assert_allclose(a, np.zeros((2, 3), np.float64))
    with pytest.raises(kiln.KilnError):
        kiln.testing.assert_allclose(a, a, atol=-1)
    # Integers compare in exact integer arithmetic; non-contiguous arrays are fine here.
    big = np.array([2**63 - 1, -2**63], np.int64)
    with pytest.raises(AssertionError):
        kiln.testing.assert_allclose(big, big - [1, -1], atol=0, rtol=0)
    kiln.testing.assert_allclose(big, big - [1, -1], atol=1, rtol=0)
    ints = np.arange(12, dtype=np.int64).reshape(3, 4)
    kiln.testing.assert_allclose(ints.T, ints.T.copy(), atol=0, rtol=0)
