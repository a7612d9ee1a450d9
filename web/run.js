// One run: its status, its graph with each step's state changing live, the
// approval panel when it waits at a gate, the text of its streaming model
// calls as it arrives, its step records (outputs, errors, attempts,
// revisions), its external writes with the decision each carried out, a
// waterfall of its step attempts and an inspector of its model calls (issue
// 25), and a timeline of events that resumes after a cut.

import {follow, get, post} from './api.js';
import {h, pretty, replace, statusBadge, toast, when} from './dom.js';
import {gatePanel} from './gate.js';
import {drawGraph} from './graph.js';
import {inspector} from './inspector.js';
import {waterfall} from './waterfall.js';
import {TERMINAL} from './vocabulary.js';

function eventLine(ev) {
  const d = ev.data || {};
  const bits = [];
  for (const k of ['path', 'status', 'decision', 'reviewer', 'attempt', 'error', 'from_phase', 'reason']) {
    if (d[k] !== undefined && d[k] !== '') bits.push(`${k} ${typeof d[k] === 'string' ? d[k] : JSON.stringify(d[k])}`);
  }
  return h('li', {'data-seq': ev.seq},
    h('span', {class: 'seq'}, `#${ev.seq}`), ' ',
    h('time', {datetime: ev.at}, when(ev.at)), ' ',
    h('strong', {}, ev.type), bits.length ? ` — ${bits.join(', ')}` : '');
}

function stepsTable(records) {
  const sorted = [...records].sort((a, b) => (a.started_at || '').localeCompare(b.started_at || ''));
  return h('table', {class: 'steps'},
    h('caption', {}, 'Step records (every attempt and revision)'),
    h('thead', {}, h('tr', {}, ['Step', 'Kind', 'Revision', 'Attempt', 'State', 'Output or error']
      .map((c) => h('th', {scope: 'col'}, c)))),
    h('tbody', {}, sorted.map((s) => h('tr', {},
      h('td', {}, s.path), h('td', {}, s.kind), h('td', {}, s.revision), h('td', {}, s.attempt),
      h('td', {}, statusBadge(s.state)),
      h('td', {}, s.error
        ? h('details', {}, h('summary', {class: 'error'}, s.error.slice(0, 120)),
          h('pre', {}, s.error), s.stderr_tail ? h('pre', {}, s.stderr_tail) : null)
        : s.output !== null && s.output !== undefined && s.output !== ''
          ? h('details', {}, h('summary', {}, 'output'), h('pre', {}, pretty(s.output)))
          : '')))));
}

// The write ledger (reference 003: "the decision records hold the
// evidence"): one row per external write, keyed by the decision it carried out.
function writesTable(writes) {
  if (!writes.length) return h('p', {class: 'writes-none'}, 'No external writes.');
  return h('table', {class: 'writes'},
    h('caption', {}, 'External writes (each once per decision)'),
    h('thead', {}, h('tr', {}, ['Step', 'Action', 'Decision', 'State', 'HTTP', 'Source', 'Response']
      .map((c) => h('th', {scope: 'col'}, c)))),
    h('tbody', {}, writes.map((w) => h('tr', {},
      h('td', {}, w.path), h('td', {}, w.action),
      h('td', {}, w.decision ? h('code', {title: w.decision}, w.decision.replace(/:sha256:(.{12}).*/, ':$1…')) : '—'),
      h('td', {}, h('span', {class: `badge s-${w.state === 'done' ? 'succeeded' : 'running'}`}, w.state)),
      h('td', {}, w.http_status ?? '—'), h('td', {}, w.source ?? '—'),
      h('td', {}, w.response !== null && w.response !== undefined
        ? h('details', {}, h('summary', {}, 'response'), h('pre', {}, pretty(w.response)))
        : '')))));
}

function actions(ctx, run, refresh) {
  if (!ctx.can('operator')) return null;
  const box = h('div', {class: 'actions'});
  if (!TERMINAL.has(run.status)) {
    box.appendChild(h('button', {type: 'button', onclick: async () => {
      if (!confirm(`Cancel run ${run.id}?`)) return;
      try {
        await post(`/runs/${encodeURIComponent(run.id)}/cancel`, {});
        toast('Cancel requested.');
        refresh();
      } catch (e) {
        toast(`Not cancelled: ${e.message}`);
      }
    }}, 'Cancel run'));
  }
  return box;
}

