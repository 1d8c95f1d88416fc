#!/usr/bin/python3
"""kiln's differential shape fuzzer.

Generates random small ONNX graphs of the idioms exporters emit on dynamic dims (graphs.py), runs
each at four size sets with ONNX Runtime (tools/ort/run_ort.js, one node process per batch), and
hands them to `kiln test-suite` in the backend-test layout (model.onnx + test_data_set_K, ORT's
outputs as the expected ones). For every graph that gives:
  - the dynamic module, compiled once, at each size set, against ORT (the strict comparator);
  - the module compiled with every symbol bound (`--bind`) at each size set, against ORT and, bit
    for bit, against the dynamic module;
  - kiln's float64 reference evaluator (`--backend reference`) against ORT.
Each graph ends in one outcome (the first that applies):
  crash        kiln test-suite died by a signal or an exit code other than 0/1/2
  timeout      it ran past --timeout seconds
  invalid      ONNX Runtime refused the graph at some size set: a generator bug
  dyn-vs-bound the bound module's outputs differ from the dynamic module's
  nan          NaN/Inf counts of kiln's output differ from ORT's
  mismatch     outside the tolerance (compiled module or reference evaluator)
  bound-error  the dynamic module works, the bound one does not compile or run
  run-error    compiled, then failed to run (or the reference evaluator failed)
  refused      the dynamic module was not compiled (import or compile error): grouped by class
               and the normalized message
  pass

Usage:
  shape_fuzz.py --kiln build/tools/kiln [--seed 0] [--count 50 | --seconds 60] [--work DIR]
                [--json out.json] [--expect expected_refusals.json [--update]]
                [--max-refused-fraction F]
Exit 0 when nothing failed (see --help), 1 on a failure, 2 on a usage or setup error.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graphs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FAILING = ("crash", "timeout", "invalid", "dyn-vs-bound", "nan", "mismatch", "bound-error", "run-error")
ORDER = FAILING + ("refused", "pass")
ORT_TYPES = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32, "bool": np.bool_}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---- generation and ONNX Runtime ---------------------------------------------------------------

def nan_oracle(model_bytes: bytes) -> bytes | None:
    """The model ONNX Runtime runs for the expected outputs of a graph with a planted NaN, or None
    when that is the model itself.

    ONNX Runtime's MaxPool keeps or drops a NaN by its place in the window (onnxruntime-node 1.30,
    its MLAS kernel computes max(acc, x) with maxps, which returns the second operand when either
    is NaN: the 1-D windows [NaN, 1] and [0.5, NaN] give 1 and 0.5, the 2x2 windows over one NaN
    give NaN in one window and a number in the other three). kiln gives NaN for every window that
    holds a NaN, as PyTorch does (README, "NaN, Inf and edge semantics"). So each MaxPool
    becomes, for ORT only, Where(MaxPool(Cast(IsNaN(x))) > 0.5, NaN, MaxPool(x)): the same
    windows pool a 0/1 NaN indicator, exact in any implementation, and ORT still computes every
    value and every other op. kiln is given the graph as generated."""
    model = onnx.load_from_string(model_bytes)
    if not any(n.op_type == "MaxPool" and len([o for o in n.output if o]) == 1 for n in model.graph.node):
        return None
    nodes = []
    nan = onnx.helper.make_node("Constant", [], ["kiln_oracle_nan"],
                                value=onnx.helper.make_tensor("nan", onnx.TensorProto.FLOAT, [], [float("nan")]))
    nodes.append(nan)
    for k, n in enumerate(model.graph.node):
        if n.op_type != "MaxPool" or len([o for o in n.output if o]) != 1:
            nodes.append(n)
            continue
        x, y = n.input[0], n.output[0]
        t = f"kiln_oracle_{k}"
        pool = onnx.NodeProto()
        pool.CopyFrom(n)
        pool.output[0] = f"{t}_max"
        nodes.append(pool)
        nodes.append(onnx.helper.make_node("IsNaN", [x], [f"{t}_isnan"]))
        nodes.append(onnx.helper.make_node("Cast", [f"{t}_isnan"], [f"{t}_flag"], to=onnx.TensorProto.FLOAT))
        flags = onnx.NodeProto()
        flags.CopyFrom(n)
        flags.name = f"{n.name}_nan_windows" if n.name else ""
        flags.input[0] = f"{t}_flag"
        flags.output[0] = f"{t}_flag_max"
        nodes.append(flags)
        nodes.append(onnx.helper.make_node("Constant", [], [f"{t}_half"],
                                           value=onnx.helper.make_tensor("half", onnx.TensorProto.FLOAT, [], [0.5])))
        nodes.append(onnx.helper.make_node("Greater", [f"{t}_flag_max", f"{t}_half"], [f"{t}_has_nan"]))
        nodes.append(onnx.helper.make_node("Where", [f"{t}_has_nan", "kiln_oracle_nan", f"{t}_max"], [y]))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model.SerializeToString()


def write_cases(cases: list, seed: int, work: str, plant_nan: float = 0) -> list:
    """Writes each graph as a backend-test folder (inputs only) and returns ORT's job list."""
    jobs = []
    for index, case in cases:
        nan = graphs.plants_nan(seed, index, plant_nan)
        d = os.path.join(work, "graphs", case.name)
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model)
        oracle = nan_oracle(case.model) if nan else None
        if oracle is not None:
            oracle_dir = os.path.join(work, "ort", case.name)
            os.makedirs(oracle_dir, exist_ok=True)
            with open(os.path.join(oracle_dir, "oracle.onnx"), "wb") as f:
                f.write(oracle)
            oracle = os.path.join(oracle_dir, "oracle.onnx")
        for k in range(len(case.size_sets)):
            sd = os.path.join(d, f"test_data_set_{k}")
            os.makedirs(sd)
            job_inputs = []
            for j, (name, arr) in enumerate(graphs.input_arrays(case, k, seed, index, nan)):
                with open(os.path.join(sd, f"input_{j}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(arr, name).SerializeToString())
                raw = os.path.join(work, "ort", case.name, f"{k}_in{j}.bin")
                os.makedirs(os.path.dirname(raw), exist_ok=True)
                arr.tofile(raw)
                job_inputs.append({"name": name, "shape": list(arr.shape), "type": "f32", "file": raw})
            jobs.append({"model": oracle or os.path.join(d, "model.onnx"), "inputs": job_inputs,
                         "output_dir": os.path.join(work, "ort", case.name, f"out{k}")})
    return jobs


def run_ort(jobs: list, work: str, node: str, runner: str) -> None:
    path = os.path.join(work, "ort_jobs.json")
    with open(path, "w") as f:
        json.dump(jobs, f)
    r = subprocess.run([node, runner, "batch", path, "--threads", "1"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"shape_fuzz: ONNX Runtime batch failed (exit {r.returncode}): {r.stderr.strip()}")


def collect_ort(case, work: str) -> str | None:
    """Copies ORT's outputs into the data sets as output_K.pb; returns ORT's error, if any."""
    for k in range(len(case.size_sets)):
        out = os.path.join(work, "ort", case.name, f"out{k}")
        err = os.path.join(out, "error.txt")
        if os.path.exists(err):
            with open(err) as f:
                return f"size set {case.size_sets[k]}: {f.read().strip()}"
        with open(os.path.join(out, "outputs.json")) as f:
            outputs = json.load(f)
        for j, o in enumerate(outputs):
            arr = np.fromfile(o["file"], dtype=ORT_TYPES[o["type"]]).reshape(o["shape"])
            with open(os.path.join(work, "graphs", case.name, f"test_data_set_{k}", f"output_{j}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(arr, o["name"]).SerializeToString())
    return None


# ---- kiln test-suite ---------------------------------------------------------------------------

def run_suite(kiln: str, names: list, work: str, backend: str, tol: dict, timeout: float, tag: str):
    """Runs `kiln test-suite` on the graphs `names`. Returns (status, {graph: [case dicts]}) with
    status 'ok', 'crash: ...' or 'timeout'."""
    manifest = {
        "suite": "kiln-shape-fuzz",
        "defaults": {"tolerance": tol, "batch_invariance": "off"},
        "models": [{"name": n, "test_dir": os.path.join(work, "graphs", n)} for n in names],
    }
    mpath = os.path.join(work, f"suite_{tag}.json")
    junit = os.path.join(work, f"suite_{tag}.xml")
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=1)
    if os.path.exists(junit):
        os.remove(junit)
    cmd = [kiln, "test-suite", mpath, "--backend", backend, "-j", "1", "--threads", "1", "--progress", "none",
           "--junit", junit]
    env = dict(os.environ, GOMP_SPINCOUNT="3000", OMP_NUM_THREADS="1")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return "timeout", {}
    if r.returncode < 0:
        return f"crash: signal {signal.Signals(-r.returncode).name}", {}
    if r.returncode not in (0, 1) or not os.path.exists(junit):
        tail = " | ".join((r.stderr or r.stdout).strip().splitlines()[-3:])
        # 2 is kiln's "usage or input error": a clean refusal of the whole run, not a crash
        return f"{'error' if r.returncode == 2 else 'crash'}: exit {r.returncode}: {tail}", {}
    return "ok", parse_junit(junit)


def parse_junit(path: str) -> dict:
    out = collections.defaultdict(list)
    for tc in ET.parse(path).getroot().iter("testcase"):
        name = tc.get("name")
        graph = name.split("/")[0]
        case = {"name": name, "outcome": "pass", "message": "", "text": ""}
        for tag in ("failure", "error"):
            el = tc.find(tag)
            if el is not None:
                case["outcome"] = el.get("type", tag)
                case["message"] = el.get("message", "")
                case["text"] = el.text or ""
        out[graph].append(case)
    return out


def run_isolated(kiln, names, work, backend, tol, timeout, tag):
    """Runs `names` in one process; when it crashes or times out, halves the set until each
    crash or timeout is pinned on one graph. Returns ({graph: cases}, {graph: crash/timeout})."""
    status, results = run_suite(kiln, names, work, backend, tol, timeout * max(1, len(names)), tag)
    if status == "ok":
        return results, {}
    if len(names) == 1:
        return {}, {names[0]: status}
    half = len(names) // 2
    r1, b1 = run_isolated(kiln, names[:half], work, backend, tol, timeout, tag + "a")
    r2, b2 = run_isolated(kiln, names[half:], work, backend, tol, timeout, tag + "b")
    return {**r1, **r2}, {**b1, **b2}


def write_static(case, work: str) -> list:
    """For a refused graph: one copy per size set with every symbolic dim made static (what a user
    whose sizes are fixed would export), with that set as its only data set. Returns the names."""
    names = []
    for k, sizes in enumerate(case.size_sets):
        model = onnx.load_from_string(case.model)
        for value in model.graph.input:
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param"):
                    dim.dim_value = sizes[dim.dim_param]
        name = f"{case.name}__static{k}"
        d = os.path.join(work, "graphs", name)
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        onnx.save(model, os.path.join(d, "model.onnx"))
        shutil.copytree(os.path.join(work, "graphs", case.name, f"test_data_set_{k}"),
                        os.path.join(d, "test_data_set_0"))
        names.append(name)
    return names


# ---- classification ----------------------------------------------------------------------------

NAN_RE = re.compile(r"actual NaN (\d+)/\d+, Inf (\d+)/\d+; expected NaN (\d+)/\d+, Inf (\d+)/\d+")


def normalize(message: str) -> str:
    """A refusal's message without node names and numbers, for grouping."""
    m = message.strip().splitlines()[0] if message.strip() else ""
    m = re.sub(r"'[^']*'", "'_'", m)
    m = re.sub(r"\b\d+\b", "#", m)
    m = re.sub(r"\s+", " ", m)
    return m[:300]


def op_of(message: str) -> str:
    ops = re.findall(r"\(([A-Z][A-Za-z]+)\)", message)
    return ops[-1] if ops else "?"


def classify(case, ort_error, cpu, ref, broken_cpu, broken_ref) -> dict:
    rec = {"graph": case.name, "class": case.cls, "idiom": case.idiom, "description": case.description,
           "sizes": case.size_sets, "outcome": "pass", "details": []}
    flags = []
    if ort_error:
        flags.append(("invalid", ort_error))
    for broken in (broken_cpu, broken_ref):
        if case.name in broken:
            status = broken[case.name]
            kind = {"timeout": "timeout", "error": "run-error"}.get(status.split(":")[0], "crash")
            flags.append((kind, status))
    cases = cpu.get(case.name, [])
    dynamic = [c for c in cases if "/bound/" not in c["name"]]
    bound = [c for c in cases if "/bound/" in c["name"]]
    refused = [c for c in dynamic if c["outcome"] in ("fail-import", "fail-compile")]
    if refused:
        # The same graph with its sizes fixed: the bound builds when the refusal came at compile
        # time, else (import refused it, before --bind applies) the static copies.
        static_cases = [c for k in range(len(case.size_sets)) for c in cpu.get(f"{case.name}__static{k}", [])]
        fixed = bound if bound else static_cases
        rec["refusal"] = {"message": refused[0]["message"], "key": normalize(refused[0]["message"]),
                          "op": op_of(refused[0]["text"] or refused[0]["message"]),
                          "stage": refused[0]["outcome"],
                          "fixed_sizes_compile": sum(1 for c in fixed if c["outcome"] not in ("fail-compile",
                                                                                                "fail-import")),
                          "fixed_sizes_tried": len(fixed)}
        flags.append(("refused", refused[0]["message"]))
        for c in static_cases:
            text = c["text"] + "\n" + c["message"]
            if c["outcome"] == "fail-compare":
                nan_diff = any(m[0] != m[2] or m[1] != m[3] for m in NAN_RE.findall(text))
                flags.append(("nan" if nan_diff else "mismatch", f"{c['name']}: {c['message']}"))
            elif c["outcome"] in ("fail-run", "error"):
                flags.append(("run-error", f"{c['name']}: {c['message']}"))
    for c in cases:
        text = c["text"] + "\n" + c["message"]
        where = c["name"]
        if c["outcome"] == "fail-compare":
            if "differs from the dynamic module" in text:
                flags.append(("dyn-vs-bound", f"{where}: {c['message']}"))
            nan_diff = any(m[0] != m[2] or m[1] != m[3] for m in NAN_RE.findall(text))
            if nan_diff:
                flags.append(("nan", f"{where}: {c['message']}"))
            elif "differs from the dynamic module" not in c["message"]:
                flags.append(("mismatch", f"{where}: {c['message']}"))
        elif c["outcome"] == "fail-run":
            flags.append(("bound-error" if c in bound and not refused else "run-error", f"{where}: {c['message']}"))
        elif c["outcome"] in ("fail-compile", "fail-import") and c in bound and not refused:
            flags.append(("bound-error", f"{where}: {c['message']}"))
        elif c["outcome"] == "error":
            flags.append(("run-error", f"{where}: {c['message']}"))
    for c in ref.get(case.name, []):
        text = c["text"] + "\n" + c["message"]
        if c["outcome"] == "fail-import" and refused:
            continue  # the same refusal, seen by the reference backend's import
        if c["outcome"] == "fail-compare":
            nan_diff = any(m[0] != m[2] or m[1] != m[3] for m in NAN_RE.findall(text))
            flags.append(("nan" if nan_diff else "mismatch", f"{c['name']}: {c['message']}"))
        elif c["outcome"] != "pass":
            flags.append(("run-error", f"{c['name']} ({c['outcome']}): {c['message']}"))
    if flags:
        rec["outcome"] = min(flags, key=lambda f: ORDER.index(f[0]))[0]
        rec["details"] = [f"{k}: {v}" for k, v in flags]
    return rec


# ---- minimization --------------------------------------------------------------------------------

def minimize(kiln, rec, seed, index, work, tol, timeout, plant_nan=0) -> dict:
    """For a failing graph: the idiom alone (no blocks around it), and the first failing size set."""
    bare = graphs.make_case(seed, index, wrap=False)
    bare.name = rec["graph"] + "_bare"
    mwork = os.path.join(work, "minimized")
    os.makedirs(mwork, exist_ok=True)
    run_ort(write_cases([(index, bare)], seed, mwork, plant_nan), mwork, "node", os.path.join(ROOT, "tools/ort/run_ort.js"))
    err = collect_ort(bare, mwork)
    cpu, bc = run_isolated(kiln, [bare.name], mwork, "cpu", tol, timeout, "min_cpu")
    ref, br = run_isolated(kiln, [bare.name], mwork, "reference", tol, timeout, "min_ref")
    r = classify(bare, err, cpu, ref, bc, br)
    still = r["outcome"] == rec["outcome"]
    return {"bare_graph": os.path.join(mwork, "graphs", bare.name) if still else None,
            "bare_outcome": r["outcome"], "bare_details": r["details"]}


# ---- reporting ---------------------------------------------------------------------------------

def summarize(records: list, seconds: float) -> dict:
    counts = collections.Counter(r["outcome"] for r in records)
    by_class = collections.defaultdict(collections.Counter)
    for r in records:
        by_class[r["class"]][r["outcome"]] += 1
    refusals = collections.defaultdict(list)
    for r in records:
        if "refusal" in r:
            refusals[(r["class"], r["refusal"]["op"], r["refusal"]["key"])].append(r)
    groups = []
    for (cls, op, key), rs in sorted(refusals.items(), key=lambda kv: -len(kv[1])):
        groups.append({"class": cls, "op": op, "reason": key, "count": len(rs),
                       "fixed_sizes_compile": sum(1 for r in rs if r["refusal"]["fixed_sizes_tried"] and
                                                  r["refusal"]["fixed_sizes_compile"] == r["refusal"]["fixed_sizes_tried"]),
                       "idioms": dict(collections.Counter(r["idiom"] for r in rs)),
                       "example": {"graph": rs[0]["graph"], "message": rs[0]["refusal"]["message"]}})
    return {"graphs": len(records), "seconds": round(seconds, 1), "outcomes": dict(counts),
            "by_class": {c: dict(v) for c, v in sorted(by_class.items())}, "refusal_groups": groups}


def print_summary(summary: dict, records: list) -> None:
    cols = list(ORDER)
    print(f"kiln shape fuzz: {summary['graphs']} graphs in {summary['seconds']} s")
    print(f"{'class':<15}" + "".join(f"{c:>13}" for c in cols))
    for cls, counts in summary["by_class"].items():
        print(f"{cls:<15}" + "".join(f"{counts.get(c, 0):>13}" for c in cols))
    print(f"{'total':<15}" + "".join(f"{summary['outcomes'].get(c, 0):>13}" for c in cols))
    if summary["refusal_groups"]:
        print("\nrefused, by class, op and reason (fixed: graphs that compile at every size set once the sizes "
              "are fixed, by --bind or as a static model):")
        for g in summary["refusal_groups"]:
            print(f"  {g['count']:4d} {g['class']:<14} {g['op']:<12} fixed {g['fixed_sizes_compile']:3d}  "
                  f"{g['reason']}")
            print(f"       e.g. {g['example']['graph']}: {g['example']['message'][:200]}")
    bad = [r for r in records if r["outcome"] in FAILING]
    if bad:
        groups = collections.Counter((r["outcome"], r["class"], r["idiom"]) for r in bad)
        print("\nfailures, by outcome and idiom:")
        for (outcome, cls, idiom), n in groups.most_common():
            print(f"  {n:4d} {outcome:<13} {cls}/{idiom}")
        print("\nfailing graphs (the first detail of each; all in the JSON):")
        for r in bad:
            print(f"  {r['outcome'].upper()} {r['graph']} ({r['description']})")
            first = next((d for d in r["details"] if d.startswith(r["outcome"])), r["details"][0])
            print(f"      {first[:400]}")
            m = r.get("minimized")
            if m:
                print("      the idiom alone " + (f"fails the same way: {m['bare_graph']}" if m["bare_graph"] else
                                               f"gives {m['bare_outcome']}"))


def check_expectations(records: list, path: str, update: bool, seed: int, count: int) -> list:
    """The refused graphs must be exactly those the file lists (reasons are informational)."""
    refused = {r["graph"]: {"class": r["class"], "reason": r["refusal"]["message"].splitlines()[0]}
               for r in records if "refusal" in r}
    if update:
        with open(path, "w") as f:
            json.dump({"comment": "graphs kiln refuses to compile today, from tests/fuzz/shapes/shape_fuzz.py "
                                  f"--seed {seed} --count {count}; rewrite with --update",
                       "seed": seed, "count": count, "refused": dict(sorted(refused.items()))}, f, indent=1)
            f.write("\n")
        log(f"shape_fuzz: wrote {path} ({len(refused)} refused graphs)")
        return []
    with open(path) as f:
        expected = json.load(f)
    problems = []
    if expected.get("seed") != seed or expected.get("count") != count:
        problems.append(f"{path} was written for --seed {expected.get('seed')} --count {expected.get('count')}")
    want = expected.get("refused", {})
    for g in sorted(set(refused) - set(want)):
        problems.append(f"newly refused: {g}: {refused[g]['reason']}")
    for g in sorted(set(want) - set(refused)):
        problems.append(f"now compiles (update the expectations with --update): {g} (was: {want[g]['reason']})")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", required=True, help="the kiln binary")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=50, help="graphs to run (with --seconds: at most)")
    ap.add_argument("--first", type=int, default=0, help="index of the first graph")
    ap.add_argument("--seconds", type=float, default=0, help="stop starting new batches after this long")
    ap.add_argument("--batch", type=int, default=50, help="graphs per ORT / kiln test-suite process")
    ap.add_argument("--work", default=None, help="work folder (default: build/shape-fuzz)")
    ap.add_argument("--json", default=None, help="write every graph's outcome and the summary here")
    ap.add_argument("--expect", default=None, help="refusal expectations file (strict both ways)")
    ap.add_argument("--update", action="store_true", help="rewrite --expect from this run")
    ap.add_argument("--max-refused-fraction", type=float, default=1.0,
                    help="fail when more than this fraction of the graphs is refused")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--timeout", type=float, default=30, help="seconds per graph")
    ap.add_argument("--no-minimize", action="store_true", help="do not try to minimize failures")
    ap.add_argument("--keep", action="store_true", help="keep every graph's folder (default: failures only)")
    ap.add_argument("--plant-nan", type=float, default=0, metavar="FRACTION",
                    help="this fraction of the graphs get one NaN in their first input; kiln must put NaN "
                         "exactly where ONNX Runtime does")
    ap.add_argument("--node", default="node")
    ap.add_argument("--ort-runner", default=os.path.join(ROOT, "tools", "ort", "run_ort.js"))
    args = ap.parse_args()
    if not os.access(args.kiln, os.X_OK):
        log(f"shape_fuzz: --kiln {args.kiln}: not an executable")
        return 2
    if shutil.which(args.node) is None or not os.path.exists(args.ort_runner):
        log(f"shape_fuzz: needs node ({args.node}) and {args.ort_runner} for ONNX Runtime (scripts/setup.sh)")
        return 2
    work = os.path.abspath(args.work or os.path.join(os.getcwd(), "shape-fuzz"))
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)
    tol = {"atol": args.atol, "rtol": args.rtol, "nan": "match"}
    start = time.monotonic()
    records = []
    index = args.first
    end = args.first + args.count
    while index < end:
        if args.seconds and time.monotonic() - start > args.seconds:
            break
        batch = [(i, graphs.make_case(args.seed, i)) for i in range(index, min(end, index + args.batch))]
        index += len(batch)
        run_ort(write_cases(batch, args.seed, work, args.plant_nan), work, args.node, args.ort_runner)
        ort_errors = {c.name: collect_ort(c, work) for _, c in batch}
        names = [c.name for _, c in batch if not ort_errors[c.name]]
        cpu, broken_cpu = run_isolated(args.kiln, names, work, "cpu", tol, args.timeout, "cpu") if names else ({}, {})
        ref, broken_ref = run_isolated(args.kiln, names, work, "reference", tol, args.timeout, "ref") \
            if names else ({}, {})
        import_refused = [c for _, c in batch if any(x["outcome"] == "fail-import" for x in cpu.get(c.name, []))]
        static = [n for c in import_refused for n in write_static(c, work)]
        if static:
            cpu_static, broken_static = run_isolated(args.kiln, static, work, "cpu", tol, args.timeout, "static")
            cpu.update(cpu_static)
            broken_cpu.update({n.split("__static")[0]: v for n, v in broken_static.items()})
        for i, c in batch:
            rec = classify(c, ort_errors[c.name], cpu, ref, broken_cpu, broken_ref)
            rec["index"] = i
            rec["nan_planted"] = graphs.plants_nan(args.seed, i, args.plant_nan)
            if rec["outcome"] in FAILING and rec["outcome"] != "invalid" and not args.no_minimize:
                rec["minimized"] = minimize(args.kiln, rec, args.seed, i, work, tol, args.timeout, args.plant_nan)
            records.append(rec)
            if rec["outcome"] not in FAILING and not args.keep:  # only failures stay on disk
                for sub in ("graphs", "ort"):
                    shutil.rmtree(os.path.join(work, sub, c.name), ignore_errors=True)
                for k in range(len(c.size_sets)):
                    shutil.rmtree(os.path.join(work, "graphs", f"{c.name}__static{k}"), ignore_errors=True)
        done = collections.Counter(r["outcome"] for r in records)
        log(f"shape_fuzz: {len(records)} graphs, {time.monotonic() - start:.0f} s: "
            + ", ".join(f"{k} {v}" for k, v in sorted(done.items())))
    summary = summarize(records, time.monotonic() - start)
    summary["seed"], summary["first"], summary["plant_nan"] = args.seed, args.first, args.plant_nan
    print_summary(summary, records)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "graphs": records}, f, indent=1)
    failed = [r for r in records if r["outcome"] in FAILING]
    problems = []
    if failed:
        problems.append(f"{len(failed)} graphs failed: " + ", ".join(
            f"{k} {v}" for k, v in collections.Counter(r["outcome"] for r in failed).items()))
    refused = sum(1 for r in records if r["outcome"] == "refused")
    if records and refused / len(records) > args.max_refused_fraction:
        problems.append(f"{refused}/{len(records)} graphs refused, more than --max-refused-fraction "
                        f"{args.max_refused_fraction}")
    if args.expect:
        problems += check_expectations(records, args.expect, args.update, args.seed, args.count)
    for p in problems:
        print(f"shape_fuzz: FAIL: {p}")
    if not records:
        print("shape_fuzz: FAIL: no graph ran")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
