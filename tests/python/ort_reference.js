#!/usr/bin/env node
// What ONNX Runtime (onnxruntime-node, tools/ort) says about models, for the kiln.InferenceSession
// tests: each model's input and output metadata (names in order, types, shapes with symbolic dims
// as strings) and, given inputs, its outputs.
//
// Usage: node tests/python/ort_reference.js JOBS.json
// JOBS.json: [{"model": PATH, "output_dir": DIR, "inputs": [{"name", "shape": [dims], "type",
// "file"}] (optional)}]. Each DIR gets meta.json ({"inputs": [...], "outputs": [...]}, each entry
// {"name", "type", "shape"}), and when inputs are given, outputs.json ([{"name", "type", "shape",
// "file"}] in the model's output order) with the raw little-endian data in the files, or
// error.txt with ORT's message. Types are onnxruntime-node's names (float32, int64, ...).
'use strict';

const fs = require('fs');
const path = require('path');

const ORT_DIR = path.join(__dirname, '..', '..', 'tools', 'ort', 'node_modules', 'onnxruntime-node');
const ARRAYS = {
  float32: Float32Array, float64: Float64Array, float16: Uint16Array, int8: Int8Array,
  int16: Int16Array, int32: Int32Array, int64: BigInt64Array, uint8: Uint8Array,
  uint16: Uint16Array, uint32: Uint32Array, uint64: BigUint64Array, bool: Uint8Array,
};

function metadata(list) {
  return list.map((m) => ({ name: m.name, type: m.type, shape: m.shape ? Array.from(m.shape) : null }));
}

function tensorBytes(t) {
  const d = t.data;
  if (ArrayBuffer.isView(d)) return Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  if (Array.isArray(d) && t.type === 'bool') return Buffer.from(d.map((v) => (v ? 1 : 0)));
  throw new Error(`cannot write an output of type ${t.type}`);
}

async function runJob(ort, job) {
  const session = await ort.InferenceSession.create(job.model, { logSeverityLevel: 3, intraOpNumThreads: 1 });
  fs.writeFileSync(path.join(job.output_dir, 'meta.json'), JSON.stringify({
    inputs: metadata(session.inputMetadata), outputs: metadata(session.outputMetadata),
  }) + '\n');
  if (!job.inputs) return;
  const feeds = {};
  for (const inp of job.inputs) {
    const Array_ = ARRAYS[inp.type];
    if (!Array_) throw new Error(`unknown type ${inp.type}`);
    const buf = fs.readFileSync(inp.file);
    const ab = new ArrayBuffer(buf.length);
    new Uint8Array(ab).set(buf);
    feeds[inp.name] = new ort.Tensor(inp.type, new Array_(ab), inp.shape);
  }
  const results = await session.run(feeds);
  const outputs = [];
  session.outputNames.forEach((name, i) => {
    const t = results[name];
    const file = path.join(job.output_dir, `output${i}.bin`);
    fs.writeFileSync(file, tensorBytes(t));
    outputs.push({ name, type: t.type, shape: Array.from(t.dims), file });
  });
  fs.writeFileSync(path.join(job.output_dir, 'outputs.json'), JSON.stringify(outputs) + '\n');
}

async function main() {
  // ORT's telemetry otherwise leaves an empty mat-debug-PID.log in $TMPDIR on every start.
  process.env.ORT_DISABLE_TELEMETRY = '1';
  const ort = require(ORT_DIR);
  const jobs = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  for (const job of jobs) {
    fs.mkdirSync(job.output_dir, { recursive: true });
    try {
      await runJob(ort, job);
    } catch (e) {
      fs.writeFileSync(path.join(job.output_dir, 'error.txt'), `${e && e.message ? e.message : e}\n`);
    }
  }
}

main().catch((e) => {
  process.stderr.write(`ort_reference: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
