"""Both ResNet-50 replicas (dynamic batch) through kiln.Session and kiln.InferenceSession, at
batch 1 and 3 from one module each: bit for bit what `kiln run` gives on the same module and
inputs, and within kiln's ONNX Runtime tolerance of ONNX Runtime's outputs."""

import os

import numpy as np
import pytest

import kiln
from conftest import (RESNETS, kiln_cli_run, model_dir, model_path, ort_job, ort_reference,
                      read_f32)

BATCHES = (1, 3)
# kiln's tolerance against ONNX Runtime on the ResNet replicas (tests/e2e/resnet_e2e_test.cc).
ORT_ATOL, ORT_RTOL = 2e-5, 1e-5


def resnet_input(batch):
    return read_f32(model_path(f"input_b{batch}.bin"), (batch, 3, 224, 224))


@pytest.fixture(scope="module")
def cli_outputs(resnet_modules, tmp_path_factory):
    """{(stem, batch): output bytes} from `kiln run --module=... --output=@file`."""
    work = tmp_path_factory.mktemp("resnet_cli")
    outputs = {}
    for stem in RESNETS:
        for batch in BATCHES:
            (outputs[stem, batch],) = kiln_cli_run(resnet_modules[stem], [resnet_input(batch)],
                                                   str(work), f"{stem}_b{batch}")
    return outputs


@pytest.mark.parametrize("stem", RESNETS)
def test_session_matches_kiln_run_bit_for_bit(stem, resnet_modules, cli_outputs):
    path = resnet_modules[stem]
    # v1 from the module file, v2 from the module's bytes in memory.
    if stem == RESNETS[0]:
        session = kiln.Session(path)
    else:
        with open(path, "rb") as f:
            session = kiln.Session(f.read())
    (data,) = session.inputs
    assert (data.name, data.dtype, data.shape) == ("data", np.dtype("float32"), ["N", 3, 224, 224])
    assert [o.shape for o in session.outputs] == [["N", 1000]]
    for batch in BATCHES:
        (out,) = session.run([resnet_input(batch)])
        assert out.dtype == np.float32 and out.shape == (batch, 1000)
        assert out.tobytes() == cli_outputs[stem, batch], f"{stem} batch {batch}"
        (by_name,) = session.run({"data": resnet_input(batch)})
        assert by_name.tobytes() == cli_outputs[stem, batch]


@pytest.mark.parametrize("stem", RESNETS)
def test_inference_session_matches_kiln_run_and_onnxruntime(stem, resnet_modules, cli_outputs,
                                                            tmp_path):
    import kiln as onnxruntime  # a user's one changed import

    sess = onnxruntime.InferenceSession(model_path(f"{stem}.onnx"),
                                        providers=["CPUExecutionProvider"])
    assert sess.compiled
    # The cached module is the module kiln.compile makes of the model, byte for byte.
    with open(sess.cache_path, "rb") as a, open(resnet_modules[stem], "rb") as b:
        assert a.read() == b.read()
    (meta, _), = ort_reference([ort_job(model_path(f"{stem}.onnx"), str(tmp_path / "ort"))],
                               str(tmp_path))
    assert [(i.name, i.shape) for i in sess.get_inputs()] == \
        [(m["name"], m["shape"]) for m in meta["inputs"]]
    assert [(o.name, o.shape) for o in sess.get_outputs()] == \
        [(m["name"], m["shape"]) for m in meta["outputs"]]
    assert [i.type for i in sess.get_inputs()] == ["tensor(float)"]
    output_name = sess.get_outputs()[0].name
    for batch in BATCHES:
        x = resnet_input(batch)
        (out,) = sess.run(None, {"data": x})
        assert out.tobytes() == cli_outputs[stem, batch], f"{stem} batch {batch}"
        (named,) = sess.run([output_name], {"data": x})
        assert named.tobytes() == out.tobytes()
        # ONNX Runtime's outputs for these inputs (made by tests/models/gen_resnet.py).
        expected = read_f32(os.path.join(model_dir(), f"{stem}.ref_b{batch}.bin"), (batch, 1000))
        kiln.testing.assert_allclose(out, expected, atol=ORT_ATOL, rtol=ORT_RTOL)


def test_run_releases_the_gil(resnet_modules):
    """While one thread is inside Session.run, other Python threads keep running."""
    import threading
    import time

    session = kiln.Session(resnet_modules[RESNETS[0]])
    x = resnet_input(1)
    session.run([x])  # plan prepared
    inside = []

    def worker():
        t0 = time.perf_counter()
        session.run([x])
        inside.append((t0, time.perf_counter()))

    ticks = []
    thread = threading.Thread(target=worker)
    thread.start()
    while thread.is_alive():
        ticks.append(time.perf_counter())
    thread.join()
    (t0, t1), = inside
    during = sum(t0 < t < t1 for t in ticks)
    # Holding the GIL through the run would leave this thread a switch or two at most.
    assert during > 1000, f"{during} iterations of the main thread during a {t1 - t0:.3f} s run"
