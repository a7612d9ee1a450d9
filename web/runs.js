// Runs: a live list with a search (workflow, status, tenant, input id, time
// range) and cursor paging, bulk cancel with a confirmation, and a form that
// starts a run of a registered workflow.

import {follow, get, post} from './api.js';
import {confirmDialog, eachInTurn, summary} from './bulk.js';
import {h, replace, statusBadge, toast, when} from './dom.js';
import {STATUSES as RUN_STATUSES, TERMINAL} from './vocabulary.js';

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

// The search (issue 25): the filters GET /runs takes, kept in the page's
// hash so a search can be linked and reloaded. Times are shown in local time
// (datetime-local) and sent as UTC RFC 3339.
const FILTERS = ['workflow', 'status', 'tenant', 'input_id', 'created_after', 'created_before'];

function localValue(iso) {
  const d = new Date(iso);
  if (!iso || isNaN(d)) return '';
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

function searchHash(values, cursor) {
  const q = new URLSearchParams();
  for (const k of FILTERS) if (values[k]) q.set(k, values[k]);
  if (cursor) q.set('cursor', cursor);
  const s = q.toString();
  return s ? `#/runs?${s}` : '#/runs';
}

async function searchForm(values) {
  let names = [];
  try {
    const list = await get('/workflows');
    names = [...new Set((list.workflows || []).map((w) => w.name))];
  } catch (e) {
    names = [];
  }
  if (values.workflow && !names.includes(values.workflow)) names.push(values.workflow);
  const field = (id, label, el) => h('div', {class: 'field'}, h('label', {for: id}, label), el);
  const workflow = h('select', {id: 'search-workflow', name: 'workflow'},
    h('option', {value: ''}, 'any workflow'),
    names.map((n) => h('option', {value: n, selected: n === values.workflow}, n)));
  const status = h('select', {id: 'status-filter', name: 'status'},
    STATUSES.map((s) => h('option', {value: s, selected: s === values.status}, s || 'any status')));
  const text = (id, name, placeholder) => h('input', {id, name, type: 'search', autocomplete: 'off',
    maxlength: 256, placeholder, value: values[name] || ''});
  const time = (id, name) => h('input', {id, name, type: 'datetime-local', value: localValue(values[name])});
  const form = h('form', {class: 'search', role: 'search', 'aria-label': 'Search runs'},
    field('search-workflow', 'Workflow', workflow),
    field('status-filter', 'Status', status),
    field('search-tenant', 'Tenant', text('search-tenant', 'tenant', 'any tenant')),
    field('search-input', 'Input id', text('search-input', 'input_id', 'idempotency key or input value')),
    field('search-after', 'Created from', time('search-after', 'created_after')),
    field('search-before', 'Created before', time('search-before', 'created_before')),
    h('div', {class: 'search-buttons'},
      h('button', {type: 'submit'}, 'Search'),
      h('a', {href: '#/runs', class: 'clear'}, 'Clear')));
  function apply() {
    const v = {};
    for (const k of FILTERS) {
      const el = form.elements[k];
      if (!el || !el.value) continue;
      v[k] = el.type === 'datetime-local' ? new Date(el.value).toISOString() : el.value.trim();
    }
    location.hash = searchHash(v, '');
  }
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    apply();
  });
  status.addEventListener('change', apply);  // a status is one click away
  workflow.addEventListener('change', apply);
  return form;
}

// Cancels the selected runs after a confirmation (operator).
function bulkBar(ctx, selected, reload) {
  if (!ctx.can('operator')) return {element: null, update() {}};
  const count = h('span', {class: 'bulk-count', 'aria-live': 'polite'});
  const cancel = h('button', {type: 'button', id: 'bulk-cancel', disabled: true}, 'Cancel selected…');
  const bar = h('div', {class: 'toolbar bulk'}, cancel, count);
  function update() {
    cancel.disabled = selected.size === 0;
    count.textContent = selected.size ? `${selected.size} selected` : '';
  }
  cancel.addEventListener('click', async () => {
    const ids = [...selected];
    if (!ids.length) return;
    const yes = await confirmDialog(`Cancel ${ids.length} run${ids.length === 1 ? '' : 's'}?`, ids,
      `Cancel ${ids.length} run${ids.length === 1 ? '' : 's'}`);
    if (!yes) return;
    cancel.disabled = true;
    const result = await eachInTurn(ids,
      (id) => post(`/runs/${encodeURIComponent(id)}/cancel`, {}),
      (n, total) => (count.textContent = `cancelling ${n} of ${total}…`));
    toast(summary('Cancel requested for', result));
    selected.clear();
    await reload();
  });
  return {element: bar, update};
}

