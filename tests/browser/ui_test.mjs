// Browser tests of the web UI (issue 10): Debian's chromium, headless, driven
// by playwright-core, against a real `runloom serve` on loopback.
//
//   node ui_test.mjs RUNLOOM_BINARY SOURCE_DIR OUT_DIR
//
// Starts its own server on a fresh SQLite file with three tokens (approver,
// a second approver, viewer), then:
//   1. starts a blog run from the UI, watches it reach the outline review
//      live, edits the outline and approves it in the panel, sees the final
//      review, requests a revision from `research`, approves, sees completed;
//   2. two browser contexts decide the same gate: the second sees the
//      conflict message and nothing of its decision is recorded;
//   3. a viewer sees no decision buttons and the API refuses its decision;
//   4. runs that ended unresolved and budget_stopped (made with the CLI
//      before the server starts) show no Cancel button, and the status
//      filter offers and finds both (the UI's statuses come from the engine's
//      tables, vocabulary.js); a paused run does show Cancel;
//   5. a run that approves a gate and then writes to the example actions
//      server shows the write on its page, with the decision it carried out
//      (GET /runs/{id}/writes), and a run without writes says so;
//   6. a run waiting for a signal says so on its page and in the runs list,
//      and a signal sent over the API resolves it;
//   7. serve restarted gracefully (SIGTERM, then again on the same port and
//      database) while a run page follows a run that goes on: the page
//      reconnects, shows the events after the restart, and says ended only
//      when the run has finished;
//   8. a schedule created over the API (a 1-second cron) is listed on the
//      schedules page with its cron, zone and policies, its latest tick's
//      run linked; Pause on the page pauses it (the API says so, and no tick
//      starts a run meanwhile), Resume resumes it; a viewer sees no buttons;
//   9. a streaming model call (`stream: true`, issue 24): its run page shows
//      the text growing as the pieces arrive, and the text shown at the end
//      is the step's stored output.
// Screenshots of each page go to OUT_DIR/screenshots. Exits non-zero on the
// first failed check, after stopping the server (SIGTERM: it must exit 0).

