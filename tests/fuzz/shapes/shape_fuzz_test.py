#!/usr/bin/python3
"""Tests of the shape fuzzer's own logic: the generator is deterministic and every graph is valid
ONNX; outcomes are classified from `kiln test-suite`'s JUnit cases as documented."""
import os
import sys
import unittest

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graphs  # noqa: E402
import shape_fuzz as sf  # noqa: E402


def case(name, outcome="pass", message="", text=""):
    return {"name": name, "outcome": outcome, "message": message, "text": text}


class GeneratorTest(unittest.TestCase):
    def test_deterministic_and_valid(self):
        for i in range(60):
            a, b = graphs.make_case(7, i), graphs.make_case(7, i)
            self.assertEqual(a.model, b.model)
            self.assertEqual(a.size_sets, b.size_sets)
            onnx.checker.check_model(onnx.load_from_string(a.model), full_check=True)
            self.assertEqual(len(a.size_sets), 4)
            for k in range(4):
                for (_, x), (_, y) in zip(graphs.input_arrays(a, k, 7, i), graphs.input_arrays(b, k, 7, i)):
                    self.assertTrue((x == y).all())

    def test_sizes_meet_the_rules(self):
        for i in range(200):
            c = graphs.make_case(3, i)
            self.assertEqual(min(v for v in c.size_sets[0].values()), min(c.size_sets[0].values()))
            for sizes in c.size_sets:
                if "T" in sizes:
                    self.assertEqual(sizes["T"], sizes["S"])
                if "pool_resize" in c.description or "space_to_depth" in c.description:
                    self.assertEqual(sizes["H"] % 2, 0)
                    self.assertEqual(sizes["W"] % 2, 0)

    def test_planted_nan(self):
        picked = [i for i in range(200) if graphs.plants_nan(5, i, 0.25)]
        self.assertTrue(30 < len(picked) < 70)
        c = graphs.make_case(5, picked[0])
        for k in range(4):
            arrays = graphs.input_arrays(c, k, 5, picked[0], nan=True)
            self.assertEqual(int(np.isnan(arrays[0][1]).sum()), 1)
            clean = graphs.input_arrays(c, k, 5, picked[0])
            self.assertFalse(np.isnan(clean[0][1]).any())

    def test_every_class_appears(self):
        classes = {graphs.make_case(0, i).cls for i in range(100)}
        self.assertEqual(classes, {cls for cls, _, _ in graphs.IDIOMS})


class NanOracleTest(unittest.TestCase):
    """ONNX Runtime's MaxPool keeps or drops a NaN by its place in the window; the oracle model ORT
    runs for graphs with a planted NaN gives NaN for every window that holds one, as kiln does."""

    @staticmethod
    def maxpool_model(**attrs):
        h = onnx.helper
        node = h.make_node("MaxPool", ["x"], ["y"], name="pool", **attrs)
        relu = h.make_node("Relu", ["y"], ["z"])
        g = h.make_graph([node, relu], "g", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 6])],
                         [h.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None)])
        return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()

    def test_only_maxpool_graphs_change(self):
        for i in range(40):
            c = graphs.make_case(3, i)
            oracle = sf.nan_oracle(c.model)
            ops = [n.op_type for n in onnx.load_from_string(c.model).graph.node]
            self.assertEqual(oracle is None, "MaxPool" not in ops, c.name)
            if oracle is not None:
                m = onnx.load_from_string(oracle)
                onnx.checker.check_model(m, full_check=True)
                new_ops = [n.op_type for n in m.graph.node]
                self.assertEqual(new_ops.count("MaxPool"), 2 * ops.count("MaxPool"))
                self.assertEqual(new_ops.count("Where"), ops.count("MaxPool"))
                self.assertEqual([o.name for o in m.graph.output],
                                 [o.name for o in onnx.load_from_string(c.model).graph.output])

    def test_every_window_with_nan_is_nan_in_ort(self):
        import shutil
        import subprocess
        import tempfile
        runner = os.path.join(sf.ROOT, "tools", "ort", "run_ort.js")
        if shutil.which("node") is None or not os.path.isdir(os.path.join(sf.ROOT, "tools", "ort", "node_modules")):
            self.skipTest("needs node and onnxruntime-node (scripts/setup.sh)")
        x = np.array([[[np.nan, 1, 0.5, np.nan, 2, 3]]], np.float32)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "m.onnx"), "wb") as f:
                f.write(sf.nan_oracle(self.maxpool_model(kernel_shape=[2], strides=[1])))
            x.tofile(os.path.join(d, "x.bin"))
            subprocess.run(["node", runner, "run", os.path.join(d, "m.onnx"), "--input",
                            f"x=1x1x6:f32:{os.path.join(d, 'x.bin')}", "--output-dir", os.path.join(d, "o"),
                            "--threads", "1"], check=True, capture_output=True)
            z = np.fromfile(os.path.join(d, "o", "z.bin"), np.float32)
        # windows [NaN,1] [1,0.5] [0.5,NaN] [NaN,2] [2,3]
        self.assertEqual(np.isnan(z).tolist(), [True, False, True, True, False])
        self.assertEqual(z[[1, 4]].tolist(), [1, 3])


