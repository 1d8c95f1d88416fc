#!/usr/bin/env node
// ONNX Runtime (CPU EP) oracle and benchmark peer for kiln.
//
// Usage:
//   node tools/ort/run_ort.js run  MODEL.onnx --input NAME=SHAPE:f32:FILE.bin [...] --output-dir DIR
//        [--threads N] [--verbose]
//   node tools/ort/run_ort.js time MODEL.onnx --input NAME=SHAPE:f32:FILE.bin [...]
//        [--warmup N] [--repeat N] [--threads N] [--verbose]
//   node tools/ort/run_ort.js profile MODEL.onnx --input NAME=SHAPE:f32:FILE.bin [...]
//        [--warmup N] [--repeat N] [--threads N] [--json] [--verbose]
//   node tools/ort/run_ort.js batch JOBS.json [--threads N] [--verbose]
//   node tools/ort/run_ort.js serve MODEL.onnx --input NAME=SHAPE:f32:FILE.bin [...]
//        [--warmup N] [--threads N] [--verbose]
//
// SHAPE is dims joined by 'x' (e.g. 8x3x224x224; use 'scalar' for a 0-d tensor).
// Element types: f32 (float32), f64, f16, i64, i32, i16, i8, u64, u32, u16, u8, bool (no bf16:
// onnxruntime-node has no bfloat16 tensors). FILE is raw little-endian data.
//
// `run` writes, for each model output, DIR/<name>.bin (raw little-endian data of the output's type,
// f32 for float models) and DIR/<name>.shape (text, e.g. `8x1000`). Characters in <name> outside
// [A-Za-z0-9._-] are replaced by '_'.
// `time` prints one JSON line to stdout: {"times_ms":[...],"median_ms":...,...}.
// `profile` times each node as ORT runs it (ORT's own profiler, on the optimized graph: fused nodes
// carry ORT's names), to set beside `kiln bench --per-dispatch`: after the warmup runs, the median
// over the `repeat` timed runs of each node's kernel time in a run (a node inside a Loop or If body
// adds up its executions in that run), and the median of the whole runs. Prints a table sorted by
// time, then the totals per op type; with --json one JSON line instead:
// {"runs":N,"run_median_ms":..,"nodes":[{"name","op","median_ms"}],"ops":[{"op","nodes","median_ms"}]}.
// The profiler adds a little time to each node: compare its figures with each other, and take
// `time` for the model's.
// `serve` keeps the session loaded and warm and runs as stdin asks, so that a harness can interleave
// short bursts of ORT's runs with kiln's (`kiln bench --serve`, bench/harness.py): after the warmup
// runs it prints {"ready":true}, then answers each stdin line N (a run count, 1 to 100000) with one
// JSON line {"times_ms":[...]}; `quit` or the end of input ends it, any other line is an error
// (exit 2).
// `batch` runs many models in one process (node and ORT start once, not per model). JOBS.json is
// [{"model": PATH, "inputs": [{"name", "shape": [dims], "type": "f32", "file"}], "output_dir": DIR}].
// Each job's DIR gets the outputs as for `run`, plus outputs.json ([{"name", "type", "shape"}] in
// the model's output order), or error.txt with ORT's message when the session cannot be created or
// run; one job's failure never stops the others. Exit 0 when every job was attempted.
//
// Install: cd tools/ort && ONNXRUNTIME_NODE_INSTALL=skip npm install
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { performance } = require('perf_hooks');

function die(msg) {
  process.stderr.write(`run_ort: ${msg}\n`);
  process.exit(2);
}

