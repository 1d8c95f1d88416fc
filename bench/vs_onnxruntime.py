#!/usr/bin/python3
"""kiln and ONNX Runtime side by side, on the same model files, inputs and thread count.

Every figure is a median over PAIRS alternating rounds (kiln, ORT, kiln, ORT, ...: both see the
same machine conditions), each round a fresh process timing a few runs after warm-up runs. Per
model and batch it reports kiln's and ORT's medians and their ratio, against the ResNet replicas
as shipped (weights also listed in graph.input, so ORT must treat them as inputs) and against
ORT's best case (the same model with those inputs stripped), kiln's GFLOP/s as a fraction of the
FMA peak that bench/fma_peak measures in the same run, the dynamic-batch module against one
compiled with --bind N=B (both in one `kiln bench --against` process per round, runs alternating,
so the machine's drifting load falls on both, and the rounds take turns at which module comes
first; the figure is the median over rounds of each round's median ratio of adjacent runs),
compile and load time, the cold (first) run at each batch, and peak RSS at batch 1 against the
module size. The targets of the performance issue are checked at the end.

The int8 part (--part int8, also in all) times the QDQ ResNet-50 (MODELS/qdq/resnet50-v1-12-qdq
.onnx, from `make models-qdq-resnet`) at batch 1 and 8: kiln against ONNX Runtime on the same QDQ
file (ORT fuses the QDQ patterns into its own int8 kernels), and kiln's int8 module against
kiln's float resnet50-v1-12 module in one `kiln bench --against` process per round (as the
dynamic/bound pair above). It names the CPU, its VNNI flags and the ISA of the oneDNN int8
convolution kiln ran.

The fp16 part (--part fp16, also in all) converts resnet50-v1-12 to f16 (bench/to_float16.py)
and times kiln's f16 module against its f32 one at batch 1 and 8 (alternating processes), and,
from one `kiln bench --per-dispatch` run of each, the time of their 53 convolutions (f16 on a CPU
without f16 arithmetic computes in f32 with conversions): f16 conv throughput / f32.

Usage: bench/vs_onnxruntime.py --build BUILD --models MODELS [--pairs 10] [--threads 2]
       [--quick] [--part all|resnet|int8|fp16|suite] [--json OUT.json]
(bench/vs_onnxruntime.sh builds what it needs first and runs this.)
"""
import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESNETS = ["resnet50-v1-12", "resnet50-v2-7"]


