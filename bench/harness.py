"""The timing harness shared by bench/vs_onnxruntime.py's parts: one timed process per call
(`kiln bench`, tools/ort/run_ort.js `time`, bench/fma_peak), `kiln compile`, and alternating
rounds of several contenders so that the machine's drifting load falls on all of them.

Bench(args) needs args.build, args.models and args.threads (the default thread count of every
timed process), args.pairs (rounds per figure); args.kiln_env, when set, is extra environment for
every kiln process (e.g. DNNL_MAX_CPU_ISA=AVX2 to run oneDNN's AVX2 code path on an AVX-512 CPU).
"""
import itertools
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, env=None):
    """Runs cmd and returns its stdout; exits with the command's stderr on failure."""
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env)
    if proc.returncode != 0:
        sys.exit(f"vs_onnxruntime: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def cpu_info():
    """The CPU's model name (of its first core) and its feature flags, from /proc/cpuinfo."""
    name, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name == "unknown CPU":
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    return name, flags


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def med(results, key="median_ms"):
    return statistics.median(r[key] for r in results)


def rounds_ms(res):
    """Each contender's per-round medians, as the JSON rows keep them."""
    return {name: [r["median_ms"] for r in results] for name, results in res.items()}


class Bench:
    def __init__(self, args):
        self.args = args
        self.kiln = os.path.join(args.build, "tools", "kiln")
        self.fma_peak = os.path.join(args.build, "bench", "fma_peak")
        self.work = os.path.join(args.build, "bench-work")
        self.ort = os.path.join(ROOT, "tools", "ort", "run_ort.js")
        self.env = dict(os.environ, **(getattr(args, "kiln_env", None) or {}))
        os.makedirs(self.work, exist_ok=True)

    # --- one timed process each ---
    def kiln_bench(self, module, spec, warmup, repeat, against=None, threads=None, per_dispatch=False,
                   team_policy=None, against_threads=None):
        """spec: one `--input` value or a list of them (NAME=SPEC for models with several inputs);
        team_policy: kiln's --team-policy (default: kiln's own, adaptive); against_threads: the
        --against module's --threads (default: the same as module's)."""
        out = os.path.join(self.work, "kiln_bench.json")
        specs = [spec] if isinstance(spec, str) else list(spec)
        run([self.kiln, "bench", f"--module={module}"] + [f"--input={s}" for s in specs] +
            [f"--threads={threads or self.args.threads}", f"--warmup={warmup}", f"--repeat={repeat}",
             f"--json={out}"] + ([f"--against={against}"] if against else []) +
            (["--per-dispatch"] if per_dispatch else []) +
            ([f"--team-policy={team_policy}"] if team_policy else []) +
            ([f"--against-threads={against_threads}"] if against_threads else []), env=self.env)
        with open(out) as f:
            return json.load(f)

    def kiln_pair(self, module, other, spec):
        """A contender timing `module` against `other` in one `kiln bench --against` process (runs
        alternating). The module named first in that process ran about 1% slower than the other
        even when both were the same file, so rounds take turns at which comes first. Each round
        gives module's median_ms, other's other_ms and the median ratio of adjacent runs."""
        turn = itertools.count()

        def time_pair(warmup, repeat):
            if next(turn) % 2 == 0:
                r = self.kiln_bench(module, spec, warmup, repeat, against=other)
                return {"median_ms": r["median_ms"], "other_ms": r["against"]["median_ms"],
                        "ratio": r["against"]["median_of_pair_ratios"]}
            r = self.kiln_bench(other, spec, warmup, repeat, against=module)
            return {"median_ms": r["against"]["median_ms"], "other_ms": r["median_ms"],
                    "ratio": 1.0 / r["against"]["median_of_pair_ratios"]}
        return time_pair

    def ort_time(self, model, name, shape, data, warmup, repeat, dtype="f32", threads=None):
        return self.ort_time_inputs(model, [(name, shape, dtype, data)], warmup, repeat, threads)

    def ort_time_inputs(self, model, inputs, warmup, repeat, threads=None):
        """inputs: [(name, shape, dtype code, data file)]."""
        cmd = ["node", self.ort, "time", model]
        for name, shape, dtype, data in inputs:
            cmd += ["--input", f"{name}={'x'.join(str(d) for d in shape)}:{dtype}:{data}"]
        text = run(cmd + ["--threads", str(threads or self.args.threads), "--warmup", str(warmup),
                          "--repeat", str(repeat)])
        return json.loads(text)

    def peak(self):
        return json.loads(run([self.fma_peak, "--threads", str(self.args.threads), "--json"]))

    def compile(self, model, out, bind=None):
        cmd = [self.kiln, "compile", model, "--target=cpu", "-o", out]
        if bind:
            cmd.append(f"--bind={bind}")
        start = time.perf_counter()
        run(cmd, env=self.env)
        return (time.perf_counter() - start) * 1000

    def ort_best(self, shipped):
        """The model without the initializers graph.input also lists (ORT's best case), made by
        bench/strip_initializer_inputs.py next to the other work files when out of date."""
        stem = os.path.splitext(os.path.basename(shipped))[0]
        best = os.path.join(self.work, f"{stem}-ort-best.onnx")
        if not os.path.exists(best) or os.path.getmtime(best) < os.path.getmtime(shipped):
            run(["/usr/bin/python3", os.path.join(ROOT, "bench", "strip_initializer_inputs.py"),
                 shipped, best])
        return best

    def input_file(self, source, batch, sample_bytes):
        path = os.path.join(self.work, f"{os.path.basename(source)}.b{batch}.bin")
        with open(source, "rb") as f:
            data = f.read(batch * sample_bytes)
        if len(data) != batch * sample_bytes:
            sys.exit(f"vs_onnxruntime: {source} holds fewer than {batch} samples")
        with open(path, "wb") as f:
            f.write(data)
        return path

    # --- alternating rounds ---
    def alternate(self, contenders, warmup, repeat, pairs=None):
        """contenders: name -> fn(warmup, repeat) returning a dict with median_ms. One untimed
        warm-up round (page cache, CPU clocks), then PAIRS rounds in turn. Returns name -> list
        of the per-process results."""
        for fn in contenders.values():
            fn(1, 1)
        results = {name: [] for name in contenders}
        for _ in range(pairs or self.args.pairs):
            for name, fn in contenders.items():
                results[name].append(fn(warmup, repeat))
        return results
