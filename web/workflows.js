// Workflows: the catalog, and one workflow's versions with each version's
// canonical definition (what runs pin by digest).

import {get} from './api.js';
import {h, pretty, replace, when} from './dom.js';

export async function workflowsPage(ctx) {
  const list = await get('/workflows');
  const rows = Array.isArray(list) ? list : list.workflows || [];
  replace(ctx.main, h('h1', {}, 'Workflows'),
    rows.length ? h('table', {},
      h('caption', {}, 'Registered workflow versions'),
      h('thead', {}, h('tr', {}, ['Name', 'Version', 'Digest', 'Registered'].map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', {}, rows.map((w) => h('tr', {},
        h('td', {}, h('a', {href: `#/workflows/${encodeURIComponent(w.name)}`}, w.name)),
        h('td', {}, w.version), h('td', {}, h('code', {}, w.digest)), h('td', {}, when(w.created_at))))))
      : h('p', {}, 'No workflows are registered yet.'));
  return null;
}

export async function workflowPage(ctx, name) {
  const list = await get('/workflows');
  const versions = (Array.isArray(list) ? list : list.workflows || []).filter((w) => w.name === name);
  const box = h('div');
  replace(ctx.main, h('h1', {}, 'Workflow ', h('code', {}, name)),
    h('nav', {'aria-label': 'Versions', class: 'versions'},
      versions.map((v) => h('button', {type: 'button', onclick: () => show(v.version)}, `v${v.version}`))),
    box);
  async function show(version) {
    const wf = await get(`/workflows/${encodeURIComponent(name)}?version=${version}`);
    replace(box, h('h2', {}, `Version ${version}`), h('p', {}, h('code', {}, wf.digest)),
      h('pre', {class: 'definition'}, pretty(wf.definition)));
  }
  if (versions.length) await show(versions[versions.length - 1].version);
  return null;
}
