#!/usr/bin/python3
"""What calling kiln from Python costs, against the same work done from C and by `kiln bench`.

1. Calling overhead: kiln.Session.run on a tiny model (x [1, 16] -> Relu) against
   kiln_session_run called from C (bench/capi_timing.c, loaded into this process with ctypes,
   on the same libkiln.so, module and input), in ROUNDS alternating blocks of CALLS calls each
   (C, Python, C, Python, ...: both see the same machine conditions). Reports each side's median
   time per call over the rounds and the median of the per-round differences (target: Python
   at most 10 us more).
2. ResNet-50 (a replica of the zoo's resnet50-v1-12, dynamic batch) from Python against `kiln
   bench` on the same module, batch and thread count, alternating: each round one `kiln bench`
   process (--warmup 1, --repeat REPEAT) then REPEAT timed Session.run calls after one warm-up in
   this process. Reports both medians and the median of the per-round ratios Python/kiln
   (target: at most 1.02), the ratio of the fastest runs (less sensitive to other processes on
   a busy machine), and Session.run against kiln_session_run from C in this process (each
   Python run followed by a C run; the median of the pairs' ratios).

Usage: bench/python_overhead.py --build BUILD [--models MODELS] [--rounds 20] [--calls 2000]
       [--resnet-rounds 5] [--repeat 5] [--batch 1] [--threads 0] [--json OUT.json]
Needs the build's kiln, kiln_python and kiln_capi_timing targets (`cmake --build BUILD --target
kiln kiln_python kiln_capi_timing`) and, for part 2, `make models`.
"""

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_model():
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class CTiming:
    """bench/capi_timing.c through ctypes."""

    def __init__(self, library, module_path, threads):
        self.lib = ctypes.CDLL(library)
        self.lib.kiln_timing_open.restype = ctypes.c_void_p
        self.lib.kiln_timing_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                              ctypes.c_size_t]
        self.lib.kiln_timing_run.restype = ctypes.c_double
        self.lib.kiln_timing_run.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                             ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t,
                                             ctypes.c_void_p, ctypes.c_int64]
        self.lib.kiln_timing_error.restype = ctypes.c_char_p
        self.lib.kiln_timing_error.argtypes = [ctypes.c_void_p]
        self.lib.kiln_timing_close.argtypes = [ctypes.c_void_p]
        error = ctypes.create_string_buffer(1024)
        self.handle = self.lib.kiln_timing_open(module_path.encode(), threads, error, 1024)
        if not self.handle:
            sys.exit(f"python_overhead: {error.value.decode()}")

    def ns_per_call(self, x, calls):
        dims = (ctypes.c_int64 * x.ndim)(*x.shape)
        ns = self.lib.kiln_timing_run(self.handle, 1, dims, x.ndim, x.ctypes.data, calls)
        if ns < 0:
            sys.exit(f"python_overhead: {self.lib.kiln_timing_error(self.handle).decode()}")
        return ns

    def close(self):
        self.lib.kiln_timing_close(self.handle)


def python_ns_per_call(session, x, calls):
    inputs = [x]
    run = session.run
    start = time.perf_counter_ns()
    for _ in range(calls):
        run(inputs)
    return (time.perf_counter_ns() - start) / calls


def calling_overhead(kiln, build, work, rounds, calls, threads):
    module = os.path.join(work, "tiny.kmod")
    kiln.compile(tiny_model(), output=module)
    library = os.path.join(build, "bench", "libkiln_capi_timing.so")
    if not os.path.exists(library):
        sys.exit(f"python_overhead: no {library}: build the kiln_capi_timing target")
    c = CTiming(library, module, threads)
    session = kiln.Session(module, threads=threads)
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
    c.ns_per_call(x, calls)  # warm-up: plans prepared, memory touched
    python_ns_per_call(session, x, calls)
    c_times, py_times, diffs = [], [], []
    for _ in range(rounds):
        c_ns = c.ns_per_call(x, calls)
        py_ns = python_ns_per_call(session, x, calls)
        c_times.append(c_ns)
        py_times.append(py_ns)
        diffs.append(py_ns - c_ns)
    c.close()
    return {
        "c_us_per_call": statistics.median(c_times) / 1e3,
        "python_us_per_call": statistics.median(py_times) / 1e3,
        "overhead_us": statistics.median(diffs) / 1e3,
        "overhead_us_rounds": [round(d / 1e3, 3) for d in diffs],
        "rounds": rounds, "calls_per_round": calls,
    }


