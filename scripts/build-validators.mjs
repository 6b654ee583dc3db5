// Build step: compiles the JSON Schemas in store-format/ into standalone validator modules
// (dist/validators/*.cjs), so commands validate without paying Ajv's compile cost at start-up.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import standaloneCode from 'ajv/dist/standalone/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const schemaDir = path.join(root, 'store-format');
const outDir = path.join(root, 'dist', 'validators');
fs.mkdirSync(outDir, { recursive: true });

for (const file of fs.readdirSync(schemaDir).filter((name) => name.endsWith('.schema.json')).sort()) {
  const schema = JSON.parse(fs.readFileSync(path.join(schemaDir, file), 'utf8'));
  const ajv = new Ajv.default({ code: { source: true }, allErrors: true, strict: false, strictNumbers: true });
  const validate = ajv.compile(schema);
  const out = path.join(outDir, file.replace(/\.schema\.json$/, '.cjs'));
  fs.writeFileSync(out, standaloneCode.default(ajv, validate));
}
