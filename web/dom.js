// Small DOM helpers. Text always goes in as text nodes, never as HTML: every
// value shown here (inputs, outputs, model text, errors) is untrusted.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function svg(tag, attrs, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

export function replace(el, ...children) {
  el.textContent = '';
  append(el, children);
}

export function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

export function pretty(value) {
  if (typeof value === 'string') return value;
  return JSON.stringify(value, null, 2);
}

export function statusBadge(status) {
  return h('span', {class: `badge s-${status}`}, status);
}

let toastTimer = null;
export function toast(text) {
  const t = document.getElementById('toast');
  t.textContent = text;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => (t.textContent = ''), 6000);
}

export function errorBox(e) {
  return h('p', {class: 'error', role: 'alert'}, e && e.message ? e.message : String(e));
}
