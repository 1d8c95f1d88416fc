"""The corpus part of bench/vs_onnxruntime.py (--part corpus): every model of bench/corpus_table.py
checked, its compile cost measured, then timed against ONNX Runtime's best case.

1. Correctness first, in one `kiln test-suite` run over a manifest written to
   BUILD/bench-work/corpus_suite.json: per model and size, kiln's outputs against ONNX Runtime's
   on the same inputs with the suite's strict comparator and its default tolerance (atol 2e-5,
   rtol 1e-5; bench/corpus_table.py), the dynamic module bit for bit
   against one compiled with every dim bound (--bind), and each sample of a batch bit for bit
   against the same sample run alone ("batch_invariance": "enforce"). A failure is printed with the
   suite's figures (and its Markdown report) and makes the whole run exit 1.
2. Compile cost: `kiln compile` of the dynamic model, three times: the median wall time, with
   its CPU time and the child's peak RSS (os.wait4) against the model file's size, and the
   slowest wall time beside it. One compile can take twice the others on a virtual machine: a
   transformer's module is hundreds of MB of fresh page cache, and where the host has taken
   back the guest's free memory each new page faults into the host first (writing 652 MB of
   zeros with dd took 3.9 s of system time once, then 0.16 s on each of the next two).
3. Timing: per model and size, `kiln bench --serve` against tools/ort's `serve` (ORT's best
   case: weights stripped from graph.input where a model lists them there) in interleaved bursts
   (harness.Bench.interleave: --pairs rounds of fresh processes, each warmed until its runs
   settle, then bursts of about 0.25 s that alternate). The ratio is the median over all bursts of
   kiln's burst median over ORT's in the same pair; kiln's and ORT's figures are the medians of
   all their timed runs. Each row also prints the range of the rounds' own ratios: a wide one
   says the machine's load or ORT's speed moved from one process to the next.
   One `kiln bench --per-dispatch` run per model names the kernels kiln ran (e.g.
   brgconv:avx512_core, kiln_gemm:avx2): the ISA of its code paths.
The table (print_table) gives each ratio kiln/ORT, kiln's GFLOP/s and % of the FMA peak for the
models whose time goes to convolutions and matrix products, the geometric mean of the ratios and
how many are above 1.0, with issue 19's targets checked.
"""
import json
import math
import os
import re
import subprocess
import sys
import time

import corpus_table
from harness import all_runs_median, cpu_info, interleaved_rounds_ms, paired_ratio

ISA_NAME = re.compile(r"\b([A-Za-z0-9_]+:(?:avx|sse|amx)[A-Za-z0-9_]*)")


def cpu_isa():
    """'AVX-512' or 'AVX2' (the widest f32 FMA the CPU has) and the CPU's model name."""
    name, flags = cpu_info()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return isa, name


def inputs_of(models_dir, model, sizes):
    """(kiln --input values, ORT inputs [(name, shape, dtype, file)]) of a model at sizes."""
    kiln, ort = [], []
    for iname, (dtype, _) in model.inputs.items():
        shape = model.shape(iname, sizes)
        data = os.path.join(models_dir, model.file(iname, sizes))
        kiln.append(f"{iname}={'x'.join(map(str, shape))}x{dtype}=@{data}")
        ort.append((iname, shape, dtype, data))
    return kiln, ort


def size_label(sizes):
    return "x".join(str(v) for v in sizes.values())


# --- 1. correctness --------------------------------------------------------------------------

def suite_manifest(models):
    return {"suite": "kiln-bench-corpus", "root": "model-dir",
            "defaults": {"batch_invariance": "enforce"},
            "models": [{"name": m.name, "path": m.path, "dims": m.dims, "batch_dim": m.batch_dim,
                        "inputs": {i: {"file": m.files[i]} for i in m.inputs},
                        "tolerance": m.tolerance} for m in models]}


