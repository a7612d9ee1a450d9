// Validates runloom events against the JSON Schemas in schemas/events/.
//
// Usage:
//   node tests/events/validate.mjs <schemas_dir> [--require-all-types] [events.jsonl ...]
//
//   <schemas_dir>         schemas/events: envelope.schema.json, <type>.schema.json
//                         for every event type, fixtures/<type>.json.
//   events.jsonl          zero or more files of events, one envelope per line
//                         (as EventToJson writes them; blank lines are ignored).
//   --require-all-types   fail unless the files hold at least one event of every
//                         type that has a schema (used with events_dump's output).
//
// Always checks the schema folder itself: every type schema compiles, agrees
// with the envelope schema (same run_id/seq/at rules, its type listed in the
// envelope's enum), and has a fixture that passes both its own schema and the
// envelope schema; every fixture has a schema. Then every line of every file
// must be JSON, pass the envelope schema and the schema of its `type` (an
// unknown type fails), and within a file the seq of each run must increase.
// A file with no events fails (an empty dump is a broken dump).
//
// Prints each failure and a summary; exits 0 when all passed, 1 when anything
// failed, 2 on bad usage. Needs ajv and ajv-formats: run tests/events/install.sh
// first (ctest does, through the events_npm fixture).
//
// Example (what an end-to-end test does with a finished run's events, written
// one envelope per line to run.jsonl by whatever dumps them):
//   bash tests/events/install.sh
//   node tests/events/validate.mjs schemas/events run.jsonl

import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join, basename } from "node:path";
import { isDeepStrictEqual } from "node:util";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const SCHEMA_SUFFIX = ".schema.json";
const ENVELOPE = "envelope" + SCHEMA_SUFFIX;
// Envelope properties every type schema must describe exactly as the envelope does.
const SHARED_PROPERTIES = ["run_id", "seq", "at"];

function usage(message) {
  console.error(`validate.mjs: ${message}`);
  console.error("usage: node validate.mjs <schemas_dir> [--require-all-types] [events.jsonl ...]");
  process.exit(2);
}

const args = process.argv.slice(2);
const requireAllTypes = args.includes("--require-all-types");
const positional = args.filter((a) => a !== "--require-all-types");
const unknownFlag = positional.find((a) => a.startsWith("--"));
if (unknownFlag) usage(`unknown option ${unknownFlag}`);
if (positional.length < 1) usage("missing <schemas_dir>");
const [schemasDir, ...eventFiles] = positional;
if (!existsSync(join(schemasDir, ENVELOPE))) {
  usage(`${schemasDir} has no ${ENVELOPE}; pass the schemas/events folder`);
}

let passed = 0;
const failures = [];
function fail(where, what) {
  failures.push(`${where}: ${what}`);
}

function readJson(path) {
  return JSON.parse(readFileSync(path, "utf8"));
}

function describeErrors(errors) {
  return (errors ?? [])
    .map((e) => {
      const at = e.instancePath === "" ? "(root)" : e.instancePath;
      const params = Object.keys(e.params ?? {}).length ? ` ${JSON.stringify(e.params)}` : "";
      return `${at} ${e.message}${params}`;
    })
    .join("; ");
}

const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv);

// --- The schema folder -------------------------------------------------------

const envelopeSchema = readJson(join(schemasDir, ENVELOPE));
let validateEnvelope;
try {
  validateEnvelope = ajv.compile(envelopeSchema);
} catch (e) {
  console.error(`validate.mjs: ${ENVELOPE} does not compile: ${e.message}`);
  process.exit(1);
}

