// Runs: a live list with a status filter and cursor paging, and a form that
// starts a run of a registered workflow.

import {follow, get, post} from './api.js';
import {h, replace, statusBadge, toast, when} from './dom.js';
import {STATUSES as RUN_STATUSES} from './vocabulary.js';

// '' is "any status"; the rest is the engine's list (vocabulary.js, generated).
const STATUSES = ['', ...RUN_STATUSES];

function inputField(name, spec) {
  const id = `in-${name}`;
  const label = h('label', {for: id}, name, spec.required ? ' (required)' : '');
  let field;
  if (Array.isArray(spec.enum) && spec.enum.length) {
    field = h('select', {id, name},
      spec.enum.map((v) => h('option', {value: v, selected: spec.has_default && v === spec.default}, v)));
  } else if (spec.type === 'boolean') {
    field = h('input', {id, name, type: 'checkbox', checked: spec.has_default && spec.default === true});
  } else {
    field = h('input', {id, name, type: spec.secret ? 'password' : 'text', autocomplete: 'off',
                        placeholder: spec.has_default ? String(spec.default) : ''});
  }
  field.dataset.type = spec.type || 'string';
  return h('div', {class: 'field'}, label, field,
    spec.description ? h('span', {class: 'help'}, spec.description) : null);
}

function readInputs(form) {
  const inputs = {};
  for (const el of form.querySelectorAll('[data-type]')) {
    const t = el.dataset.type;
    if (t === 'boolean') {
      inputs[el.name] = el.checked;
      continue;
    }
    if (el.value === '') continue;  // the workflow's default applies
    if (t === 'number' || t === 'integer') inputs[el.name] = Number(el.value);
    else if (t === 'object' || t === 'array') inputs[el.name] = JSON.parse(el.value);
    else inputs[el.name] = el.value;
  }
  return inputs;
}

async function startForm(ctx) {
  const list = await get('/workflows');
  const workflows = Array.isArray(list) ? list : list.workflows || [];
  const names = [...new Set(workflows.map((w) => w.name))];
  if (!names.length) return h('p', {}, 'No workflows are registered yet.');
  const select = h('select', {id: 'start-workflow', name: 'workflow'},
    names.map((n) => h('option', {value: n}, n)));
  const fields = h('div', {class: 'inputs'});
  const form = h('form', {class: 'start', 'aria-labelledby': 'start-title'},
    h('h2', {id: 'start-title'}, 'Start a run'),
    h('div', {class: 'field'}, h('label', {for: 'start-workflow'}, 'Workflow'), select),
    fields,
    h('button', {type: 'submit'}, 'Start run'));
  async function showInputs() {
    const wf = await get(`/workflows/${encodeURIComponent(select.value)}`);
    const def = wf.definition || (wf.versions && wf.versions[wf.versions.length - 1].definition) || {};
    replace(fields, Object.entries(def.inputs || {}).map(([n, spec]) => inputField(n, spec)));
  }
  select.addEventListener('change', showInputs);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const run = await post('/runs', {workflow: select.value, inputs: readInputs(form)});
      location.hash = `#/runs/${encodeURIComponent(run.id)}`;
    } catch (e) {
      toast(`Not started: ${e.message}`);
    }
  });
  await showInputs();
  return form;
}

export async function runsPage(ctx) {
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const status = params.get('status') || '';
  const cursor = params.get('cursor') || '';
  const filter = h('select', {id: 'status-filter'},
    STATUSES.map((s) => h('option', {value: s, selected: s === status}, s || 'any status')));
  filter.addEventListener('change', () => {
    location.hash = filter.value ? `#/runs?status=${filter.value}` : '#/runs';
  });
  const tbody = h('tbody');
  const table = h('table', {class: 'runs'},
    h('caption', {}, 'Runs, newest first'),
    h('thead', {}, h('tr', {}, ['Run', 'Workflow', 'Status', 'Phase', 'Created', 'Updated']
      .map((c) => h('th', {scope: 'col'}, c)))),
    tbody);
  const pager = h('nav', {class: 'pager', 'aria-label': 'Pages'});
  const live = h('span', {class: 'live', 'aria-live': 'polite'});
  const rows = new Map();

  async function load() {
    const q = new URLSearchParams();
    if (status) q.set('status', status);
    if (cursor) q.set('cursor', cursor);
    q.set('limit', '50');
    const page = await get(`/runs?${q}`);
    rows.clear();
    replace(tbody, page.runs.map((r) => {
      // A waiting run says what it waits for (issue 23).
      const w = r.status === 'waiting' && r.waiting_for;
      const badge = h('td', {}, statusBadge(r.status),
        w ? h('span', {class: 'waiting-for'}, w.kind === 'signal' ? ` signal ${w.signal}` : ' timer') : '');
      const phase = h('td', {}, r.phase || '');
      const updated = h('td', {}, when(r.updated_at));
      rows.set(r.id, {badge, phase, updated});
      return h('tr', {},
        h('td', {}, h('a', {href: `#/runs/${encodeURIComponent(r.id)}`}, r.id)),
        h('td', {}, `${r.workflow} v${r.workflow_version}`), badge, phase,
        h('td', {}, when(r.created_at)), updated);
    }));
    if (!page.runs.length) replace(tbody, h('tr', {}, h('td', {colspan: 6}, 'No runs.')));
    const base = status ? `#/runs?status=${status}&` : '#/runs?';
    replace(pager, cursor ? h('a', {href: status ? `#/runs?status=${status}` : '#/runs'}, 'First page') : null,
      page.next_cursor ? h('a', {href: `${base}cursor=${encodeURIComponent(page.next_cursor)}`}, 'Next page') : null);
  }

  let reload = null;
  const stop = follow('/events', (ev) => {
    const d = ev.data || {};
    const id = d.run_id || d.id;
    const row = rows.get(id);
    if (row && d.status) {
      replace(row.badge, statusBadge(d.status));
      if (d.phase !== undefined) replace(row.phase, d.phase);
      replace(row.updated, when(d.at || d.updated_at || new Date().toISOString()));
    } else if (!cursor && !reload) {
      reload = setTimeout(() => {
        reload = null;
        load().catch(() => {});
      }, 300);
    }
  }, (s) => replace(live, s === 'live' ? 'live' : s === 'reconnecting' ? 'reconnecting…' : ''),
  {endless: true});

  replace(ctx.main,
    h('h1', {}, 'Runs'),
    h('div', {class: 'toolbar'}, h('label', {for: 'status-filter'}, 'Status'), filter, live),
    table, pager,
    ctx.can('operator') ? await startForm(ctx) : null);
  await load();
  return () => {
    stop();
    clearTimeout(reload);
  };
}
