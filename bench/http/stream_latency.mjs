// Streaming latency benchmark (issue 24, acceptance 3): a scripted
// OpenAI-compatible provider (this script) answers a `stream: true` llm step
// with CHUNKS SSE chunks INTERVAL ms apart; an SSE subscriber (this script
// too) follows the run's events on `runloom serve`. Both sides take their
// times from this process's monotonic clock, so the figures are exact:
//   first_delta_ms    the first chunk's send -> the first llm.delta received
//   chunk_p50/p99_ms  each chunk's send -> the delta carrying its text
// and `stored_equals_streamed`: the step's recorded text equals the deltas
// concatenated.
//
//   node bench/http/stream_latency.mjs --url http://127.0.0.1:8080 --token TOKEN \
//        --provider-port 18090 [--chunks 200] [--interval 10]
//
// The caller starts `runloom serve` with a config whose model `streamer`
// goes to provider kind openai at http://127.0.0.1:PROVIDER_PORT/v1, and
// registers bench/http/stream_bench.yaml (bench/http/run.sh stream does).
// Prints one JSON object.

import http from 'node:http';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const base = args.url;
const tok = args.token;
const providerPort = Number(args['provider-port']);
const chunks = Number(args.chunks || 200);
const interval = Number(args.interval || 10);
if (!base || !tok || !providerPort) {
  console.error('usage: stream_latency.mjs --url URL --token TOKEN --provider-port PORT ' +
                '[--chunks N] [--interval MS]');
  process.exit(2);
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Piece i of the reply; unique, so a delta's text names the chunk it holds.
const piece = (i) => `w${i} `;
const sentAt = [];
let subscribed;
const subscriberReady = new Promise((r) => { subscribed = r; });

const provider = http.createServer((req, res) => {
  let body = '';
  req.on('data', (d) => { body += d; });
  req.on('end', async () => {
    const request = JSON.parse(body);
    if (!request.stream) {
      res.writeHead(400, {'content-type': 'application/json'});
      res.end(JSON.stringify({error: {message: 'this provider only streams'}}));
      return;
    }
    await subscriberReady;  // the subscriber is on before the first chunk goes
    res.writeHead(200, {'content-type': 'text/event-stream'});
    for (let i = 0; i < chunks; ++i) {
      sentAt[i] = nowMs();
      res.write(`data: ${JSON.stringify({model: 'scripted', choices: [{index: 0, delta: {content: piece(i)}}]})}\n\n`);
      await sleep(interval);
    }
    res.write(`data: ${JSON.stringify({model: 'scripted', choices: [], usage: {prompt_tokens: 10, completion_tokens: chunks}})}\n\n`);
    res.end('data: [DONE]\n\n');
  });
});
await new Promise((r) => provider.listen(providerPort, '127.0.0.1', r));

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

const run = await api('POST', '/runs', {workflow: 'stream_bench', inputs: {}});
let streamed = '';
const receivedAt = [];  // chunk index -> when its text arrived
let firstDeltaAt = null;
await new Promise((resolve, reject) => {
  const req = http.get(`${base}/api/v1/runs/${run.id}/events`, {
    headers: {Authorization: `Bearer ${tok}`, Accept: 'text/event-stream'},
  }, (res) => {
    if (res.statusCode !== 200) {
      reject(new Error(`subscribe: ${res.statusCode}`));
      return;
    }
    subscribed();
    res.setEncoding('utf8');
    let buf = '';
    res.on('data', (value) => {
      const now = nowMs();
      buf += value;
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const event = (block.match(/^event: (.*)$/m) || [])[1];
        const data = (block.match(/^data: (.*)$/m) || [])[1];
        if (event !== 'llm.delta' || !data) continue;
        const d = JSON.parse(data);
        if (firstDeltaAt === null) firstDeltaAt = now;
        streamed += d.text;
        for (const m of d.text.matchAll(/w(\d+) /g)) receivedAt[Number(m[1])] = now;
      }
    });
    res.on('end', resolve);
  });
  req.on('error', reject);
});

const steps = await api('GET', `/runs/${run.id}/steps`);
const records = Array.isArray(steps) ? steps : steps.steps;
const stored = records.find((s) => s.path === 'talk');
const lat = [];
for (let i = 0; i < chunks; ++i) {
  if (receivedAt[i] !== undefined) lat.push(receivedAt[i] - sentAt[i]);
}
lat.sort((a, b) => a - b);
const q = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : null);
const round = (x) => (x === null ? null : Math.round(x * 100) / 100);
console.log(JSON.stringify({
  chunks,
  interval_ms: interval,
  run_status: (await api('GET', `/runs/${run.id}`)).status,
  first_delta_ms: round(firstDeltaAt === null ? null : firstDeltaAt - sentAt[0]),
  chunks_seen: lat.length,
  chunk_p50_ms: round(q(0.5)),
  chunk_p99_ms: round(q(0.99)),
  chunk_max_ms: round(lat.length ? lat[lat.length - 1] : null),
  stored_equals_streamed: !!stored && stored.output && stored.output.text === streamed,
}));
provider.close();
