// The fixture emulator (reference 002: "the web UI's mock emulator replays the
// same fixtures, so the frontend develops against the exact wire format"):
// with ?emulator in the address, every /api/v1 request of this page is
// answered here, in the browser, from the fixtures of the source tree, and no
// server is asked. The event fixtures are schemas/events/fixtures/ (the same
// files the event schemas are tested with); the run, step, gate, write,
// workflow, dead-letter and schedule forms are schemas/wire/fixtures/, which api_test
// holds to the shape the server answers with. Both reach the page as
// fixtures.js, written at build time (cmake/EmulatorFixtures.cmake) into the
// build's web-emulator/ui/ beside links to web/. docs/operations.md says how
// to open it.
//
// Requests go through the real client (api.js): JSON answers and the event
// streams (text/event-stream, `id:`/`event:`/`data:` lines) are made as the
// server makes them, so the parsing, the reconnection and the rendering are
// the ones a user's browser runs. Starting, cancelling, deciding, redriving
// and pausing or resuming a schedule change this page's copy of the fixtures
// only.

import {EVENTS, WIRE} from './fixtures.js';

const RUN_ID = WIRE.run.id;
const encoder = new TextEncoder();

function clone(v) {
  return JSON.parse(JSON.stringify(v));
}

// The page's state, from the fixtures; ?role=viewer (or operator, approver)
// shows the UI as that role sees it.
const params = new URLSearchParams(location.search);
const state = {
  me: Object.assign(clone(WIRE.me), params.get('role') ? {role: params.get('role')} : {}),
  runs: clone(WIRE.runs.runs),
  steps: clone(WIRE.steps),
  gate: clone(WIRE.gate),
  writes: clone(WIRE.writes),
  deadLetters: clone(WIRE.dead_letters),
  schedules: clone(WIRE.schedules.schedules),
  started: 0,
};
// The main run is the fixture run (run.json); the page's other runs answer
// with their summary and no steps.
state.runs[state.runs.findIndex((r) => r.id === RUN_ID)] = clone(WIRE.run);

// The event fixtures are one example of each type, not one run's history
// (two share a seq): replayed in seq order, then type order, numbered again
// 1..N so that each is one event of the fixture run.
const replay = [...EVENTS]
  .sort((a, b) => a.seq - b.seq || a.type.localeCompare(b.type))
  .map((e, i) => Object.assign(clone(e), {run_id: RUN_ID, seq: i + 1}));

function json(status, body) {
  return new Response(JSON.stringify(body), {status, headers: {'Content-Type': 'application/json'}});
}

function error(status, code, message) {
  return json(status, {code, message});
}

// A text/event-stream of `frames`, kept open (as the server keeps a live
// stream open) until the page aborts the request.
function stream(frames, signal) {
  const body = new ReadableStream({
    start(controller) {
      for (const f of frames) controller.enqueue(encoder.encode(f));
      if (signal) {
        signal.addEventListener('abort', () => {
          try {
            controller.error(new DOMException('aborted', 'AbortError'));
          } catch (e) {
            // already closed
          }
        });
      }
    },
  });
  return new Response(body, {status: 200, headers: {'Content-Type': 'text/event-stream'}});
}

function runById(id) {
  return state.runs.find((r) => r.id === id);
}

function touch(run, status) {
  run.status = status;
  run.updated_at = new Date().toISOString();
}

