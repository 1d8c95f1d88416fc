#!/usr/bin/python3
"""Runs every ONNX backend test case of Debian's libonnx-testdata through kiln and rewrites

  tests/conformance/onnx_backend.json  the manifest `make test` checks (kiln test-suite): each case
                                       with its expected outcome per backend (cpu: the compiled CPU
                                       path; null: the null device, which only has to accept or
                                       refuse each case cleanly; reference: the float64 reference
                                       evaluator), a reason
                                       for every expected failure;
  docs/conformance.md                  per op: cases passed / failed / unsupported, and why.

Run it after a change that makes cases pass (or fail on purpose), review the diff, commit both:
    /usr/bin/python3 tests/conformance/update.py --kiln build/tools/kiln
Expectations are strict: a listed failure that starts passing fails `make test` until this is rerun.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = "/usr/share/libonnx-testdata/data"
SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]
BACKENDS = ["cpu", "null", "vulkan", "reference"]
# The op types the Vulkan backend has a GPU kernel for (its op table); the rest of a vulkan case
# runs on the CPU fallback.
VULKAN_OP_TABLE = os.path.join(ROOT, "src", "kiln", "hal", "vulkan", "op_table.cc")
UNSUPPORTED_OUTCOMES = {"fail-import", "fail-compile"}
# Cases whose expected data kiln departs from on purpose, with why (printed in the doc).
DELIBERATE = {
    name: "deliberate: the expected data take the ONNX reference's resized length scale * input "
          "(a fraction here); kiln takes the output length, as ONNX Runtime and PyTorch do "
          "(src/kiln/kernels/resize.cc)"
    for name in ["test_resize_downsample_scales_cubic_align_corners",
                 "test_resize_downsample_scales_linear_align_corners"]
}
DELIBERATE.update({
    name: "deliberate: the expected data come from NumPy's generator (np.random.seed(0), uniform "
          "draws); kiln's training Dropout draws its own counter-based stream "
          "(src/kiln/kernels/random.h), so its mask differs; ratio 0 cases pass"
    for name in ["test_training_dropout", "test_training_dropout_default",
                 "test_training_dropout_default_mask", "test_training_dropout_mask"]
})
DELIBERATE["test_adam_multiple"] = (
    "deliberate: the expected data were computed with epsilon 1e-2, but the model's Adam node "
    "omits 'epsilon' (default 1e-6; onnx/backend/test/case/node/adam.py export_adam_multiple); "
    "kiln follows the model")
# Cases kiln does not run on purpose, with why (printed in the doc like the ones above).
DELIBERATE.update({
    name: "out of scope: kiln has no string tensors (strings are tokenizer and feature-engineering "
          "data, not tensor computation)"
    for name in ["test_cast_FLOAT_to_STRING", "test_cast_STRING_to_FLOAT",
                 "test_castlike_FLOAT_to_STRING", "test_castlike_FLOAT_to_STRING_expanded",
                 "test_castlike_STRING_to_FLOAT", "test_castlike_STRING_to_FLOAT_expanded",
                 "test_strnormalizer_export_monday_casesensintive_lower",
                 "test_strnormalizer_export_monday_casesensintive_nochangecase",
                 "test_strnormalizer_export_monday_casesensintive_upper",
                 "test_strnormalizer_export_monday_empty_output",
                 "test_strnormalizer_export_monday_insensintive_upper_twodim",
                 "test_strnormalizer_nostopwords_nochangecase"]
})
DELIBERATE.update({
    name: "out of scope: random sampling (Bernoulli, RandomUniformLike) whose expected data come "
          "from NumPy's generator, which no other engine reproduces; no inference model kiln "
          "targets samples at run time"
    for name in ["test_bernoulli", "test_bernoulli_double", "test_bernoulli_double_expanded",
                 "test_bernoulli_expanded", "test_bernoulli_seed", "test_bernoulli_seed_expanded"]
})


def run_suite(kiln, folder, backend, jobs):
    """Outcome per case folder: ("pass", "") or (outcome, first line of the failure)."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = os.path.join(tmp, "junit.xml")
        # The Vulkan device runs with the validation layer on, as in `make test`.
        env = dict(os.environ, KILN_VULKAN_VALIDATION="1")
        proc = subprocess.run([kiln, "test-suite", folder, f"--backend={backend}", "-j", str(jobs),
                               "--progress", "none", f"--junit={junit}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        if proc.returncode not in (0, 1):
            sys.exit(f"kiln test-suite {folder} failed ({proc.returncode}):\n{proc.stderr}")
        tree = ET.parse(junit)
    results = {}
    for case in tree.iter("testcase"):
        model = case.get("classname").split(".", 1)[1]
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        previous = results.get(model)
        if failure is None:
            results.setdefault(model, ("pass", ""))
            continue
        if previous is not None and previous[0] != "pass":
            continue  # keep the first failure
        results[model] = (failure.get("type"), clean_reason(failure.get("message", "")))
    return results


def clean_reason(message):
    text = message.split("\n")[0]
    text = text.replace(DATA + "/", "")
    return text[:300]


def main_op(case_dir):
    """The op a case tests: the op of a one-op model, else the ops it uses."""
    model = onnx.load(os.path.join(case_dir, "model.onnx"), load_external_data=False)
    ops = [n.op_type for n in model.graph.node if n.op_type != "Constant"]
    distinct = sorted(set(ops))
    if len(distinct) == 1:
        return distinct[0]
    return None


def group_of(suite, name, case_dir, ops_by_case):
    if suite != "node":
        return f"({suite})"
    op = ops_by_case.get(name)
    if name.endswith("_expanded"):
        base = ops_by_case.get(name[: -len("_expanded")])
        return f"{base or '?'} (expanded)"
    return op or "(several ops)"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kiln", default=os.path.join(ROOT, "build", "tools", "kiln"))
    parser.add_argument("--manifest", default=os.path.join(ROOT, "tests", "conformance", "onnx_backend.json"))
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs", "conformance.md"))
    parser.add_argument("-j", type=int, default=2)
    args = parser.parse_args()

    models = []
    skipped = []  # (suite, name, group, why)
    rows = []  # (suite, name, group, {backend: (outcome, reason)})
    for suite in SUITES:
        folder = os.path.join(DATA, suite)
        outcomes = {b: run_suite(args.kiln, folder, b, args.j) for b in BACKENDS}
        names = sorted(os.listdir(folder))
        ops_by_case = {}
        for name in names:
            if os.path.exists(os.path.join(folder, name, "model.onnx")):
                ops_by_case[name] = main_op(os.path.join(folder, name))
        for name in names:
            case_dir = os.path.join(folder, name)
            if not os.path.exists(os.path.join(case_dir, "model.onnx")):
                continue
            result = {}
            expect = {}
            for backend in BACKENDS:
                outcome, reason = outcomes[backend].get(name, ("error", "no result"))
                result[backend] = (outcome, reason)
                if outcome == "pass":
                    expect[backend] = "pass"
                else:
                    why = f"{DELIBERATE[name]}; {reason}" if name in DELIBERATE else reason
                    expect[backend] = {"outcome": outcome, "reason": why}
            group = group_of(suite, name, case_dir, ops_by_case)
            setup_error = next((r for o, r in result.values() if o == "error"), None)
            if setup_error is not None:
                # The case's own data does not fit its model (e.g. an input file of another
                # shape): no outcome of kiln's can be expected, so it is left out of the manifest.
                skipped.append((suite, name, group, setup_error))
                continue
            models.append({"name": f"{suite}.{name}", "test_dir": case_dir, "expect": expect})
            rows.append((suite, name, group, result))

    manifest = {"suite": "onnx-backend", "models": models}
    with open(args.manifest, "w") as f:
        f.write("// Generated by tests/conformance/update.py: every ONNX backend test case of\n"
                "// libonnx-testdata with its expected outcome per backend. Do not edit by hand.\n")
        json.dump(manifest, f, indent=1)
        f.write("\n")
    write_doc(args.doc, rows, skipped)
    for backend in BACKENDS:
        for suite in SUITES:
            mine = [r for r in rows if r[0] == suite]
            passed = sum(1 for r in mine if r[3][backend][0] == "pass")
            print(f"{backend:9s} {suite:18s} {passed}/{len(mine)} pass")


def vulkan_ops():
    """Op types listed in the Vulkan backend's op table ({"Relu", build_unary}, ...)."""
    with open(VULKAN_OP_TABLE) as f:
        return set(re.findall(r'\{"(\w+)", build_\w+\}', f.read()))


def write_doc(path, rows, skipped):
    lines = ["# ONNX conformance", "",
             "Generated by `tests/conformance/update.py` from a run of every case of Debian's",
             "`libonnx-testdata` (`/usr/share/libonnx-testdata/data`) through `kiln test-suite`, with the",
             "ONNX backend runner's tolerance (rtol 1e-3, atol 1e-7) and kiln's strict comparator.",
             "`make test` checks the same expectations (`tests/conformance/onnx_backend.json`): a case that",
             "stops passing, or an expected failure that starts passing, fails it.", "",
             "- **cpu**: imported, compiled and run through the CPU backend (the module path users run).",
             "- **null**: the same module on the null device, which computes nothing: a case passes when it",
             "  compiles, binds and runs cleanly (outputs are not compared), and is refused cleanly",
             "  otherwise (data-dependent sizes: the null device has no data to size them from).",
             "- **vulkan**: the same module on the Vulkan device (lavapipe on machines without a GPU), with",
             "  the validation layer on: ops with a GPU kernel (the \"GPU kernel\" column) run as compute",
             "  shaders, the rest on the CPU fallback between them.",
             "- **reference**: the imported graph evaluated by kiln's float64 reference evaluator.",
             "- Shape-determining operands that a case feeds as graph inputs (a Reshape's shape, a",
             "  reduction's axes) are bound from the case's data at compile time, as with a constant.",
             "  Data-dependent sizes (NonZero, Compress, TopK's k) stay graph inputs: the module binds",
             "  them from the data at run time.",
             "",
             "## Totals", "",
             "| suite | cases | cpu pass | null pass | vulkan pass | reference pass | left out (bad test data) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for suite in SUITES:
        mine = [r for r in rows if r[0] == suite]
        cpu = sum(1 for r in mine if r[3]["cpu"][0] == "pass")
        null = sum(1 for r in mine if r[3]["null"][0] == "pass")
        vulkan = sum(1 for r in mine if r[3]["vulkan"][0] == "pass")
        ref = sum(1 for r in mine if r[3]["reference"][0] == "pass")
        left = sum(1 for s in skipped if s[0] == suite)
        lines.append(f"| {suite} | {len(mine) + left} | {cpu} | {null} | {vulkan} | {ref} | {left} |")
    gpu_ops = vulkan_ops()
    lines += ["", "## Per op (cpu, and vulkan)", "",
              "passed / failed (imported but wrong or a run error) / unsupported (refused at import or "
              "compile, naming what is missing) on cpu; passed on vulkan, and whether the op has a "
              "Vulkan GPU kernel", "",
              "| op | cases | passed | failed | unsupported | vulkan passed | GPU kernel |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    groups = collections.OrderedDict()
    for r in sorted(rows, key=lambda r: (r[2].lower(), r[1])):
        groups.setdefault(r[2], []).append(r)
    for group, members in groups.items():
        passed = sum(1 for r in members if r[3]["cpu"][0] == "pass")
        unsupported = sum(1 for r in members if r[3]["cpu"][0] in UNSUPPORTED_OUTCOMES)
        failed = len(members) - passed - unsupported
        on_vulkan = sum(1 for r in members if r[3]["vulkan"][0] == "pass")
        kernel = "yes" if group in gpu_ops else ""
        lines.append(f"| {group} | {len(members)} | {passed} | {failed} | {unsupported} | "
                     f"{on_vulkan} | {kernel} |")
    lines += ["", "## Why each exception exists", "",
              "Every case that does not pass on the cpu backend, with the first line of kiln's error.", ""]
    for group, members in groups.items():
        failing = [r for r in members if r[3]["cpu"][0] != "pass"]
        if not failing:
            continue
        lines.append(f"### {group}")
        lines.append("")
        for suite, name, _, result in failing:
            outcome, reason = result["cpu"]
            reason = reason.replace("|", "\\|")
            lines.append(f"- `{suite}/{name}` — {outcome}: {reason}")
            if name in DELIBERATE:
                lines.append(f"  ({DELIBERATE[name]})")
        lines.append("")
    differing = [r for r in rows if (r[3]["vulkan"][0] == "pass") != (r[3]["cpu"][0] == "pass")]
    lines += ["## Where vulkan differs from cpu", "",
              "Cases that pass on one of the two devices only, with the first line of kiln's error.", ""]
    for suite, name, _, result in differing:
        for backend in ("cpu", "vulkan"):
            outcome, reason = result[backend]
            if outcome != "pass":
                lines.append(f"- `{suite}/{name}` fails on {backend} — {outcome}: "
                             f"{reason.replace('|', chr(92) + '|')}")
    if not differing:
        lines.append("None.")
    lines.append("")
    if skipped:
        lines += ["## Left out of the manifest", "",
                  "Cases whose own data does not fit their model, so the suite cannot set them up:", ""]
        for suite, name, _, why in skipped:
            lines.append(f"- `{suite}/{name}` — {why.replace('|', chr(92) + '|')}")
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")


if __name__ == "__main__":
    main()
