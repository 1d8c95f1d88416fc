"""bench/harness.py's interleaved timing servers (Bench.interleave, Server, paired_ratio), with fake
servers that speak the protocol of `kiln bench --serve` and run_ort.js `serve` and log each
request: every round starts each contender afresh with the warm-up the run time asks for, bursts
alternate with the order rotating, each burst's first run is left out, the ratio pairs bursts,
and a server that fails or answers nonsense stops the harness with its command and stderr."""
import json
import os
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import harness  # noqa: E402

# A fake server: argv NAME MS LOG [MODE]. Ready at once; each stdin line N gets N times (the first
# of each burst 1000x MS, as an untimed run that must be left out), logged as "NAME N".
FAKE = r'''
import json, sys
name, ms, log = sys.argv[1], float(sys.argv[2]), sys.argv[3]
mode = sys.argv[4] if len(sys.argv) > 4 else ""
if mode == "die":
    sys.stderr.write("fake: cannot load the model\n")
    sys.exit(3)
print(json.dumps({"ready": True, "name": name}), flush=True)
for line in sys.stdin:
    line = line.strip()
    if line == "quit":
        break
    with open(log, "a") as f:
        f.write(f"{name} {line}\n")
    if mode == "nonsense":
        print("not json", flush=True)
        continue
    n = int(line)
    print(json.dumps({"times_ms": [ms * 1000] + [ms] * (n - 1)}), flush=True)
'''


class InterleaveTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.script = os.path.join(self.dir.name, "fake.py")
        with open(self.script, "w") as f:
            f.write(FAKE)
        self.log = os.path.join(self.dir.name, "log")
        args = types.SimpleNamespace(build=self.dir.name, models=self.dir.name, threads=2, pairs=2)
        self.bench = harness.Bench(args)
        self.bench.QUIET_S = 0
        self.warmups = []

    def tearDown(self):
        self.dir.cleanup()

    def start(self, name, ms, mode=""):
        def started(warmup):
            self.warmups.append((name, warmup))
            return harness.Server([sys.executable, self.script, name, str(ms), self.log] +
                                  ([mode] if mode else []))
        return started

    def logged(self):
        with open(self.log) as f:
            return [line.split() for line in f]

    def test_rounds_alternate_and_pair_the_bursts(self):
        run_ms = 125  # 24 warm-up runs for 3 s; bursts of 2 timed runs (0.25 s) after 1 untimed
        res = self.bench.interleave({"kiln": self.start("kiln", 10), "ort": self.start("ort", 20)}, run_ms)
        self.assertEqual(self.warmups, [("kiln", 24), ("ort", 24)] * 2)  # fresh servers each round
        # 2 rounds of 4 bursts, the order rotating, each burst asking for 3 runs.
        self.assertEqual(self.logged(), [["kiln", "3"], ["ort", "3"], ["ort", "3"], ["kiln", "3"]] * 4)
        self.assertEqual(len(res["kiln"]), 2)
        for r in res["kiln"]:
            self.assertEqual(r["ready"], {"ready": True, "name": "kiln"})
            self.assertEqual(r["bursts_ms"], [10] * 4)
            self.assertEqual(r["times_ms"], [10] * 8)  # the 1000x untimed runs left out
        ratio, rounds = harness.paired_ratio(res, "kiln", "ort")
        self.assertEqual((ratio, rounds), (0.5, [0.5, 0.5]))
        self.assertEqual(harness.all_runs_median(res["ort"]), 20)

    def test_warm_up_and_bursts_follow_the_run_time(self):
        res = self.bench.interleave({"a": self.start("a", 1), "b": self.start("b", 1)}, 9000, rounds=1)
        self.assertEqual(self.warmups, [("a", 3), ("b", 3)])  # at least MIN_WARM_RUNS
        self.assertEqual({n for _, n in self.logged()}, {"2"})  # 1 timed run a burst, at least
        self.assertEqual(len(res["a"][0]["times_ms"]), 4)
        self.warmups.clear()
        self.bench.interleave({"a": self.start("a", 1), "b": self.start("b", 1)}, 0.001, rounds=1)
        self.assertEqual(self.warmups, [("a", 200), ("b", 200)])  # at most MAX_WARM_RUNS
        self.assertEqual(self.logged()[-1], ["a", "51"])  # at most 50 timed runs a burst

    def test_a_server_that_fails_stops_the_harness_with_its_stderr(self):
        with self.assertRaises(SystemExit) as stop:
            self.bench.interleave({"kiln": self.start("kiln", 10), "ort": self.start("ort", 1, "die")}, 10)
        message = str(stop.exception)
        self.assertIn(f"{self.script} ort 1", message)
        self.assertIn("ended (3) before answering", message)
        self.assertIn("fake: cannot load the model", message)

    def test_a_server_that_answers_nonsense_stops_the_harness(self):
        with self.assertRaises(SystemExit) as stop:
            self.bench.interleave({"kiln": self.start("kiln", 10, "nonsense")}, 10)
        self.assertIn("answered 'not json', without 'times_ms'", str(stop.exception))


if __name__ == "__main__":
    unittest.main()