const typeValidators = new Map(); // type -> compiled schema
for (const name of readdirSync(schemasDir).sort()) {
  if (!name.endsWith(SCHEMA_SUFFIX) || name === ENVELOPE) continue;
  const type = name.slice(0, -SCHEMA_SUFFIX.length);
  const where = join(schemasDir, name);
  let schema;
  try {
    schema = readJson(where);
    typeValidators.set(type, ajv.compile(schema));
  } catch (e) {
    fail(where, `does not load or compile: ${e.message}`);
    continue;
  }
  const props = schema.properties ?? {};
  if (props.type?.const !== type) {
    fail(where, `properties.type.const must be "${type}", got ${JSON.stringify(props.type?.const)}`);
  }
  for (const p of SHARED_PROPERTIES) {
    if (!isDeepStrictEqual(props[p], envelopeSchema.properties[p])) {
      fail(where, `properties.${p} differs from ${ENVELOPE}; keep them identical`);
    }
  }
  if (!isDeepStrictEqual(schema.required, envelopeSchema.required)) {
    fail(where, `required differs from ${ENVELOPE}`);
  }
  if (props.data?.additionalProperties !== false) {
    fail(where, "properties.data must set additionalProperties: false");
  }
  if (!(envelopeSchema.properties.type.enum ?? []).includes(type)) {
    fail(join(schemasDir, ENVELOPE), `properties.type.enum lacks "${type}"`);
  }
}
for (const type of envelopeSchema.properties.type.enum ?? []) {
  if (!typeValidators.has(type) && !existsSync(join(schemasDir, type + SCHEMA_SUFFIX))) {
    fail(join(schemasDir, ENVELOPE), `lists type "${type}" but ${type}${SCHEMA_SUFFIX} is missing`);
  }
}
if (typeValidators.size === 0) fail(schemasDir, "holds no <type>.schema.json");

// Validates one envelope; returns true when it passed.
function checkEvent(where, event, expectedType) {
  const problems = [];
  if (!validateEnvelope(event)) {
    problems.push(`envelope: ${describeErrors(validateEnvelope.errors)}`);
  }
  const type = event !== null && typeof event === "object" ? event.type : undefined;
  if (expectedType !== undefined && type !== expectedType) {
    problems.push(`type is ${JSON.stringify(type)}, expected "${expectedType}"`);
  }
  const validate = typeValidators.get(type);
  if (validate === undefined) {
    problems.push(`unknown event type ${JSON.stringify(type)} (no ${type}${SCHEMA_SUFFIX})`);
  } else if (!validate(event)) {
    problems.push(`${type}: ${describeErrors(validate.errors)}`);
  }
  if (problems.length > 0) {
    fail(where, problems.join(" | "));
    return false;
  }
  passed++;
  return true;
}

// --- Fixtures ----------------------------------------------------------------

const fixturesDir = join(schemasDir, "fixtures");
const fixtureNames = existsSync(fixturesDir) ? readdirSync(fixturesDir).sort() : [];
let fixtureCount = 0;
for (const type of typeValidators.keys()) {
  const where = join(fixturesDir, `${type}.json`);
  if (!fixtureNames.includes(`${type}.json`)) {
    fail(where, `missing: every schema needs a fixture`);
    continue;
  }
  fixtureCount++;
  let event;
  try {
    event = readJson(where);
  } catch (e) {
    fail(where, `not JSON: ${e.message}`);
    continue;
  }
  checkEvent(where, event, type);
}
for (const name of fixtureNames) {
  const type = basename(name, ".json");
  if (!name.endsWith(".json") || !typeValidators.has(type)) {
    fail(join(fixturesDir, name), "fixture without a schema (name it <type>.json)");
  }
}

// --- Event files ---------------------------------------------------------------

let eventCount = 0;
const typesSeen = new Set();
for (const file of eventFiles) {
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    fail(file, `cannot read: ${e.message}`);
    continue;
  }
  const lastSeq = new Map(); // run_id -> last seq seen in this file
  let inFile = 0;
  text.split("\n").forEach((line, i) => {
    if (line.trim() === "") return;
    const where = `${file}:${i + 1}`;
    inFile++;
    eventCount++;
    let event;
    try {
      event = JSON.parse(line);
    } catch (e) {
      fail(where, `not JSON: ${e.message}`);
      return;
    }
    if (!checkEvent(where, event, undefined)) return;
    typesSeen.add(event.type);
    const prev = lastSeq.get(event.run_id);
    if (prev !== undefined && event.seq <= prev) {
      fail(where, `seq ${event.seq} of run ${event.run_id} does not follow seq ${prev}`);
      passed--;
    }
    lastSeq.set(event.run_id, event.seq);
  });
  if (inFile === 0) fail(file, "holds no events");
}
if (requireAllTypes) {
  for (const type of typeValidators.keys()) {
    if (!typesSeen.has(type)) fail(eventFiles.join(", ") || "(no files)", `no ${type} event`);
  }
}

// --- Summary -------------------------------------------------------------------

for (const f of failures) console.error(`FAIL ${f}`);
console.log(
  `validate.mjs: ${typeValidators.size} type schemas, ${fixtureCount} fixtures, ` +
    `${eventCount} events in ${eventFiles.length} files`,
);
console.log(`${passed} passed, ${failures.length} failed`);
process.exit(failures.length === 0 ? 0 : 1);