def check(bench, models):
    """Runs `kiln test-suite` over the models; returns {"ok", "cases", "report", "seconds"}."""
    manifest = os.path.join(bench.work, "corpus_suite.json")
    report = os.path.join(bench.work, "corpus_suite.md")
    with open(manifest, "w") as f:
        json.dump(suite_manifest(models), f, indent=1)
    print(f"\ncorrectness: kiln test-suite {manifest} (ORT references, dynamic vs bound bit for bit, "
          f"batch invariance), {len(models)} models", flush=True)
    start = time.time()
    proc = subprocess.run(
        [bench.kiln, "test-suite", manifest, "--backend=cpu", "-j1", f"--threads={bench.args.threads}",
         f"--model-dir={os.path.abspath(bench.args.models)}", f"--cache-dir={os.path.join(bench.work, 'ort-cache')}",
         f"--report={report}", "--progress=none"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=bench.env)
    seconds = time.time() - start
    print(proc.stdout.rstrip(), flush=True)
    ok = proc.returncode == 0
    if not ok:
        print(f"\n{'!' * 100}\nCORRECTNESS FAILED: `kiln test-suite {manifest}` exited {proc.returncode}; the "
              f"cases above that FAIL name the model, the check and the figures; details in {report}\n"
              f"{proc.stderr.strip()[-4000:]}\n{'!' * 100}", flush=True)
    else:
        print(f"correctness: every case passed ({seconds:.0f} s); report {report}", flush=True)
    return {"ok": ok, "exit_code": proc.returncode, "report": report, "seconds": seconds,
            "summary": proc.stdout}


# --- 2. compile cost -------------------------------------------------------------------------

def compile_once(bench, model_path, module):
    """One `kiln compile` of the model: wall and CPU seconds and the child's peak RSS."""
    cmd = [bench.kiln, "compile", model_path, "--target=cpu", "-o", module]
    start = time.perf_counter()
    with open(os.path.join(bench.work, "compile.err"), "w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=bench.env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            err.seek(0)
            sys.exit(f"vs_onnxruntime: {' '.join(cmd)} failed ({proc.returncode}):\n{err.read()}")
    # CPU time too: on a busy machine the wall time also counts waiting for the cores and the disk.
    return {"compile_s": wall, "compile_cpu_s": usage.ru_utime + usage.ru_stime,
            "compile_peak_rss_mib": usage.ru_maxrss / 1024}  # KiB on Linux


COMPILES = 3


def compile_cost(bench, model_path, module):
    """`kiln compile` of the model COMPILES times: the median compile by wall time (its wall and
    CPU seconds), the slowest wall time, and the largest peak RSS, also against the file's size."""
    runs = sorted((compile_once(bench, model_path, module) for _ in range(COMPILES)),
                  key=lambda c: c["compile_s"])
    cost = dict(runs[len(runs) // 2])
    cost["compile_peak_rss_mib"] = max(c["compile_peak_rss_mib"] for c in runs)
    file_mib = os.path.getsize(model_path) / 2**20
    cost.update({"compile_max_s": runs[-1]["compile_s"], "compiles": len(runs),
                 "file_mib": file_mib, "compile_rss_over_file": cost["compile_peak_rss_mib"] / file_mib})
    return cost


# --- 3. timing -------------------------------------------------------------------------------

def kernels_of(bench, module, specs):
    """The implementation names with an ISA that one --per-dispatch run shows (sorted)."""
    r = bench.kiln_bench(module, specs, 0, 1, per_dispatch=True)
    found = set()
    for d in r.get("dispatches", []):
        for k in d.get("kernels", []):
            found.update(ISA_NAME.findall(k))
    return sorted(found)


def time_model(bench, model, module, sizes_list, reuse):
    args = bench.args
    shipped = os.path.join(args.models, model.path)
    ort_model = bench.ort_best(shipped) if model.ort_strip else shipped
    rows = []
    kernels = None
    for sizes in sizes_list:
        label = size_label(sizes)
        specs, ort_inputs = inputs_of(args.models, model, sizes)
        if kernels is None:
            kernels = kernels_of(bench, module, specs)
        prior = reuse.get((model.name, label))
        if prior is not None:  # the ResNet part timed it in this run (same contenders)
            row = dict(prior)
            print(f"  {model.name} {label}: kiln {row['kiln_ms']:.2f} ms | ORT best {row['ort_ms']:.2f} ms -> "
                  f"kiln/ORT {row['ratio']:.3f} (from the ResNet part)", flush=True)
        else:
            first = bench.kiln_bench(module, specs, 1, 1)
            res = bench.interleave({
                "kiln": lambda warmup: bench.kiln_server(module, specs, warmup),
                "ort": lambda warmup: bench.ort_server(ort_model, ort_inputs, warmup),
            }, first["median_ms"])
            k, o = all_runs_median(res["kiln"]), all_runs_median(res["ort"])
            ratio, round_ratios = paired_ratio(res, "kiln", "ort")
            runs = sum(len(r["times_ms"]) for r in res["kiln"])
            row = {"kiln_ms": k, "ort_ms": o, "ratio": ratio, "gflop": res["kiln"][0]["ready"]["gflop"],
                   "timed_runs": runs, "round_ratios": round_ratios,
                   "rounds_ms": interleaved_rounds_ms(res)}
            print(f"  {model.name} {label}: kiln {k:.2f} ms | ORT best {o:.2f} ms -> kiln/ORT {ratio:.3f} "
                  f"({runs} timed runs each in {len(round_ratios)} rounds; rounds "
                  f"{min(round_ratios):.3f}-{max(round_ratios):.3f})", flush=True)
        row.update({"model": model.name, "sizes": label, "kind": model.kind,
                    "flops_dominate": model.flops_dominate, "kernels": kernels,
                    "kiln_gflop_per_s": row["gflop"] / (row["kiln_ms"] / 1000)})
        rows.append(row)
    return rows


def corpus_part(bench, summary, names, resnet_rows):
    """Checks, compiles and times the named corpus models. Returns (rows, correct)."""
    args = bench.args
    models = [corpus_table.BY_NAME[n] for n in names]
    missing = [os.path.join(args.models, m.path) for m in models if not os.path.exists(os.path.join(args.models, m.path))]
    if missing:
        sys.exit(f"vs_onnxruntime: corpus models missing: {', '.join(missing)}; run `make bench-models` "
                 f"(bench/corpus_models.py --out {args.models}) and `make models`")
    isa, cpu = cpu_isa()
    forced = (getattr(args, "kiln_env", None) or {}).get("DNNL_MAX_CPU_ISA")
    summary["corpus_isa"] = {"cpu": cpu, "cpu_isa": isa, "kiln_env": getattr(args, "kiln_env", None) or {}}
    print(f"\ncorpus: {cpu}: {isa}" + (f"; kiln runs with DNNL_MAX_CPU_ISA={forced}" if forced else ""), flush=True)

    correct = True
    if not args.skip_check:
        result = check(bench, models)
        summary["corpus_check"] = {k: v for k, v in result.items() if k != "summary"}
        correct = result["ok"]

    reuse = {(r["model"], str(r["batch"])): {"kiln_ms": r["kiln_ms"], "ort_ms": r["ort_best_ms"],
                                               "ratio": r["ratio_best"], "gflop": r["gflop"]}
             for r in resnet_rows if "ort_best_ms" in r}
    rows, costs = [], {}
    for model in models:
        module = os.path.join(bench.work, f"corpus-{model.name}.kmod")
        cost = compile_cost(bench, os.path.join(args.models, model.path), module)
        costs[model.name] = cost
        print(f"\n{model.name}: compile {cost['compile_s']:.1f} s ({cost['compile_cpu_s']:.1f} s CPU; "
              f"median of {cost['compiles']}, slowest {cost['compile_max_s']:.1f} s), "
              f"peak RSS {cost['compile_peak_rss_mib']:.0f} MiB "
              f"({cost['compile_rss_over_file']:.2f}x the {cost['file_mib']:.0f} MiB file)", flush=True)
        sizes = model.sizes()
        if args.quick and model.name in corpus_table.QUICK_ONE_SIZE:
            sizes = sizes[:1]
        rows += time_model(bench, model, module, sizes, reuse)
    summary["corpus_compile"] = costs
    return rows, correct


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def print_table(rows, costs, peak, summary, threads):
    """The corpus table and issue 19's targets; returns the checks ([{target, value, limit, met}])."""
    info = summary.get("corpus_isa", {})
    env = info.get("kiln_env") or {}
    isa_line = f"{info.get('cpu', '?')}: {info.get('cpu_isa', '?')}"
    if env.get("DNNL_MAX_CPU_ISA"):
        isa_line += f"; kiln with DNNL_MAX_CPU_ISA={env['DNNL_MAX_CPU_ISA']} (oneDNN's AVX2 code path)"
    print(f"\ncorpus, {threads} threads, kiln vs ONNX Runtime's best case; {isa_line}; FMA peak {peak:.1f} GFLOP/s")
    # % peak: kiln's FLOPs (convolutions and matrix products, direct algorithm) per second over the
    # FMA peak; ORT %: the same FLOPs over ONNX Runtime's time. A ratio limit L asks kiln for
    # ORT's fraction / L of the peak, so where ORT runs near the peak no kernel meets it.
    print(f"{'model':<22}{'size':>8}{'kiln ms':>10}{'ORT ms':>10}{'k/ORT':>8}{'GFLOP/s':>9}{'% peak':>8}"
          f"{'ORT %':>7}  kernels")
    for r in rows:
        r["fraction_of_peak"] = r["kiln_gflop_per_s"] / peak
        r["ort_fraction_of_peak"] = r["gflop"] / (r["ort_ms"] / 1000) / peak
        pct = (f"{100 * r['fraction_of_peak']:>7.1f}%{100 * r['ort_fraction_of_peak']:>6.1f}%"
               if r["flops_dominate"] else f"{'-':>8}{'-':>7}")
        print(f"{r['model']:<22}{r['sizes']:>8}{r['kiln_ms']:>10.3f}{r['ort_ms']:>10.3f}{r['ratio']:>8.3f}"
              f"{r['kiln_gflop_per_s']:>9.1f}{pct}  {', '.join(r['kernels'])}")
    ratios = [r["ratio"] for r in rows]
    gm, above = geomean(ratios), sum(1 for x in ratios if x > 1.0)
    summary["corpus_geomean"], summary["corpus_above_1"] = gm, above
    print(f"geometric mean of kiln/ORT over {len(ratios)} rows: {gm:.3f}; above 1.0: {above}")
    if costs:
        print(f"\n{'compile (median of ' + str(COMPILES) + ')':<22}{'wall s':>8}{'CPU s':>8}{'slowest':>9}"
              f"{'peak MiB':>10}{'file MiB':>10}{'RSS/file':>10}")
        for name, c in costs.items():
            print(f"{name:<22}{c['compile_s']:>8.1f}{c['compile_cpu_s']:>8.1f}{c['compile_max_s']:>9.1f}"
                  f"{c['compile_peak_rss_mib']:>10.0f}"
                  f"{c['file_mib']:>10.1f}"
                  f"{c['compile_rss_over_file']:>10.2f}")

    checks = []

    def target(what, value, limit, fmt="{:.3f}", row=None):
        ok = value <= limit
        check = {"target": what, "value": value, "limit": limit, "met": ok}
        needs = ""
        if row is not None and row["flops_dominate"]:
            check["needs_fraction_of_peak"] = row["ort_fraction_of_peak"] / limit
            needs = (f"; needs kiln at {100 * check['needs_fraction_of_peak']:.1f}% of FMA peak, "
                     f"now {100 * row['fraction_of_peak']:.1f}%")
        checks.append(check)
        print(f"  [{'x' if ok else ' '}] {what}: {fmt.format(value)} (target <= {fmt.format(limit)}{needs})")

    print("\ncorpus targets (issue 19):")
    target("corpus geometric mean kiln/ORT", gm, 0.80)
    target("corpus rows above 1.0", above, 0, "{}")
    for r in rows:
        strict = r["model"].startswith(("resnet50", "bert_base", "gpt2_small", "vit_b_16"))
        target(f"{r['model']} {r['sizes']} kiln/ORT", r["ratio"], 0.85 if strict else 1.0, row=r)
        if r["model"].startswith("resnet50") and r["sizes"] == "8":
            ok = r["fraction_of_peak"] >= 0.85
            checks.append({"target": f"{r['model']} 8 fraction of FMA peak", "value": r["fraction_of_peak"],
                           "limit": 0.85, "met": ok})
            print(f"  [{'x' if ok else ' '}] {r['model']} 8 fraction of FMA peak: {r['fraction_of_peak']:.3f} "
                  f"(target >= 0.850)")
    for name, c in costs.items():
        if name.startswith(("bert_base", "gpt2_small")):
            target(f"{name} compile s", c["compile_s"], 3.0)
            target(f"{name} compile peak RSS / file", c["compile_rss_over_file"], 2.0)
    return checks
