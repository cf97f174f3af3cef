// trace_processor_wasm.js — loads one trace into Perfetto's own trace
// processor (the WebAssembly build the Perfetto UI runs in a web worker,
// engine_bundle.js + trace_processor.wasm of a published UI package) under
// Node, runs SQL queries on it and prints the answers as JSON.
//
//   node trace_processor_wasm.js PACKAGE_DIR TRACE_FILE < queries.json
//
// queries.json: {"name": "SELECT ...", ...}. Output (stdout, one JSON
// object): {"version": "...", "append_error": null|"...",
// "results": {"name": {"columns": [...], "rows": [[...], ...],
// "error": null|"..."}}}. Integers are printed exactly (64-bit), so
// nanosecond timestamps survive.
//
// Why this shape: the engine bundle is the UI's worker script; it reads
// `self` for its postMessage entry point and speaks trace processor's RPC
// (protos/perfetto/trace_processor/trace_processor.proto: a stream of
// TraceProcessorRpc messages, each framed as field 1 of
// TraceProcessorRpcStream) over a MessagePort. We give it a `self` and a
// port of our own, and, since the Wasm call answers synchronously inside
// port.postMessage, drive the whole exchange without an event loop. The
// RPC protobufs are small enough to encode and decode by hand here.
'use strict';

const fs = require('fs');
const path = require('path');

const [pkgDir, tracePath] = process.argv.slice(2);
if (!pkgDir || !tracePath) {
  process.stderr.write('usage: node trace_processor_wasm.js PACKAGE_DIR TRACE_FILE < queries.json\n');
  process.exit(2);
}
const queries = JSON.parse(fs.readFileSync(0, 'utf8'));
const trace = fs.readFileSync(tracePath);

// ------------------------------------------------------------ protobuf
const TPM_APPEND_TRACE_DATA = 1;
const TPM_FINALIZE_TRACE_DATA = 2;
const TPM_QUERY_STREAMING = 3;
const TPM_GET_STATUS = 10;

function varint(n) {  // n: BigInt or Number >= 0
  let v = BigInt(n);
  const out = [];
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v) b |= 0x80;
    out.push(b);
  } while (v);
  return Buffer.from(out);
}
const key = (field, wire) => varint((field << 3) | wire);
const lenField = (field, bytes) => Buffer.concat([key(field, 2), varint(bytes.length), bytes]);
const intField = (field, n) => Buffer.concat([key(field, 0), varint(n)]);

