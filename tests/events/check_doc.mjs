// Checks docs/formats/events.md against schemas/events: every event type with
// a schema has a row in the doc's table, and the row names every field of the
// schema's `data` (issue 8, finding 9: run.created's `entry` was missing).
//
// Usage: node tests/events/check_doc.mjs <schemas_dir> <events.md>
// Exits 0 when the doc agrees, 1 (listing each gap) when it does not.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

const [schemasDir, docPath] = process.argv.slice(2);
if (!schemasDir || !docPath) {
  console.error("usage: node check_doc.mjs <schemas_dir> <events.md>");
  process.exit(2);
}
const rows = new Map();
for (const line of readFileSync(docPath, "utf8").split("\n")) {
  const cells = line.split("|").map((c) => c.trim());
  if (cells.length >= 5 && /^[a-z_]+\.[a-z_]+$/.test(cells[1])) rows.set(cells[1], cells[3]);
}
let failures = 0;
for (const file of readdirSync(schemasDir).sort()) {
  if (!file.endsWith(".schema.json") || file === "envelope.schema.json") continue;
  const type = file.slice(0, -".schema.json".length);
  const schema = JSON.parse(readFileSync(join(schemasDir, file), "utf8"));
  const fields = Object.keys(schema.properties?.data?.properties ?? {});
  if (!rows.has(type)) {
    console.error(`${docPath}: no row for event type ${type}`);
    failures++;
    continue;
  }
  const words = new Set(rows.get(type).match(/[a-z_]+/g) ?? []);
  for (const f of fields) {
    if (!words.has(f)) {
      console.error(`${docPath}: the row of ${type} does not name its field '${f}'`);
      failures++;
    }
  }
}
console.log(failures === 0 ? "events.md names every schema field" : `${failures} gap(s)`);
process.exit(failures === 0 ? 0 : 1);
