#!/usr/bin/python3
"""tools/ort/run_ort.js on a small graph whose nodes ORT keeps apart.

`profile`: ONNX Runtime's per-node times, to set beside `kiln bench --per-dispatch`: one row per
node with its op type, the runs counted after the warmup, the totals per op type, the JSON form, a
temporary profile left behind nowhere, and clear errors for bad arguments.

`serve`: the timing server of bench/harness.py: ready after its warmup, each stdin line a run count
answered with that many times, `quit` or the end of input ending it, and an error naming a line
that is not a run count."""
import json
import os
import subprocess
import tempfile
import unittest

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_ORT = os.path.join(ROOT, "tools", "ort", "run_ort.js")


def run(*args):
    return subprocess.run(["node", RUN_ORT, *args], capture_output=True, text=True, timeout=120)


class SmallGraph(unittest.TestCase):
    """The three-node graph and its input, in a temporary folder."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        nodes = [
            helper.make_node("Softmax", ["x"], ["s"], name="soft", axis=-1),
            helper.make_node("Sigmoid", ["s"], ["g"], name="sig"),
            helper.make_node("Transpose", ["g"], ["y"], name="flip", perm=[1, 0]),
        ]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 10])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [10, 6])])
        cls.model = os.path.join(cls.dir.name, "three.onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), cls.model)
        cls.x = os.path.join(cls.dir.name, "x.bin")
        np.random.default_rng(1).random((6, 10), dtype=np.float32).tofile(cls.x)
        cls.input = f"x=6x10:f32:{cls.x}"

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()


class ProfileTest(SmallGraph):
    def profile_dirs(self):
        return {d for d in os.listdir(tempfile.gettempdir()) if d.startswith("run_ort_profile-")}

    def test_json_has_every_node_and_the_timed_runs(self):
        before = self.profile_dirs()
        r = run("profile", self.model, "--input", self.input, "--warmup", "2", "--repeat", "5", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        s = json.loads(r.stdout)
        self.assertEqual(s["runs"], 5)
        self.assertEqual({n["op"] for n in s["nodes"]}, {"Softmax", "Sigmoid", "Transpose"})
        self.assertEqual({n["name"] for n in s["nodes"]}, {"soft", "sig", "flip"})
        times = [n["median_ms"] for n in s["nodes"]]
        self.assertTrue(all(t >= 0 for t in times))
        self.assertEqual(times, sorted(times, reverse=True))
        self.assertEqual({t["op"]: t["nodes"] for t in s["ops"]}, {"Softmax": 1, "Sigmoid": 1, "Transpose": 1})
        self.assertGreater(s["run_median_ms"], 0)
        self.assertEqual(self.profile_dirs(), before)  # the profiler's file went with its folder

    def test_table_lists_each_node_and_op_type(self):
        r = run("profile", self.model, "--input", self.input, "--warmup", "0", "--repeat", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertIn("median of 3 run(s)", lines[0])
        rows = [line.split() for line in lines[2:5]]
        self.assertEqual(sorted(row[-1] for row in rows), ["flip", "sig", "soft"])
        self.assertEqual(lines[5], "per op type:")
        self.assertEqual(len(lines), 9)

    def test_bad_arguments_fail_with_a_message(self):
        for args, message in [
            (("profile", self.model, "--input", self.input, "--repeat", "0"), "--repeat must be >= 1"),
            (("time", self.model, "--input", self.input, "--json"), "unknown argument '--json'"),
            (("profile", self.model, "--input", "x=6x10:f32:/nonexistent.bin"), "cannot read /nonexistent.bin"),
            (("profile", os.path.join(self.dir.name, "missing.onnx"), "--input", self.input), "no such model"),
        ]:
            before = self.profile_dirs()
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertEqual(self.profile_dirs(), before)
            self.assertIn(message, r.stderr)
            self.assertEqual(r.stdout, "")


class ServeTest(SmallGraph):
    def serve(self, stdin):
        return subprocess.run(["node", RUN_ORT, "serve", self.model, "--input", self.input, "--warmup", "1"],
                              input=stdin, capture_output=True, text=True, timeout=120)

    def test_answers_each_run_count_with_that_many_times(self):
        for ending in ("quit\n", ""):  # `quit`, or the end of input
            r = self.serve("2\n3\n" + ending)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = [json.loads(line) for line in r.stdout.splitlines()]
            self.assertEqual(lines[0], {"ready": True})
            self.assertEqual([len(line["times_ms"]) for line in lines[1:]], [2, 3])
            self.assertTrue(all(t > 0 for line in lines[1:] for t in line["times_ms"]))

    def test_a_line_that_is_no_run_count_is_an_error_naming_it(self):
        for bad in ("abc", "0", "100001", "", "2x", "-1"):
            r = self.serve(f"1\n{bad}\n1\n")
            self.assertEqual(r.returncode, 2, (bad, r.stdout, r.stderr))
            self.assertIn(f"serve: stdin line 2: expected a run count (1 to 100000) or 'quit', got '{bad}'",
                          r.stderr)
            self.assertEqual(len(r.stdout.splitlines()), 2)  # ready, then the first line's run


if __name__ == "__main__":
    unittest.main()
