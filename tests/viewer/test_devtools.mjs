// Loads traces written by the real trace stage (build/tests/trace/gen_trace) with Chrome
// DevTools' own trace engine and checks what the Performance panel would show: every
// slice in the flame-chart tree (DevTools silently drops a slice that partially overlaps
// its parent) at the depth its name says, every thread and process named.
// usage: node test_devtools.mjs BUILD_DIR   -> prints "viewer: N passed, N failed"
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import * as Trace from '@paulirish/trace_engine';

// The engine expects a browser's DOMRect; this is all it uses of it.
globalThis.DOMRect ??= class {
  constructor(x = 0, y = 0, width = 0, height = 0) {
    Object.assign(this, { x, y, width, height });
  }
};

const build = process.argv[2] ?? 'build';
const gen = path.resolve(build, 'tests/trace/gen_trace');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pytrace-viewer-'));
let passed = 0;
let failed = 0;

function load(file) {
  let buf = fs.readFileSync(file);
  if (buf[0] === 0x1f && buf[1] === 0x8b) buf = zlib.gunzipSync(buf);
  return JSON.parse(buf.toString('utf8'));
}

// Returns a list of problems DevTools would show with these events (empty when none).
// @flat: written with --flat: one process, each thread named "worker-TID (pid PID, tid
// TID) proc-PID".
async function viewerProblems(events, flat = false) {
  const problems = [];
  const model = Trace.TraceModel.Model.createWithAllHandlers();
  await model.parse(structuredClone(events));
  const data = model.parsedTrace().data;
  const slices = events.filter((e) => e.ph === 'X');
  const threadsWithSlices = new Set(slices.map((e) => `${e.pid}:${e.tid}`));
  let nodes = 0;

  for (const [pid, proc] of data.Renderer.processes) {
    for (const [tid, thread] of proc.threads) {
      if (!threadsWithSlices.has(`${pid}:${tid}`)) continue;
      const want = flat ? new RegExp(`^worker-${tid} \\(pid (\\d+), tid ${tid}\\) proc-\\1$`)
        : new RegExp(`^worker-${tid}$`);
      if (!want.test(thread.name ?? ''))
        problems.push(`thread ${pid}:${tid} is named ${JSON.stringify(thread.name)}`);
      const walk = (node) => {
        nodes++;
        const want = Number(/^d(\d+)_/.exec(node.entry.name)?.[1]);
        if (node.depth !== want)
          problems.push(`${node.entry.name} at ts ${node.entry.ts} shown at depth ${node.depth}`);
        for (const child of node.children) walk(child);
      };
      for (const root of thread.tree.roots) walk(root);
    }
  }
  if (nodes !== slices.length)
    problems.push(`${slices.length} slices in the file, ${nodes} in DevTools' flame chart`);
  const pids = new Set(slices.map((e) => e.pid));
  if (flat && pids.size !== 1) problems.push(`${pids.size} processes, not one`);
  for (const pid of pids) {
    const name = data.Meta.processNames.get(pid)?.args?.name;
    if (flat ? !/^pytrace-sample: 3 processes/.test(name) : name !== `proc-${pid}`)
      problems.push(`process ${pid} is named ${JSON.stringify(name)}`);
  }
  return problems;
}

function check(name, problems) {
  if (problems.length === 0) {
    passed++;
    console.log(`ok: ${name}`);
  } else {
    failed++;
    console.log(`FAIL: ${name}\n  ${problems.slice(0, 10).join('\n  ')}`);
  }
}

// A copy of @events in which one nested slice outlives its parent.
function withPartialOverlap(events) {
  const copy = structuredClone(events);
  const slices = copy.filter((e) => e.ph === 'X');
  for (const child of slices) {
    if (!child.name.startsWith('d1_')) continue;
    const parent = slices.find((p) => p.tid === child.tid && p.name.startsWith('d0_') &&
      p.ts <= child.ts && child.ts + child.dur <= p.ts + p.dur);
    if (!parent) continue;
    child.dur = Math.round((parent.ts + parent.dur - child.ts + 5) * 1000) / 1000;
    return copy;
  }
  throw new Error('no nested slice to break');
}

try {
  for (const [seed, ext] of [[1, 'json'], [2, 'json'], [3, 'json.gz'], [4, 'json']]) {
    const file = path.join(tmp, `seed${seed}.${ext}`);
    execFileSync(gen, [file, String(seed)], { stdio: 'inherit' });
    const events = load(file).traceEvents;
    const count = events.filter((e) => e.ph === 'X').length;
    check(`seed ${seed} (${ext}, ${count} slices) fully shown at the right depths`,
      await viewerProblems(events));
    if (seed === 1) {
      // The check itself must catch a writer that emits a partial overlap.
      const caught = await viewerProblems(withPartialOverlap(events));
      check('a partial overlap is caught', caught.length ? [] : ['a partial overlap went unnoticed']);
    }
  }
  // --flat: one process, a row per thread, every slice kept at its depth.
  const flatFile = path.join(tmp, 'flat.json');
  execFileSync(gen, [flatFile, '5', 'flat'], { stdio: 'inherit' });
  const flatEvents = load(flatFile).traceEvents;
  const rows = new Set(flatEvents.filter((e) => e.ph === 'X').map((e) => e.tid)).size;
  check(`--flat (${rows} thread rows in one process) fully shown at the right depths`,
    [...await viewerProblems(flatEvents, true), ...(rows === 6 ? [] : [`${rows} rows, not 6`])]);
} catch (e) {
  failed++;
  console.log(`FAIL: ${e.stack ?? e}`);
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
console.log(`viewer: ${passed} passed, ${failed} failed`);
process.exitCode = failed ? 1 : 0;
