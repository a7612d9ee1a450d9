// Browser tests of the operators' pages (issue 25): Debian's chromium,
// headless, driven by playwright-core, against a real `runloom serve`.
//
//   node ops_test.mjs RUNLOOM_BINARY SOURCE_DIR OUT_DIR
//
// Before the server starts, a `runloom worker` with a 1 s lease takes a run
// whose exec step sleeps, and is killed (SIGKILL) inside the step: the
// server's sweeper finds the lease expired and the server finishes the run,
// a real lease takeover. Then, against the server:
//   1. waterfall: that run's page shows a bar per step attempt (the one the
//      killed worker never finished, interrupted, and the one that
//      succeeded) and the takeover; a run whose model call failed once and
//      was retried shows both attempts, the first failed; each bar's queue
//      delay and duration are the events' (checked against the API);
//   2. model-call inspector: the llm run's calls with model, provider,
//      tokens, cost and latency as the llm.call events say; opening one shows
//      the prompt and the reply, where a secret input is "[secret]" and the
//      secret itself is nowhere on the page;
//   3. budgets: the page shows each tenant's limit, spent, reserved and left
//      as GET /api/v1/budgets does (the llm runs spent acme's budget);
//   4. caps: the page shows the fake provider's cap and its history as GET
//      /api/v1/llm/caps does;
//   5. search: by tenant, by input id, by workflow and status, by a time
//      range; each shows the runs the API finds for the same query;
//   6. bulk cancel: three paused runs selected; the confirmation dialog
//      names them; "Keep them" cancels nothing; confirming cancels the three
//      (the API says cancelled) and no other run.
// Screenshots go to OUT_DIR/screenshots. Exits non-zero on the first failed
// check, after stopping every process it started.

import {execFileSync, spawn} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {chromium} from 'playwright-core';
import {check, createToken, login as signIn, loopbackAddress, prepareRun, serverReady,
  waitFor as waitForMs} from '../node_helpers.mjs';

const {args: [binary, sourceDir, outDir], shots} =
  prepareRun('ops_test.mjs', ['RUNLOOM_BINARY', 'SOURCE_DIR', 'OUT_DIR']);
const db = path.join(outDir, 'ops.db');
const WAIT = 30000;
const waitFor = (what, fn) => waitForMs(what, fn, WAIT);
const SECRET = 'sk-ops-test-0f9e8d7c6b5a';

const token = (name, role) => createToken(binary, db, name, role);

const {port, base, api} = await loopbackAddress();
const operator = token('olga', 'operator');
const viewer = token('vera', 'viewer');
const admin = token('root', 'admin');

const wfDir = path.join(outDir, 'workflows');
fs.mkdirSync(wfDir, {recursive: true});
const config = path.join(wfDir, 'config.yaml');
fs.writeFileSync(config, [
  'providers:',
  '  sim: {kind: fake, max_concurrency: 3}',
  'models:',
  '  priced: {provider: sim, input_price_per_1k: 1, output_price_per_1k: 2}',
  'tenants:',
  '  acme: {budget: 50}',
  '  beta: {budget: 20}',
  ''].join('\n'));
fs.writeFileSync(path.join(wfDir, 'takeover.yaml'), [
  'name: ops_takeover',
  'steps:',
  '  - id: first',
  '    kind: noop',
  '  - id: hang',
  '    kind: exec',
  '    command: ["sh", "-c", "sleep 3; echo {}"]',
  ''].join('\n'));
const llmYaml = [
  'name: ops_llm',
  'tenant: team',
  'inputs:',
  '  team: {type: string}',
  '  doc: {type: string}',
  '  key: {type: string, secret: true}',
  'steps:',
  '  - id: ask',
  '    kind: llm',
  '    model: priced',
  '    prompt: "Summarize {{ inputs.doc }}; sign with {{ inputs.key }}"',
  '    fake: {fail_times: 1, response: "Summary of {{ inputs.doc }}, signed {{ inputs.key }}"}',
  '    retry: {max_attempts: 3, on: [unavailable]}',
  ''].join('\n');
