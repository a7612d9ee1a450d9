// runloom-client: a client of the runloom HTTP API (docs/openapi.yaml) for
// Node 18+ (and other runtimes with fetch and web streams). No dependencies.
// Plain ES module; its types are in index.d.ts.
//
// Every request has a timeout; every response body and every SSE line and
// event is read up to a size limit (past it: ResponseTooLarge, never
// unbounded memory). The token is kept in a private field: it is sent in the
// Authorization header and appears in no message, inspect output or JSON.

const DEFAULTS = {
  timeoutMs: 30_000,
  maxBodyBytes: 16 * 1024 * 1024,
  maxLineBytes: 4 * 1024 * 1024,
  maxEventBytes: 16 * 1024 * 1024,
  streamIdleTimeoutMs: 45_000, // the server sends `: keep-alive` every 15 s
  reconnectTimeoutMs: 60_000,
};

/** Every error this client throws. */
export class RunloomError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The server answered with an error: HTTP status and its {code, message, field}. */
export class ApiError extends RunloomError {
  constructor(status, code, message, field = '', method = '', path = '') {
    const where = method ? `${method} ${path}: ` : '';
    super(`${where}HTTP ${status} ${code || 'error'}: ${message}${field ? ` (field ${field})` : ''}`);
    this.status = status;
    this.code = code;
    this.serverMessage = message;
    this.field = field;
    this.method = method;
    this.path = path;
  }
}

/** No answer: connection refused or reset, a timeout. */
export class TransportError extends RunloomError {}

/** The answer is not what the API promises (not JSON, not an event stream). */
export class ProtocolError extends RunloomError {}

/** A response body, SSE line or SSE event over the client's limit. */
export class ResponseTooLarge extends ProtocolError {}

const enc = (s) => encodeURIComponent(s);

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

// An RFC 3339 time for a query: a string as given, a Date in UTC.
function time(t) {
  return t instanceof Date ? t.toISOString() : t;
}

function describe(e) {
  const cause = e && e.cause;
  const detail = cause ? ` (${cause.code || cause.name || ''}${cause.message ? `: ${cause.message}` : ''})` : '';
  return `${(e && e.message) || String(e)}${detail}`;
}

// An AbortController that fires after `ms` or when `outer` fires;
// `timedOut()` says which. `clear()` removes the timer and the listener.
function deadline(ms, outer) {
  const ac = new AbortController();
  let timedOut = false;
  let timer = null;
  const arm = (t) => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timedOut = true;
      ac.abort(new TransportError(`timed out after ${t} ms`));
    }, t);
  };
  arm(ms);
  const onOuter = () => ac.abort(outer.reason);
  if (outer) {
    if (outer.aborted) onOuter();
    else outer.addEventListener('abort', onOuter, {once: true});
  }
  return {
    signal: ac.signal,
    timedOut: () => timedOut,
    rearm: arm,
    clear() {
      if (timer) clearTimeout(timer);
      if (outer) outer.removeEventListener('abort', onOuter);
    },
    abort: (why) => ac.abort(why),
  };
}

// Reads a whole body, at most `max` bytes.
async function readBounded(res, max, what) {
  const length = Number(res.headers.get('content-length'));
  if (Number.isFinite(length) && length > max) {
    await res.body?.cancel().catch(() => {});
    throw new ResponseTooLarge(`${what}: the answer is ${length} bytes, over ${max}`);
  }
  if (!res.body) return new Uint8Array();
  const reader = res.body.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      throw new ResponseTooLarge(`${what}: the answer is over ${max} bytes`);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

function apiError(status, bytes, method, path) {
  const text = new TextDecoder().decode(bytes);
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (body && typeof body === 'object') {
    return new ApiError(status, String(body.code || ''), String(body.message || ''), String(body.field || ''), method,
      path);
  }
  return new ApiError(status, '', text.slice(0, 200).trim() || `HTTP ${status}`, '', method, path);
}

// The SSE framing (HTML Living Standard, "Server-sent events"), bounded.
class SseParser {
  constructor(maxEventBytes, lastId) {
    this.max = maxEventBytes;
    this.lastId = lastId;
    this.ended = false;
    this.reset();
  }

  reset() {
    this.data = [];
    this.size = 0;
    this.event = '';
    this.id = undefined;
  }

  // One line without its end; a message when a blank line completes one.
  line(text) {
    if (text === '') {
      let msg = null;
      if (this.id !== undefined) this.lastId = this.id;
      if (this.data.length) {
        const raw = this.data.join('\n');
        let data;
        try {
          data = JSON.parse(raw);
        } catch {
          data = raw;
        }
        const id = this.id === undefined ? null : this.id;
        msg = {event: this.event || 'message', id, seq: id !== null && /^\d+$/.test(id) ? Number(id) : null, data};
      }
      this.reset();
      return msg;
    }
    if (text.startsWith(':')) {
      if (text === ': end') this.ended = true;
      return null;
    }
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') {
      this.size += value.length + 1;
      if (this.size > this.max) throw new ResponseTooLarge(`an SSE event is over ${this.max} bytes`);
      this.data.push(value);
    } else if (field === 'event') {
      this.event = value;
    } else if (field === 'id' && !value.includes('\0')) {
      this.id = value;
    }
    return null;
  }
}