const USAGE = `usage:
  node run_ort.js run  MODEL.onnx --input NAME=SHAPE:f32:FILE.bin [...] --output-dir DIR [--threads N] [--verbose]
  node run_ort.js time MODEL.onnx --input NAME=SHAPE:f32:FILE.bin [...] [--warmup N] [--repeat N] [--threads N] [--verbose]
  node run_ort.js profile MODEL.onnx --input NAME=SHAPE:f32:FILE.bin [...] [--warmup N] [--repeat N] [--threads N] [--json] [--verbose]
  node run_ort.js batch JOBS.json [--threads N] [--verbose]
  node run_ort.js serve MODEL.onnx --input NAME=SHAPE:f32:FILE.bin [...] [--warmup N] [--threads N] [--verbose]
defaults: --threads 2 --warmup 3 --repeat 10; ORT CPU EP, graphOptimizationLevel 'all'`;

const TYPES = {
  f32: { ort: 'float32', array: Float32Array },
  f64: { ort: 'float64', array: Float64Array },
  f16: { ort: 'float16', array: Uint16Array },  // bit patterns; ORT takes Uint16Array for float16
  i32: { ort: 'int32', array: Int32Array },
  i64: { ort: 'int64', array: BigInt64Array },
  i16: { ort: 'int16', array: Int16Array },
  u8: { ort: 'uint8', array: Uint8Array },
  u16: { ort: 'uint16', array: Uint16Array },
  u32: { ort: 'uint32', array: Uint32Array },
  u64: { ort: 'uint64', array: BigUint64Array },
  i8: { ort: 'int8', array: Int8Array },
  bool: { ort: 'bool', array: Uint8Array },
};

function parseIntArg(v, name, min) {
  if (v === undefined || !/^\d+$/.test(v)) die(`${name} needs a non-negative integer, got '${v}'`);
  const n = parseInt(v, 10);
  if (n < min) die(`${name} must be >= ${min}`);
  return n;
}

function parseArgs(argv) {
  if (argv.length < 2 || argv[0] === '-h' || argv[0] === '--help') {
    process.stdout.write(USAGE + '\n');
    process.exit(argv.length < 2 && !(argv[0] === '-h' || argv[0] === '--help') ? 2 : 0);
  }
  const opts = {
    mode: argv[0], model: argv[1], inputs: [], outputDir: null,
    threads: 2, warmup: 3, repeat: 10, verbose: false, json: false,
  };
  if (!['run', 'time', 'profile', 'batch', 'serve'].includes(opts.mode)) die(`unknown mode '${opts.mode}'\n${USAGE}`);
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const next = () => { if (i + 1 >= argv.length) die(`${a} needs a value`); return argv[++i]; };
    if (a === '--input') opts.inputs.push(parseInput(next()));
    else if (a === '--output-dir') opts.outputDir = next();
    else if (a === '--threads') opts.threads = parseIntArg(next(), a, 1);
    else if (a === '--warmup') opts.warmup = parseIntArg(next(), a, 0);
    else if (a === '--repeat') opts.repeat = parseIntArg(next(), a, 1);
    else if (a === '--verbose') opts.verbose = true;
    else if (a === '--json' && opts.mode === 'profile') opts.json = true;
    else die(`unknown argument '${a}'\n${USAGE}`);
  }
  if (opts.mode === 'run' && !opts.outputDir) die('run needs --output-dir DIR');
  if (opts.mode === 'batch' && (opts.inputs.length || opts.outputDir)) die('batch takes its inputs and output dirs from JOBS.json');
  return opts;
}

// NAME=SHAPE:TYPE:FILE ; NAME may itself contain '=' only before the last '=' preceding SHAPE,
// FILE may contain ':' (we split on the first two ':' after '=').
function parseInput(spec) {
  const eq = spec.lastIndexOf('=', spec.indexOf(':') === -1 ? spec.length : spec.indexOf(':'));
  if (eq <= 0) die(`bad --input '${spec}' (want NAME=SHAPE:TYPE:FILE)`);
  const name = spec.slice(0, eq);
  const rest = spec.slice(eq + 1);
  const c1 = rest.indexOf(':');
  const c2 = c1 < 0 ? -1 : rest.indexOf(':', c1 + 1);
  if (c1 < 0 || c2 < 0) die(`bad --input '${spec}' (want NAME=SHAPE:TYPE:FILE)`);
  const shapeStr = rest.slice(0, c1);
  const type = rest.slice(c1 + 1, c2);
  const file = rest.slice(c2 + 1);
  if (!TYPES[type]) die(`unsupported element type '${type}' in --input '${spec}'`);
  let dims;
  if (shapeStr === 'scalar' || shapeStr === '') dims = [];
  else {
    dims = shapeStr.split('x').map((d) => {
      if (!/^\d+$/.test(d)) die(`bad shape '${shapeStr}' in --input '${spec}'`);
      return parseInt(d, 10);
    });
  }
  return { name, dims, type, file };
}

