// DBOS Transact workflows of 3 steps on PostgreSQL: the comparison for
// `runloom bench --db postgres://… --workers 2` (a 3-step noop workflow). See
// ../README.md.
//
//   node workflows.mjs --db postgres://USER@127.0.0.1:PORT/DBNAME
//                      [--runs N] [--producers P] [--timeout-s S]
//
// Setup, DBOS as shipped (the TypeScript SDK, @dbos-inc/dbos-sdk, pinned in
// package.json):
//   - ONE node process: DBOS runs a workflow in the process that starts it
//     (no queue here), so this process holds both the P starters and every
//     workflow's execution. It launches DBOS with --db as its system database
//     (DBOS creates the database if it is missing and migrates its schema,
//     `dbos`, into it; all its state lives there), and otherwise DBOS's
//     defaults: a pool of 10 connections to the system database, tracing off;
//   - the workflow is registered with DBOS.registerWorkflow and runs 3 no-op
//     steps in order with DBOS.runStep (step1, step2, step3; each returns its
//     number). DBOS checkpoints each step's output in Postgres when the step
//     returns (an `operation_outputs` row), and the workflow's status (a
//     `workflow_status` row written PENDING at the start and SUCCESS at the
//     end, with its input and output) as it does by default;
//   - P async producers (default 8, like runloom's 8 producer threads per
//     process) call DBOS.startWorkflow as fast as it returns (it returns once
//     the workflow's status row is written; the workflow then runs in the
//     background), each keeping the handle's getResult() promise.
// Workflow ids are `noop3-PID-MS-i`, new for every call, so leftovers in the
// database don't count.
//
// Measured: from just before the first startWorkflow to the last workflow's
// result. Then verified: every result is the expected one, DBOS's list API
// reports N workflows of this call, all SUCCESS; its system tables hold 3×N
// step checkpoints for them; a sample of 5 workflows ran step1 → step2 →
// step3 (DBOS.listWorkflowSteps: each step started after the one before
// finished). Prints one JSON line on stdout (DBOS's own log lines go to
// stderr); exits 1 if not every workflow completed within --timeout-s or
// anything failed, 2 on bad arguments.
import { DBOS } from '@dbos-inc/dbos-sdk';
import pg from 'pg';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';

const require = createRequire(import.meta.url);
// The package's exports map hides package.json: find it next to dist/src/index.js.
const DBOS_VERSION = JSON.parse(readFileSync(
  join(dirname(require.resolve('@dbos-inc/dbos-sdk')), '..', '..', 'package.json'), 'utf8')).version;
const SCHEMA = 'dbos'; // DBOS's default system schema (systemDatabaseSchemaName)

function usage(message) {
  if (message) process.stderr.write(`workflows.mjs: ${message}\n`);
  process.stderr.write(
    'usage: node workflows.mjs --db postgres://USER@127.0.0.1:PORT/DBNAME\n' +
      '                          [--runs N=10000] [--producers P=8] [--timeout-s S=600]\n',
  );
  process.exit(message ? 2 : 0);
}

