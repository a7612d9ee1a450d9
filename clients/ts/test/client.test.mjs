// Tests of runloom-client against a real `runloom serve`.
//
//   node clients/ts/test/client.test.mjs RUNLOOM_BINARY [WORK_DIR]
//   RUNLOOM_BINARY=build/runloom node --test clients/ts/test/
//
// Starts its own server on a fresh SQLite file with an admin, an approver and
// a viewer token, registers small workflows over the API, and checks every
// call of the client, the typed errors, the size limits and timeouts, and
// that a followed event stream cut mid-run -- by a proxy that drops
// connections mid-message, and by a graceful restart of `serve` on the same
// database and port -- goes on with every seq exactly once, in order.

import {after, before, describe, test} from 'node:test';
import assert from 'node:assert/strict';
import {execFileSync, spawn} from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import util from 'node:util';
import {waitFor as waitForMs} from '../../../tests/node_helpers.mjs';
import {
  ApiError, ResponseTooLarge, RunloomClient, TransportError,
} from '../index.js';

const binary = process.argv[2] || process.env.RUNLOOM_BINARY;
if (!binary) {
  console.error('usage: node client.test.mjs RUNLOOM_BINARY [WORK_DIR] (or RUNLOOM_BINARY=...)');
  process.exit(2);
}
const work = process.argv[3] || fs.mkdtempSync(path.join(os.tmpdir(), 'runloom-client-ts-'));
fs.rmSync(work, {recursive: true, force: true});
fs.mkdirSync(work, {recursive: true});
const db = path.join(work, 'clients.db');

// `runloom serve` on db; port 0 picks one, read from its log line.
async function startServer(port = 0) {
  const proc = spawn(binary, ['serve', '--db', db, '--listen', `127.0.0.1:${port}`, '--executors', '2'],
    {stdio: ['ignore', 'ignore', 'pipe']});
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({code, signal})));
  let log = '';
  const got = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not log its address:\n${log}`)), 15000);
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    exited.then(() => reject(new Error(`serve exited:\n${log}`)));
  });
  return {
    port: got,
    url: `http://127.0.0.1:${got}`,
    async stop() {
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 20000);
      const r = await exited;
      clearTimeout(t);
      return r;
    },
  };
}

function token(name, role) {
  const out = execFileSync(binary, ['token', 'create', '--name', name, '--role', role, '--db', db, '--json'],
    {encoding: 'utf8'});
  return JSON.parse(out).token;
}

const waitFor = (what, fn, ms = 15000) => waitForMs(what, fn, ms);

// A TCP proxy to the server that cuts the n-th connection after
// cutAfter[n % length] bytes from the server (mid-message), and passes
// connections whole once `cuts` were cut.
// With `stall`, a cut connection goes silent and stays open instead.
function cuttingProxy(targetPort, cutAfter, cuts, stall = false) {
  const state = {connections: 0, cutsLeft: cuts};
  const server = net.createServer((client) => {
    const limit = state.cutsLeft > 0 ? cutAfter[state.connections % cutAfter.length] : null;
    state.connections += 1;
    state.cutsLeft -= 1;
    const upstream = net.connect(targetPort, '127.0.0.1');
    let sent = 0;
    client.pipe(upstream);
    upstream.on('data', (data) => {
      if (limit === null) {
        client.write(data);
        return;
      }
      if (sent >= limit) return; // stalled
      if (sent + data.length >= limit) {
        if (stall) {
          client.write(data.subarray(0, limit - sent)); // a part of a message, then silence
          upstream.pause();
        } else {
          client.end(data.subarray(0, limit - sent)); // a part of a message, then the cut
          upstream.destroy();
        }
        sent = limit;
        return;
      }
      sent += data.length;
      client.write(data);
    });
    upstream.on('end', () => client.end());
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    state.port = server.address().port;
    state.close = () => new Promise((r) => server.close(r));
    resolve(state);
  }));
}

// The workflows both clients' tests register (cl_steps, cl_gate, cl_wait,
// cl_tick, cl_stream, cl_tenant), shared with clients/python/tests/test_client.py.
const workflowsDir = new URL('../../../tests/clients/workflows/', import.meta.url);

