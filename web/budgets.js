// Budgets (issue 25): each tenant's limit, spent, reserved and left, from
// GET /api/v1/budgets (the same figures as the runloom_budget_*_micros
// gauges), with a bar of how much of the limit is used. Refreshed every 5 s.

import {get} from './api.js';
import {errorBox, h, replace} from './dom.js';
import {amount} from './inspector.js';

const kRefreshMs = 5000;

function usedBar(b) {
  if (b.limit_micros === null || b.limit_micros === undefined || b.limit_micros <= 0) return '';
  const spent = Math.min(100, (b.spent_micros / b.limit_micros) * 100);
  const reserved = Math.min(100 - spent, (b.reserved_micros / b.limit_micros) * 100);
  return h('span', {class: 'used', role: 'img',
                    'aria-label': `${spent.toFixed(0)}% spent, ${reserved.toFixed(0)}% reserved`},
    h('span', {class: 'used-spent', style: `width:${spent.toFixed(2)}%`}),
    h('span', {class: 'used-reserved', style: `width:${reserved.toFixed(2)}%`}));
}

export async function budgetsPage(ctx) {
  const box = h('div');
  async function load() {
    const list = await get('/budgets');
    const rows = list.budgets || [];
    replace(box, rows.length ? h('table', {class: 'budgets'},
      h('caption', {}, 'Tenant budgets, in price units (the config file\'s model prices)'),
      h('thead', {}, h('tr', {}, ['Tenant', 'Limit', 'Spent', 'Reserved', 'Left', 'Used']
        .map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', {}, rows.map((b) => {
        const over = b.left_micros !== null && b.left_micros <= 0;
        return h('tr', {'data-tenant': b.tenant, class: over ? 'exhausted' : ''},
          h('th', {scope: 'row'}, b.tenant),
          h('td', {class: 'num'}, b.limit_micros === null ? 'no limit' : amount(b.limit_micros)),
          h('td', {class: 'num'}, amount(b.spent_micros)),
          h('td', {class: 'num'}, amount(b.reserved_micros)),
          h('td', {class: `num left${over ? ' error' : ''}`}, b.left_micros === null ? '—' : amount(b.left_micros)),
          h('td', {}, usedBar(b)));
      })))
      : h('p', {}, 'No tenant has a budget row yet (a tenant gets one when the config file sets its budget or its first model call is paid for).'));
  }
  replace(ctx.main, h('h1', {}, 'Budgets'), box);
  await load();
  const timer = setInterval(() => load().catch((e) => replace(box, errorBox(e))), kRefreshMs);
  return () => clearInterval(timer);
}