async function answer(method, url, init) {
  const path = url.pathname.slice('/api/v1'.length);
  const q = url.searchParams;
  const body = init && init.body ? JSON.parse(init.body) : {};
  const parts = path.split('/').slice(1).map(decodeURIComponent);
  if (method === 'GET') {
    if (path === '/me') return json(200, state.me);
    if (path === '/workflows') return json(200, WIRE.workflows);
    if (parts[0] === 'workflows' && parts.length === 2) {
      return parts[1] === WIRE.workflow.name ? json(200, WIRE.workflow)
        : error(404, 'not_found', `no workflow named '${parts[1]}'`);
    }
    if (path === '/dead-letters') return json(200, state.deadLetters);
    if (path === '/budgets') return json(200, WIRE.budgets);
    if (path === '/llm/caps') return json(200, WIRE.llm_caps);
    if (path === '/schedules') {
      // By id, after `after`, at most `limit`, as the server pages them.
      const after = q.get('after') || '';
      const limit = Number(q.get('limit') || 100);
      const page = [...state.schedules].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
        .filter((s) => s.id > after).slice(0, limit);
      return json(200, {schedules: page});
    }
    if (parts[0] === 'schedules' && parts.length === 2) {
      const s = state.schedules.find((x) => x.id === parts[1]);
      return s ? json(200, s) : error(404, 'not_found', `schedule ${parts[1]} not found`);
    }
    if (path === '/runs') {
      const status = q.get('status');
      const parent = q.get('parent');
      return json(200, {next_cursor: '', runs: state.runs.filter((r) => (!status || r.status === status) &&
        (!parent || r.parent_run_id === parent))});
    }
    if (path === '/events') {
      // The server's ids here are times of its store (unix microseconds).
      return stream([`id: ${Date.now() * 1000}\nevent: run\ndata: ${JSON.stringify(WIRE.run_change)}\n\n`],
        init && init.signal);
    }
    if (parts[0] === 'runs' && parts.length >= 2) {
      const run = runById(parts[1]);
      if (!run) return error(404, 'not_found', `no run '${parts[1]}'`);
      const main = run.id === RUN_ID;
      const tail = parts.slice(2).join('/');
      if (tail === '') return json(200, run);
      if (tail === 'steps') return json(200, main ? state.steps : {steps: []});
      if (tail === 'writes') return json(200, main ? state.writes : {writes: []});
      if (tail === 'gate') {
        return main && run.status === 'paused' ? json(200, state.gate)
          : error(404, 'not_found', `run '${run.id}' waits at no gate`);
      }
      if (tail === 'events') {
        const events = main ? replay : [];
        if ((init && init.headers && init.headers.Accept) === 'text/event-stream') {
          const after = Number((init.headers['Last-Event-ID']) || 0);
          return stream(events.filter((e) => e.seq > after)
            .map((e) => `id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`), init.signal);
        }
        return json(200, {events});
      }
    }
  }
  if (method === 'POST') {
    if (path === '/runs') {
      if (body.workflow !== WIRE.workflow.name) return error(404, 'not_found', `no workflow named '${body.workflow}'`);
      const run = clone(WIRE.run);
      run.id = `${RUN_ID.slice(0, -4)}e${String(state.started++).padStart(3, '0')}`;
      Object.assign(run, {status: 'queued', phase: '', pending_gate: null, inputs: body.inputs || {},
        created_at: new Date().toISOString(), updated_at: new Date().toISOString()});
      state.runs.unshift(run);
      return json(201, run);
    }
    if (parts[0] === 'runs' && parts.length === 3) {
      const run = runById(parts[1]);
      if (!run) return error(404, 'not_found', `no run '${parts[1]}'`);
      if (parts[2] === 'cancel') {
        run.cancel_requested = true;
        touch(run, 'cancelled');
        return json(200, run);
      }
      if (parts[2] === 'decisions') {
        if (run.status !== 'paused' || body.digest !== state.gate.proposal_digest) {
          return error(409, 'conflict', 'the proposal was already decided or has changed');
        }
        run.pending_gate = null;
        touch(run, body.decision === 'reject' ? 'rejected' : 'running');
        return json(200, run);
      }
    }
    if (parts[0] === 'schedules' && parts.length === 3 && ['pause', 'resume'].includes(parts[2])) {
      // Operators and the roles above, as the server's role table says.
      if (!['operator', 'approver', 'admin'].includes(state.me.role)) {
        return error(403, 'forbidden', `this needs the operator role; your token has ${state.me.role}`);
      }
      const s = state.schedules.find((x) => x.id === parts[1]);
      if (!s) return error(404, 'not_found', `schedule ${parts[1]} not found`);
      s.paused = parts[2] === 'pause';
      s.updated_at = new Date().toISOString();
      // Resumed: the next tick is the first after now (here: the next minute).
      if (!s.paused) s.next_fire_at = new Date(Math.ceil(Date.now() / 60000) * 60000).toISOString();
      return json(200, s);
    }
    if (parts[0] === 'dead-letters' && parts[2] === 'redrive') {
      state.deadLetters.dead_letters = state.deadLetters.dead_letters.filter((d) => d.id !== parts[1]);
      return json(200, {redriven: parts[1]});
    }
  }
  return error(404, 'not_found', `the emulator has no fixture for ${method} ${url.pathname}`);
}

// Answers this page's /api/v1 requests from the fixtures from now on; any
// other request (the UI's own files) goes to the network as before.
export function install() {
  const network = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const url = new URL(typeof input === 'string' ? input : input.url, location.href);
    if (url.origin !== location.origin || !url.pathname.startsWith('/api/v1')) return network(input, init);
    return answer(((init && init.method) || 'GET').toUpperCase(), url, init);
  };
  document.body.classList.add('emulated');
  const banner = document.createElement('p');
  banner.className = 'emulator-banner';
  banner.setAttribute('role', 'note');
  banner.textContent = 'Fixture emulator: every answer comes from schemas/*/fixtures; no server is asked.';
  document.body.prepend(banner);
}
