// A run's graph, drawn from its workflow's canonical definition: top-level
// steps in columns by dependency depth, edges from `needs`, each node coloured
// by its latest step record. A loop or parallel step lists its inner steps.

import {svg} from './dom.js';

const W = 150;
const H = 46;
const GAP_X = 50;
const GAP_Y = 18;

// A step's dependencies: `needs` as written, else the sibling before it.
function depsOf(steps, i) {
  const s = steps[i];
  if (s.explicit_needs || (s.needs && s.needs.length)) return s.needs || [];
  return i > 0 ? [steps[i - 1].id] : [];
}

export function layout(steps) {
  const depth = new Map();
  const byId = new Map(steps.map((s, i) => [s.id, i]));
  function d(id, seen) {
    if (depth.has(id)) return depth.get(id);
    if (seen.has(id)) return 0;
    seen.add(id);
    const deps = depsOf(steps, byId.get(id)).filter((x) => byId.has(x));
    const v = deps.length ? Math.max(...deps.map((x) => d(x, seen))) + 1 : 0;
    depth.set(id, v);
    return v;
  }
  steps.forEach((s) => d(s.id, new Set()));
  const columns = [];
  steps.forEach((s) => {
    const c = depth.get(s.id);
    (columns[c] = columns[c] || []).push(s.id);
  });
  const pos = new Map();
  columns.forEach((col, c) => col.forEach((id, r) => pos.set(id, {x: 10 + c * (W + GAP_X), y: 10 + r * (H + GAP_Y)})));
  const edges = [];
  steps.forEach((s, i) => depsOf(steps, i).forEach((from) => {
    if (pos.has(from)) edges.push([from, s.id]);
  }));
  const rows = Math.max(1, ...columns.map((c) => c.length));
  return {pos, edges, width: 20 + columns.length * (W + GAP_X) - GAP_X, height: 20 + rows * (H + GAP_Y) - GAP_Y};
}

// The latest record of each path: the highest revision, then attempt.
export function latestByPath(records) {
  const out = new Map();
  for (const r of records) {
    const prev = out.get(r.path);
    if (!prev || r.revision > prev.revision || (r.revision === prev.revision && r.attempt >= prev.attempt)) {
      out.set(r.path, r);
    }
  }
  return out;
}

function innerSummary(step, latest) {
  const inner = (step.body || []).map((b) => b.id)
    .concat(...(step.branches || []).map((b) => b.steps.map((s) => `${b.name}/${s.id}`)));
  if (!inner.length) return '';
  let iterations = 0;
  for (const path of latest.keys()) {
    const m = path.match(new RegExp(`^${step.id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\[(\\d+)\\]/`));
    if (m) iterations = Math.max(iterations, Number(m[1]));
  }
  return `${inner.join(' → ')}${iterations ? ` · round ${iterations}` : ''}`;
}

// Draws the graph into an <svg>; returns update(records) to recolour it.
export function drawGraph(definition) {
  const steps = definition.steps || [];
  const {pos, edges, width, height} = layout(steps);
  const root = svg('svg', {class: 'graph', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img',
                           'aria-label': `Graph of ${steps.length} steps`});
  root.appendChild(svg('defs', {}, svg('marker', {id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5,
                                                   markerWidth: 6, markerHeight: 6, orient: 'auto'},
    svg('path', {d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead'}))));
  for (const [from, to] of edges) {
    const a = pos.get(from);
    const b = pos.get(to);
    root.appendChild(svg('path', {class: 'edge', 'marker-end': 'url(#arrow)',
      d: `M${a.x + W},${a.y + H / 2} C${a.x + W + GAP_X / 2},${a.y + H / 2} ${b.x - GAP_X / 2},${b.y + H / 2} ${b.x},${b.y + H / 2}`}));
  }
  const nodes = new Map();
  for (const s of steps) {
    const p = pos.get(s.id);
    const title = svg('title', {}, `${s.id} (${s.kind})`);
    const state = svg('text', {x: p.x + 8, y: p.y + 36, class: 'state'}, 'pending');
    const g = svg('g', {class: 'node st-pending', 'data-step': s.id},
      title,
      svg('rect', {x: p.x, y: p.y, width: W, height: H, rx: 6}),
      svg('text', {x: p.x + 8, y: p.y + 18, class: 'name'}, `${s.id}`),
      state);
    nodes.set(s.id, {g, state, title, step: s});
    root.appendChild(g);
  }
  // `waiting`: the path of the gate the run is paused at (no record yet).
  function update(records, waiting) {
    const latest = latestByPath(records);
    for (const [id, n] of nodes) {
      const r = latest.get(id);
      const st = id === waiting && (!r || r.state === 'pending') ? 'waiting' : r ? r.state : 'pending';
      n.g.setAttribute('class', `node st-${st}`);
      n.g.setAttribute('data-state', st);
      const inner = innerSummary(n.step, latest);
      n.state.textContent = r && r.attempt > 1 ? `${st} · attempt ${r.attempt}` : st;
      n.title.textContent = `${id} (${n.step.kind}): ${st}${inner ? ` — ${inner}` : ''}`;
    }
  }
  return {element: root, update};
}
