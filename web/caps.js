// LLM concurrency caps (issue 25): each provider's cap in force, this
// process's calls in flight, and the cap's recent changes with the limiters
// each was the minimum of, from GET /api/v1/llm/caps. The history is the
// serving process's own, in memory and bounded (history_limit per cap): a
// restart starts it again. Refreshed every 5 s.

import {get} from './api.js';
import {errorBox, h, replace, svg, when} from './dom.js';

const kRefreshMs = 5000;

// A step line of the cap over its history, newest at the right.
function sparkline(history, cap) {
  const W = 240;
  const H = 40;
  const points = history.length ? history.map((d) => d.cap) : [cap];
  points.push(cap);
  const max = Math.max(...points, 1);
  const step = W / Math.max(1, points.length - 1);
  let d = '';
  points.forEach((v, i) => {
    const x = (i * step).toFixed(1);
    const y = (H - 2 - (v / max) * (H - 4)).toFixed(1);
    d += i === 0 ? `M${x},${y}` : `H${x}V${y}`;
  });
  return svg('svg', {class: 'spark', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img',
                     'aria-label': `cap over its last ${history.length} changes, now ${cap}`},
    svg('path', {d, fill: 'none', stroke: 'currentColor', 'stroke-width': 2}));
}

function capSection(c) {
  const history = c.history || [];
  return h('section', {class: 'cap', 'data-provider': c.provider, 'aria-labelledby': `cap-${c.provider}`},
    h('h2', {id: `cap-${c.provider}`}, h('code', {}, c.provider)),
    h('p', {class: 'cap-now'}, `cap ${c.cap} · ${c.in_flight} in flight here `, sparkline(history, c.cap)),
    history.length ? h('table', {class: 'cap-history'},
      h('caption', {}, `Changes this process saw (newest first, at most ${history.length})`),
      h('thead', {}, h('tr', {}, ['At', 'Cap', 'Limiters'].map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', {}, [...history].reverse().map((d) => h('tr', {},
        h('td', {}, h('time', {datetime: d.at}, when(d.at))), h('td', {class: 'num'}, d.cap),
        h('td', {}, h('code', {}, d.reason))))))
      : h('p', {class: 'help'}, 'No change seen by this process yet.'));
}

export async function capsPage(ctx) {
  const box = h('div');
  async function load() {
    const list = await get('/llm/caps');
    const caps = list.caps || [];
    replace(box,
      h('p', {class: 'help'}, `Per serving process, in memory: the last ${list.history_limit} changes of each cap. ` +
        'A server without executors runs no controllers and shows none.'),
      caps.length ? caps.map(capSection) : h('p', {}, 'No LLM concurrency cap runs in this process.'));
  }
  replace(ctx.main, h('h1', {}, 'LLM caps'), box);
  await load();
  const timer = setInterval(() => load().catch((e) => replace(box, errorBox(e))), kRefreshMs);
  return () => clearInterval(timer);
}