def resnet(kiln, build, models, work, rounds, repeat, batch, threads):
    kiln_binary = os.path.join(build, "tools", "kiln")
    model = os.path.join(models, "resnet50-v1-12.onnx")
    data_file = os.path.join(models, f"input_b{batch}.bin")
    if not os.path.exists(model):
        sys.exit(f"python_overhead: no {model}: run `make models`")
    module = os.path.join(work, "resnet50-v1-12.kmod")
    start = time.perf_counter()
    kiln.compile(model, output=module)
    compile_s = time.perf_counter() - start
    shape = (batch, 3, 224, 224)
    if os.path.exists(data_file):
        x = np.fromfile(data_file, np.float32, count=int(np.prod(shape))).reshape(shape)
    else:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        data_file = os.path.join(work, f"input_b{batch}.bin")
        x.tofile(data_file)
    session = kiln.Session(module, threads=threads)
    c = CTiming(os.path.join(build, "bench", "libkiln_capi_timing.so"), module, threads)
    session.run([x])  # cold runs
    c.ns_per_call(x, 1)
    spec = "x".join(map(str, shape)) + "xf32=@" + data_file
    kiln_med, kiln_min, py_med, py_min, ratios, c_pairs = [], [], [], [], [], []
    for r in range(rounds):
        report = os.path.join(work, f"bench_{r}.json")
        proc = subprocess.run(
            [kiln_binary, "bench", f"--module={module}", f"--input={spec}", "--warmup=1",
             f"--repeat={repeat}", f"--threads={threads}", f"--json={report}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            sys.exit(f"python_overhead: kiln bench failed:\n{proc.stderr}")
        with open(report) as f:
            figures = json.load(f)
        session.run([x])  # warm-up, as kiln bench's
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            session.run([x])
            times.append((time.perf_counter() - t0) * 1e3)
            # The same run from C in this process, right after: Python / C per adjacent pair.
            c_pairs.append(times[-1] / (c.ns_per_call(x, 1) / 1e6))
        kiln_med.append(figures["median_ms"])
        kiln_min.append(figures["min_ms"])
        py_med.append(statistics.median(times))
        py_min.append(min(times))
        ratios.append(py_med[-1] / kiln_med[-1])
    c.close()
    return {
        "batch": batch, "threads": threads, "compile_s": compile_s,
        "kiln_bench_median_ms": statistics.median(kiln_med),
        "python_median_ms": statistics.median(py_med),
        "ratio": statistics.median(ratios),
        "ratio_rounds": [round(r, 4) for r in ratios],
        "kiln_bench_min_ms": min(kiln_min), "python_min_ms": min(py_min),
        "ratio_of_minimums": min(py_min) / min(kiln_min),
        "python_vs_c_in_process": statistics.median(c_pairs),
        "rounds": rounds, "repeat": repeat,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default=None, help="the models of `make models` "
                        "(default $KILN_MODEL_DIR or BUILD/models)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--resnet-rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--skip-resnet", action="store_true")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    models = args.models or os.environ.get("KILN_MODEL_DIR") or os.path.join(build, "models")
    sys.path.insert(0, os.path.join(build, "python"))
    import kiln

    summary = {"kiln": kiln.version(), "cpus": os.cpu_count(),
               "load_average": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="kiln-python-overhead-") as work:
        o = calling_overhead(kiln, build, work, args.rounds, args.calls, args.threads)
        summary["calling_overhead"] = o
        print(f"calling overhead, x [1,16] -> Relu, {o['rounds']} rounds x {o['calls_per_round']} "
              f"calls: C {o['c_us_per_call']:.2f} us/call, Python {o['python_us_per_call']:.2f} "
              f"us/call, Python - C {o['overhead_us']:.2f} us "
              f"[{'ok' if o['overhead_us'] <= 10 else 'MISSED'}: target <= 10 us]")
        if not args.skip_resnet:
            r = resnet(kiln, build, models, work, args.resnet_rounds, args.repeat, args.batch,
                       args.threads)
            summary["resnet50"] = r
            print(f"ResNet-50 v1 batch {r['batch']}, threads {r['threads'] or 'all'}, "
                  f"{r['rounds']} rounds x {r['repeat']} runs: kiln bench "
                  f"{r['kiln_bench_median_ms']:.1f} ms, Python {r['python_median_ms']:.1f} ms, "
                  f"Python/kiln {r['ratio']:.3f} "
                  f"[{'ok' if r['ratio'] <= 1.02 else 'MISSED'}: target <= 1.02] "
                  f"(per round: {r['ratio_rounds']}); fastest runs: kiln bench "
                  f"{r['kiln_bench_min_ms']:.1f} ms, Python {r['python_min_ms']:.1f} ms, ratio "
                  f"{r['ratio_of_minimums']:.3f}; Python / C (kiln_session_run) in this process, "
                  f"adjacent runs: {r['python_vs_c_in_process']:.3f}")
    summary["load_average_after"] = os.getloadavg()[0]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