export async function runsPage(ctx) {
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const values = {};
  for (const k of FILTERS) values[k] = params.get(k) || '';
  const cursor = params.get('cursor') || '';
  const searching = FILTERS.some((k) => values[k]);
  const selected = new Set();
  const bulk = bulkBar(ctx, selected, () => load());
  const canAct = ctx.can('operator');
  const selectAll = canAct ? h('input', {type: 'checkbox', id: 'select-all', 'aria-label': 'Select every run shown that can be cancelled'}) : null;
  const tbody = h('tbody');
  const table = h('table', {class: 'runs'},
    h('caption', {}, searching ? 'Runs found, newest first' : 'Runs, newest first'),
    h('thead', {}, h('tr', {}, canAct ? h('th', {scope: 'col'}, selectAll) : null,
      ['Run', 'Workflow', 'Status', 'Phase', 'Tenant', 'Created', 'Updated']
        .map((c) => h('th', {scope: 'col'}, c)))),
    tbody);
  const pager = h('nav', {class: 'pager', 'aria-label': 'Pages'});
  const live = h('span', {class: 'live', 'aria-live': 'polite'});
  const rows = new Map();
  const boxes = [];
  if (selectAll) {
    selectAll.addEventListener('change', () => {
      for (const b of boxes) {
        if (b.disabled) continue;
        b.checked = selectAll.checked;
        if (b.checked) selected.add(b.value);
        else selected.delete(b.value);
      }
      bulk.update();
    });
  }

  async function load() {
    const q = new URLSearchParams();
    for (const k of FILTERS) if (values[k]) q.set(k, values[k]);
    if (cursor) q.set('cursor', cursor);
    q.set('limit', '50');
    const page = await get(`/runs?${q}`);
    rows.clear();
    boxes.length = 0;
    selected.clear();
    if (selectAll) selectAll.checked = false;
    bulk.update();
    replace(tbody, page.runs.map((r) => {
      // A waiting run says what it waits for (issue 23).
      const w = r.status === 'waiting' && r.waiting_for;
      const badge = h('td', {}, statusBadge(r.status),
        w ? h('span', {class: 'waiting-for'}, w.kind === 'signal' ? ` signal ${w.signal}` : ' timer') : '');
      const phase = h('td', {}, r.phase || '');
      const updated = h('td', {}, when(r.updated_at));
      let pick = null;
      if (canAct) {
        const box = h('input', {type: 'checkbox', value: r.id, class: 'pick', 'aria-label': `Select run ${r.id}`,
                                disabled: TERMINAL.has(r.status)});
        box.addEventListener('change', () => {
          if (box.checked) selected.add(r.id);
          else selected.delete(r.id);
          bulk.update();
        });
        boxes.push(box);
        pick = h('td', {}, box);
      }
      rows.set(r.id, {badge, phase, updated, box: pick && pick.firstChild});
      return h('tr', {'data-run': r.id}, pick,
        h('td', {}, h('a', {href: `#/runs/${encodeURIComponent(r.id)}`}, r.id)),
        h('td', {}, `${r.workflow} v${r.workflow_version}`), badge, phase,
        h('td', {}, r.budget && r.budget.tenant ? r.budget.tenant : ''),
        h('td', {}, when(r.created_at)), updated);
    }));
    if (!page.runs.length) {
      replace(tbody, h('tr', {}, h('td', {colspan: canAct ? 8 : 7},
        page.next_cursor ? 'No match among the runs read; go on with Next page.' : 'No runs.')));
    }
    replace(pager, cursor ? h('a', {href: searchHash(values, '')}, 'First page') : null,
      page.next_cursor ? h('a', {href: searchHash(values, page.next_cursor)}, 'Next page') : null);
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
      if (row.box && TERMINAL.has(d.status)) {
        row.box.checked = false;
        row.box.disabled = true;
        selected.delete(id);
        bulk.update();
      }
    } else if (!cursor && !reload && !selected.size) {
      reload = setTimeout(() => {
        reload = null;
        load().catch(() => {});
      }, 300);
    }
  }, (s) => replace(live, s === 'live' ? 'live' : s === 'reconnecting' ? 'reconnecting…' : ''),
  {endless: true});

  replace(ctx.main,
    h('h1', {}, 'Runs'),
    await searchForm(values),
    h('div', {class: 'toolbar'}, live),
    bulk.element,
    table, pager,
    ctx.can('operator') ? await startForm(ctx) : null);
  await load();
  return () => {
    stop();
    clearTimeout(reload);
  };
}
