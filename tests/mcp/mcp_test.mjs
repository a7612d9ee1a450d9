// `runloom mcp` driven by the reference MCP client (issue 24): the npm
// @modelcontextprotocol/sdk Client over its StdioClientTransport, which
// starts `runloom mcp` as a subprocess, as an agent's MCP host does.
//
//   node mcp_test.mjs RUNLOOM_BINARY OUT_DIR
//
// On a fresh SQLite file with two workflows (an approval gate; a wait for a
// signal), an admin, an approver and a viewer token, and `runloom serve`
// executing the runs (`runloom mcp` executes none), it checks:
//   1. tools/list names every tool, each with an object inputSchema;
//   2. start_run, then get_run until the run waits at its gate;
//   3. decide with a wrong digest is refused with the same {code, message,
//      field} the HTTP API answers for the same decision (409 stale_digest);
//   4. decide with a viewer token is refused (forbidden, naming the role
//      needed), as over HTTP (403); nothing is recorded;
//   5. decide with the right digest: the run proceeds to completed, and
//      follow_events follows it to its end;
//   6. cancel_run cancels a second run at its gate; rerun starts the first
//      again from a phase; signal_run resolves a run waiting for a signal;
//   7. list_dead_letters lists (none), redrive_dead_letter of an id no
//      transport issued is refused clearly;
//   8. an unknown tool is a JSON-RPC error (-32602); raw lines of bad JSON,
//      an unknown method and an oversized line are JSON-RPC errors, and the
//      server answers the next line;
//   9. no token appears in anything either server wrote (stdout, stderr).
// Exits non-zero on the first failed check, after stopping the servers.

