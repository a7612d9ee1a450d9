// What the Node test scripts share (tests/browser/ui_test.mjs, ops_test.mjs,
// emulator_test.mjs, tests/mcp/mcp_test.mjs): their arguments and output
// folder, checks that print TAP-like lines, a free loopback
// port, polling with a deadline, a JSON client of the HTTP API, tokens made
// with the CLI, the server's readiness and a signed-in browser page. Node's
// own modules only, so it needs no npm install.
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

// The script's arguments, named `names` in the usage line (it exits 2 with
// "usage: node SCRIPT NAMES" when one is missing), the last being the
// output folder: emptied, with OUT_DIR/screenshots made in it. Returns
// {args, shots}, shots being that screenshots folder.
export function prepareRun(script, names) {
  const args = process.argv.slice(2, 2 + names.length);
  if (args.length < names.length || args.some((a) => !a)) {
    console.error(`usage: node ${script} ${names.join(' ')}`);
    process.exit(2);
  }
  const outDir = args[args.length - 1];
  const shots = path.join(outDir, 'screenshots');
  fs.rmSync(outDir, {recursive: true, force: true});
  fs.mkdirSync(shots, {recursive: true});
  return {args, shots};
}

// Throws "check failed: WHAT" unless `cond`; prints "ok - WHAT" otherwise.
export function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  console.log(`ok - ${what}`);
}

// A TCP port free on 127.0.0.1 now.
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const {port} = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

// A server's address on loopback before it starts: {port, base, api}, a
// free port, its `http://127.0.0.1:PORT` and an apiClient of that.
export async function loopbackAddress() {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  return {port, base, api: apiClient(base)};
}

// Calls `fn` every 100 ms until it returns a truthy value (returned), or
// throws "timed out waiting for WHAT" after `ms`.
export async function waitFor(what, fn, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// api(method, path, token, body) against `${base}/api/v1`: {status, body}
// with the body parsed as JSON (null when empty).
export function apiClient(base) {
  return async (method, p, tok, body) => {
    const res = await fetch(`${base}/api/v1${p}`, {
      method,
      headers: Object.assign({Authorization: `Bearer ${tok}`},
        body === undefined ? {} : {'Content-Type': 'application/json'}),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return {status: res.status, body: text ? JSON.parse(text) : null};
  };
}

// A new API token made with the CLI (`runloom token create --json` on `db`).
export function createToken(binary, db, name, role) {
  const out = execFileSync(binary, ['token', 'create', '--name', name, '--role', role, '--db', db, '--json'],
    {encoding: 'utf8'});
  return JSON.parse(out).token;
}

// Resolves once `${base}/readyz` answers 200, polling with `wait(what, fn)`
// (a waitFor with its deadline bound).
export async function serverReady(base, wait) {
  await wait('the server to be ready', async () => {
    try {
      return (await fetch(`${base}/readyz`)).ok;
    } catch (e) {
      return false;
    }
  });
}

// A new page of the browser `context` signed in to the web UI at `base` with
// `tok`, keyboard only (the token field has focus; Enter submits); its
// default timeout `ms`.
export async function login(context, base, tok, ms) {
  const page = await context.newPage();
  page.setDefaultTimeout(ms);
  await page.goto(`${base}/`);
  await page.locator('#token').waitFor();
  await page.keyboard.type(tok);
  await page.keyboard.press('Enter');
  await page.locator('#who').filter({hasText: '('}).waitFor();
  return page;
}
