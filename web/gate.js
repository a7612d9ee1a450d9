// The approval panel: the proposal rendered, an editor that keeps the
// proposal's shape, feedback and a phase for a revision request, and the
// proposal's digest sent with every decision. A stale digest (someone else
// decided, or the proposal changed) shows a clear message and the new state.

import {post} from './api.js';
import {h, pretty, replace, toast} from './dom.js';

let editorIds = 0;

// An editor for `value` that can only produce a value of the same shape:
// strings, numbers and booleans get fields of their type, arrays of strings a
// line per item, objects a fieldset per key. Returns {element, read()}.
export function shapeEditor(value, label) {
  const id = `ed-${++editorIds}`;
  if (typeof value === 'string') {
    const el = h(value.length > 60 ? 'textarea' : 'input', {id, rows: 4});
    el.value = value;
    return {element: h('div', {class: 'field'}, h('label', {for: id}, label), el), read: () => el.value};
  }
  if (typeof value === 'number') {
    const el = h('input', {id, type: 'number', step: 'any', value});
    return {element: h('div', {class: 'field'}, h('label', {for: id}, label), el), read: () => Number(el.value)};
  }
  if (typeof value === 'boolean') {
    const el = h('input', {id, type: 'checkbox', checked: value});
    return {element: h('div', {class: 'field'}, el, h('label', {for: id}, label)), read: () => el.checked};
  }
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) {
    const el = h('textarea', {id, rows: Math.max(3, value.length + 1), 'aria-describedby': `${id}-help`});
    el.value = value.join('\n');
    return {element: h('div', {class: 'field'}, h('label', {for: id}, label), el,
      h('span', {id: `${id}-help`, class: 'help'}, 'One item per line.')),
    read: () => el.value.split('\n').map((s) => s.trim()).filter((s) => s !== '')};
  }
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const parts = Object.entries(value).map(([k, v]) => [k, shapeEditor(v, k)]);
    return {element: h('fieldset', {}, h('legend', {}, label), parts.map(([, p]) => p.element)),
      read: () => Object.fromEntries(parts.map(([k, p]) => [k, p.read()]))};
  }
  // Anything else (arrays of objects, null): edited as JSON of the same type.
  const el = h('textarea', {id, rows: 8});
  el.value = JSON.stringify(value, null, 2);
  return {element: h('div', {class: 'field'}, h('label', {for: id}, `${label} (JSON)`), el),
    read: () => {
      const v = JSON.parse(el.value);
      if (Array.isArray(v) !== Array.isArray(value) || typeof v !== typeof value) {
        throw new Error(`${label} must stay ${Array.isArray(value) ? 'an array' : typeof value}`);
      }
      return v;
    }};
}

export function gatePanel(ctx, run, gate, onDecided) {
  const status = h('div', {role: 'alert', class: 'gatestatus'});
  const panel = h('section', {class: 'gate', 'aria-labelledby': 'gate-title'},
    h('h2', {id: 'gate-title'}, gate.title || `Approval: ${gate.step_id}`),
    h('p', {}, `Step ${gate.path} in phase ${gate.phase || '(none)'} waits for a decision.`),
    h('h3', {}, 'Proposal'),
    h('pre', {class: 'proposal'}, pretty(gate.proposal)),
    status);
  if (!ctx.can('approver')) {
    panel.appendChild(h('p', {class: 'help'}, 'Your role cannot decide; an approver can.'));
    return panel;
  }
  const allow = gate.allow || [];

  async function decide(body, button) {
    button.disabled = true;
    try {
      await post(`/runs/${encodeURIComponent(run.id)}/decisions`,
        Object.assign({digest: gate.proposal_digest}, body));
      toast(`Decision recorded: ${body.decision}.`);
      onDecided('');
    } catch (e) {
      if (e.status === 409) {
        // The panel is redrawn from the run's current state; the notice
        // stays above it (run.js) so the reviewer learns why.
        onDecided('This proposal was already decided or has changed since you opened it. ' +
          'Nothing of your decision was recorded. The current state is shown below.');
      } else {
        replace(status, h('p', {class: 'error'}, `Not recorded: ${e.message}`));
      }
      button.disabled = false;
    }
  }

  const buttons = h('div', {class: 'decisions'});
  if (allow.includes('approve')) {
    const b = h('button', {type: 'button', class: 'approve', onclick: () => decide({decision: 'approve'}, b)}, 'Approve');
    buttons.appendChild(b);
  }
  if (allow.includes('reject')) {
    const b = h('button', {type: 'button', class: 'reject', onclick: () => {
      if (confirm('Reject this proposal? The run ends as rejected.')) decide({decision: 'reject'}, b);
    }}, 'Reject');
    buttons.appendChild(b);
  }
  panel.appendChild(buttons);

  if (allow.includes('edit')) {
    const editor = shapeEditor(gate.proposal, 'Proposal');
    const b = h('button', {type: 'submit'}, 'Save edit and approve');
    panel.appendChild(h('form', {class: 'edit', onsubmit: (ev) => {
      ev.preventDefault();
      let edited;
      try {
        edited = editor.read();
      } catch (e) {
        replace(status, h('p', {class: 'error'}, e.message));
        return;
      }
      decide({decision: 'edit', edited}, b);
    }}, h('h3', {}, 'Edit'), editor.element, b));
  }
  if (allow.includes('request_revision')) {
    const fb = h('textarea', {id: 'feedback', rows: 3, required: true});
    const phase = h('input', {id: 'from-phase', value: gate.revision_phase || ''});
    const b = h('button', {type: 'submit'}, 'Request revision');
    panel.appendChild(h('form', {class: 'revision', onsubmit: (ev) => {
      ev.preventDefault();
      const body = {decision: 'request_revision', feedback: fb.value};
      if (phase.value) body.from_phase = phase.value;
      decide(body, b);
    }}, h('h3', {}, 'Request a revision'),
    h('div', {class: 'field'}, h('label', {for: 'feedback'}, 'Feedback'), fb),
    h('div', {class: 'field'}, h('label', {for: 'from-phase'}, 'Rerun from phase'), phase), b));
  }
  return panel;
}
