// The runloom web UI: a hash router over a few pages, a login that keeps the
// pasted token in this browser session only, and the caller's role, which
// decides what the pages offer (the API enforces it either way).

import {ApiError, get, setToken, token} from './api.js';
import {h, replace} from './dom.js';
import {deadLettersPage} from './deadletters.js';
import {runPage} from './run.js';
import {runsPage} from './runs.js';
import {workflowPage, workflowsPage} from './workflows.js';

const main = document.getElementById('main');
export const session = {name: '', role: ''};
const ROLES = ['viewer', 'operator', 'approver', 'admin'];

export function can(role) {
  return ROLES.indexOf(session.role) >= ROLES.indexOf(role);
}

let cleanup = null;

function loginPage(message) {
  const input = h('input', {id: 'token', type: 'password', autocomplete: 'off', required: true,
                            'aria-describedby': 'token-help'});
  const form = h('form', {class: 'login', onsubmit: async (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    await start();
  }},
  h('h1', {}, 'Sign in'),
  message ? h('p', {class: 'error', role: 'alert'}, message) : null,
  h('label', {for: 'token'}, 'API token'),
  input,
  h('p', {id: 'token-help', class: 'help'},
    'Create one with: runloom token create --name NAME --role ROLE. ' +
    'It is kept in this browser tab only.'),
  h('button', {type: 'submit'}, 'Sign in'));
  replace(main, form);
  input.focus();
}

async function route() {
  if (cleanup) cleanup();
  cleanup = null;
  const hash = location.hash || '#/runs';
  const parts = hash.slice(2).split('/').map(decodeURIComponent);
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === parts[0]) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const ctx = {main, can, session};
  try {
    if (parts[0] === 'runs' && parts[1]) cleanup = await runPage(ctx, parts[1]);
    else if (parts[0] === 'workflows' && parts[1]) cleanup = await workflowPage(ctx, parts[1]);
    else if (parts[0] === 'workflows') cleanup = await workflowsPage(ctx);
    else if (parts[0] === 'dead-letters') cleanup = await deadLettersPage(ctx);
    else cleanup = await runsPage(ctx);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      setToken('');
      loginPage('That token was not accepted.');
      return;
    }
    replace(main, h('p', {class: 'error', role: 'alert'}, e.message || String(e)));
  }
  main.focus({preventScroll: true});
}

async function start() {
  try {
    const me = await get('/me');
    session.name = me.name;
    session.role = me.role;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      loginPage(token() ? 'That token was not accepted.' : '');
      return;
    }
    replace(main, h('p', {class: 'error', role: 'alert'}, `The server did not answer: ${e.message}`));
    return;
  }
  document.getElementById('who').textContent = `${session.name} (${session.role})`;
  const out = document.getElementById('logout');
  out.hidden = !token();
  out.onclick = () => {
    setToken('');
    location.reload();
  };
  window.onhashchange = route;
  await route();
}

// ?emulator: the fixture emulator answers every API request (emulator.js;
// only the build's web-emulator/ holds it, the server does not serve it).
async function boot() {
  if (new URLSearchParams(location.search).has('emulator')) {
    try {
      (await import('./emulator.js')).install();
    } catch (e) {
      replace(main, h('p', {class: 'error', role: 'alert'},
        'The fixture emulator is not served here: open the build\'s web-emulator/ (docs/operations.md).'));
      return;
    }
  }
  await start();
}

boot();