// Splits a message into [field, wire, value] (value: BigInt for varints,
// Buffer for length-delimited and fixed-width fields).
function fields(buf) {
  const out = [];
  let i = 0;
  const readVarint = () => {
    let v = 0n, shift = 0n;
    for (;;) {
      if (i >= buf.length) throw new Error('truncated varint');
      const b = buf[i++];
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const k = Number(readVarint());
    const field = k >>> 3, wire = k & 7;
    if (wire === 0) out.push([field, wire, readVarint()]);
    else if (wire === 1) { out.push([field, wire, buf.subarray(i, i + 8)]); i += 8; }
    else if (wire === 5) { out.push([field, wire, buf.subarray(i, i + 4)]); i += 4; }
    else if (wire === 2) {
      const n = Number(readVarint());
      if (i + n > buf.length) throw new Error('truncated field');
      out.push([field, wire, buf.subarray(i, i + n)]); i += n;
    } else throw new Error(`wire type ${wire} not handled`);
  }
  return out;
}

function unpackVarints(buf) {
  const out = [];
  let i = 0;
  while (i < buf.length) {
    let v = 0n, shift = 0n;
    for (;;) {
      const b = buf[i++];
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
      shift += 7n;
    }
    out.push(v);
  }
  return out;
}
const asInt64 = (u) => BigInt.asIntN(64, u);

// QueryResult.CellsBatch -> rows appended to `rows` (width = ncols).
const CELL_NULL = 1, CELL_VARINT = 2, CELL_FLOAT64 = 3, CELL_STRING = 4, CELL_BLOB = 5;
function decodeBatch(buf, ncols, state) {
  let cells = [], ints = [], doubles = [], blobs = [], strings = [], last = false;
  for (const [f, w, v] of fields(buf)) {
    if (f === 1) cells = cells.concat(w === 2 ? unpackVarints(v).map(Number) : [Number(v)]);
    else if (f === 2) ints = ints.concat(w === 2 ? unpackVarints(v).map(asInt64) : [asInt64(v)]);
    else if (f === 3) {
      if (w === 2) for (let o = 0; o < v.length; o += 8) doubles.push(v.readDoubleLE(o));
      else doubles.push(v.readDoubleLE(0));
    } else if (f === 4) blobs.push(Buffer.from(v).toString('base64'));
    else if (f === 5) {
      const s = v.toString('utf8');
      strings = s.endsWith('\0') ? s.slice(0, -1).split('\0') : s.split('\0');
    } else if (f === 6) last = v !== 0n;
  }
  let ni = 0, nd = 0, ns = 0, nb = 0;
  for (const c of cells) {
    let val;
    if (c === CELL_NULL) val = null;
    else if (c === CELL_VARINT) val = ints[ni++];
    else if (c === CELL_FLOAT64) val = doubles[nd++];
    else if (c === CELL_STRING) val = strings[ns++];
    else if (c === CELL_BLOB) val = {blob: blobs[nb++]};
    else throw new Error(`cell type ${c}`);
    state.row.push(val);
    if (state.row.length === ncols) { state.rows.push(state.row); state.row = []; }
  }
  return last;
}

// ------------------------------------------------- the engine, under Node
// engine_bundle.js reads the .wasm with a path relative to the working
// directory (its locateFile returns the bare name).
process.chdir(path.resolve(pkgDir));
let inbox = [];
const port = {
  postMessage(data) { inbox.push(Buffer.from(data)); },
  set onmessage(fn) { this.deliver = fn; },
};
globalThis.self = {};
require(path.resolve('engine_bundle.js'));
if (typeof globalThis.self.onmessage !== 'function') {
  throw new Error('engine_bundle.js did not install a worker onmessage handler');
}
globalThis.self.onmessage({data: {enginePort: port}});

let txSeq = 0;
let rxBuf = Buffer.alloc(0);
// Sends one request; returns the TraceProcessorRpc messages it answered.
function call(method, args) {
  const msg = Buffer.concat([intField(1, txSeq++), intField(2, method), args || Buffer.alloc(0)]);
  inbox = [];
  port.deliver({data: new Uint8Array(lenField(1, msg))});
  rxBuf = Buffer.concat([rxBuf, ...inbox]);
  const replies = [];
  // Whole TraceProcessorRpcStream.msg fields only; a partial one waits.
  for (;;) {
    let i = 0, k = 0n, shift = 0n;
    const readVarint = () => {
      let v = 0n; shift = 0n;
      for (;;) {
        if (i >= rxBuf.length) return null;
        const b = rxBuf[i++];
        v |= BigInt(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
        shift += 7n;
      }
    };
    k = readVarint();
    if (k === null) break;
    const n = readVarint();
    if (n === null || i + Number(n) > rxBuf.length) break;
    if (k !== 0x0an) throw new Error(`unexpected RPC stream field ${k}`);
    replies.push(fields(rxBuf.subarray(i, i + Number(n))));
    rxBuf = rxBuf.subarray(i + Number(n));
  }
  for (const r of replies) {
    for (const [f, , v] of r) {
      if (f === 5) throw new Error(`trace processor fatal error: ${v.toString('utf8')}`);
      if (f === 4) throw new Error(`trace processor does not know request ${v}`);
    }
  }
  return replies;
}

function query(sql) {
  const replies = call(TPM_QUERY_STREAMING, lenField(103, lenField(1, Buffer.from(sql, 'utf8'))));
  const res = {columns: [], rows: [], error: null};
  const state = {rows: res.rows, row: []};
  let last = false;
  for (const r of replies) {
    for (const [f, , v] of r) {
      if (f !== 203) continue;
      for (const [qf, , qv] of fields(v)) {
        if (qf === 1) res.columns.push(qv.toString('utf8'));
        else if (qf === 2) res.error = qv.toString('utf8');
        else if (qf === 3) last = decodeBatch(qv, Math.max(res.columns.length, 1), state) || last;
      }
    }
  }
  if (!last && !res.error) throw new Error(`query answer without its last batch: ${sql}`);
  return res;
}

async function main() {
  // The Wasm runtime starts synchronously inside require(); the bridge
  // finishes its set-up (trace_processor_rpc_init) in a promise callback.
  await new Promise((resolve) => setImmediate(resolve));
  let version = null;
  for (const r of call(TPM_GET_STATUS)) {
    for (const [f, , v] of r) {
      if (f !== 210) continue;
      for (const [sf, , sv] of fields(v)) if (sf === 2) version = sv.toString('utf8');
    }
  }
  let appendError = null;
  const CHUNK = 1 << 20;
  for (let o = 0; o < trace.length; o += CHUNK) {
    for (const r of call(TPM_APPEND_TRACE_DATA, lenField(101, trace.subarray(o, o + CHUNK)))) {
      for (const [f, , v] of r) {
        if (f !== 201) continue;
        for (const [af, , av] of fields(v)) if (af === 2) appendError = appendError || av.toString('utf8');
      }
    }
  }
  call(TPM_FINALIZE_TRACE_DATA);
  const results = {};
  for (const [name, sql] of Object.entries(queries)) results[name] = query(sql);
  const text = JSON.stringify({version, append_error: appendError, results},
                              (k, v) => (typeof v === 'bigint' ? `\u0000int:${v}` : v));
  process.stdout.write(text.replace(/"\\u0000int:(-?\d+)"/g, '$1') + '\n');
}

main().catch((err) => {
  process.stderr.write(`trace_processor_wasm: ${err && err.stack || err}\n`);
  process.exit(1);
});
