// Dead letters: runs whose message reached the delivery cap, with a redrive
// button for admins.

import {get, post} from './api.js';
import {h, replace, toast, when} from './dom.js';

export async function deadLettersPage(ctx) {
  const box = h('div');
  async function load() {
    const list = await get('/dead-letters');
    const rows = Array.isArray(list) ? list : list.dead_letters || [];
    replace(box, rows.length ? h('table', {},
      h('caption', {}, 'Dead-lettered runs'),
      h('thead', {}, h('tr', {}, ['Run', 'Deliveries', 'Reason', 'At', ''].map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', {}, rows.map((d) => h('tr', {},
        h('td', {}, h('a', {href: `#/runs/${encodeURIComponent(d.run_id)}`}, d.run_id)),
        h('td', {}, d.deliveries), h('td', {}, d.reason), h('td', {}, when(d.at)),
        h('td', {}, ctx.can('admin') ? h('button', {type: 'button', onclick: async () => {
          try {
            await post(`/dead-letters/${encodeURIComponent(d.id)}/redrive`, {});
            toast(`Redriven: ${d.run_id}`);
            await load();
          } catch (e) {
            toast(`Not redriven: ${e.message}`);
          }
        }}, 'Redrive') : '')))))
      : h('p', {}, 'No dead letters.'));
  }
  replace(ctx.main, h('h1', {}, 'Dead letters'), box);
  await load();
  return null;
}