function loadTensor(ort, inp, fail = die) {
  const t = TYPES[inp.type];
  if (!t) return fail(`unsupported element type '${inp.type}' for input '${inp.name}'`);
  const count = inp.dims.reduce((a, b) => a * b, 1);
  let buf;
  try { buf = fs.readFileSync(inp.file); } catch (e) { return fail(`cannot read ${inp.file}: ${e.message}`); }
  const want = count * t.array.BYTES_PER_ELEMENT;
  if (buf.length !== want) {
    return fail(`${inp.file}: ${buf.length} bytes, but ${inp.name} [${inp.dims.join('x')}] ${inp.type} needs ${want}`);
  }
  // Copy into an aligned buffer (Buffer from readFileSync may be a slice of a pool).
  const ab = new ArrayBuffer(want);
  new Uint8Array(ab).set(buf);
  return new ort.Tensor(t.ort, new t.array(ab), inp.dims);
}

function safeName(n) {
  return n.replace(/[^A-Za-z0-9._-]/g, '_');
}

function tensorBytes(t) {
  const d = t.data;
  if (ArrayBuffer.isView(d)) return Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  if (Array.isArray(d) && t.type === 'bool') return Buffer.from(d.map((v) => (v ? 1 : 0)));
  die(`cannot serialise output of type ${t.type}`);
  return null;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function sessionOptions(opts, extra = {}) {
  return {
    ...extra,
    executionProviders: ['cpu'],
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    // 0 verbose .. 4 fatal. MXNet-style models (initializers listed in graph.input) make ORT warn
    // once per initializer; keep that quiet unless asked.
    logSeverityLevel: opts.verbose ? 1 : 3,
  };
}

const TYPE_NAMES = Object.fromEntries(Object.entries(TYPES).map(([k, v]) => [v.ort, k]));

// One job of `batch`: throws with ORT's message on any failure (the caller records it).
async function runJob(ort, opts, job) {
  const fail = (msg) => { throw new Error(msg); };
  const session = await ort.InferenceSession.create(job.model, sessionOptions(opts));
  const feeds = {};
  for (const inp of job.inputs) {
    feeds[inp.name] = loadTensor(ort, { name: inp.name, dims: inp.shape, type: inp.type, file: inp.file }, fail);
  }
  const results = await session.run(feeds);
  const meta = [];
  for (const name of session.outputNames) {
    const t = results[name];
    const base = path.join(job.output_dir, safeName(name));
    fs.writeFileSync(base + '.bin', tensorBytes(t));
    fs.writeFileSync(base + '.shape', (t.dims.length ? t.dims.join('x') : 'scalar') + '\n');
    meta.push({ name, type: TYPE_NAMES[t.type] || t.type, shape: Array.from(t.dims), file: base + '.bin' });
  }
  fs.writeFileSync(path.join(job.output_dir, 'outputs.json'), JSON.stringify(meta) + '\n');
}

async function runBatch(ort, opts) {
  let jobs;
  try { jobs = JSON.parse(fs.readFileSync(opts.model, 'utf8')); } catch (e) { die(`cannot read ${opts.model}: ${e.message}`); }
  if (!Array.isArray(jobs)) die(`${opts.model}: expected a JSON array of jobs`);
  let failed = 0;
  for (const job of jobs) {
    fs.mkdirSync(job.output_dir, { recursive: true });
    try {
      await runJob(ort, opts, job);
    } catch (e) {
      failed++;
      fs.writeFileSync(path.join(job.output_dir, 'error.txt'), `${e && e.message ? e.message : e}\n`);
    }
  }
  process.stderr.write(`run_ort: batch of ${jobs.length} models, ${failed} failed\n`);
}

// ORT's profile events (Chrome trace format, durations in microseconds) summed per node and run:
// the runs after the first `warmup`, each node's median kernel time over them (0 in a run that did
// not execute it), sorted by time, and the totals per op type.
function profileSummary(events, warmup) {
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run')
    .sort((a, b) => a.ts - b.ts).slice(warmup);
  const perRun = runs.map(() => new Map());
  const ops = new Map();
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const r = runs.findIndex((run) => e.ts >= run.ts && e.ts <= run.ts + run.dur);
    if (r < 0) continue;
    const name = e.name.slice(0, -'_kernel_time'.length);
    ops.set(name, (e.args && e.args.op_name) || '?');
    perRun[r].set(name, (perRun[r].get(name) || 0) + e.dur);
  }
  const ms = (us) => Math.round(us) / 1000;
  const nodes = [...ops.keys()].map((name) => ({
    name, op: ops.get(name), median_ms: ms(median(perRun.map((m) => m.get(name) || 0))),
  })).sort((a, b) => b.median_ms - a.median_ms);
  const byOp = new Map();
  for (const n of nodes) {
    const t = byOp.get(n.op) || { op: n.op, nodes: 0, median_ms: 0 };
    t.nodes += 1;
    t.median_ms += n.median_ms;
    byOp.set(n.op, t);
  }
  return {
    runs: runs.length,
    run_median_ms: runs.length ? ms(median(runs.map((run) => run.dur))) : 0,
    nodes,
    ops: [...byOp.values()].map((t) => ({ ...t, median_ms: Math.round(t.median_ms * 1000) / 1000 }))
      .sort((a, b) => b.median_ms - a.median_ms),
  };
}