import {execFileSync, spawn, spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {chromium} from 'playwright-core';
import {check, createToken, login as signIn, loopbackAddress, prepareRun,
  serverReady as serverReadyAt, waitFor as waitForMs} from '../node_helpers.mjs';

const {args: [binary, sourceDir, outDir], shots} =
  prepareRun('ui_test.mjs', ['RUNLOOM_BINARY', 'SOURCE_DIR', 'OUT_DIR']);
const db = path.join(outDir, 'ui.db');
const WAIT = 20000;
const waitFor = (what, fn) => waitForMs(what, fn, WAIT);

const token = (name, role) => createToken(binary, db, name, role);

const {port, base, api} = await loopbackAddress();
const approver = token('alice', 'approver');
const approver2 = token('bob', 'approver');
const viewer = token('vera', 'viewer');
const admin = token('root', 'admin');

// Two runs that end in the terminal statuses the UI once missed. `runloom
// run` exits 1 for a run that ended other than completed; --json prints it.
const terminalDir = path.join(outDir, 'terminal');
fs.mkdirSync(terminalDir, {recursive: true});
fs.writeFileSync(path.join(terminalDir, 'unresolved.yaml'),
  'name: ui_unresolved\nsteps:\n  - {id: look, kind: noop}\noutcome: unresolved\n');
// A priced model on the offline fake provider; the run's budget (one
// micro-unit) cannot pay for the call's worst case, so it is never sent.
fs.writeFileSync(path.join(terminalDir, 'config.yaml'),
  'providers:\n  sim: {kind: fake}\nmodels:\n  priced: {provider: sim, input_price_per_1k: 1, output_price_per_1k: 1}\n');
fs.writeFileSync(path.join(terminalDir, 'billed.yaml'),
  'name: ui_billed\nsteps:\n  - {id: ask, kind: llm, model: priced, prompt: "a prompt that costs more than the budget"}\n');
function cliRun(args, want) {
  const r = spawnSync(binary, ['run', ...args, '--db', db, '--json'], {encoding: 'utf8'});
  const run = JSON.parse(r.stdout);
  check(r.status === 1 && run.status === want, `the CLI ran ${args[0]} to ${want} (exit 1)`);
  return run.id;
}
const unresolvedId = cliRun([path.join(terminalDir, 'unresolved.yaml')], 'unresolved');
const budgetId = cliRun([path.join(terminalDir, 'billed.yaml'), '--config', path.join(terminalDir, 'config.yaml'),
  '--budget', '0.000001'], 'budget_stopped');

// `runloom serve` on the database and port; step 7 stops it and starts it
// again (a graceful restart).
let server = null;
let serverExit = null;
let exited = null;
function startServer() {
  server = spawn(binary, ['serve', '--db', db, '--listen', `127.0.0.1:${port}`],
    {stdio: ['ignore', 'inherit', 'inherit']});
  serverExit = null;
  exited = new Promise((resolve) => server.on('exit', (code, signal) => {
    serverExit = {code, signal};
    resolve();
  }));
}
startServer();

const serverReady = () => serverReadyAt(base, waitFor);

async function pausedRun() {
  const r = await api('POST', '/runs', approver, {workflow: 'blog', inputs: {}});
  check(r.status === 201, 'a blog run is created over the API (201)');
  const id = r.body.id;
  await waitFor(`run ${id} to pause`, async () => (await api('GET', `/runs/${id}`, viewer)).body.status === 'paused');
  return id;
}

const login = (context, tok) => signIn(context, base, tok, WAIT);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
let failed = null;
try {
  await serverReady();
  const yaml = fs.readFileSync(path.join(sourceDir, 'examples', 'blog.yaml'), 'utf8');
  const reg = await api('POST', '/workflows', admin, {yaml});
  check(reg.status === 201 || reg.status === 200, 'the blog workflow is registered over the API');

  // 1. The whole blog flow from the UI.
  const ctxA = await browser.newContext({viewport: {width: 1300, height: 900}});
  const page = await login(ctxA, approver);
  await page.locator('table.runs').waitFor();
  await page.screenshot({path: path.join(shots, 'runs.png'), fullPage: true});
  await page.selectOption('#start-workflow', 'blog');
  await page.getByRole('button', {name: 'Start run'}).click();
  await page.waitForURL(/#\/runs\/r_/);
  const runId = decodeURIComponent(page.url().split('#/runs/')[1]);
  check(runId.startsWith('r_'), `the UI started run ${runId}`);
  await page.locator('section.gate h2', {hasText: 'Outline review'}).waitFor();
  check(await page.locator('.graph [data-step="outline_review"]').count() === 1, 'the graph shows the gate step');
  await page.screenshot({path: path.join(shots, 'run-outline-review.png'), fullPage: true});
  await page.locator('form.edit').getByLabel('title').fill('Fencing, explained');
  await page.getByRole('button', {name: 'Save edit and approve'}).click();
  await page.locator('section.gate h2', {hasText: 'Final review'}).waitFor();
  check(await page.locator('pre.proposal', {hasText: 'Fencing, explained'}).count() === 1,
    'the final review shows the edited outline title');
  check(await page.locator('#from-phase').inputValue() === 'research', 'the revision phase defaults to research');
  await page.screenshot({path: path.join(shots, 'run-final-review.png'), fullPage: true});
  await page.locator('#feedback').fill('Add a section on lease expiry.');
  await page.getByRole('button', {name: 'Request revision'}).click();
  await page.locator('.runhead', {hasText: 'revision 2'}).waitFor();
  await page.locator('section.gate h2', {hasText: 'Final review'}).waitFor();
  await page.locator('section.gate').getByRole('button', {name: 'Approve', exact: true}).click();
  await page.locator('.runhead .badge', {hasText: 'completed'}).waitFor();
  const done = await api('GET', `/runs/${runId}`, viewer);
  check(done.body.status === 'completed' && done.body.revision === 2, 'the run completed in revision 2');
  const counts = done.body.step_counts;
  check(counts && counts.revision === 2 && counts.failed === 0 && counts.succeeded === counts.total &&
        counts.total > 0, `GET /runs/{id} carries the revision's step counts (${JSON.stringify(counts)})`);
  await page.locator('.runhead .step-counts', {hasText: `steps ${counts.succeeded} succeeded, 0 failed`}).waitFor();
  await page.locator('.timeline li', {hasText: 'run.finished'}).waitFor();
  await page.screenshot({path: path.join(shots, 'run-completed.png'), fullPage: true});
  const seqs = await page.locator('.timeline li').evaluateAll((els) => els.map((e) => Number(e.dataset.seq)));
  check(seqs.every((s, i) => s === i + 1), `the timeline shows events 1..${seqs.length} once each, in order`);

  // 2. Two contexts decide the same gate; the second sees the conflict.
  const id2 = await pausedRun();
  const ctxB = await browser.newContext();
  const pageB = await login(ctxB, approver2);
  // Bob's page gets no live updates (its event streams are cut), so his panel
  // still shows the proposal Alice decides: the race a slow network makes.
  await pageB.route(/\/api\/v1\/(runs\/[^/]+\/)?events/, (route) => route.abort());
  await page.goto(`${base}/#/runs/${id2}`);
  await pageB.goto(`${base}/#/runs/${id2}`);
  await page.locator('section.gate h2', {hasText: 'Outline review'}).waitFor();
  await pageB.locator('section.gate h2', {hasText: 'Outline review'}).waitFor();
  await page.locator('section.gate').getByRole('button', {name: 'Approve', exact: true}).click();
  await waitFor('the first decision', async () => (await api('GET', `/runs/${id2}`, viewer)).body.revision >= 1 &&
    (await api('GET', `/runs/${id2}/events`, viewer)).body.events.some((e) => e.type === 'run.decided'));
  await pageB.locator('section.gate').getByRole('button', {name: 'Approve', exact: true}).click();
  await pageB.locator('.conflict').waitFor();
  await pageB.screenshot({path: path.join(shots, 'run-conflict.png'), fullPage: true});
  const decided = (await api('GET', `/runs/${id2}/events`, viewer)).body.events
    .filter((e) => e.type === 'run.decided' && e.data.step_path === 'outline_review');
  check(decided.length === 1 && decided[0].data.reviewer === 'alice',
    'one decision recorded on the outline review, by alice; bob saw the conflict');

  // 3. A viewer sees no decision buttons, and the API refuses it.
  const id3 = await pausedRun();
  const ctxV = await browser.newContext();
  const pageV = await login(ctxV, viewer);
  await pageV.goto(`${base}/#/runs/${id3}`);
  await pageV.locator('section.gate h2', {hasText: 'Outline review'}).waitFor();
  check(await pageV.locator('section.gate button').count() === 0, 'a viewer sees no decision buttons');
  check(await pageV.locator('form.start').count() === 0, 'a viewer sees no start form');
  const gate = (await api('GET', `/runs/${id3}/gate`, viewer)).body;
  const refused = await api('POST', `/runs/${id3}/decisions`, viewer,
    {digest: gate.proposal_digest, decision: 'approve'});
  check(refused.status === 403, 'the API refuses a viewer\'s decision (403)');
  check((await api('GET', `/runs/${id3}`, viewer)).body.status === 'paused', 'nothing was recorded');
  await pageV.screenshot({path: path.join(shots, 'run-viewer.png'), fullPage: true});

  // 4. Every terminal status is terminal in the UI, and in the filter.
  await page.goto(`${base}/#/runs/${id3}`);
  await page.locator('.runhead .badge', {hasText: 'paused'}).waitFor();
  check(await page.getByRole('button', {name: 'Cancel run'}).count() === 1, 'a paused run shows Cancel');
  for (const [id, status] of [[unresolvedId, 'unresolved'], [budgetId, 'budget_stopped']]) {
    await page.goto(`${base}/#/runs/${id}`);
    await page.locator('.runhead .badge', {hasText: status}).waitFor();
    await page.locator('.timeline li', {hasText: 'run.finished'}).waitFor();
    check(await page.getByRole('button', {name: 'Cancel run'}).count() === 0, `a ${status} run shows no Cancel`);
    await page.screenshot({path: path.join(shots, `run-${status}.png`), fullPage: true});
    await page.goto(`${base}/#/runs`);
    await page.locator('table.runs tbody tr').first().waitFor();
    check(await page.locator(`#status-filter option[value="${status}"]`).count() === 1,
      `the status filter offers ${status}`);
    await page.selectOption('#status-filter', status);
    await page.waitForURL(new RegExp(`status=${status}$`));
    await waitFor(`the ${status} filter to list one run`, async () =>
      await page.locator('table.runs tbody tr').count() === 1 &&
      await page.locator('table.runs tbody tr', {hasText: id}).count() === 1);
    check(true, `the ${status} filter finds that run alone`);
  }

  // 5. The write ledger on the run page: a gate approved, then one write to
  // the example actions server, named by that decision.
  const actionsPortFile = path.join(outDir, 'actions.port');
  const actions = spawn(path.join(path.dirname(binary), 'runloom-example-actions'),
    ['--port', '0', '--port-file', actionsPortFile], {stdio: ['ignore', 'inherit', 'inherit']});
  try {
    await waitFor('the actions server to listen', async () =>
      fs.existsSync(actionsPortFile) && fs.readFileSync(actionsPortFile, 'utf8').trim() !== '');
    const actionsUrl = `http://127.0.0.1:${fs.readFileSync(actionsPortFile, 'utf8').trim()}`;
    const writeYaml = 'name: ui_write\nsteps:\n' +
      '  - {id: review, kind: approval, proposal: {action: restart}}\n' +
      `  - {id: apply, kind: http, method: POST, url: "${actionsUrl}/actions", write: true, ` +
      'action: restart, body: {by: "{{ steps.review.output.reviewer }}"}, expect: [200, 201]}\n';
    check((await api('POST', '/workflows', admin, {yaml: writeYaml})).status < 300, 'a workflow with a write is registered');
    const w = await api('POST', '/runs', approver, {workflow: 'ui_write', inputs: {}});
    await waitFor('the write run to pause', async () => (await api('GET', `/runs/${w.body.id}`, viewer)).body.status === 'paused');
    const gate = await api('GET', `/runs/${w.body.id}/gate`, viewer);
    const decided = await api('POST', `/runs/${w.body.id}/decisions`, approver,
      {decision: 'approve', digest: gate.body.proposal_digest});
    check(decided.status === 200, 'the write run\'s gate is approved over the API');
    await waitFor('the write run to complete', async () => (await api('GET', `/runs/${w.body.id}`, viewer)).body.status === 'completed');
    const writes = (await api('GET', `/runs/${w.body.id}/writes`, viewer)).body.writes;
    check(writes.length === 1 && writes[0].state === 'done' && writes[0].http_status === 201 &&
          writes[0].decision.startsWith('review@1:sha256:'),
      `GET /runs/{id}/writes names the decision the write carried out (${writes[0] && writes[0].decision})`);
    await page.goto(`${base}/#/runs/${w.body.id}`);
    await page.locator('table.writes tbody tr', {hasText: 'restart'}).waitFor();
    check(await page.locator('table.writes tbody tr code', {hasText: 'review@1:'}).count() === 1,
      'the run page shows the write with its decision');
    await page.screenshot({path: path.join(shots, 'run-writes.png'), fullPage: true});
    await page.goto(`${base}/#/runs/${unresolvedId}`);
    await page.locator('.writes-none').waitFor();
    check(true, 'a run without writes says it made none');
  } finally {
    actions.kill('SIGTERM');
  }

  // 6. A run waiting for a signal says what it waits for, on its page and in
  // the list (issue 23); a signal sent over the API resolves it.
  const waitYaml = 'name: ui_wait\nsteps:\n  - {id: paid, kind: wait, signal: payment, timeout: 1h}\n' +
    '  - {id: after, kind: noop}\n';
  check((await api('POST', '/workflows', admin, {yaml: waitYaml})).status < 300, 'a workflow with a wait is registered');
  const waiting = await api('POST', '/runs', approver, {workflow: 'ui_wait', inputs: {}});
  await waitFor('the wait run to park', async () => (await api('GET', `/runs/${waiting.body.id}`, viewer)).body.status === 'waiting');
  await page.goto(`${base}/#/runs/${waiting.body.id}`);
  await page.locator('.runhead .waiting-for', {hasText: 'payment'}).waitFor();
  check(true, 'the run page says the run waits for signal payment');
  await page.screenshot({path: path.join(shots, 'run-waiting.png'), fullPage: true});
  await page.goto(`${base}/#/runs?status=waiting`);
  await page.locator('table.runs tbody tr', {hasText: waiting.body.id}).locator('.waiting-for', {hasText: 'signal payment'}).waitFor();
  check(true, 'the runs list says what a waiting run waits for');
  const signalled = await api('POST', `/runs/${waiting.body.id}/signals/payment`, approver, {payload: {amount: 5}});
  check(signalled.status === 201 && signalled.body.resolved === true, 'a signal over the API resolves the wait (201)');
  await waitFor('the wait run to complete', async () => (await api('GET', `/runs/${waiting.body.id}`, viewer)).body.status === 'completed');

  // 7. A graceful restart of `serve` while a run page follows a run that
  // goes on (issue 28): the server closes the stream cleanly, which is a cut,
  // not the end; the page reconnects with Last-Event-ID to the new server,
  // shows the events after the restart, and says ended only when the run is.
  const going = await api('POST', '/runs', approver, {workflow: 'ui_wait', inputs: {}});
  await waitFor('the run to park', async () => (await api('GET', `/runs/${going.body.id}`, viewer)).body.status === 'waiting');
  await page.goto(`${base}/#/runs/${going.body.id}`);
  await page.locator('.runhead .waiting-for', {hasText: 'payment'}).waitFor();
  await page.locator('.timeline li', {hasText: 'run.waiting'}).waitFor();
  await page.locator('span.live', {hasText: '(live)'}).waitFor();
  server.kill('SIGTERM');
  await exited;
  check(serverExit.code === 0, 'serve stopped gracefully on SIGTERM (exit 0)');
  const cutState = await waitFor('the page to notice the closed stream', async () => {
    const t = await page.locator('span.live').textContent();
    return t === '(live)' ? null : t;
  });
  check(cutState === '(reconnecting…)', `a stream the server closed for a restart is not the end (${cutState})`);
  startServer();
  await serverReady();
  await page.locator('span.live', {hasText: '(live)'}).waitFor();
  check(true, 'the page reconnected to the restarted server');
  const resumed = await api('POST', `/runs/${going.body.id}/signals/payment`, approver, {payload: {amount: 7}});
  check(resumed.status === 201, 'a signal to the restarted server resolves the wait (201)');
  await page.locator('.timeline li', {hasText: 'run.finished'}).waitFor();
  await page.locator('.runhead .badge', {hasText: 'completed'}).waitFor();
  check(true, 'the page shows the events after the restart and the completed run');
  await page.locator('span.live', {hasText: '(ended)'}).waitFor();
  check(true, 'the page says ended once the run has finished');
  const shown = await page.locator('.timeline li').evaluateAll((els) => els.map((e) => Number(e.dataset.seq)));
  check(shown.every((s, i) => s === i + 1), `the timeline shows events 1..${shown.length} once each across the restart`);

  // 8. Schedules (issue 23): the page lists a schedule made over the API and
  // pauses and resumes it; `serve` fires it (every 250 ms it looks).
  const schedYaml = 'name: ui_sched\nsteps:\n  - {id: tick, kind: noop}\n';
  check((await api('POST', '/workflows', admin, {yaml: schedYaml})).status < 300,
    'a workflow for a schedule is registered');
  const made = await api('POST', '/schedules', approver, {id: 'ui-every-second', workflow: 'ui_sched',
    cron: '* * * * * *', timezone: 'Europe/Paris', overlap: 'allow', catch_up: 'none'});
  check(made.status === 201 && made.body.paused === false, 'a 1-second schedule is created over the API (201)');
  const firstRun = await waitFor('the schedule\'s first run', async () =>
    (await api('GET', '/schedules/ui-every-second', viewer)).body.last_run_id);
  await page.goto(`${base}/#/schedules`);
  const schedRow = page.locator('table.schedules tbody tr[data-id="ui-every-second"]');
  await schedRow.waitFor();
  check(await schedRow.locator('td', {hasText: '* * * * * *'}).count() === 1 &&
        await schedRow.locator('td', {hasText: 'Europe/Paris'}).count() === 1 &&
        await schedRow.locator('td', {hasText: 'allow / none'}).count() === 1 &&
        await schedRow.locator('.state .badge', {hasText: 'active'}).count() === 1,
  'the schedules page lists it: cron, time zone, overlap / catch-up, active');
  const lastLink = schedRow.locator('td.last a');
  await lastLink.waitFor();
  const shownRun = (await lastLink.textContent()).trim();
  const linked = await api('GET', `/runs/${shownRun}`, viewer);
  check(shownRun.startsWith('r_') && linked.status === 200 &&
        linked.body.idempotency_key.startsWith('schedule:ui-every-second:'),
  `the page links the latest tick's run ${shownRun} (first was ${firstRun}), keyed by schedule and tick`);
  await page.screenshot({path: path.join(shots, 'schedules.png'), fullPage: true});
  await schedRow.getByRole('button', {name: 'Pause ui-every-second'}).click();
  await schedRow.locator('.state .badge', {hasText: 'paused'}).waitFor();
  await page.locator('#toast', {hasText: 'Schedule ui-every-second paused'}).waitFor();
  const pausedNow = await api('GET', '/schedules/ui-every-second', viewer);
  check(pausedNow.body.paused === true, 'Pause on the page paused it (GET /schedules/{id} says paused)');
  await new Promise((r) => setTimeout(r, 2500));
  const stillPaused = await api('GET', '/schedules/ui-every-second', viewer);
  check(stillPaused.body.last_run_id === pausedNow.body.last_run_id,
    'no tick started a run while it was paused (2.5 s of a 1-second schedule)');
  await page.screenshot({path: path.join(shots, 'schedules-paused.png'), fullPage: true});
  await pageV.goto(`${base}/#/schedules`);  // the viewer's tab (its token is kept per tab)
  await pageV.locator('table.schedules tbody tr[data-id="ui-every-second"]').waitFor();
  check(await pageV.locator('table.schedules button').count() === 0, 'a viewer sees the schedules with no buttons');
  const viewerPause = await api('POST', '/schedules/ui-every-second/resume', viewer, {});
  check(viewerPause.status === 403, 'the API refuses a viewer\'s resume (403)');
  await schedRow.getByRole('button', {name: 'Resume ui-every-second'}).click();
  await schedRow.locator('.state .badge', {hasText: 'active'}).waitFor();
  check((await api('GET', '/schedules/ui-every-second', viewer)).body.paused === false,
    'Resume on the page resumed it');
  check((await api('DELETE', '/schedules/ui-every-second', approver)).status === 200,
    'the schedule is deleted over the API (the rest of the test starts no more runs)');

  // 9. Streaming (issue 24): the fake model sends its reply word by word
  // over 4 s; the page shows the text growing, and in the end the stored one.
  const streamYaml = 'name: ui_stream\nsteps:\n  - id: talk\n    kind: llm\n    stream: true\n' +
    '    prompt: "Tell the story of the durable run, in many small words, slowly"\n' +
    '    fake: {latency: 4s}\n';
  check((await api('POST', '/workflows', admin, {yaml: streamYaml})).status < 300,
    'a streaming workflow is registered');
  const streaming = await api('POST', '/runs', approver, {workflow: 'ui_stream', inputs: {}});
  check(streaming.status === 201, 'a streaming run is started (201)');
  await page.goto(`${base}/#/runs/${streaming.body.id}`);
  const liveText = page.locator('.live-calls pre.live-text[data-path="talk"]');
  const lengths = [];
  await waitFor('the streamed text to grow three times', async () => {
    const t = (await liveText.count()) ? await liveText.textContent() : '';
    if (t.length > 0 && (lengths.length === 0 || t.length > lengths[lengths.length - 1])) lengths.push(t.length);
    return lengths.length >= 3 ? lengths : null;
  });
  check(true, `the page shows the text growing as it arrives (lengths ${lengths.join(' < ')})`);
  await page.screenshot({path: path.join(shots, 'run-streaming.png'), fullPage: true});
  await page.locator('.live-calls .live-state', {hasText: 'done'}).waitFor();
  await page.locator('.runhead .badge', {hasText: 'completed'}).waitFor();
  const finalText = await liveText.textContent();
  const streamSteps = (await api('GET', `/runs/${streaming.body.id}/steps`, viewer)).body;
  const talk = (Array.isArray(streamSteps) ? streamSteps : streamSteps.steps).find((s) => s.path === 'talk');
  check(talk && talk.output.text === finalText,
    `the text the page streamed is the stored output (${finalText.length} characters)`);

  // The other pages render.
  await page.goto(`${base}/#/workflows/blog`);
  await page.locator('pre.definition').waitFor();
  await page.screenshot({path: path.join(shots, 'workflow.png'), fullPage: true});
  await page.goto(`${base}/#/workflows`);
  await page.locator('table').waitFor();
  await page.screenshot({path: path.join(shots, 'workflows.png'), fullPage: true});
  await page.goto(`${base}/#/dead-letters`);
  await page.locator('h1', {hasText: 'Dead letters'}).waitFor();
  await page.screenshot({path: path.join(shots, 'dead-letters.png'), fullPage: true});
  await page.goto(`${base}/#/runs`);
  await page.locator('table.runs tbody tr').first().waitFor();
  await page.screenshot({path: path.join(shots, 'runs-after.png'), fullPage: true});
} catch (e) {
  failed = e;
} finally {
  await browser.close();
  server.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 10000))]);
  if (serverExit === null) {
    server.kill('SIGKILL');
    if (!failed) failed = new Error('runloom serve did not stop within 10 s of SIGTERM');
  } else if (!failed && serverExit.code !== 0) {
    failed = new Error(`runloom serve exited with ${JSON.stringify(serverExit)} after SIGTERM`);
  }
}
if (failed) {
  console.error(`not ok - ${failed.stack || failed}`);
  process.exit(1);
}
console.log(`ok - screenshots in ${shots}`);