import {execFileSync, spawn, spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {Client} from '@modelcontextprotocol/sdk/client/index.js';
import {StdioClientTransport} from '@modelcontextprotocol/sdk/client/stdio.js';
import {check, loopbackAddress, serverReady, waitFor as waitForMs} from '../node_helpers.mjs';

const [binary, outDir] = process.argv.slice(2);
if (!binary || !outDir) {
  console.error('usage: node mcp_test.mjs RUNLOOM_BINARY OUT_DIR');
  process.exit(2);
}
fs.rmSync(outDir, {recursive: true, force: true});
fs.mkdirSync(outDir, {recursive: true});
const db = path.join(outDir, 'mcp.db');
const WAIT = 20000;
const waitFor = (what, fn) => waitForMs(what, fn, WAIT);

// The workflows, registered with the CLI (which creates the database).
fs.writeFileSync(path.join(outDir, 'gated.yaml'), `name: mcp_gated
steps:
  - {id: draft, kind: noop, phase: drafting}
  - id: review
    kind: approval
    phase: review
    title: Draft review
    proposal: {text: "a draft to review"}
  - {id: publish, kind: noop, phase: publish}
`);
fs.writeFileSync(path.join(outDir, 'wait.yaml'), `name: mcp_wait
steps:
  - {id: paid, kind: wait, signal: payment, timeout: 1h}
  - {id: after, kind: noop}
`);
execFileSync(binary, ['workflows', '--db', db, '--register', path.join(outDir, 'gated.yaml'),
  '--register', path.join(outDir, 'wait.yaml')], {stdio: ['ignore', 'ignore', 'inherit']});

function token(name, role) {
  const out = execFileSync(binary, ['token', 'create', '--name', name, '--role', role, '--db', db, '--json'],
    {encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore']});
  return JSON.parse(out).token;
}
const admin = token('ada', 'admin');
const viewer = token('vera', 'viewer');
const tokens = [admin, viewer];

// `runloom serve` executes the runs (and answers the HTTP comparisons).
const {port, base, api} = await loopbackAddress();
let serveOutput = '';
const serve = spawn(binary, ['serve', '--db', db, '--listen', `127.0.0.1:${port}`],
  {stdio: ['ignore', 'pipe', 'pipe']});
serve.stdout.on('data', (d) => { serveOutput += d; });
serve.stderr.on('data', (d) => { serveOutput += d; });
const serveExited = new Promise((resolve) => serve.on('exit', (code, signal) => resolve({code, signal})));

// An MCP session: `runloom mcp` started by the SDK's stdio transport with
// `tok` in RUNLOOM_TOKEN; what it writes to stderr is kept.
async function connect(tok) {
  const transport = new StdioClientTransport({
    command: binary,
    args: ['mcp', '--db', db],
    env: {PATH: process.env.PATH, HOME: process.env.HOME ?? '/tmp', RUNLOOM_TOKEN: tok},
    stderr: 'pipe',
  });
  const session = {stderr: '', client: new Client({name: 'runloom-mcp-test', version: '1.0.0'})};
  transport.stderr.on('data', (d) => { session.stderr += d; });
  await session.client.connect(transport);
  return session;
}

// A tool call: the result's structuredContent, and isError.
async function call(session, name, args) {
  const r = await session.client.callTool({name, arguments: args});
  for (const t of tokens) {
    if (JSON.stringify(r).includes(t)) throw new Error(`a result of ${name} holds a token`);
  }
  return {error: r.isError === true, out: r.structuredContent, text: r.content?.[0]?.text ?? ''};
}

let failed = null;
const sessions = [];
try {
  await serverReady(base, waitFor);
  const ada = await connect(admin);
  const vera = await connect(viewer);
  sessions.push(ada, vera);

  // 1. tools/list.
  const {tools} = await ada.client.listTools();
  const names = tools.map((t) => t.name).sort();
  for (const want of ['list_runs', 'get_run', 'follow_events', 'start_run', 'decide', 'cancel_run',
    'rerun', 'signal_run', 'list_dead_letters', 'redrive_dead_letter', 'list_workflows']) {
    check(names.includes(want), `tools/list offers ${want}`);
  }
  check(tools.every((t) => t.inputSchema?.type === 'object' && t.description),
    'every tool has a description and an object inputSchema');

  // 2. A run to its gate.
  const started = await call(ada, 'start_run', {workflow: 'mcp_gated', idempotency_key: 'first'});
  check(!started.error && started.out.created === true, 'start_run starts a run of a catalog workflow');
  const id = started.out.run.id;
  const again = await call(ada, 'start_run', {workflow: 'mcp_gated', idempotency_key: 'first'});
  check(!again.error && again.out.created === false && again.out.run.id === id,
    'start_run with the same idempotency key returns the first run');
  const paused = await waitFor('the run to wait at its gate', async () => {
    const r = await call(vera, 'get_run', {run_id: id});
    return r.out.run.status === 'paused' && r.out.pending_gate ? r.out : null;
  });
  check(paused.pending_gate.proposal.text === 'a draft to review' && paused.steps.length >= 1,
    'get_run shows the steps and the pending gate with its proposal');
  const digest = paused.pending_gate.proposal_digest;

  // 3. A wrong digest, over MCP and over HTTP.
  const wrong = 'sha256:' + '0'.repeat(64);
  const stale = await call(ada, 'decide', {run_id: id, digest: wrong, decision: 'approve'});
  const http = await api('POST', `/runs/${id}/decisions`, admin, {digest: wrong, decision: 'approve'});
  check(stale.error && stale.out.error.code === 'stale_digest', 'decide with a wrong digest is refused (stale_digest)');
  check(http.status === 409 && JSON.stringify(http.body) === JSON.stringify(stale.out.error),
    'the refusal is the HTTP API\'s, word for word (409 ' + http.body.code + ')');

  // 4. A viewer may not decide.
  const low = await call(vera, 'decide', {run_id: id, digest, decision: 'approve'});
  const lowHttp = await api('POST', `/runs/${id}/decisions`, viewer, {digest, decision: 'approve'});
  check(low.error && low.out.error.code === 'forbidden' && low.out.error.message.includes('approver'),
    'decide with a viewer token is refused, naming the role it needs');
  check(lowHttp.status === 403 && low.out.error.message.includes(lowHttp.body.message),
    'with the HTTP API\'s words for the same refusal (403)');
  check((await call(vera, 'get_run', {run_id: id})).out.run.status === 'paused',
    'nothing was recorded: the run still waits at its gate');
  const viewerStart = await call(vera, 'start_run', {workflow: 'mcp_gated'});
  check(viewerStart.error && viewerStart.out.error.code === 'forbidden', 'a viewer may not start a run');

  // 5. The right digest; follow the run to its end.
  const decided = await call(ada, 'decide', {run_id: id, digest, decision: 'approve'});
  check(!decided.error && decided.out.run.status === 'queued', 'decide with the right digest queues the run');
  let after = 0;
  const seen = [];
  await waitFor('follow_events to see the run end', async () => {
    const r = await call(vera, 'follow_events', {run_id: id, after_seq: after, wait_seconds: 2});
    check(!r.error, `follow_events after ${after}: ${r.out.events.length} events`);
    for (const e of r.out.events) seen.push(e.type);
    after = r.out.next_after_seq;
    return r.out.settled && r.out.run_status === 'completed';
  });
  check(seen[0] === 'run.created' && seen.includes('run.decided') && seen.at(-1) === 'run.finished',
    `follow_events saw the run from run.created through run.decided to run.finished (${seen.length} events)`);
  check((await call(vera, 'get_run', {run_id: id})).out.run.status === 'completed', 'the run completed');

  // 6. cancel, rerun, signal.
  const second = (await call(ada, 'start_run', {workflow: 'mcp_gated'})).out.run.id;
  await waitFor('the second run to pause', async () =>
    (await call(vera, 'get_run', {run_id: second})).out.run.status === 'paused');
  const viewerCancel = await call(vera, 'cancel_run', {run_id: second});
  check(viewerCancel.error && viewerCancel.out.error.code === 'forbidden', 'a viewer may not cancel');
  const cancelled = await call(ada, 'cancel_run', {run_id: second});
  check(!cancelled.error && cancelled.out.run.status === 'cancelled', 'cancel_run cancels a paused run');
  const rerun = await call(ada, 'rerun', {run_id: id, from_phase: 'review'});
  check(!rerun.error && rerun.out.run.revision === 2, 'rerun starts revision 2 from the review phase');
  await waitFor('the rerun to reach the gate again', async () =>
    (await call(vera, 'get_run', {run_id: id})).out.run.status === 'paused');
  const badPhase = await call(ada, 'rerun', {run_id: id, from_phase: 'nowhere'});
  check(badPhase.error && badPhase.out.error.field === 'from_phase', 'rerun from an unknown phase is refused, naming from_phase');
  const waiting = (await call(ada, 'start_run', {workflow: 'mcp_wait'})).out.run.id;
  await waitFor('the wait run to park', async () =>
    (await call(vera, 'get_run', {run_id: waiting})).out.run.status === 'waiting');
  const signal = await call(ada, 'signal_run', {run_id: waiting, name: 'payment', payload: {amount: 3}});
  check(!signal.error && signal.out.signal.resolved === true, 'signal_run resolves the run\'s wait');
  await waitFor('the signalled run to complete', async () =>
    (await call(vera, 'get_run', {run_id: waiting})).out.run.status === 'completed');
  check(true, 'the signalled run completed');

  // 7. Dead letters.
  const dead = await call(vera, 'list_dead_letters', {});
  check(!dead.error && Array.isArray(dead.out.dead_letters), `list_dead_letters lists (${dead.out.dead_letters.length})`);
  const redrive = await call(ada, 'redrive_dead_letter', {id: 'no-such-letter'});
  check(redrive.error && ['invalid_argument', 'not_found'].includes(redrive.out.error.code) && redrive.text.length > 20,
    `redrive of an unknown dead letter is refused: ${redrive.text}`);
  const viewerRedrive = await call(vera, 'redrive_dead_letter', {id: 'no-such-letter'});
  check(viewerRedrive.error && viewerRedrive.out.error.code === 'forbidden', 'a viewer may not redrive');
  const runs = await call(vera, 'list_runs', {limit: 10});
  check(!runs.error && runs.out.runs.length === 3, 'list_runs lists the three runs');

  // 8. Protocol faults.
  let unknownTool = null;
  try {
    await ada.client.callTool({name: 'drop_everything', arguments: {}});
  } catch (e) {
    unknownTool = e;
  }
  check(unknownTool && unknownTool.code === -32602, 'an unknown tool is a JSON-RPC error -32602');
  const badArgs = await call(ada, 'get_run', {run_id: 42});
  check(badArgs.error && badArgs.out.error.field === 'run_id', 'an argument of the wrong type is refused, naming it');

  const lines = ['{not json', '{"jsonrpc":"2.0","id":1,"method":"resources/list"}',
    JSON.stringify({jsonrpc: '2.0', id: 2, method: 'ping', params: {pad: 'x'.repeat(2 << 20)}}),
    '{"jsonrpc":"2.0","id":3,"method":"ping"}'];
  const raw = spawnSync(binary, ['mcp', '--db', db], {
    input: lines.join('\n') + '\n', encoding: 'utf8', maxBuffer: 1 << 26,
    env: {PATH: process.env.PATH, RUNLOOM_TOKEN: admin},
  });
  const replies = raw.stdout.trim().split('\n').map((l) => JSON.parse(l));
  check(raw.status === 0 && replies.length === 4, 'raw stdio: one reply per line, exit 0 at the end of input');
  check(replies[0].error.code === -32700 && replies[0].id === null, 'bad JSON: -32700');
  check(replies[1].error.code === -32601 && replies[1].id === 1, 'an unknown method: -32601');
  check(replies[2].error.code === -32600 && replies[2].id === null && replies[2].error.message.includes('bytes'),
    'a line over 1 MiB: refused unread (-32600)');
  check(replies[3].id === 3 && replies[3].result !== undefined, 'the next line is answered');
  const noToken = spawnSync(binary, ['mcp', '--db', db], {input: '', encoding: 'utf8', env: {PATH: process.env.PATH}});
  check(noToken.status === 2 && noToken.stderr.includes('RUNLOOM_TOKEN') && noToken.stdout === '',
    'without RUNLOOM_TOKEN: exit 2, saying how to make one');
  const revokedish = 'rl_' + 'f'.repeat(64);
  const bad = spawnSync(binary, ['mcp', '--db', db], {input: '', encoding: 'utf8',
    env: {PATH: process.env.PATH, RUNLOOM_TOKEN: revokedish}});
  check(bad.status === 2 && !bad.stderr.includes(revokedish) && bad.stderr.includes('not an active token'),
    'an unknown token: exit 2, without echoing it');

  // 9. No token in anything written.
  for (const s of sessions) await s.client.close();
  const written = [ada.stderr, vera.stderr, raw.stdout, raw.stderr, serveOutput].join('\n');
  check(ada.stderr.includes("as 'ada' (admin)"), 'the server names its principal on stderr');
  check(tokens.every((t) => !written.includes(t)), 'no token appears in any output of the servers');
} catch (e) {
  failed = e;
} finally {
  for (const s of sessions) await s.client.close().catch(() => {});
  serve.kill('SIGTERM');
  const end = await serveExited;
  if (!failed && end.code !== 0) failed = new Error(`serve exited ${JSON.stringify(end)}`);
}
if (failed) {
  console.error(failed.stack ?? String(failed));
  console.error('--- serve output ---\n' + serveOutput);
  process.exit(1);
}
console.log('mcp_test: all checks passed');