const sleep = (ms, signal) => new Promise((resolve, reject) => {
  if (signal?.aborted) return reject(signal.reason);
  const t = setTimeout(() => {
    signal?.removeEventListener('abort', onAbort);
    resolve();
  }, ms);
  const onAbort = () => {
    clearTimeout(t);
    reject(signal.reason);
  };
  signal?.addEventListener('abort', onAbort, {once: true});
});

/** A client of one runloom server's HTTP API (/api/v1). */
export class RunloomClient {
  #token;
  #fetch;

  /**
   * @param {string} baseUrl e.g. "http://127.0.0.1:8080"
   * @param {import('./index.js').ClientOptions} [options]
   */
  constructor(baseUrl, options = {}) {
    const u = new URL(baseUrl);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TypeError('baseUrl must be http(s)://host[:port]');
    if (u.username || u.password) throw new TypeError('baseUrl must not carry credentials; pass options.token');
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.#token = options.token || null;
    this.#fetch = options.fetch || globalThis.fetch;
    if (typeof this.#fetch !== 'function') throw new TypeError('no fetch: Node 18+ or options.fetch');
    for (const k of Object.keys(DEFAULTS)) this[k] = options[k] ?? DEFAULTS[k];
  }

  toJSON() {
    return {baseUrl: this.baseUrl, token: this.#token ? '<hidden>' : null};
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    return `RunloomClient(${JSON.stringify(this.baseUrl)}, ${this.#token ? 'token=<hidden>' : 'no token'})`;
  }

  #headers(accept, extra) {
    const h = {Accept: accept, ...(extra || {})};
    if (this.#token) h.Authorization = `Bearer ${this.#token}`;
    return h;
  }

  /**
   * One JSON request to `path` under the base URL (e.g. "/api/v1/me"). Returns
   * the parsed answer (null when empty). Throws ApiError for an HTTP error,
   * TransportError when no answer came within timeoutMs, ResponseTooLarge or
   * ProtocolError for a bad answer.
   */
  async request(method, path, body, opts = {}) {
    const what = `${method} ${path}`;
    const headers = this.#headers('application/json', opts.headers);
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const d = deadline(this.timeoutMs, opts.signal);
    try {
      let res;
      let bytes;
      try {
        res = await this.#fetch(`${this.baseUrl}${path}${query(opts.query)}`, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: d.signal,
          redirect: 'manual',
        });
        bytes = await readBounded(res, this.maxBodyBytes, what);
      } catch (e) {
        if (d.timedOut()) throw new TransportError(`${what}: timed out after ${this.timeoutMs} ms`);
        if (e instanceof RunloomError) throw e;
        if (opts.signal?.aborted) throw opts.signal.reason;
        throw new TransportError(`${what}: ${describe(e)}`);
      }
      if (res.status >= 400) throw apiError(res.status, bytes, method, path);
      // Redirects are not followed (redirect: 'manual'): the token goes nowhere else.
      if (res.status < 200 || res.status >= 300) throw new ProtocolError(`${what}: unexpected HTTP ${res.status}`);
      if (!bytes.byteLength) return null;
      try {
        return JSON.parse(new TextDecoder().decode(bytes));
      } catch {
        throw new ProtocolError(`${what}: the answer is not JSON`);
      }
    } finally {
      d.clear();
    }
  }

  // ------------------------------------------------------------- health

  healthz(opts) {
    return this.request('GET', '/healthz', undefined, opts);
  }

  readyz(opts) {
    return this.request('GET', '/readyz', undefined, opts);
  }