// What a waiting run waits for (issue 23): a signal (until its timeout, if
// any), its child run, or a timer. GET /runs/{id} carries it as waiting_for.
function waitingFor(run) {
  const w = run.waiting_for;
  if (run.status !== 'waiting' || !w) return '';
  const until = w.until ? ` until ${when(w.until)}` : '';
  if (w.kind === 'child') {
    return h('span', {class: 'waiting-for'}, ' · waits for child run ',
      h('a', {href: `#/runs/${encodeURIComponent(w.child_run_id)}`}, h('code', {}, w.child_run_id)));
  }
  return h('span', {class: 'waiting-for'},
    w.kind === 'signal' ? [' · waits for signal ', h('code', {}, w.signal), until] : ` · timer${until}`);
}

// The run that started this one (its `kind: run` step), linked.
function parentLink(run) {
  if (!run.parent_run_id) return '';
  return h('span', {class: 'parent-run'}, ' · child of ',
    h('a', {href: `#/runs/${encodeURIComponent(run.parent_run_id)}`}, h('code', {}, run.parent_run_id)),
    run.parent_step_path ? ` (step ${run.parent_step_path})` : '');
}

// The runs this one started with `kind: run` steps (GET /runs?parent=ID).
function childrenTable(children) {
  if (!children.length) return '';
  return h('div', {},
    h('h2', {}, 'Child runs'),
    h('table', {class: 'children'},
      h('thead', {}, h('tr', {}, h('th', {}, 'Run'), h('th', {}, 'Workflow'), h('th', {}, 'Status'))),
      h('tbody', {}, ...children.map((c) => h('tr', {},
        h('td', {}, h('a', {href: `#/runs/${encodeURIComponent(c.id)}`}, h('code', {}, c.id))),
        h('td', {}, `${c.workflow} v${c.workflow_version}`),
        h('td', {}, statusBadge(c.status)))))));
}

// The streamed model calls (issue 24): one box per call, its text growing
// with each `llm.delta` frame (placed by byte offset, so a piece is shown
// once), voided by `llm.reset`, marked done by `llm.end`.
function liveCalls() {
  const box = h('section', {class: 'live-calls', 'aria-label': 'Streaming model calls'});
  const calls = new Map();
  const bytes = (s) => new TextEncoder().encode(s).length;
  function call(d) {
    const key = `${d.path}#${d.attempt}`;
    let c = calls.get(key);
    if (!c) {
      const text = h('pre', {class: 'live-text', 'data-path': d.path, 'aria-live': 'off'});
      const state = h('span', {class: 'live-state'}, 'streaming…');
      c = {text, state, length: 0, el: h('div', {class: 'live-call'},
        h('h3', {}, h('code', {}, d.path), ` attempt ${d.attempt} `, state), text)};
      calls.set(key, c);
      box.appendChild(c.el);
    }
    return c;
  }
  return {
    element: box,
    frame(event, d) {
      if (!d || typeof d.path !== 'string') return;
      const c = call(d);
      if (event === 'llm.reset') {
        c.text.textContent = '';
        c.length = 0;
        c.state.textContent = 'streaming again…';
      } else if (event === 'llm.end') {
        c.state.textContent = 'done';
      } else if (typeof d.text === 'string' && d.offset >= c.length) {
        c.text.textContent += d.text;
        c.length = d.offset + bytes(d.text);
      }
    },
  };
}

