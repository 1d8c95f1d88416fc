"""One kiln.Session shared by 8 Python threads, 200 runs each at mixed batch sizes: every output
equals, bit for bit, the same call made alone (kiln releases the GIL while it runs).

The threads run in a child process (this file run as a script), so that a crash (memory
corrupted by a race) fails this test with its signal and the rest of the suite still reports."""

import os
import subprocess
import sys
import threading

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import kiln

THREADS = 8
RUNS = 200
BATCHES = (1, 2, 3, 5)


def small_model():
    """x [N, 3, 8, 8] -> Conv 3x3 (8) -> Relu -> GlobalAveragePool -> Flatten -> Gemm (10) ->
    Softmax."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "bias")
    fc = numpy_helper.from_array(rng.standard_normal((10, 8)).astype(np.float32), "fc")
    fc_b = numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fc_b")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "bias"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("GlobalAveragePool", ["r"], ["p"]),
         helper.make_node("Flatten", ["p"], ["f"]),
         helper.make_node("Gemm", ["f", "fc", "fc_b"], ["logits"], transB=1),
         helper.make_node("Softmax", ["logits"], ["prob"], axis=1)],
        "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", 10])],
        initializer=[w, bias, fc, fc_b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run_threads():
    """The check itself; returns the failures (empty when every output matched)."""
    session = kiln.Session(kiln.compile(small_model()))
    rng = np.random.default_rng(11)
    # A few inputs per batch size, and each one's output from a single-threaded run.
    inputs = {b: [rng.standard_normal((b, 3, 8, 8)).astype(np.float32) for _ in range(3)]
              for b in BATCHES}
    expected = {b: [session.run([x])[0].tobytes() for x in inputs[b]] for b in BATCHES}

    start = threading.Barrier(THREADS)
    failures = []
    done = [0] * THREADS

    def worker(t):
        start.wait()
        try:
            for i in range(RUNS):
                b = BATCHES[(t + i) % len(BATCHES)]
                k = (t * 7 + i) % 3
                (out,) = session.run([inputs[b][k]])
                if out.tobytes() != expected[b][k]:
                    failures.append(f"thread {t} run {i} (batch {b}, input {k}) differs")
                done[t] += 1
        except Exception as e:  # reported below, with the thread that met it
            failures.append(f"thread {t}: {type(e).__name__}: {e}")

    workers = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if done != [RUNS] * THREADS:
        failures.append(f"runs done per thread: {done}")
    return failures


def test_eight_threads_share_one_session():
    child = subprocess.run([sys.executable, os.path.abspath(__file__)], capture_output=True,
                           text=True, env=dict(os.environ), timeout=300)
    report = (child.stdout + child.stderr)[-4000:]
    assert child.returncode == 0, (
        f"the threaded run exited {child.returncode}"
        f"{' (signal %d)' % -child.returncode if child.returncode < 0 else ''}:\n{report}")
    assert "all outputs identical" in child.stdout, report


if __name__ == "__main__":
    problems = run_threads()
    for line in problems[:20]:
        print(line)
    if problems:
        sys.exit(1)
    print(f"all outputs identical: {THREADS} threads x {RUNS} runs")