  /** The token's principal: {name, role}. */
  me(opts) {
    return this.request('GET', '/api/v1/me', undefined, opts);
  }

  // --------------------------------------------------------------- runs

  /**
   * Starts a run of a catalog workflow (operator). The same idempotencyKey
   * (per workflow) answers the first run again and writes nothing.
   */
  startRun(workflow, inputs = {}, opts = {}) {
    const body = {workflow, inputs};
    if (opts.idempotencyKey !== undefined) body.idempotency_key = opts.idempotencyKey;
    if (opts.version !== undefined) body.version = opts.version;
    if (opts.priority !== undefined) body.priority = opts.priority;
    if (opts.budgetMicros !== undefined) body.budget_micros = opts.budgetMicros;
    const headers = opts.traceparent ? {traceparent: opts.traceparent} : undefined;
    return this.request('POST', '/api/v1/runs', body, {headers, signal: opts.signal});
  }

  /** One run, with its step_counts. */
  getRun(runId, opts) {
    return this.request('GET', `/api/v1/runs/${enc(runId)}`, undefined, opts);
  }

  /**
   * One page of runs, newest first: {runs, next_cursor} ("" on the last page).
   * Filters: status, workflow, parent; tenant (the run's budget tenant),
   * inputId (the idempotency key, or any top-level input with this string or
   * integer value), createdAfter (inclusive) / createdBefore (exclusive):
   * RFC 3339 strings or Dates.
   */
  async listRuns(filter = {}, opts = {}) {
    const {status, workflow, parent, tenant, inputId, createdAfter, createdBefore, limit, cursor} = filter;
    const got = await this.request('GET', '/api/v1/runs', undefined, {
      ...opts,
      query: {
        status, workflow, parent, tenant, input_id: inputId,
        created_after: time(createdAfter), created_before: time(createdBefore), limit, cursor,
      },
    });
    return {runs: got.runs || [], next_cursor: got.next_cursor || ''};
  }

  /** Every run matching the filter, newest first, page by page. */
  async *iterRuns(filter = {}, opts = {}) {
    let cursor = '';
    for (;;) {
      const page = await this.listRuns({...filter, limit: filter.pageSize, cursor}, opts);
      yield* page.runs;
      if (!page.next_cursor) return;
      cursor = page.next_cursor;
    }
  }

  async steps(runId, opts = {}) {
    const got = await this.request('GET', `/api/v1/runs/${enc(runId)}/steps`, undefined,
      {...opts, query: {revision: opts.revision}});
    return got.steps || [];
  }

  async writes(runId, opts) {
    return (await this.request('GET', `/api/v1/runs/${enc(runId)}/writes`, undefined, opts)).writes || [];
  }

  /** Stored events with a seq after `after` (at most `limit`, server max 1000). */
  async events(runId, opts = {}) {
    const got = await this.request('GET', `/api/v1/runs/${enc(runId)}/events`, undefined,
      {...opts, query: {after: opts.after, limit: opts.limit}});
    return got.events || [];
  }

  cancel(runId, opts) {
    return this.request('POST', `/api/v1/runs/${enc(runId)}/cancel`, {}, opts);
  }

  rerun(runId, fromPhase, opts = {}) {
    const body = {from_phase: fromPhase};
    if (opts.feedback !== undefined) body.feedback = opts.feedback;
    return this.request('POST', `/api/v1/runs/${enc(runId)}/rerun`, body, opts);
  }

  // -------------------------------------------------------------- gates

