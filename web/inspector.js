// The model-call inspector (issue 25): every model call of the run, one row
// per call (each `llm.call` event: also the failed and the refused ones),
// with its model, provider, outcome, tokens, cost and latency; opening a row
// shows the prompt as sent and the reply, from the step attempt's record.
// The server stored them with the run's secrets replaced by "[secret]"
// (docs/operations.md, Secrets); the inspector marks those places and never
// has the values.

import {h, pretty} from './dom.js';
import {fmtMs} from './waterfall.js';

const SCRUBBED = '[secret]';

// Price units from micro-units, exact: 2500000 -> "2.5", 1 -> "0.000001".
export function amount(micros) {
  if (micros === null || micros === undefined) return '—';
  const neg = micros < 0;
  const v = Math.abs(micros);
  const whole = Math.floor(v / 1e6);
  const frac = String(v % 1e6).padStart(6, '0').replace(/0+$/, '');
  return `${neg ? '-' : ''}${whole}${frac ? `.${frac}` : ''}`;
}

// `text` with each "[secret]" in a <mark>, as text nodes only.
function marked(text) {
  const s = typeof text === 'string' ? text : pretty(text);
  const parts = s.split(SCRUBBED);
  const out = [];
  parts.forEach((p, i) => {
    if (i > 0) out.push(h('mark', {class: 'scrubbed', title: 'a secret, scrubbed before it was stored'}, SCRUBBED));
    out.push(p);
  });
  return out;
}

function recordOf(records, path, attempt) {
  return records.find((r) => r.path === path && r.attempt === attempt && r.output && typeof r.output === 'object');
}

function details(call, record) {
  const out = record ? record.output : null;
  const prompt = out && out.prompt;
  const reply = out ? (out.json !== undefined ? out.json : out.text) : null;
  return h('div', {class: 'call-detail'},
    prompt && prompt.system ? [h('h4', {}, 'System prompt'), h('pre', {class: 'prompt-system'}, marked(prompt.system))] : null,
    h('h4', {}, 'Prompt'),
    prompt ? h('pre', {class: 'prompt'}, marked(prompt.user)) : h('p', {class: 'help'},
      'Not recorded: the call failed before a reply, or the step ran before prompts were recorded.'),
    prompt && prompt.truncated ? h('p', {class: 'help'}, 'Truncated: the first 16 KiB are kept.') : null,
    h('h4', {}, 'Reply'),
    reply !== null && reply !== undefined ? h('pre', {class: 'reply'}, marked(reply))
      : h('p', {class: 'help'}, call.outcome === 'ok' ? 'No reply recorded.' : `No reply (${call.outcome}).`),
    out && out.tool_calls ? [h('h4', {}, 'Tool calls'), h('pre', {}, marked(out.tool_calls))] : null);
}

// The inspector for the run's events (oldest first) and step records.
export function inspector(events, records) {
  const calls = events.filter((e) => e.type === 'llm.call').map((e) => Object.assign({at: e.at, seq: e.seq}, e.data || {}));
  if (!calls.length) return h('p', {class: 'calls-none'}, 'No model calls.');
  const total = calls.reduce((t, c) => ({
    input: t.input + (c.input_tokens || 0), output: t.output + (c.output_tokens || 0),
    cost: t.cost + (c.cost_micros || 0)}), {input: 0, output: 0, cost: 0});
  const rows = [];
  for (const c of calls) {
    const record = recordOf(records, c.path, c.attempt);
    const open = h('button', {type: 'button', class: 'call-open', 'aria-expanded': 'false',
                              'aria-label': `Prompt and reply of ${c.path} attempt ${c.attempt}`}, 'Show');
    const detailRow = h('tr', {class: 'call-detail-row', hidden: true},
      h('td', {colspan: 9}, details(c, record)));
    open.addEventListener('click', () => {
      const show = detailRow.hidden;
      detailRow.hidden = !show;
      open.setAttribute('aria-expanded', String(show));
      open.textContent = show ? 'Hide' : 'Show';
    });
    rows.push(h('tr', {class: `call call-${c.outcome}`, 'data-path': c.path, 'data-attempt': c.attempt},
      h('td', {}, h('code', {}, c.path), ` #${c.attempt}`),
      h('td', {}, c.model, c.provider_model ? h('span', {class: 'help'}, ` (${c.provider_model})`) : ''),
      h('td', {}, c.provider),
      h('td', {}, h('span', {class: `badge s-${c.outcome === 'ok' ? 'succeeded' : 'failed'}`}, c.outcome),
        c.error_class ? ` ${c.error_class}` : ''),
      h('td', {class: 'num'}, c.input_tokens ?? 0),
      h('td', {class: 'num'}, c.output_tokens ?? 0),
      h('td', {class: 'num cost'}, amount(c.cost_micros ?? 0)),
      h('td', {class: 'num'}, fmtMs(c.latency_ms), c.requests > 1 ? ` (${c.requests} requests)` : ''),
      h('td', {}, open)));
    rows.push(detailRow);
  }
  return h('table', {class: 'calls'},
    h('caption', {}, `Model calls: ${calls.length}, tokens ${total.input} in / ${total.output} out, ` +
      `cost ${amount(total.cost)} (price units). Secrets show as ${SCRUBBED}.`),
    h('thead', {}, h('tr', {}, ['Step', 'Model', 'Provider', 'Outcome', 'Tokens in', 'Tokens out', 'Cost', 'Latency', '']
      .map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', {}, rows));
}
