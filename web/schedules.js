// Schedules (issue 23): every schedule (GET /schedules, a page of 100 at a
// time), with its cron expression and zone, its next tick, whether it is
// paused, the run its latest tick started, and its overlap and catch-up
// policies. Operators (and the roles above) get Pause and Resume; the API
// checks the role either way, and a refusal is shown with the row.

import {get, post} from './api.js';
import {h, replace, toast, when} from './dom.js';

const PAGE = 100;

export async function schedulesPage(ctx) {
  const status = h('div', {class: 'notice', role: 'alert'});
  const box = h('div');
  // The id the page starts after ('' = the first page), and those before it
  // (the Previous link).
  let after = '';
  const before = [];

  async function change(s, action, button) {
    button.disabled = true;
    replace(status);
    try {
      const now = await post(`/schedules/${encodeURIComponent(s.id)}/${action}`, {});
      toast(`Schedule ${now.id} ${now.paused ? 'paused' : 'resumed'}.`);
      await load();
    } catch (e) {
      // 403 (a role that may not), 404 (deleted meanwhile), or the server down.
      replace(status, h('p', {class: 'error'}, `Schedule ${s.id} not ${action}d: ${e.message}`));
      button.disabled = false;
    }
  }

  function actions(s) {
    if (!ctx.can('operator')) return '';
    const action = s.paused ? 'resume' : 'pause';
    const b = h('button', {type: 'button', 'aria-label': `${s.paused ? 'Resume' : 'Pause'} ${s.id}`,
      onclick: () => change(s, action, b)}, s.paused ? 'Resume' : 'Pause');
    return b;
  }

  function row(s) {
    return h('tr', {'data-id': s.id},
      h('td', {}, h('code', {}, s.id)),
      h('td', {}, h('a', {href: `#/workflows/${encodeURIComponent(s.workflow)}`}, s.workflow)),
      h('td', {}, h('code', {}, s.cron)),
      h('td', {}, s.timezone),
      h('td', {class: 'next'}, s.paused ? h('span', {class: 'help'}, '(paused)') : when(s.next_fire_at)),
      h('td', {class: 'state'}, h('span', {class: `badge ${s.paused ? 's-paused' : 's-running'}`},
        s.paused ? 'paused' : 'active')),
      h('td', {class: 'last'}, s.last_run_id
        ? [h('a', {href: `#/runs/${encodeURIComponent(s.last_run_id)}`}, s.last_run_id),
          s.last_fired_at ? h('div', {class: 'help'}, `tick ${when(s.last_fired_at)}`) : null]
        : h('span', {class: 'help'}, s.last_fired_at ? `none (tick ${when(s.last_fired_at)})` : 'none yet')),
      h('td', {}, `${s.overlap} / ${s.catch_up}`),
      h('td', {}, actions(s)));
  }

  async function load() {
    const q = `?limit=${PAGE}${after ? `&after=${encodeURIComponent(after)}` : ''}`;
    const page = await get(`/schedules${q}`);
    const rows = (page && page.schedules) || [];
    const pager = h('p', {class: 'pager'},
      before.length ? h('a', {href: '#/schedules', onclick: (ev) => {
        ev.preventDefault();
        after = before.pop();
        load().catch((e) => replace(status, h('p', {class: 'error'}, e.message)));
      }}, 'Previous') : null,
      rows.length === PAGE ? h('a', {href: '#/schedules', onclick: (ev) => {
        ev.preventDefault();
        before.push(after);
        after = rows[rows.length - 1].id;
        load().catch((e) => replace(status, h('p', {class: 'error'}, e.message)));
      }}, 'Next') : null);
    replace(box, rows.length ? [h('table', {class: 'schedules'},
      h('caption', {}, 'Schedules: each tick starts one run of the workflow\'s latest version'),
      h('thead', {}, h('tr', {}, ['Id', 'Workflow', 'Cron', 'Time zone', 'Next tick', 'State',
        'Last run', 'Overlap / catch-up', ''].map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', {}, rows.map(row))), pager]
      : h('p', {}, before.length ? 'No more schedules.'
        : 'No schedules. Create one with runloom schedule create, POST /api/v1/schedules, ' +
          'or schedules: in a workflow file.'));
  }

  replace(ctx.main, h('h1', {}, 'Schedules'), status, box);
  await load();
  return null;
}