const gatedYaml = [
  'name: ops_gated',
  'inputs:',
  '  n: {type: integer, default: 0}',
  'steps:',
  '  - id: review',
  '    kind: approval',
  '    proposal: {text: "run {{ inputs.n }}"}',
  ''].join('\n');

const started = [];  // every child process, stopped at the end
function startProc(args) {
  const p = spawn(binary, args, {stdio: ['ignore', 'inherit', 'inherit']});
  const exit = new Promise((resolve) => p.on('exit', (code, signal) => resolve({code, signal})));
  started.push({p, exit});
  return {p, exit};
}

function events(runId) {
  const out = execFileSync(binary, ['events', runId, '--db', db, '--json'], {encoding: 'utf8'});
  return out.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
}

// The takeover: a worker with a 1 s lease dies inside the exec step.
const worker = startProc(['worker', '--db', db, '--lease-ttl', '1s']);
const detached = JSON.parse(execFileSync(binary,
  ['run', path.join(wfDir, 'takeover.yaml'), '--detach', '--db', db, '--json'], {encoding: 'utf8'}));
const takeoverId = detached.id;
await waitFor('the worker to start the exec step', async () =>
  events(takeoverId).some((e) => e.type === 'step.started' && e.data.path === 'hang'));
worker.p.kill('SIGKILL');
await worker.exit;
check(true, `a worker was killed inside run ${takeoverId}'s exec step`);

const server = startProc(['serve', '--db', db, '--listen', `127.0.0.1:${port}`, '--config', config]);

const login = (context, tok) => signIn(context, base, tok, WAIT);

async function runTo(id, statuses) {
  let run = null;
  const ends = ['completed', 'rejected', 'unresolved', 'budget_stopped', 'failed', 'cancelled'];
  await waitFor(`run ${id} to reach ${statuses.join('/')}`, async () => {
    run = (await api('GET', `/runs/${id}`, viewer)).body;
    return statuses.includes(run.status) || ends.includes(run.status);
  });
  check(statuses.includes(run.status), `run ${id} is ${run.status}${run.error ? ` (${run.error})` : ''}`);
  return run;
}

async function start(workflow, inputs, extra) {
  const r = await api('POST', '/runs', operator, Object.assign({workflow, inputs}, extra || {}));
  check(r.status === 201, `a ${workflow} run is created (${r.status} ${JSON.stringify(r.body).slice(0, 200)})`);
  return r.body.id;
}

async function rowIds(page) {
  return page.locator('table.runs tbody tr[data-run]').evaluateAll((els) => els.map((e) => e.dataset.run));
}

async function apiIds(query) {
  const r = await api('GET', `/runs?${query}&limit=50`, viewer);
  check(r.status === 200, `GET /runs?${query} answers 200`);
  return r.body.runs.map((x) => x.id);
}

