// SSE fan-out benchmark (issue 10): N subscribers follow one run's events
// over `GET /api/v1/runs/{id}/events` (text/event-stream); each received
// event's delivery latency is the receive time minus the event's `at` (the
// store's commit clock, same machine). Also the server's memory per idle
// stream: its RSS before and after N streams are open on a paused run.
//
//   node bench/http/sse_fanout.mjs --url http://127.0.0.1:8080 --token TOKEN \
//        --pid SERVER_PID [--subscribers 1000] [--workflow NAME]
//
// The workflow (default `sse_bench`, registered by the caller) should pause at
// an approval gate first (for the idle measurement) and then write a few dozen
// events at a modest pace after it is approved. Prints one JSON object.

import fs from 'node:fs';
import http from 'node:http';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const base = args.url;
const tok = args.token;
const pid = Number(args.pid);
const n = Number(args.subscribers || 1000);
const workflow = args.workflow || 'sse_bench';
if (!base || !tok || !pid) {
  console.error('usage: sse_fanout.mjs --url URL --token TOKEN --pid SERVER_PID [--subscribers N] [--workflow W]');
  process.exit(2);
}

function rssKiB() {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
  return Number(m[1]);
}

async function api(method, p, body) {
  const res = await fetch(`${base}/api/v1${p}`, {
    method,
    headers: Object.assign({Authorization: `Bearer ${tok}`}, body ? {'Content-Type': 'application/json'} : {}),
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const agent = new http.Agent({keepAlive: false, maxSockets: Infinity});

const run = await api('POST', '/runs', {workflow, inputs: {}});
for (let i = 0; ; ++i) {
  if ((await api('GET', `/runs/${run.id}`)).status === 'paused') break;
  if (i > 200) throw new Error('the run did not pause at its gate');
  await sleep(50);
}

const latencies = [];
let opened = 0;
let ended = 0;
const requests = [];
// node:http directly (not fetch and web streams): the receive time is taken
// when the socket's data arrives, before this client's own parsing, so the
// figure is the server's delivery more than this one-threaded client's work.
function subscribe() {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}/api/v1/runs/${run.id}/events`, {
      headers: {Authorization: `Bearer ${tok}`, Accept: 'text/event-stream'},
      agent,
    }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        reject(new Error(`subscribe: ${res.statusCode}`));
        return;
      }
      ++opened;
      res.setEncoding('utf8');
      let buf = '';
      let caughtUp = false;
      res.on('data', (value) => {
        const now = Date.now();
        buf += value;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const msg = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = msg.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
          if (!data) continue;
          const ev = JSON.parse(data);
          // Events committed before this subscriber connected are history, not
          // deliveries: only what follows the decision counts.
          if (ev.type === 'run.decided') caughtUp = true;
          else if (caughtUp) latencies.push(now - Date.parse(ev.at));
        }
      });
      res.on('end', () => {
        ++ended;
        resolve();
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    requests.push(req);
  });
}

const rssBefore = rssKiB();
const subs = [];
for (let i = 0; i < n; ++i) subs.push(subscribe().catch((e) => console.error(e.message)));
for (let i = 0; opened < n && i < 600; ++i) await sleep(50);
await sleep(1000);
const rssIdle = rssKiB();

const gate = await api('GET', `/runs/${run.id}/gate`);
const t0 = Date.now();
await api('POST', `/runs/${run.id}/decisions`, {digest: gate.proposal_digest, decision: 'approve'});
await Promise.race([Promise.all(subs), sleep(120000)]);
const elapsed = Date.now() - t0;
for (const r of requests) r.destroy();

latencies.sort((a, b) => a - b);
const q = (p) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] : null);
console.log(JSON.stringify({
  subscribers: n,
  opened,
  streams_ended_by_server: ended,
  deliveries: latencies.length,
  latency_ms: {p50: q(0.5), p90: q(0.9), p99: q(0.99), max: latencies[latencies.length - 1] ?? null},
  rss_kib_before: rssBefore,
  rss_kib_with_idle_streams: rssIdle,
  kib_per_idle_stream: Math.round(((rssIdle - rssBefore) / n) * 10) / 10,
  elapsed_ms: elapsed,
}));
process.exit(0);  // not after the 120 s guard timer above