class ClassifyTest(unittest.TestCase):
    c = graphs.make_case(0, 0)

    def classify(self, cpu, ref=(), broken_cpu=None):
        return sf.classify(self.c, None, {self.c.name: list(cpu)}, {self.c.name: list(ref)}, broken_cpu or {}, {})

    def test_pass(self):
        r = self.classify([case(f"{self.c.name}/dynamic/N=1"), case(f"{self.c.name}/bound/N=1")],
                          [case(f"{self.c.name}/reference/N=1")])
        self.assertEqual(r["outcome"], "pass")

    def test_refused_with_bound_compiling(self):
        msg = "invalid argument: kiln supports only whole-dim slices of symbolic dims; in node 'Slice_3' (Slice)"
        r = self.classify([case(f"{self.c.name}/dynamic/N=1", "fail-compile", msg, msg),
                           case(f"{self.c.name}/bound/N=1")])
        self.assertEqual(r["outcome"], "refused")
        self.assertEqual(r["refusal"]["op"], "Slice")
        self.assertEqual(r["refusal"]["fixed_sizes_compile"], 1)
        self.assertEqual(r["refusal"]["key"], "invalid argument: kiln supports only whole-dim slices of symbolic "
                                              "dims; in node '_' (Slice)")

    def test_nan_difference_beats_mismatch(self):
        text = ("output 'out0' vs file: FAIL: 2/8 mismatches (atol 0.0001, rtol 0.0001); actual NaN 2/8, Inf 0/8; "
                "expected NaN 0/8, Inf 0/8; max abs err 0")
        r = self.classify([case(f"{self.c.name}/dynamic/N=3", "fail-compare", text, text)])
        self.assertEqual(r["outcome"], "nan")

    def test_mismatch_in_the_reference_evaluator(self):
        text = ("FAIL: 1/8 mismatches; actual NaN 0/8, Inf 0/8; expected NaN 0/8, Inf 0/8; max abs err 0.5")
        r = self.classify([case(f"{self.c.name}/dynamic/N=3")], [case(f"{self.c.name}/reference/N=3",
                                                                      "fail-compare", text, text)])
        self.assertEqual(r["outcome"], "mismatch")

    def test_dynamic_vs_bound(self):
        text = ("output 'out0': the module bound to N=11 differs from the dynamic module at N=11 (max abs difference "
                "3.7e-09); invariant 1 requires them bit for bit equal")
        r = self.classify([case(f"{self.c.name}/dynamic/N=11"), case(f"{self.c.name}/bound/N=11", "fail-compare",
                                                                     text, text)])
        self.assertEqual(r["outcome"], "dyn-vs-bound")

    def test_bound_build_fails_where_dynamic_works(self):
        r = self.classify([case(f"{self.c.name}/dynamic/N=3"),
                           case(f"{self.c.name}/bound/N=3", "fail-compile", "constant 'y' data does not match")])
        self.assertEqual(r["outcome"], "bound-error")

    def test_timeout_and_usage_error(self):
        self.assertEqual(self.classify([], broken_cpu={self.c.name: "timeout"})["outcome"], "timeout")
        r = self.classify([], broken_cpu={self.c.name: "error: exit 2: bad manifest"})
        self.assertEqual(r["outcome"], "run-error")

    def test_crash_beats_everything(self):
        r = self.classify([], broken_cpu={self.c.name: "crash: signal SIGSEGV"})
        self.assertEqual(r["outcome"], "crash")


if __name__ == "__main__":
    unittest.main()
