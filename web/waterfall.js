// The run's timeline as a waterfall (issue 25): one bar per step attempt,
// read from the run's events. Each bar is the attempt's queue delay (from
// the run's last step of progress before it, e.g. the run taken by an
// executor, the step before finishing, a failed attempt's retry wait, a
// decision, until the attempt started) then its duration, coloured by how it
// ended; retries are rows of their own. Lease takeovers (run.lease_expired,
// then run.started by the next executor) are marked across every row, and an
// attempt its executor never finished ends at the lease's expiry.

import {h} from './dom.js';

// The events that let a step start: the moment one of them happened is when
// the next attempt could begin.
const PROGRESS = new Set(['run.created', 'run.started', 'run.resumed', 'run.decided', 'signal.received',
  'step.succeeded', 'step.failed', 'step.skipped', 'step.reused']);

const ms = (iso) => new Date(iso).getTime();

export function fmtMs(n) {
  if (n === null || n === undefined || isNaN(n)) return '—';
  if (n < 1000) return `${Math.round(n)} ms`;
  if (n < 60000) return `${(n / 1000).toFixed(n < 10000 ? 2 : 1)} s`;
  return `${Math.floor(n / 60000)} min ${Math.round((n % 60000) / 1000)} s`;
}

// From events (oldest first) to {start, end, attempts, takeovers}: times in
// unix ms; `now` ends what is still running.
export function layout(events, now) {
  const attempts = [];
  const open = new Map();  // path#attempt -> attempt
  const takeovers = [];
  let ready = null;
  let expired = null;  // the lease_expired event awaiting its takeover
  let lastOwner = '';
  let start = null;
  let end = null;
  for (const ev of events) {
    const t = ms(ev.at);
    const d = ev.data || {};
    if (start === null) start = t;
    end = end === null ? t : Math.max(end, t);
    if (ev.type === 'step.started') {
      const a = {path: d.path, attempt: d.attempt || 1, kind: d.kind || '', queuedAt: ready === null ? t : ready,
                 startedAt: t, endedAt: null, outcome: 'running', detail: ''};
      attempts.push(a);
      open.set(`${a.path}#${a.attempt}`, a);
    } else if (ev.type === 'step.succeeded' || ev.type === 'step.failed') {
      const a = open.get(`${d.path}#${d.attempt || 1}`);
      if (a) {
        open.delete(`${d.path}#${d.attempt || 1}`);
        a.endedAt = t;
        if (ev.type === 'step.succeeded') {
          a.outcome = 'succeeded';
        } else {
          a.outcome = 'failed';
          a.detail = `${d.error_class || 'error'}${d.will_retry ? `, retry${d.retry_in_ms !== undefined ? ` in ${fmtMs(d.retry_in_ms)}` : ''}` : ''}`;
          a.error = d.error || '';
        }
      }
    } else if (ev.type === 'run.lease_expired') {
      expired = {at: t, owner: d.lease_owner || lastOwner};
      for (const a of open.values()) {
        a.endedAt = t;
        a.outcome = 'interrupted';
        a.detail = `lease of ${expired.owner || 'its executor'} expired`;
      }
      open.clear();
    } else if (ev.type === 'run.finished') {
      for (const a of open.values()) {
        a.endedAt = t;
        a.outcome = 'stopped';
        a.detail = `the run ended ${d.status || ''}`.trim();
      }
      open.clear();
    } else if (ev.type === 'run.started') {
      if (expired) {
        takeovers.push({expiredAt: expired.at, at: t, from: expired.owner, to: d.lease_owner || '',
                        attempt: d.attempt});
        expired = null;
      }
      lastOwner = d.lease_owner || lastOwner;
    }
    if (PROGRESS.has(ev.type)) ready = t;
  }
  for (const a of open.values()) {
    a.endedAt = now;
    a.outcome = 'running';
  }
  if (end === null || now > end && open.size) end = now;
  return {start, end, attempts, takeovers};
}

function pct(t, l) {
  const span = Math.max(1, l.end - l.start);
  return `${(((t - l.start) / span) * 100).toFixed(3)}%`;
}

function width(a, b, l) {
  const span = Math.max(1, l.end - l.start);
  return `max(2px, ${(((b - a) / span) * 100).toFixed(3)}%)`;
}

// The waterfall's element for `events` (GET /runs/{id}/events, oldest first).
export function waterfall(events, now) {
  const l = layout(events, now === undefined ? Date.now() : now);
  if (!l.attempts.length) {
    return h('p', {class: 'waterfall-none'}, 'No step has started yet.');
  }
  const rows = l.attempts.map((a) => {
    const queued = a.startedAt - a.queuedAt;
    const ran = a.endedAt - a.startedAt;
    const label = `${a.path} #${a.attempt}`;
    const text = `queued ${fmtMs(queued)} · ran ${fmtMs(ran)} · ${a.outcome}${a.detail ? ` (${a.detail})` : ''}`;
    return h('div', {class: `wf-row wf-${a.outcome}`, role: 'row', 'data-path': a.path, 'data-attempt': a.attempt,
                     'data-outcome': a.outcome, 'data-queued-ms': queued, 'data-ran-ms': ran},
      h('span', {class: 'wf-label', role: 'rowheader', title: a.kind},
        h('code', {}, a.path), a.attempt > 1 ? h('span', {class: 'wf-retry'}, ` retry ${a.attempt - 1}`) : ` #1`),
      h('span', {class: 'wf-track', role: 'cell', title: a.error || text},
        h('span', {class: 'wf-queue', style: `left:${pct(a.queuedAt, l)};width:${width(a.queuedAt, a.startedAt, l)}`}),
        h('span', {class: 'wf-bar', style: `left:${pct(a.startedAt, l)};width:${width(a.startedAt, a.endedAt, l)}`}),
        l.takeovers.map((k) => h('span', {class: 'wf-takeover-line', style: `left:${pct(k.at, l)}`}))),
      h('span', {class: 'wf-text', role: 'cell'}, text, ' ', h('span', {class: 'sr-only'}, label)));
  });
  const legend = h('p', {class: 'wf-legend'},
    h('span', {class: 'wf-key wf-key-queue'}), ' queue delay ',
    h('span', {class: 'wf-key wf-key-ok'}), ' succeeded ',
    h('span', {class: 'wf-key wf-key-failed'}), ' failed ',
    h('span', {class: 'wf-key wf-key-interrupted'}), ' interrupted ',
    h('span', {class: 'wf-key wf-key-takeover'}), ' lease takeover',
    ` · ${fmtMs(l.end - l.start)} from the run's first event`);
  const takeovers = l.takeovers.length
    ? h('ul', {class: 'wf-takeovers'}, l.takeovers.map((k) => h('li', {class: 'wf-takeover'},
      `Lease takeover: ${k.from || 'an executor'}'s lease expired; ${k.to || 'another executor'} took the run `,
      `${fmtMs(k.at - k.expiredAt)} later (attempt ${k.attempt}).`)))
    : null;
  return h('div', {class: 'waterfall', role: 'table', 'aria-label': 'Step attempts over time'}, legend, rows, takeovers);
}
