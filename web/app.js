// The runloom web UI: a hash router over a few pages, a login that keeps the
// pasted token in this browser session only, and the caller's role, which
// decides what the pages offer (the API enforces it either way).

import {ApiError, get, setToken, token} from './api.js';
import {budgetsPage} from './budgets.js';
import {capsPage} from './caps.js';
import {h, replace} from './dom.js';
import {deadLettersPage} from './deadletters.js';
import {runPage} from './run.js';
import {runsPage} from './runs.js';
import {schedulesPage} from './schedules.js';
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

// Each navigation renders into a view of its own, and only the latest one is
// on screen: a page still loading when the user moves on (its requests slow,
// the server loaded) renders into a detached view, and its live stream is
// stopped the moment it returns. Without this an older page could paint over
// a newer one, and its event stream would hold a connection forever.
let generation = 0;

async function route() {
  const mine = ++generation;
  if (cleanup) cleanup();
  cleanup = null;
  const hash = location.hash || '#/runs';
  const parts = hash.slice(2).split('/').map(decodeURIComponent);
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === parts[0]) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const view = h('div', {class: 'view'});
  replace(main, view);
  const ctx = {main: view, can, session};
  let stop = null;
  try {
    if (parts[0] === 'runs' && parts[1]) stop = await runPage(ctx, parts[1]);
    else if (parts[0] === 'workflows' && parts[1]) stop = await workflowPage(ctx, parts[1]);
    else if (parts[0] === 'workflows') stop = await workflowsPage(ctx);
    else if (parts[0] === 'dead-letters') stop = await deadLettersPage(ctx);
    else if (parts[0] === 'schedules') stop = await schedulesPage(ctx);
    else if (parts[0] === 'budgets') stop = await budgetsPage(ctx);
    else if (parts[0] === 'caps') stop = await capsPage(ctx);
    else stop = await runsPage(ctx);
  } catch (e) {
    if (mine !== generation) return;
    if (e instanceof ApiError && e.status === 401) {
      setToken('');
      loginPage('That token was not accepted.');
      return;
    }
    replace(view, h('p', {class: 'error', role: 'alert'}, e.message || String(e)));
  }
  if (mine !== generation) {
    if (stop) stop();
    return;
  }
  cleanup = stop;
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

// The skip link moves focus to the page; as a plain link it would change the
// hash, and the router would leave the page for the runs list.
function skipLink() {
  const skip = document.querySelector('a.skip');
  if (!skip) return;
  skip.onclick = (ev) => {
    ev.preventDefault();
    main.focus();
  };
}

// ?emulator: the fixture emulator answers every API request (emulator.js;
// only the build's web-emulator/ holds it, the server does not serve it).
async function boot() {
  skipLink();
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