export async function runPage(ctx, id) {
  const path = `/runs/${encodeURIComponent(id)}`;
  let run = await get(path);
  const wf = await get(`/workflows/${encodeURIComponent(run.workflow)}?version=${run.workflow_version}`);
  const definition = wf.definition || {};
  const graph = drawGraph(definition);
  const head = h('div', {class: 'runhead'});
  const notice = h('div', {class: 'notice', role: 'alert'});
  const gatePanelBox = h('div');
  const gateBox = h('section', {class: 'gatebox', 'aria-live': 'polite'}, notice, gatePanelBox);
  const stepsBox = h('section', {}, h('p', {}, 'Loading steps…'));
  const writesBox = h('section', {'aria-label': 'External writes'});
  const childrenBox = h('section', {'aria-label': 'Child runs'});
  const waterfallBox = h('section', {class: 'waterfall-box', 'aria-labelledby': 'waterfall-title'});
  const callsBox = h('section', {class: 'calls-box', 'aria-labelledby': 'calls-title'});
  const timeline = h('ol', {class: 'timeline', 'aria-label': 'Events'});
  const live = h('span', {class: 'live', 'aria-live': 'polite'});
  const streaming = liveCalls();
  let gateDigest = null;

  function drawHead() {
    replace(head,
      h('h1', {}, 'Run ', h('code', {}, run.id)),
      h('p', {},
        statusBadge(run.status), ' ',
        h('a', {href: `#/workflows/${encodeURIComponent(run.workflow)}`}, `${run.workflow} v${run.workflow_version}`),
        run.phase ? ` · phase ${run.phase}` : '', ` · revision ${run.revision}`,
        run.outcome ? ` · outcome ${run.outcome}` : '',
        // Distinct step records of the revision (reference 002): GET /runs/{id} only.
        run.step_counts && run.step_counts.revision === run.revision
          ? h('span', {class: 'step-counts'}, ` · steps ${run.step_counts.succeeded} succeeded, ` +
              `${run.step_counts.failed} failed, ${run.step_counts.skipped} skipped`)
          : '',
        run.error ? h('span', {class: 'error'}, ` · ${run.error}`) : '',
        waitingFor(run), parentLink(run)),
      actions(ctx, run, refresh));
  }

  async function refreshGate() {
    if (run.status !== 'paused') {
      gateDigest = null;
      replace(gatePanelBox);
      return;
    }
    let gate = null;
    try {
      gate = await get(`${path}/gate`);
    } catch (e) {
      if (e.status !== 404) throw e;
    }
    if (!gate || !gate.proposal_digest) return replace(gatePanelBox);
    graph.update(lastRecords, gate.path);  // the gate's node shows it waits
    if (gate.proposal_digest === gateDigest) return;  // the panel on screen is current
    gateDigest = gate.proposal_digest;
    replace(gatePanelBox, gatePanel(ctx, run, gate, (conflict) => {
      replace(notice, conflict ? h('p', {class: 'error conflict'}, conflict) : null);
      gateDigest = null;
      refresh().catch((e) => toast(e.message));
    }));
  }

  let pending = null;
  let lastRecords = [];
  async function refresh() {
    const [r, steps, writes, kids] = await Promise.all([get(path), get(`${path}/steps`),
      get(`${path}/writes`), get(`/runs?parent=${encodeURIComponent(id)}&limit=100`)]);
    run = r;
    const records = Array.isArray(steps) ? steps : steps.steps || [];
    drawHead();
    lastRecords = records;
    graph.update(records);
    replace(stepsBox, stepsTable(records));
    replace(writesBox, writesTable(writes.writes || []));
    replace(childrenBox, childrenTable(kids.runs || []));
    await refreshGate();
    drawObservations();
  }

  // The waterfall and the model calls, from the run's events as the stream
  // below delivered them (every stored event, once each, in seq order).
  const history = [];
  function drawObservations() {
    replace(waterfallBox, h('h2', {id: 'waterfall-title'}, 'Waterfall'), waterfall(history));
    replace(callsBox, h('h2', {id: 'calls-title'}, 'Model calls'), inspector(history, lastRecords));
  }
  function soon() {
    if (pending) return;
    pending = setTimeout(() => {
      pending = null;
      refresh().catch((e) => toast(e.message));
    }, 100);
  }

  replace(ctx.main, head,
    h('section', {'aria-label': 'Graph', class: 'graphbox'}, graph.element),
    gateBox, streaming.element, waterfallBox, callsBox, stepsBox, childrenBox, writesBox,
    h('section', {}, h('h2', {}, 'Timeline ', live), timeline));
  drawHead();
  await refresh();

  const seen = new Set();
  const stop = follow(`${path}/events`, (msg) => {
    // Stored events carry an id (their seq); streamed frames do not.
    if (msg.id === undefined && msg.event && msg.event.startsWith('llm.')) {
      streaming.frame(msg.event, msg.data);
      return;
    }
    const ev = msg.data || {};
    if (seen.has(ev.seq)) return;  // never shown twice, even across a reconnect
    seen.add(ev.seq);
    history.push(ev);
    timeline.appendChild(eventLine(ev));
    soon();
  }, (s) => replace(live, s === 'live' ? '(live)' : s === 'reconnecting' ? '(reconnecting…)' : '(ended)'));
  return () => {
    stop();
    clearTimeout(pending);
  };
}
