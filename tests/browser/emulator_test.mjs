// The web UI's fixture emulator (issue 22.7, reference 002): the UI in Debian's
// chromium (headless, playwright-core) with NO runloom server, every API
// answer coming from schemas/events/fixtures and schemas/wire/fixtures.
//
//   node emulator_test.mjs EMULATOR_DIR SOURCE_DIR OUT_DIR
//
// EMULATOR_DIR is the build's web-emulator/ (src/web/CMakeLists.txt); this
// script serves it as static files on loopback, which is all a frontend
// developer needs (docs/operations.md). It renders every page and every
// fixture type — each event type in the run's timeline, each run status in
// the list, the gate panel, the step records, the writes, the workflow, the
// dead letters (and their bulk redrive with its confirmation, issue 25), the
// budgets and LLM caps (issue 25) and the schedules — and fails on any page error, console error or failed request.
// Screenshots go to OUT_DIR/screenshots.

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import {chromium} from 'playwright-core';
import {check, prepareRun} from '../node_helpers.mjs';

const {args: [emulatorDir, sourceDir, outDir], shots} =
  prepareRun('emulator_test.mjs', ['EMULATOR_DIR', 'SOURCE_DIR', 'OUT_DIR']);
const WAIT = 15000;

function readJson(dir, name) {
  return JSON.parse(fs.readFileSync(path.join(sourceDir, dir, name), 'utf8'));
}
const eventsDir = path.join('schemas', 'events', 'fixtures');
const eventTypes = fs.readdirSync(path.join(sourceDir, eventsDir)).filter((f) => f.endsWith('.json'))
  .map((f) => readJson(eventsDir, f).type).sort();
const wireDir = path.join('schemas', 'wire', 'fixtures');
const wire = Object.fromEntries(fs.readdirSync(path.join(sourceDir, wireDir)).filter((f) => f.endsWith('.json'))
  .map((f) => [path.basename(f, '.json'), readJson(wireDir, f)]));
const runId = wire.run.id;

// A static file server, and nothing else: no /api/v1 here at all.
const TYPES = {'.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css'};
const root = fs.realpathSync(emulatorDir);
const apiRequests = [];
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  if (url.pathname.startsWith('/api/')) apiRequests.push(url.pathname);
  if (url.pathname === '/favicon.ico') {
    res.writeHead(204).end();  // the browser asks; the UI has none
    return;
  }
  let file = path.normalize(path.join(root, url.pathname));
  if (url.pathname.endsWith('/')) file = path.join(file, 'index.html');
  if (!file.startsWith(root + path.sep) || !fs.existsSync(file)) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, {'Content-Type': TYPES[path.extname(file)] || 'application/octet-stream'});
  res.end(fs.readFileSync(file));
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${server.address().port}/ui/`;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const problems = [];
async function open(query) {
  const ctx = await browser.newContext({viewport: {width: 1300, height: 900}});
  const page = await ctx.newPage();
  page.setDefaultTimeout(WAIT);
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  page.on('requestfailed', (r) => {
    if (!/ERR_ABORTED/.test(r.failure()?.errorText || '')) problems.push(`request failed: ${r.url()}`);
  });
  page.on('dialog', (d) => d.accept());
  await page.goto(`${base}?emulator${query || ''}#/runs`);
  return page;
}
function noProblems(where) {
  check(problems.length === 0, `${where}: no page error, console error or failed request` +
    (problems.length ? ` (${problems.join('; ')})` : ''));
}