function parseArgs(argv) {
  const opts = { runs: 10000, db: '', producers: 8, timeoutS: 600 };
  const ints = { '--runs': 'runs', '--producers': 'producers', '--timeout-s': 'timeoutS' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') usage();
    const value = argv[i + 1];
    if (value === undefined) usage(`${arg} needs a value`);
    i++;
    if (arg === '--db') {
      opts.db = value;
    } else if (ints[arg]) {
      // Bounded: 10,000,000 covers any run count, pid or timeout meant here.
      if (!/^[1-9][0-9]{0,7}$/.test(value) || Number(value) > 10_000_000) {
        usage(`${arg} takes an integer from 1 to 10,000,000, not '${value}'`);
      }
      opts[ints[arg]] = Number(value);
    } else {
      usage(`unknown argument '${arg}'`);
    }
  }
  if (!opts.db) usage('--db is required (the DBOS system database)');
  let u;
  try {
    u = new URL(opts.db);
  } catch {
    usage(`--db: not a URL: '${opts.db}'`);
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') {
    usage(`--db: want postgres://user@host:port/dbname, not '${opts.db}'`);
  }
  if (!u.pathname || u.pathname === '/') usage(`--db: no database name in '${opts.db}'`);
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const N = opts.runs;
const prefix = `noop3-${process.pid}-${Date.now()}-`;

// Fail early and clearly when the server isn't there. The database itself may
// be missing (DBOS creates it), so probe the server's `postgres` database.
{
  const u = new URL(opts.db);
  u.pathname = '/postgres';
  const probe = new pg.Client({ connectionString: u.toString(), connectionTimeoutMillis: 5000 });
  try {
    await probe.connect();
    await probe.query('SELECT 1');
  } catch (err) {
    process.stderr.write(`workflows.mjs: cannot reach PostgreSQL at ${opts.db}: ${err.message}\n`);
    process.exit(1);
  } finally {
    await probe.end().catch(() => {});
  }
}

// DBOS's console logger prints info on stdout; keep stdout for the JSON line.
const toStderr = (level) => (entry) => {
  const text = entry instanceof Error ? entry.stack || entry.message
    : typeof entry === 'string' ? entry : JSON.stringify(entry);
  process.stderr.write(`dbos ${level}: ${text}\n`);
};
DBOS.setConfig({
  name: 'runloom-bench-compare',
  systemDatabaseUrl: opts.db,
  logger: { debug() {}, info: toStderr('info'), warn: toStderr('warn'), error: toStderr('error') },
});

// The steps: no-ops that return their number (DBOS checkpoints it).
const step1 = async () => 1;
const step2 = async () => 2;
const step3 = async () => 3;
const noop3 = DBOS.registerWorkflow(async (i) => {
  const a = await DBOS.runStep(step1, { name: 'step1' });
  const b = await DBOS.runStep(step2, { name: 'step2' });
  const c = await DBOS.runStep(step3, { name: 'step3' });
  if (a !== 1 || b !== 2 || c !== 3) throw new Error(`workflow ${i}: steps returned ${a}, ${b}, ${c}`);
  return i;
}, { name: 'noop3' });

try {
  await DBOS.launch();
} catch (err) {
  process.stderr.write(`workflows.mjs: DBOS.launch failed: ${err.message}\n`);
  process.exit(1);
}

async function shutdown() {
  // Bounded: a shutdown that hangs must not keep a failed run alive.
  await Promise.race([DBOS.shutdown().catch(() => {}),
    new Promise((r) => setTimeout(r, 10000).unref())]);
}

const failures = [];
let completed = 0;
let endedAt = 0;
let resolveAll;
const allDone = new Promise((resolve) => (resolveAll = resolve));

let timer;
const timedOut = new Promise((resolve) => {
  timer = setTimeout(() => resolve('timeout'), opts.timeoutS * 1000);
});

let next = 0;
const startedAt = performance.now();
const starting = Promise.all(
  Array.from({ length: opts.producers }, async () => {
    for (let i = next++; i < N && failures.length === 0; i = next++) {
      const handle = await DBOS.startWorkflow(noop3, { workflowID: `${prefix}${i}` })(i);
      handle.getResult().then(
        (result) => {
          if (result !== i) {
            failures.push(`workflow ${prefix}${i}: result ${JSON.stringify(result)}, want ${i}`);
            resolveAll();
          } else if (++completed === N) {
            endedAt = performance.now();
            resolveAll();
          }
        },
        (err) => {
          failures.push(`workflow ${prefix}${i}: ${err && err.message}`);
          resolveAll();
        },
      );
    }
  }),
).catch((err) => {
  failures.push(`starting workflows: ${err.message}`);
  resolveAll();
});

const outcome = await Promise.race([allDone.then(() => 'done'), timedOut]);
clearTimeout(timer);
const elapsed = (endedAt || performance.now()) - startedAt;

if (outcome !== 'done' || failures.length > 0 || completed !== N) {
  process.stderr.write(
    `workflows.mjs: FAILED: ${completed} of ${N} workflows completed` +
      (outcome === 'timeout' ? ` within --timeout-s ${opts.timeoutS}` : '') +
      (failures.length ? `; stopped at the first failure: ${failures[0]}` : '') + '\n',
  );
  await shutdown();
  process.exit(1);
}
await starting;

// Verify what the system database holds.
const problems = [];
// Every workflow of this call, by status (DBOS's list API).
const listed = await DBOS.listWorkflows({ workflow_id_prefix: prefix, loadInput: false, loadOutput: false });
const byStatus = {};
for (const w of listed) byStatus[w.status] = (byStatus[w.status] || 0) + 1;
const success = byStatus.SUCCESS || 0;
if (success !== N || listed.length !== N) {
  problems.push(`DBOS lists ${listed.length} workflows of this run, ${success} SUCCESS, want ${N} ` +
    `(${JSON.stringify(byStatus)})`);
}
// Every step checkpointed: 3 rows per workflow in operation_outputs.
{
  const client = new pg.Client({ connectionString: opts.db });
  try {
    await client.connect();
    const { rows } = await client.query(
      `SELECT function_name, count(*)::int AS n FROM "${SCHEMA}".operation_outputs
        WHERE workflow_uuid LIKE $1 GROUP BY function_name ORDER BY function_name`, [`${prefix}%`]);
    const got = Object.fromEntries(rows.map((r) => [r.function_name, r.n]));
    const want = { step1: N, step2: N, step3: N };
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      problems.push(`step checkpoints ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    }
  } catch (err) {
    problems.push(`reading ${SCHEMA}.operation_outputs: ${err.message}`);
  } finally {
    await client.end().catch(() => {});
  }
}
// The order on a sample: first, last and a few between.
const sample = [...new Set([0, N - 1, Math.floor(N / 4), Math.floor(N / 2), Math.floor((3 * N) / 4)])];
for (const i of sample) {
  const id = `${prefix}${i}`;
  const steps = await DBOS.listWorkflowSteps(id);
  const names = (steps || []).map((s) => s.name).join(',');
  if (names !== 'step1,step2,step3') {
    problems.push(`workflow ${id}: steps ${names || 'none'}, want step1,step2,step3`);
    continue;
  }
  for (let k = 1; k < 3; k++) {
    const before = steps[k - 1], after = steps[k];
    if (before.completedAtEpochMs == null || after.startedAtEpochMs == null ||
        before.completedAtEpochMs > after.startedAtEpochMs) {
      problems.push(`workflow ${id}: ${before.name} done ${before.completedAtEpochMs}, ` +
        `${after.name} started ${after.startedAtEpochMs}`);
    }
  }
}
if (problems.length) {
  process.stderr.write(`workflows.mjs: FAILED verification: ${problems.join('; ')}\n`);
  await shutdown();
  process.exit(1);
}

const elapsedS = elapsed / 1000;
const result = {
  system: 'dbos',
  workflows: N,
  completed,
  elapsed_s: Number(elapsedS.toFixed(6)),
  workflows_per_s: Number((N / elapsedS).toFixed(3)),
  peak_rss_mb: Number((process.resourceUsage().maxRSS / 1024).toFixed(3)),
  dbos_version: DBOS_VERSION,
  success_rows: success,
  step_checkpoints: 3 * N,
  producers: opts.producers,
  node_version: process.versions.node,
};
await shutdown();
process.stdout.write(JSON.stringify(result) + '\n');
process.exit(0);
