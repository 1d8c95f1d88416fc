"""Where kiln's threads lose time: each dispatch of a module timed at 1 thread and at N (`kiln bench
--per-dispatch`), ranked by the time it takes beyond perfect scaling, t_N - t_1 / N, summed over
the dispatches that share a kernel label (the label without its node's name, so ResNet-50's four
28x28 Winograd convs are one row). A row that scales well loses little however long it runs;
one whose threads wait on each other, or on the other core's caches, stands at the top. This is
how kiln's Winograd work split was found handing ResNet-50's 28x28 stage 32 tiles on one core and
17 on the other (1.38x at 2 threads; 1.55-1.66x after the fix).

  /usr/bin/python3 bench/thread_scaling.py --build build --module M.kmod --input SPEC [--input ..]
      [--threads 2] [--repeat 10] [--top 15]
  /usr/bin/python3 bench/thread_scaling.py --from ONE.json MANY.json [--top 15]

The first form runs `kiln bench --per-dispatch --json` twice (1 thread, then N); the second reads
two such files of one module. Both runs must hold the same dispatches in the same order, else it
stops with exit 2 naming the first that differs. Timings on a shared machine move by a few
percent between runs: read the ranking, and judge a change with interleaved runs (harness.py)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile


class MismatchError(Exception):
    """The two runs do not hold the same dispatches."""


def label(dispatch):
    """The dispatch's first kernel without its node's name ("conv brgconv_1x1:... 1x64x56x56 ...");
    its op type where it ran no kernel."""
    kernels = dispatch.get("kernels") or []
    if not kernels:
        return dispatch["op_type"]
    return kernels[0].split(": ", 1)[-1]


def rows(one, many, threads):
    """Rows of (label, count, ms at 1 thread, ms at `threads`, ms lost), most lost first.
    `one` and `many` are the JSON objects of `kiln bench --per-dispatch --json`."""
    # Each run lists its dispatches by time, longest first: pair them by index.
    a = sorted(one["dispatches"], key=lambda d: d["dispatch"])
    b = sorted(many["dispatches"], key=lambda d: d["dispatch"])
    if len(a) != len(b):
        raise MismatchError(f"the runs hold {len(a)} and {len(b)} dispatches")
    groups = {}  # label -> [dispatches, ms at 1 thread, ms at N], in dispatch order
    for x, y in zip(a, b):
        if x["dispatch"] != y["dispatch"] or x["name"] != y["name"]:
            raise MismatchError(f"dispatch {x['dispatch']} is '{x['name']}' in one run and "
                                f"{y['dispatch']} '{y['name']}' in the other")
        g = groups.setdefault(label(y), [0, 0.0, 0.0])
        g[0] += 1
        g[1] += x["median_ms"]
        g[2] += y["median_ms"]
    out = [(k, n, t1, tn, tn - t1 / threads) for k, (n, t1, tn) in groups.items()]
    return sorted(out, key=lambda r: -r[4])


def print_table(one, many, threads, top):
    table = rows(one, many, threads)
    lost = sum(r[4] for r in table)
    print(f"run median: {one['median_ms']:.2f} ms at 1 thread, {many['median_ms']:.2f} ms at "
          f"{threads} ({one['median_ms'] / many['median_ms']:.2f}x); dispatches lose {lost:.2f} ms "
          f"to imperfect scaling")
    print(f"{'lost ms':>8} {'1 thread':>9} {f'{threads} threads':>10} {'speedup':>7}  n  kernel")
    for name, n, t1, tn, gone in table[:top]:
        speedup = f"{t1 / tn:.2f}x" if tn > 0 else "-"
        print(f"{gone:8.3f} {t1:9.3f} {tn:10.3f} {speedup:>7} {n:2d}  {name[:100]}")


def run_bench(args, threads, path):
    cmd = [os.path.join(args.build, "tools", "kiln"), "bench", f"--module={args.module}",
           f"--threads={threads}", f"--repeat={args.repeat}", "--per-dispatch", f"--json={path}"]
    cmd += [f"--input={spec}" for spec in args.input]
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"thread_scaling: {' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    with open(path) as f:
        return json.load(f)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--module")
    parser.add_argument("--input", action="append", default=[])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--from", dest="files", nargs=2, metavar=("ONE.json", "MANY.json"))
    args = parser.parse_args(argv)
    if args.files:
        runs = []
        for path in args.files:
            with open(path) as f:
                runs.append(json.load(f))
        one, many = runs
        threads = many.get("threads", args.threads)
    else:
        if not args.module or args.threads < 2:
            parser.error("give --module (and --input) with --threads 2 or more, or --from")
        with tempfile.TemporaryDirectory() as work:
            one = run_bench(args, 1, os.path.join(work, "one.json"))
            many = run_bench(args, args.threads, os.path.join(work, "many.json"))
        threads = args.threads
    try:
        print_table(one, many, threads, args.top)
    except MismatchError as e:
        print(f"thread_scaling: {e}: not two runs of one module", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
