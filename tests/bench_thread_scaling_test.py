"""bench/thread_scaling.py on two hand-made `kiln bench --per-dispatch --json` results: dispatches
paired by index whatever order each run lists them in, rows summed per kernel label and ranked by
the time lost beyond perfect scaling, and two runs of different modules refused with exit 2
naming the first dispatch that differs."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import thread_scaling  # noqa: E402


def dispatch(index, name, label, ms):
    return {"dispatch": index, "name": name, "op_type": "Conv", "median_ms": ms,
            "kernels": [f"{name} (Conv): {label}"] if label else []}


def run(threads, median, dispatches):
    # kiln bench lists its dispatches longest first.
    return {"threads": threads, "median_ms": median,
            "dispatches": sorted(dispatches, key=lambda d: -d["median_ms"])}


# Two convs of one label that scale 2x, one of another label that does not scale at all, and a
# dispatch without a kernel (its op type labels it).
ONE = run(1, 10.0, [dispatch(0, "d0", "conv A", 4.0), dispatch(1, "d1", "conv B", 1.0),
                    dispatch(2, "d2", "conv A", 4.0), dispatch(3, "d3", "", 1.0)])
TWO = run(2, 6.1, [dispatch(0, "d0", "conv A", 2.0), dispatch(1, "d1", "conv B", 1.1),
                   dispatch(2, "d2", "conv A", 2.5), dispatch(3, "d3", "", 0.5)])


class ThreadScalingTest(unittest.TestCase):
    def test_rows_pair_by_index_and_rank_by_time_lost(self):
        table = thread_scaling.rows(ONE, TWO, 2)
        self.assertEqual([r[0] for r in table], ["conv B", "conv A", "Conv"])
        name, count, t1, t2, lost = table[0]
        self.assertEqual((count, t1, t2), (1, 1.0, 1.1))
        self.assertAlmostEqual(lost, 0.6)  # 1.1 - 1.0 / 2
        name, count, t1, t2, lost = table[1]
        self.assertEqual((count, t1, t2), (2, 8.0, 4.5))
        self.assertAlmostEqual(lost, 0.5)  # 4.5 - 8.0 / 2
        self.assertAlmostEqual(table[2][4], 0.0)
        # conv B scaling better now loses less than conv A.
        other = run(2, 6.0, [dispatch(0, "d0", "conv A", 2.0), dispatch(1, "d1", "conv B", 0.9),
                             dispatch(2, "d2", "conv A", 2.5), dispatch(3, "d3", "", 0.5)])
        self.assertEqual([r[0] for r in thread_scaling.rows(ONE, other, 2)],
                         ["conv A", "conv B", "Conv"])

    def test_main_prints_the_table_from_files(self):
        with tempfile.TemporaryDirectory() as work:
            paths = []
            for i, r in enumerate((ONE, TWO)):
                paths.append(os.path.join(work, f"{i}.json"))
                with open(paths[-1], "w") as f:
                    json.dump(r, f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(thread_scaling.main(["--from"] + paths), 0)
        text = out.getvalue()
        self.assertIn("10.00 ms at 1 thread, 6.10 ms at 2 (1.64x)", text)
        self.assertIn("lose 1.10 ms", text)
        self.assertRegex(text, r"0\.500\s+8\.000\s+4\.500\s+1\.78x\s+2\s+conv A")

    def test_runs_of_different_modules_are_refused(self):
        renamed = run(2, 6.0, [dispatch(0, "d0", "conv A", 2.0), dispatch(1, "x1", "conv B", 1.0),
                               dispatch(2, "d2", "conv A", 2.5), dispatch(3, "d3", "", 0.5)])
        shorter = run(2, 6.0, [dispatch(0, "d0", "conv A", 2.0)])
        with tempfile.TemporaryDirectory() as work:
            for other, says in ((renamed, "dispatch 1 is 'd1' in one run and 1 'x1'"),
                                (shorter, "the runs hold 4 and 1 dispatches")):
                paths = []
                for i, r in enumerate((ONE, other)):
                    paths.append(os.path.join(work, f"{i}.json"))
                    with open(paths[-1], "w") as f:
                        json.dump(r, f)
                err, out = io.StringIO(), io.StringIO()
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                    self.assertEqual(thread_scaling.main(["--from"] + paths), 2)
                self.assertIn(says, err.getvalue())
                self.assertEqual(out.getvalue(), "")


if __name__ == "__main__":
    unittest.main()