def run(cmd, env=None):
    """Runs cmd and returns its stdout; exits with the command's stderr on failure."""
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env)
    if proc.returncode != 0:
        sys.exit(f"vs_onnxruntime: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


# kiln's other suite models (tests/models/gen_small.py, gen_models.py): name, path under the
# model dir, input name, dtype, and the (shape, data file) of each size measured.
SUITE_MODELS = [
    ("tiny_cnn", "small/tiny_cnn.onnx", "data", "f32",
     [([1, 3, 8, 8], "small/tiny_input_b1.bin"), ([3, 3, 8, 8], "small/tiny_input_b3.bin")]),
    ("mobilenetv2_like", "nets/mobilenetv2_like.onnx", "input", "f32",
     [([1, 3, 64, 64], "nets/mobilenetv2_like.input_n1.bin"),
      ([3, 3, 64, 64], "nets/mobilenetv2_like.input_n3.bin")]),
    ("transformer_encoder", "nets/transformer_encoder.onnx", "input_ids", "i64",
     [([1, 16], "nets/transformer_encoder.ids_b1_s16.bin"),
      ([3, 16], "nets/transformer_encoder.ids_b3_s16.bin")]),
    ("fcn_segmenter", "nets/fcn_segmenter.onnx", "input", "f32",
     [([1, 3, 48, 64], "nets/fcn_segmenter.input_n1_h48_w64.bin"),
      ([2, 3, 48, 64], "nets/fcn_segmenter.input_n2_h48_w64.bin")]),
]


class Bench:
    def __init__(self, args):
        self.args = args
        self.kiln = os.path.join(args.build, "tools", "kiln")
        self.fma_peak = os.path.join(args.build, "bench", "fma_peak")
        self.work = os.path.join(args.build, "bench-work")
        self.ort = os.path.join(ROOT, "tools", "ort", "run_ort.js")
        os.makedirs(self.work, exist_ok=True)

    # --- one timed process each ---
    def kiln_bench(self, module, spec, warmup, repeat, against=None):
        out = os.path.join(self.work, "kiln_bench.json")
        run([self.kiln, "bench", f"--module={module}", f"--input={spec}",
             f"--threads={self.args.threads}", f"--warmup={warmup}", f"--repeat={repeat}",
             f"--json={out}"] + ([f"--against={against}"] if against else []))
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

    def ort_time(self, model, name, shape, data, warmup, repeat, dtype="f32"):
        dims = "x".join(str(d) for d in shape)
        text = run(["node", self.ort, "time", model, "--input", f"{name}={dims}:{dtype}:{data}",
                    "--threads", str(self.args.threads), "--warmup", str(warmup),
                    "--repeat", str(repeat)])
        return json.loads(text)

    def peak(self):
        return json.loads(run([self.fma_peak, "--threads", str(self.args.threads), "--json"]))

    def compile(self, model, out, bind=None):
        cmd = [self.kiln, "compile", model, "--target=cpu", "-o", out]
        if bind:
            cmd.append(f"--bind={bind}")
        start = time.perf_counter()
        run(cmd)
        return (time.perf_counter() - start) * 1000

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
    def alternate(self, contenders, warmup, repeat):
        """contenders: name -> fn(warmup, repeat) returning a dict with median_ms. One untimed
        warm-up round (page cache, CPU clocks), then PAIRS rounds in turn. Returns name -> list
        of the per-process results."""
        for fn in contenders.values():
            fn(1, 1)
        results = {name: [] for name in contenders}
        for _ in range(self.args.pairs):
            for name, fn in contenders.items():
                results[name].append(fn(warmup, repeat))
        return results


def med(results, key="median_ms"):
    return statistics.median(r[key] for r in results)


def rounds_ms(res):
    """Each contender's per-round medians, as the JSON rows keep them."""
    return {name: [r["median_ms"] for r in results] for name, results in res.items()}


IMAGE_BYTES = 3 * 224 * 224 * 4


def image_batches(bench):
    """For batch 1 and 8 of the ResNet image inputs: (batch, input file, warm-up runs, timed runs)."""
    for batch in (1, 8):
        data = bench.input_file(os.path.join(bench.args.models, "input_b8.bin"), batch, IMAGE_BYTES)
        yield (batch, data) + ((3, 10) if batch == 1 else (1, 4))


def cpu_description():
    """The CPU's model name and its VNNI/AMX flags (what the int8 kernels can use)."""
    name, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name == "unknown CPU":
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    found = [f for f in ("avx512_vnni", "avx_vnni", "amx_int8") if f in flags]
    return f"{name}; {', '.join(found) or 'no VNNI'}"


def int8_rows(bench, summary):
    """The QDQ ResNet-50: kiln vs ORT on the same file, and kiln int8 vs kiln float."""
    args = bench.args
    qmodel = os.path.join(args.models, "qdq", "resnet50-v1-12-qdq.onnx")
    fmodel = os.path.join(args.models, "resnet50-v1-12.onnx")
    if not os.path.exists(qmodel):
        sys.exit(f"vs_onnxruntime: {qmodel} missing; run `make models-qdq-resnet` "
                 f"(tests/models/gen_qdq_resnet.py --models {args.models})")
    qmodule = os.path.join(bench.work, "resnet50-v1-12-qdq.kmod")
    fmodule = os.path.join(bench.work, "resnet50-v1-12.kmod")
    bench.compile(qmodel, qmodule)
    bench.compile(fmodel, fmodule)
    data1 = bench.input_file(os.path.join(args.models, "input_b8.bin"), 1, IMAGE_BYTES)
    # oneDNN names the implementation (and so the ISA) of each int8 convolution it runs.
    verbose = run([bench.kiln, "bench", f"--module={qmodule}", f"--input=1x3x224x224xf32=@{data1}",
                   f"--threads={args.threads}", "--warmup=0", "--repeat=1"],
                  env=dict(os.environ, ONEDNN_VERBOSE="1"))
    kernels = sorted({f[4] for f in (line.split(",") for line in verbose.splitlines())
                      if len(f) > 6 and f[1:4] == ["exec", "cpu", "convolution"]
                      and ("src_u8" in f[6] or "src_s8" in f[6])})
    summary["int8_cpu"] = cpu_description()
    summary["int8_conv_kernels"] = kernels
    print(f"\nresnet50-v1-12-qdq (int8): {summary['int8_cpu']}; kiln's int8 convolutions: "
          f"{', '.join(kernels) or 'none (portable path)'}", flush=True)
    rows = []
    for batch, data, warmup, repeat in image_batches(bench):
        shape = [batch, 3, 224, 224]
        spec = f"{batch}x3x224x224xf32=@{data}"
        res = bench.alternate({
            "kiln_int8": lambda w, r: bench.kiln_bench(qmodule, spec, w, r),
            "ort_int8": lambda w, r: bench.ort_time(qmodel, "data", shape, data, w, r),
            "int8_vs_float": bench.kiln_pair(qmodule, fmodule, spec),
        }, warmup, repeat)
        k, o = med(res["kiln_int8"]), med(res["ort_int8"])
        row = {"model": "resnet50-v1-12-qdq", "batch": batch, "kiln_ms": k, "ort_shipped_ms": o,
               "ratio_shipped": k / o, "kiln_float_ms": med(res["int8_vs_float"], "other_ms"),
               "int8_vs_float": med(res["int8_vs_float"], "ratio"), "rounds_ms": rounds_ms(res)}
        rows.append(row)
        print(f"  batch {batch}: kiln int8 {k:.1f} ms | ORT int8 {o:.1f} ms -> kiln/ORT {k / o:.3f} | "
              f"kiln float {row['kiln_float_ms']:.1f} ms -> kiln int8/float "
              f"{row['int8_vs_float']:.3f}", flush=True)
    return rows


def conv_ms(per_dispatch):
    """The summed median times of the Conv rows of `kiln bench --per-dispatch`'s table."""
    total = 0.0
    for line in per_dispatch.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[0].isdigit() and "Conv" in fields[4:6]:
            total += float(fields[1])
    return total


def fp16_rows(bench):
    """ResNet-50 v1 in f16 against f32 in kiln: whole-model time and convolution throughput."""
    args = bench.args
    fmodel = os.path.join(args.models, "resnet50-v1-12.onnx")
    hmodel = os.path.join(bench.work, "resnet50-v1-12-f16.onnx")
    if not os.path.exists(hmodel) or os.path.getmtime(hmodel) < os.path.getmtime(fmodel):
        run(["/usr/bin/python3", os.path.join(ROOT, "bench", "to_float16.py"), fmodel, hmodel])
    fmodule = os.path.join(bench.work, "resnet50-v1-12.kmod")
    hmodule = os.path.join(bench.work, "resnet50-v1-12-f16.kmod")
    bench.compile(fmodel, fmodule)
    bench.compile(hmodel, hmodule)
    print("\nresnet50-v1-12 in f16 (bench/to_float16.py) against f32, kiln only", flush=True)
    rows = []
    for batch, data, warmup, repeat in image_batches(bench):
        half = data[:-4] + ".f16.bin"
        with open(data, "rb") as f, open(half, "wb") as g:
            g.write(array_f32_to_f16(f.read()))
        fspec = f"{batch}x3x224x224xf32=@{data}"
        hspec = f"{batch}x3x224x224xf16=@{half}"
        res = bench.alternate({
            "kiln_f16": lambda w, r: bench.kiln_bench(hmodule, hspec, w, r),
            "kiln_f32": lambda w, r: bench.kiln_bench(fmodule, fspec, w, r),
        }, warmup, repeat)
        convs = {}
        for name, module, spec in (("f16", hmodule, hspec), ("f32", fmodule, fspec)):
            convs[name] = conv_ms(run([bench.kiln, "bench", f"--module={module}", f"--input={spec}",
                                       f"--threads={args.threads}", f"--warmup={warmup}",
                                       f"--repeat={repeat}", "--per-dispatch"]))
        h, f = med(res["kiln_f16"]), med(res["kiln_f32"])
        row = {"model": "resnet50-v1-12-f16", "batch": batch, "kiln_ms": h, "kiln_f32_ms": f,
               "f16_vs_f32": h / f, "conv_ms_f16": convs["f16"], "conv_ms_f32": convs["f32"],
               "conv_throughput_ratio": convs["f32"] / convs["f16"], "rounds_ms": rounds_ms(res)}
        rows.append(row)
        print(f"  batch {batch}: kiln f16 {h:.1f} ms | kiln f32 {f:.1f} ms -> f16/f32 {h / f:.3f} | "
              f"convs f16 {convs['f16']:.1f} ms, f32 {convs['f32']:.1f} ms -> f16 conv throughput "
              f"/ f32 {row['conv_throughput_ratio']:.3f}", flush=True)
    return rows


def array_f32_to_f16(data):
    """Little-endian f32 bytes as little-endian f16 bytes (round to nearest even)."""
    import numpy as np  # only this part needs numpy
    return np.frombuffer(data, "<f4").astype("<f2").tobytes()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="v1 only, batch 1 and 8, 3 pairs")
    parser.add_argument("--json", help="also write every figure here")
    parser.add_argument("--part", choices=("all", "resnet", "int8", "fp16", "suite"),
                        default="all",
                        help="the ResNet-50 replicas, the QDQ (int8) ResNet-50, ResNet-50 in f16 "
                             "against f32, the suite's other models, or all")
    args = parser.parse_args()
    if args.quick:
        args.pairs = min(args.pairs, 3)
    bench = Bench(args)
    summary = {"threads": args.threads, "pairs": args.pairs, "load_average_start": load_average()}
    print(f"kiln vs onnxruntime-node, {args.threads} threads, {args.pairs} alternating pairs per "
          f"figure; load average {summary['load_average_start']:.2f} at start", flush=True)

    peak_start = bench.peak()
    print(f"FMA peak: AVX2 {peak_start['avx2_gflops']:.1f} GFLOP/s, AVX-512 "
          f"{peak_start['avx512_gflops'] or 0:.1f} GFLOP/s ({args.threads} threads)", flush=True)

    rows, checks = [], []
    models = [] if args.part in ("suite", "int8", "fp16") else RESNETS[:1] if args.quick else RESNETS
    for model in models:
        shipped = os.path.join(args.models, f"{model}.onnx")
        best = os.path.join(bench.work, f"{model}-ort-best.onnx")
        if not os.path.exists(best) or os.path.getmtime(best) < os.path.getmtime(shipped):
            run(["/usr/bin/python3", os.path.join(ROOT, "bench", "strip_initializer_inputs.py"),
                 shipped, best])
        module = os.path.join(bench.work, f"{model}.kmod")
        compile_ms = statistics.median(bench.compile(shipped, module) for _ in range(3))
        module_mib = os.path.getsize(module) / 2**20
        print(f"\n{model}: compile {compile_ms:.0f} ms (median of 3), module {module_mib:.1f} MiB",
              flush=True)
        for batch, data, warmup, repeat in image_batches(bench):
            shape = [batch, 3, 224, 224]
            spec = f"{batch}x3x224x224xf32=@{data}"
            bound = os.path.join(bench.work, f"{model}-N{batch}.kmod")
            bench.compile(shipped, bound, bind=f"N={batch}")
            res = bench.alternate({
                "kiln": lambda w, r: bench.kiln_bench(module, spec, w, r),
                "ort_shipped": lambda w, r: bench.ort_time(shipped, "data", shape, data, w, r),
                "kiln_vs_bound": bench.kiln_pair(module, bound, spec),
                "ort_best": lambda w, r: bench.ort_time(best, "data", shape, data, w, r),
            }, warmup, repeat)
            k, o, ob = (med(res[n]) for n in ("kiln", "ort_shipped", "ort_best"))
            kb = med(res["kiln_vs_bound"], "other_ms")
            dyn_bound = med(res["kiln_vs_bound"], "ratio")
            gflop = res["kiln"][0]["gflop"]
            row = {
                "model": model, "batch": batch, "kiln_ms": k, "ort_shipped_ms": o,
                "ort_best_ms": ob, "kiln_bound_ms": kb, "ratio_shipped": k / o,
                "ratio_best": k / ob, "dynamic_vs_bound": dyn_bound, "gflop": gflop,
                "kiln_gflop_per_s": gflop / (k / 1000), "compile_ms": compile_ms,
                "load_ms": med(res["kiln"], "load_ms"), "cold_ms": med(res["kiln"], "cold_ms"),
                "peak_rss_mib": med(res["kiln"], "peak_rss_mib"), "module_mib": module_mib,
                "kiln_cpu_ms": med(res["kiln"], "cpu_median_ms"), "rounds_ms": rounds_ms(res),
            }
            rows.append(row)
            print(f"  batch {batch}: kiln {k:.1f} ms | ORT shipped {o:.1f} ms -> kiln/ORT "
                  f"{k / o:.3f} | ORT best case {ob:.1f} ms -> kiln/ORT {k / ob:.3f} | "
                  f"dynamic/bound {dyn_bound:.3f}", flush=True)
            print(f"           kiln {row['kiln_gflop_per_s']:.1f} GFLOP/s; cold run "
                  f"{row['cold_ms']:.0f} ms, load {row['load_ms']:.1f} ms, peak RSS "
                  f"{row['peak_rss_mib']:.0f} MiB (module {module_mib:.0f} MiB)", flush=True)

    if args.part in ("all", "int8"):
        rows += int8_rows(bench, summary)
    if args.part in ("all", "fp16"):
        rows += fp16_rows(bench)

    # The other models of the suite (their weights are not graph inputs), two sizes each.
    for name, path, input_name, dtype, sizes in SUITE_MODELS:
        model = os.path.join(args.models, path)
        if not os.path.exists(model) or args.quick or args.part in ("resnet", "int8", "fp16"):
            continue
        module = os.path.join(bench.work, f"{name}.kmod")
        bench.compile(model, module)
        for shape, data_file in sizes:
            data = os.path.join(args.models, data_file)
            dims = "x".join(str(d) for d in shape)
            spec = f"{dims}x{dtype}=@{data}"
            res = bench.alternate({
                "kiln": lambda w, r: bench.kiln_bench(module, spec, w, r),
                "ort_shipped": lambda w, r: bench.ort_time(model, input_name, shape, data, w, r,
                                                           dtype),
            }, 20, 200)
            k, o = med(res["kiln"]), med(res["ort_shipped"])
            rows.append({"model": name, "batch": dims, "kiln_ms": k, "ort_shipped_ms": o,
                         "ratio_shipped": k / o, "rounds_ms": rounds_ms(res)})
            print(f"\n{name} {dims}: kiln {k * 1000:.1f} us | ORT {o * 1000:.1f} us -> "
                  f"kiln/ORT {k / o:.3f}", flush=True)

    peak_end = bench.peak()
    peak = max(peak_start["peak_gflops"], peak_end["peak_gflops"])
    summary["fma_peak_gflops"] = peak
    summary["fma_peak"] = [peak_start, peak_end]
    summary["load_average_end"] = load_average()
    for row in rows:
        if "kiln_gflop_per_s" in row:
            row["fraction_of_peak"] = row["kiln_gflop_per_s"] / peak
    summary["rows"] = rows

    print(f"\nFMA peak {peak:.1f} GFLOP/s (best of start and end); load average "
          f"{summary['load_average_end']:.2f} at end")
    print(f"{'model':<20}{'batch':>6}{'kiln ms':>10}{'ORT ms':>10}{'k/ORT':>8}{'ORT best':>10}"
          f"{'k/best':>8}{'dyn/bound':>10}{'GFLOP/s':>9}{'% peak':>8}")
    for r in rows:
        if "f16_vs_f32" in r:
            print(f"{r['model']:<20}{r['batch']:>6}{r['kiln_ms']:>10.2f}   kiln f32 "
                  f"{r['kiln_f32_ms']:.2f} ms, f16/f32 time {r['f16_vs_f32']:.3f}, f16 conv "
                  f"throughput / f32 {r['conv_throughput_ratio']:.3f}")
        elif "int8_vs_float" in r:
            print(f"{r['model']:<20}{r['batch']:>6}{r['kiln_ms']:>10.2f}{r['ort_shipped_ms']:>10.2f}"
                  f"{r['ratio_shipped']:>8.3f}   kiln int8/float {r['int8_vs_float']:.3f}")
        elif "ort_best_ms" in r:
            print(f"{r['model']:<20}{r['batch']:>6}{r['kiln_ms']:>10.2f}{r['ort_shipped_ms']:>10.2f}"
                  f"{r['ratio_shipped']:>8.3f}{r['ort_best_ms']:>10.2f}{r['ratio_best']:>8.3f}"
                  f"{r['dynamic_vs_bound']:>10.3f}{r['kiln_gflop_per_s']:>9.1f}"
                  f"{100 * r['fraction_of_peak']:>7.1f}%")
        else:
            print(f"{r['model']:<20}{r['batch']:>6}{r['kiln_ms']:>10.4f}{r['ort_shipped_ms']:>10.4f}"
                  f"{r['ratio_shipped']:>8.3f}")

    def check(what, value, limit, fmt="{:.3f}"):
        ok = value <= limit
        checks.append({"target": what, "value": value, "limit": limit, "met": ok})
        print(f"  [{'x' if ok else ' '}] {what}: {fmt.format(value)} (target <= {fmt.format(limit)})")

    print("\ntargets:")
    for r in rows:
        if "f16_vs_f32" in r:
            ok = r["conv_throughput_ratio"] >= 0.5
            checks.append({"target": f"{r['model']} b{r['batch']} f16 conv throughput / f32",
                           "value": r["conv_throughput_ratio"], "limit": 0.5, "met": ok})
            print(f"  [{'x' if ok else ' '}] {r['model']} b{r['batch']} f16 conv throughput / f32: "
                  f"{r['conv_throughput_ratio']:.3f} (target >= 0.500)")
            continue
        if "int8_vs_float" in r:
            check(f"{r['model']} b{r['batch']} kiln int8/kiln float", r["int8_vs_float"], 1.0)
            check(f"{r['model']} b{r['batch']} kiln int8/ORT int8", r["ratio_shipped"], 1.0)
            continue
        if "ort_best_ms" not in r:
            check(f"{r['model']} b{r['batch']} kiln/ORT", r["ratio_shipped"], 1.0)
            continue
        tag = f"{r['model']} b{r['batch']}"
        check(f"{tag} kiln/ORT as shipped", r["ratio_shipped"], 0.65 if r["batch"] == 1 else 0.85)
        check(f"{tag} kiln/ORT best case", r["ratio_best"], 0.95)
        check(f"{tag} dynamic/bound", r["dynamic_vs_bound"], 1.02)
        if r["batch"] == 8:
            ok = r["fraction_of_peak"] >= 0.8
            checks.append({"target": f"{tag} fraction of FMA peak", "value": r["fraction_of_peak"],
                           "limit": 0.8, "met": ok})
            print(f"  [{'x' if ok else ' '}] {tag} fraction of FMA peak: "
                  f"{r['fraction_of_peak']:.3f} (target >= 0.800)")
        if r["batch"] == 1:
            check(f"{r['model']} compile ms", r["compile_ms"], 3000, "{:.0f}")
            check(f"{r['model']} load ms", r["load_ms"], 100, "{:.1f}")
            check(f"{tag} peak RSS MiB", r["peak_rss_mib"], r["module_mib"] + 64, "{:.0f}")
    summary["checks"] = checks
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
        print(f"\nfigures: {args.json}")


if __name__ == "__main__":
    main()
