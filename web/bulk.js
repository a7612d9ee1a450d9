// Bulk actions (issue 25): a confirmation dialog that says what will happen
// to which runs before anything is sent, then the action on each, one at a
// time, with what each answered. The API checks every request as if it came
// alone (roles, states): a refused one is reported, the others go on.

import {h} from './dom.js';

// Shows a modal dialog: `title`, the `items` it acts on (the first 20 listed,
// then "and N more"), and two buttons. Resolves true on confirm, false on
// cancel or Escape. Nothing is sent while it is open.
export function confirmDialog(title, items, confirmLabel) {
  const shown = items.slice(0, 20);
  return new Promise((resolve) => {
    const ok = h('button', {type: 'button', class: 'danger', 'data-confirm': ''}, confirmLabel);
    const no = h('button', {type: 'button', 'data-dismiss': ''}, 'Keep them');
    const dialog = h('dialog', {class: 'confirm', 'aria-labelledby': 'confirm-title'},
      h('h2', {id: 'confirm-title'}, title),
      h('ul', {class: 'confirm-items'}, shown.map((i) => h('li', {}, h('code', {}, i)))),
      items.length > shown.length ? h('p', {}, `and ${items.length - shown.length} more`) : null,
      h('div', {class: 'decisions'}, ok, no));
    let answered = false;
    function done(v) {
      if (answered) return;
      answered = true;
      dialog.close();
      dialog.remove();
      resolve(v);
    }
    ok.addEventListener('click', () => done(true));
    no.addEventListener('click', () => done(false));
    dialog.addEventListener('cancel', () => done(false));
    document.body.appendChild(dialog);
    dialog.showModal();
    no.focus();  // the safe choice has focus
  });
}

// Calls `act(item)` for each item in turn; returns {done: [items], failed:
// [{item, message}]}. `progress(n, total)` hears each step.
export async function eachInTurn(items, act, progress) {
  const out = {done: [], failed: []};
  let n = 0;
  for (const item of items) {
    try {
      await act(item);
      out.done.push(item);
    } catch (e) {
      out.failed.push({item, message: e && e.message ? e.message : String(e)});
    }
    n += 1;
    if (progress) progress(n, items.length);
  }
  return out;
}

// A one-line summary of eachInTurn's result, naming the first refusal.
export function summary(verb, result) {
  const failed = result.failed.length
    ? `; ${result.failed.length} refused (${result.failed[0].item}: ${result.failed[0].message})`
    : '';
  return `${verb} ${result.done.length} of ${result.done.length + result.failed.length}${failed}`;
}
