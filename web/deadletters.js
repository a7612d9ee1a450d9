// Dead letters: runs whose message reached the delivery cap, with a redrive
// button for admins, and bulk redrive of the selected ones after a
// confirmation (issue 25).

import {get, post} from './api.js';
import {confirmDialog, eachInTurn, summary} from './bulk.js';
import {h, replace, toast, when} from './dom.js';

export async function deadLettersPage(ctx) {
  const box = h('div');
  const admin = ctx.can('admin');
  const selected = new Map();  // dead letter id -> run id
  const count = h('span', {class: 'bulk-count', 'aria-live': 'polite'});
  const bulk = h('button', {type: 'button', id: 'bulk-redrive', disabled: true}, 'Redrive selected…');
  function update() {
    bulk.disabled = selected.size === 0;
    count.textContent = selected.size ? `${selected.size} selected` : '';
  }
  bulk.addEventListener('click', async () => {
    const ids = [...selected.keys()];
    if (!ids.length) return;
    const runs = ids.map((id) => selected.get(id));
    const n = `${ids.length} dead letter${ids.length === 1 ? '' : 's'}`;
    if (!await confirmDialog(`Redrive ${n}? Their runs are delivered again.`, runs, `Redrive ${n}`)) return;
    bulk.disabled = true;
    const result = await eachInTurn(ids, (id) => post(`/dead-letters/${encodeURIComponent(id)}/redrive`, {}),
      (k, total) => (count.textContent = `redriving ${k} of ${total}…`));
    toast(summary('Redriven', result));
    await load();
  });

  async function load() {
    const list = await get('/dead-letters');
    const rows = Array.isArray(list) ? list : list.dead_letters || [];
    selected.clear();
    update();
    const all = admin ? h('input', {type: 'checkbox', id: 'select-all-dead', 'aria-label': 'Select every dead letter'}) : null;
    const boxes = [];
    if (all) {
      all.addEventListener('change', () => {
        for (const b of boxes) {
          b.el.checked = all.checked;
          if (all.checked) selected.set(b.id, b.run);
          else selected.delete(b.id);
        }
        update();
      });
    }
    replace(box, rows.length ? h('table', {class: 'dead-letters'},
      h('caption', {}, 'Dead-lettered runs'),
      h('thead', {}, h('tr', {}, admin ? h('th', {scope: 'col'}, all) : null,
        ['Run', 'Deliveries', 'Reason', 'At', ''].map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', {}, rows.map((d) => {
        let pick = null;
        if (admin) {
          const el = h('input', {type: 'checkbox', class: 'pick', value: d.id, 'aria-label': `Select ${d.run_id}`});
          el.addEventListener('change', () => {
            if (el.checked) selected.set(d.id, d.run_id);
            else selected.delete(d.id);
            update();
          });
          boxes.push({el, id: d.id, run: d.run_id});
          pick = h('td', {}, el);
        }
        return h('tr', {'data-run': d.run_id}, pick,
          h('td', {}, h('a', {href: `#/runs/${encodeURIComponent(d.run_id)}`}, d.run_id)),
          h('td', {}, d.deliveries), h('td', {}, d.reason), h('td', {}, when(d.at)),
          h('td', {}, admin ? h('button', {type: 'button', onclick: async () => {
            try {
              await post(`/dead-letters/${encodeURIComponent(d.id)}/redrive`, {});
              toast(`Redriven: ${d.run_id}`);
              await load();
            } catch (e) {
              toast(`Not redriven: ${e.message}`);
            }
          }}, 'Redrive') : ''));
      })))
      : h('p', {}, 'No dead letters.'));
  }
  replace(ctx.main, h('h1', {}, 'Dead letters'), admin ? h('div', {class: 'toolbar bulk'}, bulk, count) : null, box);
  await load();
  return null;
}