function profileTable(s) {
  const total = s.nodes.reduce((a, n) => a + n.median_ms, 0);
  const pct = (v) => (total > 0 ? (100 * v) / total : 0).toFixed(1).padStart(6);
  let out = `ONNX Runtime per node (median of ${s.runs} run(s); whole run ${s.run_median_ms.toFixed(3)} ms, ` +
    `nodes ${total.toFixed(3)} ms)\n     # median ms      %  op                   node\n`;
  s.nodes.forEach((n, i) => {
    out += `${String(i + 1).padStart(6)} ${n.median_ms.toFixed(3).padStart(9)} ${pct(n.median_ms)}  ${n.op.padEnd(20)} ${n.name}\n`;
  });
  out += 'per op type:\n';
  for (const t of s.ops) {
    out += `  ${t.op.padEnd(24)} ${t.median_ms.toFixed(3).padStart(9)} ms ${pct(t.median_ms)} %  (${t.nodes} node(s))\n`;
  }
  return out;
}

// `serve`: see the header.
async function serve(session, feeds, opts) {
  const maxRuns = 100000;
  for (let i = 0; i < opts.warmup; i++) await session.run(feeds);
  process.stdout.write(JSON.stringify({ ready: true }) + '\n');
  const lines = require('readline').createInterface({ input: process.stdin, crlfDelay: Infinity });
  let number = 0;
  for await (const line of lines) {
    number++;
    if (line === 'quit') break;
    const count = /^\d+$/.test(line) ? parseInt(line, 10) : NaN;
    if (!(count >= 1 && count <= maxRuns)) {
      die(`serve: stdin line ${number}: expected a run count (1 to ${maxRuns}) or 'quit', got '${line}'`);
    }
    const times = [];
    for (let i = 0; i < count; i++) {
      const t0 = performance.now();
      await session.run(feeds);
      times.push(Math.round((performance.now() - t0) * 1000) / 1000);
    }
    process.stdout.write(JSON.stringify({ times_ms: times }) + '\n');
  }
  lines.close();
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  let ort;
  try {
    // ORT's telemetry otherwise leaves an empty mat-debug-PID.log in $TMPDIR on every start.
    process.env.ORT_DISABLE_TELEMETRY = '1';
    ort = require('onnxruntime-node');
  } catch (e) {
    die(`cannot load onnxruntime-node (${e.message}); run: cd ${__dirname} && ONNXRUNTIME_NODE_INSTALL=skip npm install`);
  }
  if (!fs.existsSync(opts.model)) die(`no such ${opts.mode === 'batch' ? 'job list' : 'model'}: ${opts.model}`);
  if (opts.mode === 'batch') return runBatch(ort, opts);

  // `profile`: ORT's profiler writes its events to a file of its own naming under this prefix.
  const profileDir = opts.mode === 'profile' ? fs.mkdtempSync(path.join(os.tmpdir(), 'run_ort_profile-')) : null;
  // Gone however the process ends (die() on a bad input exits from anywhere).
  if (profileDir) process.on('exit', () => fs.rmSync(profileDir, { recursive: true, force: true }));
  const extra = profileDir ? { enableProfiling: true, profileFilePrefix: path.join(profileDir, 'ort') } : {};
  const session = await ort.InferenceSession.create(opts.model, sessionOptions(opts, extra));

  const feeds = {};
  for (const inp of opts.inputs) {
    if (!session.inputNames.includes(inp.name)) {
      die(`model has no input '${inp.name}' (inputs: ${session.inputNames.join(', ')})`);
    }
    feeds[inp.name] = loadTensor(ort, inp);
  }
  // MXNet-style models list initializers as graph inputs; only the non-initializer ones must be fed,
  // ORT handles the rest. Anything else missing is reported by ORT itself.

  if (opts.mode === 'run') {
    const results = await session.run(feeds);
    fs.mkdirSync(opts.outputDir, { recursive: true });
    for (const name of session.outputNames) {
      const t = results[name];
      const base = path.join(opts.outputDir, safeName(name));
      fs.writeFileSync(base + '.bin', tensorBytes(t));
      fs.writeFileSync(base + '.shape', (t.dims.length ? t.dims.join('x') : 'scalar') + '\n');
      process.stderr.write(`run_ort: ${name} ${t.type} [${t.dims.join('x')}] -> ${base}.bin\n`);
    }
    return;
  }

  if (opts.mode === 'profile') {
    for (let i = 0; i < opts.warmup + opts.repeat; i++) await session.run(feeds);
    session.endProfiling();
    const files = fs.readdirSync(profileDir).filter((f) => f.endsWith('.json'));
    if (files.length !== 1) die(`ORT's profiler wrote ${files.length} files, expected 1`);
    const events = JSON.parse(fs.readFileSync(path.join(profileDir, files[0]), 'utf8'));
    const summary = profileSummary(events, opts.warmup);
    if (summary.runs !== opts.repeat) die(`ORT's profile holds ${summary.runs} timed runs, expected ${opts.repeat}`);
    process.stdout.write(opts.json ? JSON.stringify(summary) + '\n' : profileTable(summary));
    return;
  }

  if (opts.mode === 'serve') return serve(session, feeds, opts);

  // time
  for (let i = 0; i < opts.warmup; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < opts.repeat; i++) {
    const t0 = performance.now();
    await session.run(feeds);
    times.push(performance.now() - t0);
  }
  const out = {
    times_ms: times.map((t) => Math.round(t * 1000) / 1000),
    median_ms: Math.round(median(times) * 1000) / 1000,
    min_ms: Math.round(Math.min(...times) * 1000) / 1000,
    mean_ms: Math.round((times.reduce((a, b) => a + b, 0) / times.length) * 1000) / 1000,
    threads: opts.threads,
    warmup: opts.warmup,
    repeat: opts.repeat,
    ort_version: ort.env.versions ? ort.env.versions.node : undefined,
  };
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  process.stderr.write(`run_ort: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
