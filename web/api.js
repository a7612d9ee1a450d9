// The HTTP API client: JSON requests with the session's bearer token, and
// Server-Sent Event streams read through fetch (EventSource cannot send an
// Authorization header), resumed with Last-Event-ID after a cut.

const TOKEN_KEY = 'runloom.token';

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// An error the API answered with: {code, message, field?} and the status.
export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.code = (body && body.code) || '';
    this.field = (body && body.field) || '';
  }
}

function headers(extra) {
  const h = Object.assign({Accept: 'application/json'}, extra || {});
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

export async function api(method, path, body) {
  const init = {method, headers: headers(body === undefined ? {} : {'Content-Type': 'application/json'})};
  if (body !== undefined) init.body = JSON.stringify(body);
  const res = await fetch(`/api/v1${path}`, init);
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch (e) {
    json = null;
  }
  if (!res.ok) throw new ApiError(res.status, json);
  return json;
}

export const get = (path) => api('GET', path);
export const post = (path, body) => api('POST', path, body === undefined ? {} : body);

// Follows an SSE stream at `path`. onEvent({id, event, data}) is called for
// each message in order; the stream is reopened with the last id seen (an id
// with no data counts, as in EventSource) after a cut or when the server
// closes it, so nothing is lost or repeated. Returns a function that stops it.
// onState('live' | 'reconnecting' | 'ended') reports the connection.
// A run's stream is over only when the server says so: its last bytes are the
// comment `: end` (docs/openapi.yaml), sent when the run has finished and
// everything was sent. A close without it (a graceful restart of `serve`) is
// a cut. A stream that is never meant to end (opts.endless, e.g. /events) is
// reopened in every case.
export function follow(path, onEvent, onState, opts) {
  const endless = !!(opts && opts.endless);
  let lastId = null;
  let stopped = false;
  let controller = null;
  const state = onState || (() => {});

  // Reads one connection; true when the server ended the stream (`: end`).
  // `got` is set once a message arrives (the backoff starts over).
  async function once(got) {
    controller = new AbortController();
    const h = headers({Accept: 'text/event-stream'});
    if (lastId !== null) h['Last-Event-ID'] = lastId;
    const res = await fetch(`/api/v1${path}`, {headers: h, signal: controller.signal});
    if (!res.ok) {
      let body = null;
      try {
        body = await res.json();
      } catch (e) {
        body = null;
      }
      throw new ApiError(res.status, body);
    }
    state('live');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let msg = {data: []};
    let end = false;
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return end;
      buf += value;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        let line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (msg.id !== undefined) lastId = msg.id;
          if (msg.data.length) {
            got.message = true;
            let data = msg.data.join('\n');
            try {
              data = JSON.parse(data);
            } catch (e) {
              // not JSON: handed over as text
            }
            onEvent({id: msg.id, event: msg.event || 'message', data});
          }
          msg = {data: []};
          continue;
        }
        if (line === ': end') end = true;  // the run's stream is over
        if (line.startsWith(':')) continue;  // keep-alive or end comment
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'data') msg.data.push(value);
        else if (field === 'id') msg.id = value;
        else if (field === 'event') msg.event = value;
      }
    }
  }

  (async () => {
    let delay = 500;
    while (!stopped) {
      const got = {message: false};
      try {
        const end = await once(got);
        if (stopped) break;
        if (end && !endless) {
          state('ended');
          return;
        }
      } catch (e) {
        if (stopped) return;
        if (e instanceof ApiError && e.status >= 400 && e.status < 500) {
          state('ended', e);
          return;
        }
      }
      // A cut, or a close without `: end`: reconnect with Last-Event-ID.
      if (got.message) delay = 500;
      state('reconnecting');
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 5000);
    }
  })();

  return () => {
    stopped = true;
    if (controller) controller.abort();
  };
}