let failed = null;
try {
  const page = await open('');
  await page.locator('.emulator-banner').waitFor();
  await page.locator('#who').filter({hasText: wire.me.name}).waitFor();
  check(true, `the UI starts with no server, as ${wire.me.name} (${wire.me.role}) from me.json`);

  // The run list: every run of runs.json, each status shown.
  await page.locator('table.runs tbody tr').nth(wire.runs.runs.length - 1).waitFor();
  const rows = await page.locator('table.runs tbody tr').count();
  check(rows === wire.runs.runs.length, `the run list shows the ${wire.runs.runs.length} runs of runs.json`);
  for (const r of wire.runs.runs) {
    const badge = page.locator('table.runs tbody tr', {hasText: r.id}).locator('.badge');
    check((await badge.textContent()) === r.status, `run ${r.id} is listed as ${r.status}`);
  }
  await page.selectOption('#status-filter', 'failed');
  await page.waitForFunction(() => document.querySelectorAll('table.runs tbody tr').length === 1);
  check(true, 'the status filter finds the failed run');
  await page.screenshot({path: path.join(shots, 'emulator-runs.png'), fullPage: true});

  // The fixture run: every event fixture in the timeline, its graph, steps,
  // gate and writes.
  await page.goto(`${base}?emulator#/runs/${runId}`);
  await page.locator('ol.timeline li').nth(eventTypes.length - 1).waitFor();
  const shown = (await page.locator('ol.timeline li strong').allTextContents()).sort();
  check(JSON.stringify(shown) === JSON.stringify(eventTypes),
    `the timeline shows each of the ${eventTypes.length} event fixtures once (${eventTypes.join(', ')})`);
  const nodes = await page.locator('.graphbox svg g.node, .graphbox svg [data-step]').count();
  check(nodes > 0, `the graph draws the workflow's steps (${nodes} nodes)`);
  const stepRows = await page.locator('table.steps tbody tr').count();
  check(stepRows === wire.steps.steps.length, `the step table shows the ${wire.steps.steps.length} records of steps.json`);
  await page.locator('.gatebox button.approve').waitFor();
  check((await page.locator('.gatebox pre.proposal').textContent()).includes('iterations'),
    'the gate panel shows the proposal of gate.json');
  const writeRows = await page.locator('table.writes tbody tr').count();
  check(writeRows === wire.writes.writes.length, `the writes table shows the ${wire.writes.writes.length} writes of writes.json`);
  check((await page.locator('.step-counts').textContent()).includes('succeeded'), 'the run head shows its step counts');
  await page.screenshot({path: path.join(shots, 'emulator-run.png'), fullPage: true});
  await page.click('.gatebox button.approve');
  await page.locator('#toast', {hasText: 'Decision recorded'}).waitFor();
  await page.locator('.gatebox button.approve').waitFor({state: 'detached'});
  check(true, 'approving answers from the emulator and the panel goes away');

  // The other runs: no gate, no steps, no error.
  for (const r of wire.runs.runs.filter((x) => x.id !== runId)) {
    await page.goto(`${base}?emulator#/runs/${r.id}`);
    await page.locator('.runhead .badge', {hasText: r.status}).waitFor();
  }
  check(true, 'each other run of runs.json opens with its status');

  await page.goto(`${base}?emulator#/workflows`);
  await page.locator('main', {hasText: wire.workflow.name}).waitFor();
  await page.goto(`${base}?emulator#/workflows/${wire.workflow.name}`);
  await page.locator('main', {hasText: wire.workflow.definition.description}).waitFor();
  check(true, 'the workflow pages show workflows.json and workflow.json');
  await page.screenshot({path: path.join(shots, 'emulator-workflow.png'), fullPage: true});

  await page.goto(`${base}?emulator#/dead-letters`);
  await page.locator('main', {hasText: wire.dead_letters.dead_letters[0].reason}).waitFor();
  check(true, 'the dead-letter page shows dead_letters.json');
  await page.screenshot({path: path.join(shots, 'emulator-dead-letters.png'), fullPage: true});
  // Bulk redrive (issue 25): select all, a confirmation naming the runs, and
  // only then one redrive each; "Keep them" sends none.
  const deadRuns = wire.dead_letters.dead_letters.map((d) => d.run_id);
  await page.locator('#select-all-dead').check();
  await page.locator('#bulk-redrive').click();
  const confirm = page.locator('dialog.confirm');
  await confirm.waitFor();
  const named = await confirm.locator('li').allInnerTexts();
  check(named.length === deadRuns.length && deadRuns.every((r) => named.includes(r)),
    'the bulk redrive confirmation names the dead letters\' runs');
  await page.screenshot({path: path.join(shots, 'emulator-bulk-redrive-confirm.png'), fullPage: true});
  await confirm.getByRole('button', {name: 'Keep them'}).click();
  await confirm.waitFor({state: 'detached'});
  check(await page.locator('table.dead-letters tbody tr').count() === deadRuns.length, '"Keep them" redrives nothing');
  await page.locator('#select-all-dead').check();
  await page.locator('#bulk-redrive').click();
  await confirm.getByRole('button', {name: /^Redrive \d+ dead letter/}).click();
  await page.locator('main', {hasText: 'No dead letters.'}).waitFor();
  await page.locator('#toast', {hasText: `Redriven ${deadRuns.length} of ${deadRuns.length}`}).waitFor();
  check(true, 'confirming redrives each selected dead letter (the emulator answers each redrive)');
  await page.screenshot({path: path.join(shots, 'emulator-bulk-redrive-done.png'), fullPage: true});
  // Budgets and LLM caps (issue 25): budgets.json and llm_caps.json.
  await page.goto(`${base}?emulator#/budgets`);
  for (const b of wire.budgets.budgets) {
    await page.locator(`table.budgets tr[data-tenant="${b.tenant}"]`).waitFor();
  }
  check(await page.locator('table.budgets tr[data-tenant="research"] td').first().innerText() === 'no limit',
    'the budgets page shows budgets.json, a tenant without a limit as "no limit"');
  await page.screenshot({path: path.join(shots, 'emulator-budgets.png'), fullPage: true});
  await page.goto(`${base}?emulator#/caps`);
  for (const c of wire.llm_caps.caps) {
    const box = page.locator(`section.cap[data-provider="${c.provider}"]`);
    await box.waitFor();
    check((await box.locator('.cap-now').innerText()).includes(`cap ${c.cap}`) &&
          await box.locator('table.cap-history tbody tr').count() === c.history.length,
    `the caps page shows ${c.provider}'s cap and its ${c.history.length} changes`);
  }
  await page.screenshot({path: path.join(shots, 'emulator-caps.png'), fullPage: true});
  noProblems('the budgets and caps pages');
  // Schedules: schedules.json, each row with its last run linked (or none),
  // pause and resume answered by the emulator.
  await page.goto(`${base}?emulator#/schedules`);
  for (const s of wire.schedules.schedules) {
    const row = page.locator(`table.schedules tbody tr[data-id="${s.id}"]`);
    await row.waitFor();
    check(await row.locator('.state .badge', {hasText: s.paused ? 'paused' : 'active'}).count() === 1 &&
          await row.locator('td', {hasText: s.cron}).count() >= 1,
    `schedule ${s.id} is listed ${s.paused ? 'paused' : 'active'} with its cron`);
    if (s.last_run_id) {
      check(await row.locator(`td.last a[href="#/runs/${s.last_run_id}"]`).count() === 1,
        `schedule ${s.id} links its last run`);
    }
  }
  await page.screenshot({path: path.join(shots, 'emulator-schedules.png'), fullPage: true});
  const active = wire.schedules.schedules.find((s) => !s.paused);
  const activeRow = page.locator(`table.schedules tbody tr[data-id="${active.id}"]`);
  await activeRow.getByRole('button', {name: `Pause ${active.id}`}).click();
  await activeRow.locator('.state .badge', {hasText: 'paused'}).waitFor();
  await activeRow.getByRole('button', {name: `Resume ${active.id}`}).click();
  await activeRow.locator('.state .badge', {hasText: 'active'}).waitFor();
  check(true, 'pausing and resuming a schedule answer from the emulator');
  noProblems('every page as admin');

  // As a viewer (?role=viewer): the same fixtures, no decision buttons.
  const viewer = await open('&role=viewer');
  await viewer.goto(`${base}?emulator&role=viewer#/runs/${runId}`);
  await viewer.locator('.gatebox pre.proposal').waitFor();
  check(await viewer.locator('.gatebox button.approve').count() === 0, 'a viewer sees the gate with no decision buttons');
  noProblems('the run page as viewer');
  await viewer.goto(`${base}?emulator&role=viewer#/schedules`);
  await viewer.locator('table.schedules tbody tr').first().waitFor();
  check(await viewer.locator('table.schedules button').count() === 0, 'a viewer sees the schedules with no buttons');
  noProblems('the schedules page as viewer');
  check(apiRequests.length === 0, 'no request reached a server\'s /api/v1');
} catch (e) {
  failed = e;
} finally {
  await browser.close();
  server.close();
}
if (failed) {
  for (const p of problems) console.error(`  seen: ${p}`);
  console.error(`not ok - ${failed.stack || failed}`);
  process.exit(1);
}
console.log(`ok - screenshots in ${shots}`);