const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
let failed = null;
try {
  await serverReady(base, waitFor);
  for (const yaml of [llmYaml, gatedYaml]) {
    const reg = await api('POST', '/workflows', admin, {yaml});
    check(reg.status === 201 || reg.status === 200, 'a workflow is registered over the API');
  }
  const took = await runTo(takeoverId, ['completed']);
  const tev = (await api('GET', `/runs/${takeoverId}/events?limit=1000`, viewer)).body.events;
  check(tev.some((e) => e.type === 'run.lease_expired'), 'the killed worker\'s lease expired (run.lease_expired)');
  check(took.status === 'completed', 'the server took the run over and completed it');

  const llmA = await start('ops_llm', {team: 'acme', doc: 'doc-alpha', key: SECRET});
  const llmB = await start('ops_llm', {team: 'acme', doc: 'doc-beta', key: SECRET}, {idempotency_key: 'order-42'});
  const llmC = await start('ops_llm', {team: 'beta', doc: 'doc-gamma', key: SECRET});
  for (const id of [llmA, llmB, llmC]) await runTo(id, ['completed']);

  const ctx = await browser.newContext({viewport: {width: 1400, height: 1000}});
  const page = await login(ctx, operator);

  // 1. Waterfall: the takeover run.
  await page.goto(`${base}/#/runs/${takeoverId}`);
  await page.locator('.waterfall .wf-row').first().waitFor();
  const hangRows = page.locator('.waterfall .wf-row[data-path="hang"]');
  await waitFor('two bars for the exec step', async () => (await hangRows.count()) === 2);
  const outcomes = await hangRows.evaluateAll((els) => els.map((e) => e.dataset.outcome));
  check(same(outcomes, ['interrupted', 'succeeded']),
    `the exec step's bars: the killed worker's attempt interrupted, then succeeded (${outcomes})`);
  await page.locator('.wf-takeover', {hasText: 'Lease takeover'}).waitFor();
  check(await page.locator('.wf-takeover-line').count() > 0, 'the takeover is marked across the bars');
  // The bars' figures are the events' (queue delay from the last progress, duration to the end).
  const ok = tev.filter((e) => e.type === 'step.succeeded' && e.data.path === 'hang').pop();
  const st = tev.filter((e) => e.type === 'step.started' && e.data.path === 'hang').pop();
  const ran = await hangRows.nth(1).getAttribute('data-ran-ms');
  check(Number(ran) === new Date(ok.at) - new Date(st.at),
    `the succeeded bar lasts from step.started to step.succeeded (${ran} ms)`);
  await page.screenshot({path: path.join(shots, 'waterfall-takeover.png'), fullPage: true});

  // 1b. Waterfall: a retried model call.
  await page.goto(`${base}/#/runs/${llmA}`);
  const askRows = page.locator('.waterfall .wf-row[data-path="ask"]');
  await waitFor('two bars for the retried llm step', async () => (await askRows.count()) === 2);
  const askOutcomes = await askRows.evaluateAll((els) => els.map((e) => `${e.dataset.attempt}:${e.dataset.outcome}`));
  check(same(askOutcomes, ['1:failed', '2:succeeded']), `the retry shows: ${askOutcomes}`);
  check(await page.locator('.wf-row[data-attempt="2"] .wf-retry', {hasText: 'retry 1'}).count() === 1,
    'the second attempt is labelled a retry');
  const aev = (await api('GET', `/runs/${llmA}/events?limit=1000`, viewer)).body.events;
  const failedAt = aev.find((e) => e.type === 'step.failed').at;
  const secondStart = aev.filter((e) => e.type === 'step.started').pop().at;
  const queued = Number(await askRows.nth(1).getAttribute('data-queued-ms'));
  check(queued === new Date(secondStart) - new Date(failedAt),
    `the retry's queue delay is from the failure to its start (${queued} ms)`);
  await page.screenshot({path: path.join(shots, 'waterfall-retry.png'), fullPage: true});

  // 2. The model-call inspector on the same run.
  const calls = aev.filter((e) => e.type === 'llm.call');
  check(calls.length === 2, 'the run made two model calls (one failed, one retried)');
  const rows = page.locator('table.calls tbody tr.call');
  await waitFor('the inspector rows', async () => (await rows.count()) === 2);
  const okCall = calls.find((c) => c.data.outcome === 'ok').data;
  const okRow = page.locator('table.calls tr.call-ok');
  const cells = await okRow.locator('td').allInnerTexts();
  check(cells[1].startsWith('priced') && cells[2] === 'sim', `model and provider shown (${cells[1]}, ${cells[2]})`);
  check(Number(cells[4]) === okCall.input_tokens && Number(cells[5]) === okCall.output_tokens,
    `tokens shown as recorded (${cells[4]} in, ${cells[5]} out)`);
  const units = (m) => {
    const w = Math.floor(m / 1e6);
    const f = String(m % 1e6).padStart(6, '0').replace(/0+$/, '');
    return f ? `${w}.${f}` : `${w}`;
  };
  check(cells[6] === units(okCall.cost_micros) && okCall.cost_micros > 0, `cost shown (${cells[6]})`);
  check(cells[7].includes('ms') || cells[7].includes(' s'), `latency shown (${cells[7]})`);
  check(await page.locator('table.calls tr.call-error').count() === 1, 'the failed call is listed too');
  await okRow.getByRole('button', {name: /Prompt and reply/}).click();
  const prompt = page.locator('pre.prompt');
  await prompt.waitFor();
  check((await prompt.innerText()).includes('Summarize doc-alpha; sign with [secret]'),
    'the prompt as sent, with the secret scrubbed');
  check((await page.locator('pre.reply').innerText()).includes('signed [secret]'), 'the reply, scrubbed too');
  check(await page.locator('mark.scrubbed').count() >= 2, 'the scrubbed places are marked');
  const html = await page.content();
  check(!html.includes(SECRET), 'the secret is nowhere on the page');
  const stepsJson = JSON.stringify((await api('GET', `/runs/${llmA}/steps`, viewer)).body);
  check(!stepsJson.includes(SECRET) && stepsJson.includes('[secret]'), 'nor in the stored step records');
  await page.screenshot({path: path.join(shots, 'model-calls.png'), fullPage: true});

  // 3. Budgets.
  const budgets = (await api('GET', '/budgets', viewer)).body.budgets;
  const acme = budgets.find((b) => b.tenant === 'acme');
  check(acme && acme.limit_micros === 50000000 && acme.spent_micros > 0 &&
        acme.left_micros === acme.limit_micros - acme.spent_micros - acme.reserved_micros,
  `GET /api/v1/budgets: acme ${JSON.stringify(acme)}`);
  await page.goto(`${base}/#/budgets`);
  const acmeRow = page.locator('table.budgets tr[data-tenant="acme"]');
  await acmeRow.waitFor();
  const b = await acmeRow.locator('th, td').allInnerTexts();
  check(b[1] === '50' && b[2] === units(acme.spent_micros) && b[3] === units(acme.reserved_micros) &&
        b[4] === units(acme.left_micros), `the budgets page shows acme as the API does (${b.slice(0, 5)})`);
  check(await page.locator('table.budgets tr[data-tenant="beta"]').count() === 1, 'and beta');
  await page.screenshot({path: path.join(shots, 'budgets.png'), fullPage: true});

  // 4. Caps.
  const caps = (await api('GET', '/llm/caps', viewer)).body;
  const sim = caps.caps.find((c) => c.provider === 'sim');
  check(sim && sim.cap >= 1 && sim.history.length >= 1 && /^aimd \d+, telemetry/.test(sim.history[0].reason),
    `GET /api/v1/llm/caps: sim ${JSON.stringify(sim)}`);
  check(caps.history_limit === 64, 'the history bound is said');
  await page.goto(`${base}/#/caps`);
  const simBox = page.locator('section.cap[data-provider="sim"]');
  await simBox.waitFor();
  check((await simBox.locator('.cap-now').innerText()).includes(`cap ${sim.cap}`), 'the caps page shows the cap');
  check(await simBox.locator('table.cap-history tbody tr').count() >= 1 &&
        (await simBox.locator('table.cap-history').innerText()).includes('aimd'),
  'and its history with the limiters');
  await page.screenshot({path: path.join(shots, 'caps.png'), fullPage: true});

  // 5. Search.
  await page.goto(`${base}/#/runs`);
  await page.locator('form.search').waitFor();
  await page.fill('#search-tenant', 'acme');
  await page.getByRole('button', {name: 'Search'}).click();
  await page.waitForURL(/tenant=acme/);
  await waitFor('the acme runs', async () => same(await rowIds(page), [llmB, llmA]));
  check(same(await apiIds('tenant=acme'), [llmB, llmA]), 'search by tenant: the page and the API agree');
  await page.screenshot({path: path.join(shots, 'search-tenant.png'), fullPage: true});
  await page.goto(`${base}/#/runs?input_id=order-42`);
  await waitFor('the run with that key', async () => same(await rowIds(page), [llmB]));
  await page.goto(`${base}/#/runs?input_id=doc-gamma`);
  await waitFor('the run with that input', async () => same(await rowIds(page), [llmC]));
  check(await page.locator('#search-input').inputValue() === 'doc-gamma', 'the form shows the search');
  await page.screenshot({path: path.join(shots, 'search-input-id.png'), fullPage: true});
  await page.goto(`${base}/#/runs?workflow=ops_llm&status=completed`);
  await waitFor('the completed ops_llm runs', async () => same(await rowIds(page), [llmC, llmB, llmA]));
  const created = (await api('GET', `/runs/${llmB}`, viewer)).body.created_at;
  const range = `created_after=${encodeURIComponent(created)}&created_before=${encodeURIComponent(new Date(Date.parse(created) + 1).toISOString())}`;
  await page.goto(`${base}/#/runs?${range}`);
  await waitFor('the run of that millisecond', async () => same(await rowIds(page), await apiIds(range)));
  check((await rowIds(page)).includes(llmB), 'search by time range finds the run created then');
  await page.goto(`${base}/#/runs?created_before=2001-01-01T00:00:00.000Z`);
  await page.locator('table.runs tbody', {hasText: 'No runs.'}).waitFor();
  check(true, 'a time range before every run finds none');
  await page.screenshot({path: path.join(shots, 'search-time-range.png'), fullPage: true});

  // 6. Bulk cancel with a confirmation.
  const paused = [];
  for (let n = 1; n <= 3; n++) paused.push(await start('ops_gated', {n}));
  for (const id of paused) await runTo(id, ['paused']);
  await page.goto(`${base}/#/runs?workflow=ops_gated&status=paused`);
  await waitFor('the paused runs', async () => (await rowIds(page)).length === 3);
  await page.locator('#select-all').check();
  check(await page.locator('.bulk-count').innerText() === '3 selected', 'three runs selected');
  await page.locator('#bulk-cancel').click();
  const dialog = page.locator('dialog.confirm');
  await dialog.waitFor();
  const listed = await dialog.locator('li').allInnerTexts();
  check(same([...listed].sort(), [...paused].sort()), 'the confirmation names the three runs');
  await page.screenshot({path: path.join(shots, 'bulk-cancel-confirm.png'), fullPage: true});
  await dialog.getByRole('button', {name: 'Keep them'}).click();
  await dialog.waitFor({state: 'detached'});
  for (const id of paused) {
    check((await api('GET', `/runs/${id}`, viewer)).body.status === 'paused', `"Keep them" left ${id} paused`);
  }
  await page.locator('#bulk-cancel').click();
  await dialog.getByRole('button', {name: 'Cancel 3 runs'}).click();
  for (const id of paused) await runTo(id, ['cancelled']);
  check(true, 'confirming cancelled the three runs');
  await page.locator('#toast', {hasText: 'Cancel requested for 3 of 3'}).waitFor();
  for (const id of [llmA, llmB, llmC, takeoverId]) {
    check((await api('GET', `/runs/${id}`, viewer)).body.status === 'completed', `run ${id} was left alone`);
  }
  await page.screenshot({path: path.join(shots, 'bulk-cancel-done.png'), fullPage: true});

  // A viewer gets no selection and no bulk buttons.
  const ctxV = await browser.newContext();
  const pageV = await login(ctxV, viewer);
  await pageV.goto(`${base}/#/runs`);
  await pageV.locator('table.runs tbody tr').first().waitFor();
  check(await pageV.locator('#bulk-cancel').count() === 0 && await pageV.locator('input.pick').count() === 0,
    'a viewer sees no bulk cancel');
  const refused = await api('POST', `/runs/${paused[0]}/cancel`, viewer, {});
  check(refused.status === 403, 'and the API refuses a viewer\'s cancel');
} catch (e) {
  failed = e;
} finally {
  await browser.close();
  for (const s of started) {
    if (s.p.exitCode === null && s.p.signalCode === null) s.p.kill('SIGTERM');
  }
  const results = await Promise.all(started.map((s) => s.exit));
  const serverResult = results[1];
  if (!failed && serverResult && serverResult.code !== 0) failed = new Error(`serve exited ${JSON.stringify(serverResult)}`);
}
if (failed) {
  console.error(`not ok - ${failed.stack || failed}`);
  process.exit(1);
}
console.log('ok - operators\' pages');
