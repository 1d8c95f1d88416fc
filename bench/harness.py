"""The timing harness shared by bench/vs_onnxruntime.py's parts: one timed process per call
(`kiln bench`, tools/ort/run_ort.js `time`, bench/fma_peak), `kiln compile`, alternating rounds of
several contenders so that the machine's drifting load falls on all of them, and interleaved
bursts of long-lived timing servers (`kiln bench --serve`, run_ort.js `serve`) for kiln against
ONNX Runtime (Bench.interleave: pairs of figures taken within a second of each other, each engine
warmed until its runs settle, several processes of each).

Bench(args) needs args.build, args.models and args.threads (the default thread count of every
timed process), args.pairs (rounds per figure); args.kiln_env, when set, is extra environment for
every kiln process (e.g. DNNL_MAX_CPU_ISA=AVX2 to run oneDNN's AVX2 code path on an AVX-512 CPU).
"""
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
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


class Server:
    """A timing server (`kiln bench --serve` or run_ort.js `serve`): started by the constructor,
    which waits for its ready line (kept as .ready); runs(n) has it run n times and returns the
    wall times in ms; close() ends it. Any failure exits the harness with the command and its
    stderr, as run() does."""

    def __init__(self, cmd, env=None):
        self.cmd = cmd
        # stderr goes to a file: a pipe nobody reads could fill and stall the server.
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True, env=env)
        self.ready = self._reply("ready")

    def _fail(self, why):
        self.stderr.seek(0)
        stderr = self.stderr.read()
        self.stop()
        sys.exit(f"vs_onnxruntime: {' '.join(self.cmd)} {why}:\n{stderr}")

    def stop(self):
        """Ends the server at once (another contender failed)."""
        if not self.stderr.closed:
            self.proc.kill()
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout, self.stderr):
                f.close()

    def _reply(self, key):
        line = self.proc.stdout.readline()
        if not line:
            self._fail(f"ended ({self.proc.wait()}) before answering")
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            reply = {}
        if key not in reply:
            self._fail(f"answered {line.strip()!r}, without {key!r}")
        return reply

    def runs(self, count):
        self.proc.stdin.write(f"{count}\n")
        self.proc.stdin.flush()
        return self._reply("times_ms")["times_ms"]

    def close(self):
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        if self.proc.wait() != 0:
            self._fail(f"failed ({self.proc.returncode}) on quit")
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.stderr.close()


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

    def kiln_server(self, module, spec, warmup, threads=None):
        """`kiln bench --serve` on `module` (spec: as for kiln_bench), after `warmup` runs."""
        specs = [spec] if isinstance(spec, str) else list(spec)
        return Server([self.kiln, "bench", f"--module={module}"] + [f"--input={s}" for s in specs] +
                      [f"--threads={threads or self.args.threads}", f"--warmup={warmup}", "--serve"],
                      env=self.env)

    def ort_server(self, model, inputs, warmup, threads=None):
        """run_ort.js `serve` on `model` (inputs: as for ort_time_inputs), after `warmup` runs."""
        cmd = ["node", self.ort, "serve", model]
        for name, shape, dtype, data in inputs:
            cmd += ["--input", f"{name}={'x'.join(str(d) for d in shape)}:{dtype}:{data}"]
        return Server(cmd + ["--threads", str(threads or self.args.threads), "--warmup", str(warmup)])

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

    # --- interleaved servers ---
    # ONNX Runtime's runs settle only after several (Zen 5, 2 threads: ViT-B/16 at batch 4 501,
    # 474, 458, then 437-454 ms; the GPT-2-small-style decoder at (1,128) about 255 ms for its
    # first 9 runs, 188-206 for the next 3, then 110-130), and its speed differs from process to
    # process by up to 10% (ViT at batch 4: 456 to 527 ms over six processes in one minute), where
    # kiln's runs are within 3% from the first. So each round starts every contender afresh,
    # warms it for WARM_MS of kiln's run time (at least MIN_WARM_RUNS, at most MAX_WARM_RUNS
    # runs), and its timed runs come in bursts that alternate with the others' (the order
    # rotating), a burst's pair taken within a second; the rounds sample the processes.
    WARM_MS = 3000
    MIN_WARM_RUNS = 3
    MAX_WARM_RUNS = 200
    BURST_MS = 250
    MAX_BURST_RUNS = 50
    BURSTS_PER_ROUND = 4
    QUIET_S = 0.05  # before each burst, so that the last engine's threads have gone to sleep

    def interleave(self, starts, run_ms, rounds=None):
        """starts: name -> fn(warmup) returning a started Server; run_ms: the expected time of a
        run (sizes the warm-up and the bursts). Returns name -> one dict per round: "ready" (the
        server's ready line), "times_ms" (its timed runs) and "bursts_ms" (each burst's median)."""
        warmup = max(self.MIN_WARM_RUNS, math.ceil(self.WARM_MS / max(run_ms, 1e-3)))
        warmup = min(warmup, self.MAX_WARM_RUNS)
        per_burst = max(1, min(self.MAX_BURST_RUNS, round(self.BURST_MS / max(run_ms, 1e-3))))
        results = {name: [] for name in starts}
        names = list(starts)
        for _ in range(rounds or self.args.pairs):
            servers = {}
            try:
                for name in names:
                    servers[name] = starts[name](warmup)
                self._bursts(servers, per_burst, results)
            finally:  # a contender that failed stopped the harness: the others go too
                for server in servers.values():
                    server.stop()
        return results

    def _bursts(self, servers, per_burst, results):
        """One round of Bench.interleave on started servers; closes them and adds to results."""
        names = list(servers)
        times = {name: [] for name in names}
        bursts = {name: [] for name in names}
        for burst in range(self.BURSTS_PER_ROUND):
            turn = names[burst % len(names):] + names[:burst % len(names)]
            for name in turn:
                time.sleep(self.QUIET_S)
                # One untimed run first: the other engine's burst left the caches its own.
                ms = servers[name].runs(per_burst + 1)[1:]
                times[name] += ms
                bursts[name].append(statistics.median(ms))
        for name in names:
            servers[name].close()
            results[name].append({"ready": servers[name].ready, "times_ms": times[name],
                                  "bursts_ms": bursts[name]})


def paired_ratio(res, a, b):
    """From Bench.interleave's result: the median over all bursts of a's burst median over b's
    (each pair taken within a second), and each round's median of those ratios."""
    per_round = [[x / y for x, y in zip(ra["bursts_ms"], rb["bursts_ms"])]
                 for ra, rb in zip(res[a], res[b])]
    return (statistics.median(r for ratios in per_round for r in ratios),
            [statistics.median(ratios) for ratios in per_round])


def all_runs_median(results):
    """The median of every timed run of one contender of Bench.interleave."""
    return statistics.median(t for r in results for t in r["times_ms"])


def interleaved_rounds_ms(res):
    """Each contender's per-round medians of Bench.interleave's result, as the JSON rows keep
    them (as rounds_ms does for alternate's)."""
    return {name: [statistics.median(r["times_ms"]) for r in rounds] for name, rounds in res.items()}