const seqs = (msgs) => msgs.map((m) => m.seq).filter((s) => s !== null);
const range = (from, n) => Array.from({length: n}, (_, i) => from + i);
async function collect(iter) {
  const out = [];
  for await (const m of iter) out.push(m);
  return out;
}
async function rejects(promise, check) {
  try {
    await promise;
  } catch (e) {
    check(e);
    return e;
  }
  assert.fail('expected an error');
}

let server;
let admin;
let approver;
let viewer;
const secrets = [];

describe('runloom-client against runloom serve', () => {
  before(async () => {
    secrets.push(token('root', 'admin'), token('alice', 'approver'), token('vera', 'viewer'));
    // tenant acme's budget (50 price units) in the ledger, as a config file gives it
    const config = path.join(work, 'config.yaml');
    fs.writeFileSync(config, 'tenants:\n  acme: {budget: 50}\n');
    execFileSync(binary, ['budgets', '--db', db, '--config', config], {stdio: 'ignore'});
    server = await startServer();
    admin = new RunloomClient(server.url, {token: secrets[0], timeoutMs: 10000});
    approver = new RunloomClient(server.url, {token: secrets[1], timeoutMs: 10000});
    viewer = new RunloomClient(server.url, {token: secrets[2], timeoutMs: 10000});
    for (const f of fs.readdirSync(workflowsDir).filter((n) => n.endsWith('.yaml')).sort()) {
      await admin.registerWorkflow(fs.readFileSync(new URL(f, workflowsDir), 'utf8'));
    }
  });

  after(async () => {
    const r = await server.stop();
    assert.equal(r.code, 0, `serve exited ${JSON.stringify(r)}`);
  });

  test('health and me', async () => {
    assert.equal((await viewer.healthz()).status, 'ok');
    assert.equal((await viewer.readyz()).status, 'ready');
    assert.deepEqual(await viewer.me(), {name: 'vera', role: 'viewer'});
  });

  test('the token is never shown', async () => {
    const bad = new RunloomClient(server.url, {token: 'rl_not_a_real_token_' + 'x'.repeat(20), timeoutMs: 5000});
    const e = await rejects(bad.me(), (e) => {
      assert.ok(e instanceof ApiError);
      assert.equal(e.status, 401);
      assert.equal(e.code, 'unauthenticated');
    });
    const texts = [String(e), e.stack, util.inspect(e), util.inspect(bad), JSON.stringify(bad), util.inspect(admin),
      JSON.stringify(admin), String(admin)];
    for (const t of texts) {
      assert.ok(!t.includes('rl_not_a_real_token_'), t);
      for (const s of secrets) assert.ok(!t.includes(s), t);
    }
    await rejects(viewer.startRun('cl_tick'), (e) => {
      assert.equal(e.status, 403);
      assert.equal(e.code, 'forbidden');
      assert.ok(!util.inspect(e).includes(secrets[2]));
    });
  });

  test('start with an idempotency key, get, list', async () => {
    const first = await admin.startRun('cl_tick', {}, {idempotencyKey: 'ts-once'});
    const again = await admin.startRun('cl_tick', {}, {idempotencyKey: 'ts-once'});
    assert.equal(again.id, first.id);
    assert.equal(first.idempotency_key, 'ts-once');
    const other = await admin.startRun('cl_tick', {}, {idempotencyKey: 'ts-twice'});
    assert.notEqual(other.id, first.id);
    await waitFor('the run to complete', async () => (await viewer.getRun(first.id)).status === 'completed');
    assert.equal((await viewer.getRun(first.id)).step_counts.succeeded, 1);
    const page = await viewer.listRuns({workflow: 'cl_tick', limit: 1});
    assert.equal(page.runs.length, 1);
    assert.notEqual(page.next_cursor, '');
    const ids = [];
    for await (const r of viewer.iterRuns({workflow: 'cl_tick', pageSize: 1})) ids.push(r.id);
    assert.ok(ids.includes(first.id) && ids.includes(other.id));
    assert.equal(new Set(ids).size, ids.length);
    assert.equal((await viewer.steps(first.id))[0].step_id, 'tick');
    assert.deepEqual(await viewer.writes(first.id), []);
    const evs = await viewer.events(first.id);
    assert.deepEqual(evs.map((e) => e.seq), range(1, evs.length));
    assert.equal((await viewer.events(first.id, {after: 1, limit: 1}))[0].seq, 2);
  });

  test('search runs: tenant, input id, created range', async () => {
    const a = await admin.startRun('cl_tenant', {team: 'acme', order: 'ts-o-1'});
    await new Promise((r) => setTimeout(r, 10)); // b is created later than a: the time filters tell them apart
    const b = await admin.startRun('cl_tenant', {team: 'beta', order: 'ts-o-2'}, {idempotencyKey: 'ts-search-b'});
    const ids = async (filter = {}) =>
      (await viewer.listRuns({workflow: 'cl_tenant', ...filter})).runs.map((r) => r.id);
    assert.deepEqual(await ids(), [b.id, a.id]);
    assert.deepEqual(await ids({tenant: 'acme'}), [a.id]);
    assert.deepEqual(await ids({tenant: 'nobody'}), []);
    assert.deepEqual(await ids({inputId: 'ts-o-1'}), [a.id]); // a top-level input's value
    assert.deepEqual(await ids({inputId: 'ts-search-b'}), [b.id]); // the idempotency key
    assert.deepEqual(await ids({createdAfter: b.created_at}), [b.id]); // inclusive
    assert.deepEqual(await ids({createdBefore: b.created_at}), [a.id]); // exclusive
    // a Date goes as RFC 3339 UTC (milliseconds: the bound is b's millisecond, so only a is before it)
    const bMs = new Date(b.created_at);
    assert.deepEqual(await ids({createdAfter: new Date(bMs.getTime() + 1)}), []);
    assert.deepEqual(await ids({createdBefore: bMs}), [a.id]);
    const pages = [];
    for await (const r of viewer.iterRuns({tenant: 'beta', pageSize: 1})) pages.push(r.id);
    assert.deepEqual(pages, [b.id]);
    await rejects(viewer.listRuns({createdAfter: 'yesterday'}), (e) => {
      assert.deepEqual([e.status, e.field], [400, 'created_after']);
    });
  });

  test('budgets and llm caps', async () => {
    const acme = await viewer.budgets({tenant: 'acme'});
    assert.equal(acme.length, 1);
    const {tenant, limit_micros, spent_micros, reserved_micros, left_micros} = acme[0];
    assert.deepEqual({tenant, limit_micros, spent_micros, reserved_micros, left_micros},
      {tenant: 'acme', limit_micros: 50_000_000, spent_micros: 0, reserved_micros: 0, left_micros: 50_000_000});
    assert.ok((await viewer.budgets()).some((x) => x.tenant === 'acme'));
    assert.deepEqual(await viewer.budgets({tenant: 'nobody'}), []);
    // the built-in fake provider's cap (this process runs it: serve executes)
    const caps = await viewer.llmCaps();
    const fake = caps.filter((c) => c.provider === 'fake');
    assert.equal(fake.length, 1, JSON.stringify(caps));
    assert.ok(fake[0].cap >= 1 && fake[0].in_flight >= 0);
    assert.ok(fake[0].history.every((h) => 'at' in h && 'cap' in h && 'reason' in h));
    assert.deepEqual((await viewer.llmCaps({provider: 'fake'})).map((c) => c.provider), ['fake']);
    assert.deepEqual(await viewer.llmCaps({provider: 'nobody'}), []);
    assert.ok((await viewer.llmCaps({history: 0})).every((c) => c.history.length === 0));
    await rejects(viewer.llmCaps({history: 65}), (e) => assert.deepEqual([e.status, e.field], [400, 'history']));
  });

  test('errors are typed', async () => {
    await rejects(admin.startRun('no_such_workflow'), (e) => {
      assert.ok(e instanceof ApiError);
      assert.equal(e.status, 404);
      assert.equal(e.code, 'not_found');
    });
    await rejects(admin.startRun('cl_tick', {}, {priority: 12}), (e) => {
      assert.deepEqual([e.status, e.code, e.field], [400, 'invalid_argument', 'priority']);
    });
    await rejects(viewer.getRun('r_does_not_exist'), (e) => {
      assert.equal(e.code, 'not_found');
      assert.match(e.message, /HTTP 404 not_found/);
    });
  });

  test('gate: decide with the digest, follow, rerun', async () => {
    const run = await approver.startRun('cl_gate', {}, {idempotencyKey: 'ts-gate'});
    await waitFor('the run to pause', async () => (await viewer.getRun(run.id)).status === 'paused');
    const gate = await viewer.gate(run.id);
    assert.equal(gate.step_id, 'review');
    assert.match(gate.proposal_digest, /^sha256:/);
    await rejects(approver.decide(run.id, 'sha256:' + '0'.repeat(64), 'approve'), (e) => {
      assert.deepEqual([e.status, e.code], [409, 'stale_digest']);
    });
    await rejects(viewer.decide(run.id, gate.proposal_digest, 'approve'), (e) => assert.equal(e.status, 403));
    await approver.decide(run.id, gate.proposal_digest, 'edit', {edited: {action: 'ship later'}});
    const msgs = await collect(viewer.follow(run.id));
    assert.deepEqual(seqs(msgs), range(1, msgs.length));
    assert.equal(msgs.at(-1).event, 'run.finished');
    assert.equal(msgs.at(-1).data.type, 'run.finished');
    assert.equal((await viewer.getRun(run.id)).status, 'completed');
    assert.equal(await viewer.gate(run.id), null);
    const last = msgs.at(-1).seq;
    const rerun = await approver.rerun(run.id, 'review', {feedback: 'once more'});
    assert.equal(rerun.revision, 2);
    await waitFor('the rerun to pause', async () => (await viewer.getRun(run.id)).status === 'paused');
    const gate2 = await viewer.gate(run.id);
    await approver.decide(run.id, gate2.proposal_digest, 'reject');
    const more = await collect(viewer.follow(run.id, {after: last}));
    assert.deepEqual(seqs(more), range(last + 1, more.length));
    assert.equal((await viewer.getRun(run.id)).status, 'rejected');
  });

  test('signals and cancel', async () => {
    const run = await admin.startRun('cl_wait');
    await waitFor('the run to wait', async () => (await viewer.getRun(run.id)).status === 'waiting');
    assert.equal((await viewer.getRun(run.id)).waiting_for.signal, 'payment');
    await rejects(admin.signal(run.id, 'no_such_signal', {}), (e) => assert.deepEqual([e.status, e.field], [400, 'name']));
    const sent = await admin.signal(run.id, 'payment', {amount: 5}, {idempotencyKey: 'pay-1'});
    assert.equal(sent.created, true);
    assert.equal(sent.resolved, true);
    const again = await admin.signal(run.id, 'payment', {amount: 5}, {idempotencyKey: 'pay-1'});
    assert.equal(again.created, false);
    assert.equal(again.seq, sent.seq);
    await waitFor('the run to complete', async () => (await viewer.getRun(run.id)).status === 'completed');
    const sigs = await viewer.signals(run.id);
    assert.equal(sigs.length, 1);
    assert.equal(sigs[0].consumed, true);
    assert.deepEqual(sigs[0].payload, {amount: 5});
    const run2 = await admin.startRun('cl_wait');
    await waitFor('the run to wait', async () => (await viewer.getRun(run2.id)).status === 'waiting');
    assert.equal((await admin.cancel(run2.id)).status, 'cancelled');
    await rejects(admin.signal(run2.id, 'payment'), (e) => assert.deepEqual([e.status, e.code], [409, 'finished']));
  });

  test('schedules', async () => {
    const s = await admin.createSchedule('ts-every-second', 'cl_tick', '* * * * * *', {overlap: 'allow', catchUp: 'none'});
    assert.equal(s.cron, '* * * * * *');
    assert.equal(s.timezone, 'UTC');
    await rejects(admin.createSchedule('ts-every-second', 'cl_tick', '* * * * * *'),
      (e) => assert.deepEqual([e.status, e.code], [409, 'already_exists']));
    await rejects(admin.createSchedule('ts-bad', 'cl_tick', 'not a cron'), (e) => assert.equal(e.field, 'cron'));
    const fired = await waitFor('a tick to start a run', async () => (await viewer.getSchedule('ts-every-second')).last_run_id);
    assert.match((await viewer.getRun(fired)).idempotency_key, /^schedule:ts-every-second:/);
    assert.ok((await viewer.listSchedules()).some((x) => x.id === 'ts-every-second'));
    assert.equal((await admin.pauseSchedule('ts-every-second')).paused, true);
    assert.equal((await admin.resumeSchedule('ts-every-second')).paused, false);
    await admin.deleteSchedule('ts-every-second');
    await rejects(viewer.getSchedule('ts-every-second'), (e) => assert.equal(e.code, 'not_found'));
  });

  test('size limits and timeouts', async () => {
    const small = new RunloomClient(server.url, {token: secrets[2], timeoutMs: 5000, maxBodyBytes: 64});
    await rejects(small.workflows(), (e) => assert.ok(e instanceof ResponseTooLarge, String(e)));
    const run = await admin.startRun('cl_tick');
    await waitFor('the run to finish', async () => (await viewer.getRun(run.id)).status === 'completed');
    const shortLines = new RunloomClient(server.url, {token: secrets[2], timeoutMs: 5000, maxLineBytes: 32});
    await rejects(collect(shortLines.follow(run.id)), (e) => assert.ok(e instanceof ResponseTooLarge, String(e)));
    // a server that accepts and never answers: a TransportError after the timeout
    const silent = net.createServer(() => {});
    await new Promise((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const c = new RunloomClient(`http://127.0.0.1:${silent.address().port}`, {token: 't', timeoutMs: 500});
      const t0 = Date.now();
      await rejects(c.me(), (e) => assert.ok(e instanceof TransportError, String(e)));
      assert.ok(Date.now() - t0 < 3000);
    } finally {
      silent.close();
    }
    // a refused connection: a TransportError that says nothing of the token
    const free = net.createServer();
    await new Promise((r) => free.listen(0, '127.0.0.1', r));
    const port = free.address().port;
    await new Promise((r) => free.close(r));
    await rejects(new RunloomClient(`http://127.0.0.1:${port}`, {token: secrets[0], timeoutMs: 2000}).me(), (e) => {
      assert.ok(e instanceof TransportError, String(e));
      assert.ok(!util.inspect(e).includes(secrets[0]));
    });
  });

  test('a stream cut mid-message by a proxy resumes with no gap and no duplicate', async () => {
    const run = await admin.startRun('cl_steps');
    const proxy = await cuttingProxy(server.port, [700, 455, 903, 612, 398, 777], 6);
    let msgs;
    try {
      const c = new RunloomClient(`http://127.0.0.1:${proxy.port}`, {token: secrets[2], timeoutMs: 10000});
      msgs = await collect(c.follow(run.id));
    } finally {
      await proxy.close();
    }
    const got = seqs(msgs);
    assert.deepEqual(got, range(1, got.length), 'every seq once, in order');
    assert.equal(msgs.at(-1).event, 'run.finished');
    assert.equal(got.at(-1), (await viewer.getRun(run.id)).last_event_seq);
    assert.ok(proxy.connections >= 7, `the stream was cut and reopened (${proxy.connections} connections)`);
    assert.deepEqual(got, (await viewer.events(run.id)).map((e) => e.seq));
  });

  test('a stream cut by a restart of serve resumes with no gap and no duplicate', async () => {
    // The run waits for a signal across the restart, so events come on both
    // sides of the cut however slow the machine is.
    const run = await admin.startRun('cl_wait');
    const c = new RunloomClient(server.url, {token: secrets[2], timeoutMs: 10000, reconnectTimeoutMs: 20000});
    const msgs = [];
    const following = (async () => {
      for await (const m of c.follow(run.id)) msgs.push(m);
    })();
    await waitFor('the run to wait', async () => (await viewer.getRun(run.id)).status === 'waiting');
    await waitFor('its events so far', async () => seqs(msgs).at(-1) === (await viewer.getRun(run.id)).last_event_seq);
    const port = server.port;
    assert.equal((await server.stop()).code, 0, 'serve stops gracefully');
    const seenAtCut = msgs.length;
    await new Promise((r) => setTimeout(r, 500)); // the client tries to reconnect meanwhile (refused)
    server = await startServer(port);
    await admin.signal(run.id, 'payment', {amount: 1});
    await following;
    const got = seqs(msgs);
    assert.deepEqual(got, range(1, got.length), 'every seq once, in order');
    assert.ok(got.length > seenAtCut, 'events after the restart came');
    assert.equal(msgs.at(-1).event, 'run.finished');
    assert.equal((await viewer.getRun(run.id)).status, 'completed');
    assert.deepEqual(got, (await viewer.events(run.id)).map((e) => e.seq));
  });

  test('a stream that goes silent is reopened after streamIdleTimeoutMs', async () => {
    const run = await admin.startRun('cl_steps');
    const proxy = await cuttingProxy(server.port, [600], 1, true);
    let got;
    const t0 = Date.now();
    try {
      const c = new RunloomClient(`http://127.0.0.1:${proxy.port}`,
        {token: secrets[2], timeoutMs: 10000, streamIdleTimeoutMs: 1000});
      got = seqs(await collect(c.follow(run.id)));
    } finally {
      await proxy.close();
    }
    assert.deepEqual(got, (await viewer.events(run.id)).map((e) => e.seq));
    assert.deepEqual(got, range(1, got.length));
    // 2, unless a loaded machine let the live stream go quiet for 1 s again
    assert.ok(proxy.connections >= 2, `${proxy.connections} connections`);
    assert.ok(Date.now() - t0 < 10000, `took ${Date.now() - t0} ms`);
  });

  test('stream errors: 404 at once; no server: gives up after reconnectTimeoutMs', async () => {
    await rejects(collect(viewer.follow('r_does_not_exist')),
      (e) => assert.deepEqual([e.status, e.code], [404, 'not_found']));
    const probe = net.createServer();
    await new Promise((r) => probe.listen(0, '127.0.0.1', r));
    const port = probe.address().port;
    await new Promise((r) => probe.close(r));
    const c = new RunloomClient(`http://127.0.0.1:${port}`, {token: secrets[2], timeoutMs: 2000, reconnectTimeoutMs: 1000});
    const t0 = Date.now();
    await rejects(collect(c.follow('r_any')), (e) => assert.ok(e instanceof TransportError, String(e)));
    assert.ok(Date.now() - t0 < 5000);
  });

  test('follow with live: the streamed model text, with no id', async () => {
    const run = await admin.startRun('cl_stream');
    const msgs = await collect(viewer.follow(run.id, {live: true}));
    const live = msgs.filter((m) => m.id === null);
    assert.ok(live.length > 0, 'streamed text came');
    assert.ok(live.every((m) => m.event.startsWith('llm.') && m.data.path === 'talk' && m.seq === null));
    assert.deepEqual(seqs(msgs), (await viewer.events(run.id)).map((e) => e.seq));
    assert.equal((await collect(viewer.follow(run.id))).filter((m) => m.id === null).length, 0);
  });

  test('watchRuns: resumed from an id, then live changes; abort stops it', async () => {
    // Resumed from an id taken before the runs started, the stream first sends
    // the current state of every run changed since (the completed one); then
    // live changes (the waiting one, cancelled once the stream is open).
    const since = Date.now() * 1000;
    const done = await admin.startRun('cl_tick');
    await waitFor('the run to complete', async () => (await viewer.getRun(done.id)).status === 'completed');
    const waiting = await admin.startRun('cl_wait');
    await waitFor('the run to wait', async () => (await viewer.getRun(waiting.id)).status === 'waiting');
    const ac = new AbortController();
    const deadline = setTimeout(() => ac.abort(new Error('the changes did not come in 15 s')), 15000);
    const seen = [];
    try {
      for await (const m of viewer.watchRuns({after: since, signal: ac.signal})) {
        if (m.event !== 'run') continue;
        seen.push(`${m.data.run_id} ${m.data.status}`);
        if (seen.at(-1) === `${done.id} completed` && seen.indexOf(seen.at(-1)) === seen.length - 1) {  // may come twice
          await admin.cancel(waiting.id);
        }
        if (seen.at(-1) === `${waiting.id} cancelled`) break;
      }
    } finally {
      clearTimeout(deadline);
    }
    assert.ok(seen.includes(`${done.id} completed`), seen.join(', '));
    // an aborted stream throws the abort's reason
    const ac2 = new AbortController();
    const it = viewer.watchRuns({signal: ac2.signal});
    setTimeout(() => ac2.abort(new Error('stopped')), 200);
    await rejects(collect(it), (e) => assert.equal(e.message, 'stopped'));
  });
});
