"""kiln.InferenceSession answers as onnxruntime's InferenceSession does (names, order, types,
shapes, values; the reference is onnxruntime-node, tools/ort), and caches compiled modules by
content: a second load of the same model compiles nothing."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln
import kiln._cache
from conftest import model_path, ort_job, ort_reference

# onnxruntime-node's type names -> onnxruntime (Python)'s NodeArg.type.
ORT_TYPES = {
    "float32": "tensor(float)", "float64": "tensor(double)", "float16": "tensor(float16)",
    "int8": "tensor(int8)", "int16": "tensor(int16)", "int32": "tensor(int32)",
    "int64": "tensor(int64)", "uint8": "tensor(uint8)", "uint16": "tensor(uint16)",
    "uint32": "tensor(uint32)", "uint64": "tensor(uint64)", "bool": "tensor(bool)",
}


def multi_output_model():
    """a [N, 4] f32, b [N, 4] f32, k [2] i64 -> total = a + b, scaled = a * b, picked =
    Gather(a, k, axis=1) [N, 2], count = Shape(a) (i64 [2])."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["total"]),
         helper.make_node("Mul", ["a", "b"], ["scaled"]),
         helper.make_node("Gather", ["a", "k"], ["picked"], axis=1),
         helper.make_node("Shape", ["a"], ["count"])],
        "multi",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("total", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("scaled", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("picked", TensorProto.FLOAT, ["N", 2]),
         helper.make_tensor_value_info("count", TensorProto.INT64, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def feed_for(model_file, batch):
    rng = np.random.default_rng(batch)
    if model_file.endswith("multi.onnx"):
        return {"a": rng.standard_normal((batch, 4)).astype(np.float32),
                "b": rng.standard_normal((batch, 4)).astype(np.float32),
                "k": np.array([3, 0], np.int64)}
    if model_file.endswith("two_inputs.onnx"):
        return {"a": rng.standard_normal((batch, 4)).astype(np.float32),
                "b": rng.standard_normal((batch, 4)).astype(np.float32)}
    if model_file.endswith("weights_in_inputs.onnx"):
        return {"x": rng.standard_normal((batch, 1, 2, 2)).astype(np.float32)}
    if model_file.endswith("tiny_cnn.onnx"):
        return {"data": rng.standard_normal((batch, 3, 8, 8)).astype(np.float32)}
    if model_file.endswith("transformer_encoder.onnx"):
        return {"input_ids": rng.integers(0, 50, (batch, 7)).astype(np.int64)}
    raise AssertionError(model_file)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ort_models")
    multi = str(folder / "multi.onnx")
    onnx.save(multi_output_model(), multi)
    return [multi, model_path("small/two_inputs.onnx"), model_path("small/tiny_cnn.onnx"),
            model_path("small/weights_in_inputs.onnx"),
            model_path("nets/transformer_encoder.onnx")]


def test_same_answers_as_onnxruntime(models, tmp_path):
    jobs = []
    for i, model in enumerate(models):
        for batch in (1, 3):
            jobs.append(ort_job(model, str(tmp_path / f"m{i}_b{batch}"), feed_for(model, batch)))
    answers = iter(ort_reference(jobs, str(tmp_path)))
    for model in models:
        sess = kiln.InferenceSession(model)
        for batch in (1, 3):
            meta, expected = next(answers)
            assert [(i.name, i.type, i.shape) for i in sess.get_inputs()] == \
                [(m["name"], ORT_TYPES[m["type"]], m["shape"]) for m in meta["inputs"]], model
            assert [(o.name, o.type, o.shape) for o in sess.get_outputs()] == \
                [(m["name"], ORT_TYPES[m["type"]], m["shape"]) for m in meta["outputs"]], model
            got = sess.run(None, feed_for(model, batch))
            assert len(got) == len(expected)
            for actual, want in zip(got, expected):
                assert actual.dtype == want.dtype and actual.shape == want.shape, model
                kiln.testing.assert_allclose(actual, want, atol=2e-5, rtol=1e-5)


def test_output_names_choose_and_order(models):
    sess = kiln.InferenceSession(models[0])
    feed = feed_for(models[0], 2)
    total, scaled, picked, count = sess.run(None, feed)
    assert sess.run([], feed)[0].tobytes() == total.tobytes()
    count2, total2 = sess.run(["count", "total"], feed)
    assert count2.tolist() == [2, 4] and count.tolist() == [2, 4]
    assert total2.tobytes() == total.tobytes()
    np.testing.assert_array_equal(picked, feed["a"][:, [3, 0]])
    with pytest.raises(ValueError, match="Invalid output name: nope"):
        sess.run(["nope"], feed)
    with pytest.raises(ValueError, match="'b'"):
        sess.run(None, {"a": feed["a"], "k": feed["k"]})
    # onnxruntime takes non-contiguous arrays; so does InferenceSession (kiln.Session does not).
    wide = np.zeros((2, 8), np.float32)
    wide[:, ::2] = feed["a"]
    (total3,) = sess.run(["total"], {"a": wide[:, ::2], "b": feed["b"], "k": feed["k"]})
    assert total3.tobytes() == total.tobytes()
    assert repr(sess.get_inputs()[2]) == "NodeArg(name='k', type='tensor(int64)', shape=[2])"
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert kiln.get_available_providers() == ["CPUExecutionProvider"]


def test_second_load_does_not_compile(models, monkeypatch):
    cache = os.environ["KILN_CACHE_DIR"]
    first = kiln.InferenceSession(models[0])
    assert first.compiled and os.path.dirname(first.cache_path) == cache
    stat = os.stat(first.cache_path)
    assert os.listdir(cache) == [os.path.basename(first.cache_path)]

    def no_compile(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(kiln._cache, "_compile", no_compile)
    with open(models[0], "rb") as f:
        data = f.read()
    for source in (models[0], data):  # a path, or the same model's bytes
        again = kiln.InferenceSession(source)
        assert not again.compiled and again.cache_path == first.cache_path
        assert os.stat(again.cache_path).st_mtime_ns == stat.st_mtime_ns
    feed = feed_for(models[0], 3)
    for a, b in zip(first.run(None, feed), again.run(None, feed)):
        assert a.tobytes() == b.tobytes()


def test_cache_key_follows_content_and_options(models, tmp_path):
    cache = os.environ["KILN_CACHE_DIR"]
    base = kiln.InferenceSession(models[0])
    options = kiln.SessionOptions()
    options.add_free_dimension_override_by_name("N", 2)
    options.intra_op_num_threads = 1
    bound = kiln.InferenceSession(models[0], sess_options=options)
    assert bound.compiled and bound.cache_path != base.cache_path
    assert bound.get_inputs()[0].shape == [2, 4]
    changed = multi_output_model()
    changed.graph.node[0].op_type = "Sub"
    other = kiln.InferenceSession(changed.SerializeToString())
    assert other.compiled and other.cache_path not in (base.cache_path, bound.cache_path)
    assert len(os.listdir(cache)) == 3
    feed = feed_for(models[0], 2)
    (diff,) = other.run(["total"], feed)
    np.testing.assert_array_equal(diff, feed["a"] - feed["b"])


def test_damaged_cache_file_is_compiled_again(models):
    first = kiln.InferenceSession(models[0])
    feed = feed_for(models[0], 1)
    expected = first.run(None, feed)[0].tobytes()
    with open(first.cache_path, "r+b") as f:
        f.truncate(100)
    again = kiln.InferenceSession(models[0])
    assert again.compiled and again.cache_path == first.cache_path
    assert again.run(None, feed)[0].tobytes() == expected
    # The first session's file was damaged in place under it: it refuses to run on it.
    with pytest.raises(kiln.FailedPreconditionError, match="changed on disk while loaded"):
        first.run(None, feed)


def test_module_files_and_providers(models, tmp_path):
    module = kiln.compile(models[1], output=tmp_path / "two.kmod")
    sess = kiln.InferenceSession(module)
    assert not sess.compiled and sess.cache_path == module
    assert not os.path.exists(os.environ["KILN_CACHE_DIR"])
    with open(module, "rb") as f:
        from_bytes = kiln.InferenceSession(f.read())
    assert [i.name for i in from_bytes.get_inputs()] == ["a", "b"]
    with pytest.warns(RuntimeWarning, match="CUDAExecutionProvider"):
        kiln.InferenceSession(module, providers=["CUDAExecutionProvider",
                                                 "CPUExecutionProvider"])
    with pytest.raises(TypeError):
        kiln.InferenceSession(12)
