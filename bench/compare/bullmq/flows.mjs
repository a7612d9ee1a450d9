// BullMQ 3-job flows: the comparison for `runloom bench` (a 3-step noop
// workflow). See ../README.md.
//
//   node flows.mjs [--runs N] [--redis redis://127.0.0.1:PORT[/DB]]
//                  [--concurrency C] [--producers P] [--timeout-s S]
//                  [--redis-pid PID]
//
// Setup, chosen to mirror runloom's embedded benchmark (one process holding
// both the producers and the executors):
//   - one node process holds P FlowProducers (default 8, like runloom's 8
//     producer threads), each with its own Redis connection, adding flows as
//     fast as their `add` calls return, and one Worker with concurrency C
//     (default 64, like runloom's 64 executor threads) serving every job;
//   - each flow is BullMQ's way of writing 3 steps in order: a parent job
//     (step3) whose one child (step2) has one child (step1). BullMQ runs
//     step1 first; step2 becomes runnable only when step1 has completed, and
//     step3 only when step2 has. All three go to one queue (one queue per
//     level would need three Workers, i.e. 3×C job slots) and the processor
//     does nothing;
//   - BullMQ's defaults otherwise: jobs are kept after completion (runloom
//     keeps its runs too), lock/stall settings as shipped, the ioredis driver.
// The queue name is new for every call, so leftovers in Redis don't count.
//
// Measured: from just before the first `add` to the worker's 'completed'
// event of the last step3 (each flow's top-level job; counted once per job
// id). Then verified: the queue holds 3×N completed jobs and nothing failed,
// waiting or active, and a sample of flows ran step1 → step2 → step3.
// Prints one JSON line on stdout; exits 1 if not every flow completed within
// --timeout-s or anything failed, 2 on bad arguments.
import { FlowProducer, Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const BULLMQ_VERSION = require('bullmq/package.json').version;

function usage(message) {
  if (message) process.stderr.write(`flows.mjs: ${message}\n`);
  process.stderr.write(
    'usage: node flows.mjs [--runs N=10000] [--redis redis://127.0.0.1:6379]\n' +
      '                      [--concurrency C=64] [--producers P=8] [--timeout-s S=300]\n' +
      '                      [--redis-pid PID (report the redis-server\'s peak RSS)]\n',
  );
  process.exit(message ? 2 : 0);
}

function parseArgs(argv) {
  const opts = {
    runs: 10000,
    redis: 'redis://127.0.0.1:6379',
    concurrency: 64,
    producers: 8,
    timeoutS: 300,
    redisPid: 0,
  };
  const ints = { '--runs': 'runs', '--concurrency': 'concurrency', '--producers': 'producers',
    '--timeout-s': 'timeoutS', '--redis-pid': 'redisPid' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') usage();
    const value = argv[i + 1];
    if (value === undefined) usage(`${arg} needs a value`);
    i++;
    if (arg === '--redis') {
      opts.redis = value;
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
  return opts;
}

// redis://host:port[/db] → ioredis options (no password support needed here).
function connectionFrom(url) {
  let u;
  try {
    u = new URL(url);
  } catch {
    usage(`--redis: not a URL: '${url}'`);
  }
  if (u.protocol !== 'redis:') usage(`--redis: want redis://host:port, not '${url}'`);
  const db = u.pathname && u.pathname !== '/' ? Number(u.pathname.slice(1)) : 0;
  if (!Number.isInteger(db) || db < 0) usage(`--redis: bad database in '${url}'`);
  return { host: u.hostname || '127.0.0.1', port: Number(u.port || 6379), db };
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

// Peak resident set of another process (the redis-server): VmHWM, reset first
// by writing 5 to clear_refs (needs the right to; best effort).
function resetPeakRss(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    /* not allowed: the peak is then since the server started */
  }
}
function peakRssMb(pid) {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

const opts = parseArgs(process.argv.slice(2));
const connection = connectionFrom(opts.redis);
const N = opts.runs;
const queueName = `noop3-${process.pid}-${Date.now()}`;

// Fail early and clearly when Redis isn't there (BullMQ itself retries forever).
{
  const probe = new Redis({ ...connection, lazyConnect: true, maxRetriesPerRequest: 1,
    retryStrategy: () => null });
  let lastError = '';
  probe.on('error', (err) => (lastError = err.message));
  try {
    await probe.connect();
    await probe.ping();
  } catch (err) {
    process.stderr.write(`flows.mjs: cannot reach Redis at ${opts.redis}: ${lastError || err.message}\n`);
    process.exit(1);
  }
  probe.disconnect();
}
if (opts.redisPid) resetPeakRss(opts.redisPid);

const firstStepMs = []; // flow added → step1 taken by the worker (cf. runloom's p50/p99)
const doneParents = new Set();
const failures = [];
let resolveAll;
const allDone = new Promise((resolve) => (resolveAll = resolve));
let endedAt = 0;

const worker = new Worker(
  queueName,
  async (job) => {
    if (job.name === 'step1') firstStepMs.push(job.processedOn - job.timestamp);
    // a no-op step
  },
  { connection, concurrency: opts.concurrency },
);
worker.on('completed', (job) => {
  if (job.name !== 'step3' || doneParents.has(job.id)) return;
  doneParents.add(job.id);
  if (doneParents.size === N) {
    endedAt = performance.now();
    resolveAll();
  }
});
worker.on('failed', (job, err) => {
  failures.push(`${job ? job.name + ' ' + job.id : '?'}: ${err && err.message}`);
  resolveAll();
});
worker.on('error', (err) => process.stderr.write(`flows.mjs: worker error: ${err.message}\n`));

const producers = Array.from({ length: opts.producers }, () => new FlowProducer({ connection }));
const queue = new Queue(queueName, { connection });
await Promise.all([worker.waitUntilReady(), queue.waitUntilReady(),
  ...producers.map((p) => p.waitUntilReady())]);

const flow = (i) => ({
  name: 'step3',
  queueName,
  data: { i },
  children: [{ name: 'step2', queueName, data: { i },
    children: [{ name: 'step1', queueName, data: { i } }] }],
});
// Flows whose order is checked afterwards: first, last and a few between.
const sampleIdx = new Set([0, N - 1, Math.floor(N / 4), Math.floor(N / 2), Math.floor((3 * N) / 4)]);
const sampleIds = [];

let timer;
const timedOut = new Promise((resolve) => {
  timer = setTimeout(() => resolve('timeout'), opts.timeoutS * 1000);
});

let next = 0;
const startedAt = performance.now();
const adding = Promise.all(
  producers.map(async (producer) => {
    for (let i = next++; i < N; i = next++) {
      const node = await producer.add(flow(i));
      if (sampleIdx.has(i)) sampleIds.push(node.job.id);
    }
  }),
).catch((err) => {
  failures.push(`adding flows: ${err.message}`);
  resolveAll();
});

const outcome = await Promise.race([allDone.then(() => 'done'), timedOut]);
clearTimeout(timer);
const elapsed = (endedAt || performance.now()) - startedAt;

async function shutdown() {
  // Bounded: a close that hangs must not keep a failed run alive.
  const closing = Promise.all([worker.close(true), queue.close(), ...producers.map((p) => p.close())]);
  await Promise.race([closing, new Promise((r) => setTimeout(r, 10000).unref())]);
}

if (outcome !== 'done' || failures.length > 0 || doneParents.size !== N) {
  process.stderr.write(
    `flows.mjs: FAILED: ${doneParents.size} of ${N} flows completed` +
      (outcome === 'timeout' ? ` within --timeout-s ${opts.timeoutS}` : '') +
      (failures.length ? `; stopped at the first failure: ${failures[0]}` : '') + '\n',
  );
  await shutdown();
  process.exit(1);
}
await adding;

// Verify what Redis holds: every job of every flow completed, nothing else left.
const counts = await queue.getJobCounts('completed', 'failed', 'active', 'wait', 'waiting-children',
  'delayed', 'prioritized', 'paused');
const leftovers = Object.entries(counts).filter(([k, v]) => k !== 'completed' && v !== 0);
const problems = [];
if (counts.completed !== 3 * N) problems.push(`${counts.completed} completed jobs, want ${3 * N}`);
if (leftovers.length) problems.push(`jobs left: ${JSON.stringify(Object.fromEntries(leftovers))}`);
// Verify the order on the sample: step1 finished before step2 started, step2 before step3.
const checker = new FlowProducer({ connection });
for (const id of sampleIds) {
  const tree = await checker.getFlow({ id, queueName });
  const s3 = tree && tree.job;
  const s2 = s3 && tree.children && tree.children[0] && tree.children[0].job;
  const s1 = s2 && tree.children[0].children && tree.children[0].children[0] &&
    tree.children[0].children[0].job;
  if (!s1 || s1.name !== 'step1' || s2.name !== 'step2' || s3.name !== 'step3') {
    problems.push(`flow ${id}: not a step3 ← step2 ← step1 chain`);
  } else if (!(s1.finishedOn <= s2.processedOn && s2.finishedOn <= s3.processedOn)) {
    problems.push(`flow ${id}: out of order (step1 done ${s1.finishedOn}, step2 ${s2.processedOn}-` +
      `${s2.finishedOn}, step3 started ${s3.processedOn})`);
  }
}
await checker.close();
if (sampleIds.length !== sampleIdx.size) problems.push(`sampled ${sampleIds.length} flows, want ${sampleIdx.size}`);
if (problems.length) {
  process.stderr.write(`flows.mjs: FAILED verification: ${problems.join('; ')}\n`);
  await shutdown();
  process.exit(1);
}

firstStepMs.sort((a, b) => a - b);
const elapsedS = elapsed / 1000;
const result = {
  system: 'bullmq',
  flows: N,
  completed: doneParents.size,
  elapsed_s: Number(elapsedS.toFixed(6)),
  flows_per_s: Number((N / elapsedS).toFixed(3)),
  peak_rss_mb: Number((process.resourceUsage().maxRSS / 1024).toFixed(3)),
  bullmq_version: BULLMQ_VERSION,
  jobs: 3 * N,
  jobs_per_s: Number(((3 * N) / elapsedS).toFixed(3)),
  // added → step1 taken by the worker, ms resolution (BullMQ's timestamps)
  p50_ms: percentile(firstStepMs, 50),
  p99_ms: percentile(firstStepMs, 99),
  concurrency: opts.concurrency,
  producers: opts.producers,
  node_version: process.versions.node,
};
if (opts.redisPid) {
  const mb = peakRssMb(opts.redisPid);
  result.redis_peak_rss_mb = mb === null ? null : Number(mb.toFixed(3));
}
await shutdown();
process.stdout.write(JSON.stringify(result) + '\n');
process.exit(0);
