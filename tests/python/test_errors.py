"""Bad input raises a kiln.KilnError (a ValueError where the caller's input is wrong) whose
message is kiln's and names the input and what is wrong."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import kiln


@pytest.fixture(scope="module")
def session():
    """pixels [N, 3] f32, mask [N, 3] f32 -> out = Relu(pixels) * mask."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["pixels"], ["r"]), helper.make_node("Mul", ["r", "mask"],
                                                                       ["out"])],
        "errors",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return kiln.Session(kiln.compile(model))


def ones(*shape, dtype=np.float32):
    return np.ones(shape, dtype)


def raises_naming(session, inputs, *words):
    with pytest.raises(kiln.KilnError) as info:
        session.run(inputs)
    message = str(info.value)
    for word in words:
        assert word in message, message
    return info.value


def test_good_run(session):
    (out,) = session.run([np.array([[-1, 2, 3]], np.float32), ones(1, 3)])
    np.testing.assert_array_equal(out, [[0, 2, 3]])


def test_non_contiguous_input(session):
    strided = ones(2, 6)[:, ::2]
    error = raises_naming(session, [ones(2, 3), strided], "input 1 'mask'", "not C-contiguous")
    assert isinstance(error, kiln.InvalidArgumentError) and isinstance(error, ValueError)
    assert error.code == kiln.StatusCode.INVALID_ARGUMENT
    raises_naming(session, {"pixels": ones(3, 2).T, "mask": ones(2, 3)}, "'pixels'",
                  "not C-contiguous")


def test_wrong_dtype(session):
    error = raises_naming(session, [ones(2, 3, dtype=np.float64), ones(2, 3)], "'pixels'")
    assert isinstance(error, ValueError)
    raises_naming(session, [ones(2, 3), ones(2, 3, dtype=np.int64)], "'mask'")


def test_wrong_rank(session):
    error = raises_naming(session, [ones(2, 3, 1), ones(2, 3)], "'pixels'")
    assert isinstance(error, ValueError)
    raises_naming(session, {"pixels": ones(2, 3), "mask": ones(6)}, "'mask'")


def test_wrong_dim(session):
    error = raises_naming(session, [ones(2, 4), ones(2, 4)], "'pixels'")
    assert isinstance(error, ValueError)
    # N bound to 2 by pixels, then 3 by mask.
    raises_naming(session, [ones(2, 3), ones(3, 3)], "'mask'")


def test_dtype_numpy_cannot_give_kiln(session):
    raises_naming(session, [ones(2, 3).astype(np.complex64), ones(2, 3)], "'pixels'",
                  "complex64")
    raises_naming(session, [ones(2, 3).astype(">f4"), ones(2, 3)], "'pixels'", "byte order")


def test_wrong_count_and_names(session):
    raises_naming(session, [ones(2, 3)], "2 input(s)", "'pixels', 'mask'")
    raises_naming(session, {"pixels": ones(2, 3)}, "'mask'", "missing")
    error = raises_naming(session, {"pixels": ones(2, 3), "mask": ones(2, 3), "bias": ones(3)},
                          "'bias'")
    assert isinstance(error, kiln.NotFoundError)
    with pytest.raises(TypeError):
        session.run(ones(2, 3))


def test_bad_module():
    with pytest.raises(kiln.KilnError) as info:
        kiln.Session(b"not a module at all")
    assert info.value.code != kiln.StatusCode.INTERNAL
    with pytest.raises(kiln.KilnError, match="no-such-module.kmod"):
        kiln.Session("/nonexistent/no-such-module.kmod")
    with pytest.raises(TypeError):
        kiln.Session(3.5)


def test_bad_session_options(session, tmp_path):
    module = tmp_path / "m.kmod"
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])])
    kiln.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                 output=module)
    with pytest.raises(kiln.KilnError, match="cpu"):
        kiln.Session(module, device="no-such-device")
    with pytest.raises(kiln.InvalidArgumentError, match="threads"):
        kiln.Session(module, threads=-1)


def test_bad_model():
    graph = helper.make_graph(
        [helper.make_node("NoSuchOp", ["x"], ["y"], name="mystery")], "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(kiln.KilnError, match="NoSuchOp"):
        kiln.compile(model)
    with pytest.raises(kiln.KilnError):
        kiln.compile(b"\x01\x02 not a model")
    with pytest.raises(kiln.NotFoundError):
        kiln.compile("/nonexistent/model.onnx")
