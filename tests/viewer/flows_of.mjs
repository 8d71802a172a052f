// Prints, as JSON, the flows DevTools' own trace engine resolves in a trace: for each,
// the events it bound ([name, pid, tid, ts] in order). For the end-to-end flow tests.
// usage: node flows_of.mjs TRACE.json
import fs from 'node:fs';
import * as Trace from '@paulirish/trace_engine';

// The engine expects a browser's DOMRect; this is all it uses of it.
globalThis.DOMRect ??= class {
  constructor(x = 0, y = 0, width = 0, height = 0) {
    Object.assign(this, { x, y, width, height });
  }
};

const events = JSON.parse(fs.readFileSync(process.argv[2], 'utf8')).traceEvents;
const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(structuredClone(events));
const flows = model.parsedTrace().data.Flows.flows;
console.log(JSON.stringify(flows.map((f) => f.map((e) => [e.name, e.pid, e.tid, e.ts]))));