  /** The gate a paused run waits on; null when it waits on none. */
  async gate(runId, opts) {
    try {
      return await this.request('GET', `/api/v1/runs/${enc(runId)}/gate`, undefined, opts);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404 && e.code === 'no_pending_gate') return null;
      throw e;
    }
  }

  /**
   * Decides the gate whose proposal has `digest` (approver). A 409
   * (stale_digest, not_paused) records nothing: read gate() again.
   */
  decide(runId, digest, decision, opts = {}) {
    const body = {digest, decision};
    if (opts.edited !== undefined) body.edited = opts.edited;
    if (opts.feedback !== undefined) body.feedback = opts.feedback;
    if (opts.fromPhase !== undefined) body.from_phase = opts.fromPhase;
    return this.request('POST', `/api/v1/runs/${enc(runId)}/decisions`, body, opts);
  }

  // ------------------------------------------------------------ signals

  /**
   * Sends a signal (operator). `created` is false when the idempotency key
   * matched a signal kept before; `resolved` true when it woke the run.
   */
  signal(runId, name, payload = null, opts = {}) {
    const body = {payload};
    if (opts.idempotencyKey !== undefined) body.idempotency_key = opts.idempotencyKey;
    return this.request('POST', `/api/v1/runs/${enc(runId)}/signals/${enc(name)}`, body, opts);
  }

  async signals(runId, opts) {
    return (await this.request('GET', `/api/v1/runs/${enc(runId)}/signals`, undefined, opts)).signals || [];
  }

  // ---------------------------------------------------------- schedules

  createSchedule(id, workflow, cron, opts = {}) {
    const body = {id, workflow, cron};
    if (opts.timezone !== undefined) body.timezone = opts.timezone;
    if (opts.inputs !== undefined) body.inputs = opts.inputs;
    if (opts.overlap !== undefined) body.overlap = opts.overlap;
    if (opts.catchUp !== undefined) body.catch_up = opts.catchUp;
    return this.request('POST', '/api/v1/schedules', body, opts);
  }

  getSchedule(id, opts) {
    return this.request('GET', `/api/v1/schedules/${enc(id)}`, undefined, opts);
  }

  async listSchedules(opts = {}) {
    const got = await this.request('GET', '/api/v1/schedules', undefined,
      {...opts, query: {after: opts.after, limit: opts.limit}});
    return got.schedules || [];
  }

  pauseSchedule(id, opts) {
    return this.request('POST', `/api/v1/schedules/${enc(id)}/pause`, {}, opts);
  }

  resumeSchedule(id, opts) {
    return this.request('POST', `/api/v1/schedules/${enc(id)}/resume`, {}, opts);
  }

  async deleteSchedule(id, opts) {
    await this.request('DELETE', `/api/v1/schedules/${enc(id)}`, undefined, opts);
  }

  // ---------------------------------------------------------- workflows

  /** Registers a workflow from YAML (admin); the same definition again is a no-op. */
  registerWorkflow(yaml, opts) {
    return this.request('POST', '/api/v1/workflows', {yaml}, opts);
  }

  async workflows(opts) {
    return (await this.request('GET', '/api/v1/workflows', undefined, opts)).workflows || [];
  }

  workflow(name, opts = {}) {
    return this.request('GET', `/api/v1/workflows/${enc(name)}`, undefined, {...opts, query: {version: opts.version}});
  }

  // --------------------------------------------------- budgets and caps

  /** Every tenant's budget row, by name (only opts.tenant's when given: [] if it has none). */
  async budgets(opts = {}) {
    const got = await this.request('GET', '/api/v1/budgets', undefined, {...opts, query: {tenant: opts.tenant}});
    return got.budgets || [];
  }

  /**
   * The llm concurrency caps the serving process runs, each with its newest
   * opts.history changes (default and most: 64; this process's, in memory).
   * Empty from a `serve --no-executors`.
   */
  async llmCaps(opts = {}) {
    const got = await this.request('GET', '/api/v1/llm/caps', undefined,
      {...opts, query: {provider: opts.provider, history: opts.history}});
    return got.caps || [];
  }

  // ------------------------------------------------------------ streams

  /**
   * A run's events as they happen, until the run is finished: an async
   * iterable of {event, id, seq, data}. The stored events after seq `after`
   * come first, in order, then the new ones; it ends when the server ends the
   * stream (`: end`: the run is terminal). A stream closed without `: end` (a
   * restart of `serve`, a dropped connection, no byte for
   * streamIdleTimeoutMs) is reopened with Last-Event-ID, so every seq comes
   * exactly once. `live: true` also yields the streamed model text
   * (llm.delta / llm.reset / llm.end, id null). Stop early with `break` or
   * opts.signal.
   */
  async *follow(runId, opts = {}) {
    const path = `/api/v1/runs/${enc(runId)}/events`;
    const start = opts.after ? String(opts.after) : null;
    for await (const msg of this.#stream(path, start, false, opts.signal)) {
      if (msg.id !== null || opts.live) yield msg;
    }
  }

  /**
   * Every run's status changes (`run`: {run_id, status, last_event_seq};
   * `reset`: re-read the runs). Never ends by itself; reconnects with
   * Last-Event-ID. Stop with `break` or opts.signal.
   */
  watchRuns(opts = {}) {
    const start = opts.after !== undefined ? String(opts.after) : null;
    return this.#stream('/api/v1/events', start, true, opts.signal);
  }

  async *#stream(path, lastId, endless, signal) {
    let delay = 200;
    let lastProgress = Date.now();
    for (;;) {
      const parser = new SseParser(this.maxEventBytes, lastId);
      const state = {opened: false};
      let error;
      try {
        for await (const msg of this.#streamOnce(path, parser, state, signal)) {
          lastProgress = Date.now();
          delay = 200;
          yield msg;
        }
        if (parser.ended && !endless) return;
        error = new TransportError(`GET ${path}: the stream was cut`);
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        if (e instanceof ApiError && e.status < 500) throw e;
        if (!(e instanceof ApiError || e instanceof TransportError)) throw e;
        error = e;
      }
      lastId = parser.lastId;
      if (state.opened) lastProgress = Math.max(lastProgress, Date.now());
      // A cut: reconnect after a growing, jittered pause, with the last id.
      if (Date.now() - lastProgress > this.reconnectTimeoutMs) throw error;
      await sleep(delay * (0.5 + Math.random() / 2), signal);
      delay = Math.min(delay * 2, 5000);
    }
  }

  async *#streamOnce(path, parser, state, signal) {
    const headers = this.#headers('text/event-stream', {'Cache-Control': 'no-cache'});
    if (parser.lastId) headers['Last-Event-ID'] = parser.lastId;
    const d = deadline(this.timeoutMs, signal);
    let reader = null;
    try {
      let res;
      try {
        res = await this.#fetch(`${this.baseUrl}${path}`, {headers, signal: d.signal, redirect: 'manual'});
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        throw new TransportError(`GET ${path}: ${d.timedOut() ? `timed out after ${this.timeoutMs} ms` : describe(e)}`);
      }
      if (res.status >= 400) {
        let bytes = new Uint8Array();
        try {
          bytes = await readBounded(res, this.maxBodyBytes, `GET ${path}`);
        } catch {
          // the status says enough
        }
        throw apiError(res.status, bytes, 'GET', path);
      }
      if (res.status !== 200 || !(res.headers.get('content-type') || '').startsWith('text/event-stream') || !res.body) {
        await res.body?.cancel().catch(() => {});
        throw new ProtocolError(`GET ${path}: not an event stream (HTTP ${res.status})`);
      }
      state.opened = true;
      d.rearm(this.streamIdleTimeoutMs);
      reader = res.body.getReader();
      const decoder = new TextDecoder();
      let pending = []; // the bytes of the line being read, before its \n
      let pendingLen = 0;
      for (;;) {
        let chunk;
        try {
          const r = await reader.read();
          if (r.done) return; // closed: after `: end`, or cut (a partial message is dropped)
          chunk = r.value;
        } catch (e) {
          if (signal?.aborted) throw signal.reason;
          throw new TransportError(`GET ${path}: ${d.timedOut() ? `no byte for ${this.streamIdleTimeoutMs} ms` : describe(e)}`);
        }
        d.rearm(this.streamIdleTimeoutMs);
        let from = 0;
        for (;;) {
          const nl = chunk.indexOf(10, from);
          const end = nl < 0 ? chunk.byteLength : nl;
          if (pendingLen + (end - from) > this.maxLineBytes) {
            throw new ResponseTooLarge(`GET ${path}: an SSE line is over ${this.maxLineBytes} bytes`);
          }
          if (nl < 0) {
            if (end > from) {
              pending.push(chunk.subarray(from));
              pendingLen += end - from;
            }
            break;
          }
          let lineBytes = chunk.subarray(from, nl);
          if (pending.length) {
            const all = new Uint8Array(pendingLen + lineBytes.byteLength);
            let at = 0;
            for (const p of pending) {
              all.set(p, at);
              at += p.byteLength;
            }
            all.set(lineBytes, at);
            lineBytes = all;
            pending = [];
            pendingLen = 0;
          }
          let text = decoder.decode(lineBytes);
          if (text.endsWith('\r')) text = text.slice(0, -1);
          const msg = parser.line(text);
          if (msg) yield msg;
          if (parser.ended) return; // `: end` is the stream's last bytes: no need to wait for the close
          from = nl + 1;
        }
      }
    } finally {
      d.clear();
      if (reader) await reader.cancel().catch(() => {});
      else d.abort();
    }
  }
}

export default RunloomClient;
