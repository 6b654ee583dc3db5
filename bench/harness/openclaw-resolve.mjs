// The other side of the P1 comparison: OpenClaw's published resolver (`resolveAgentRoute` from
// `openclaw/plugin-sdk/routing`) behind the same NDJSON pipe as `switchboard route resolve --batch`:
// route inputs on stdin, one route object per line on stdout, a bad line answered with an error
// object. It only imports and calls the installed package; bench/route-openclaw.mjs runs it.
//
//   node openclaw-resolve.mjs <folder holding node_modules/openclaw> <config.json> < inputs > routes

import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [installDir, configFile] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(installDir), 'package.json'));
const { resolveAgentRoute } = await import(pathToFileURL(require.resolve('openclaw/plugin-sdk/routing')).href);
const cfg = JSON.parse(fs.readFileSync(configFile, 'utf8'));

let pending = '';
let lineNumber = 0;

function resolveLines(text) {
  const out = [];
  for (const line of text.split('\n')) {
    lineNumber++;
    if (line.trim() === '') continue;
    try {
      const input = JSON.parse(line);
      out.push(JSON.stringify(resolveAgentRoute({ ...input, cfg })));
    } catch (err) {
      out.push(JSON.stringify({ error: { message: `line ${lineNumber}: ${err.message}`, line: lineNumber } }));
    }
  }
  return out.length > 0 ? `${out.join('\n')}\n` : '';
}

// Large chunks both ways, as switchboard does: whole lines of each read, one write per read.
process.stdin.setEncoding('utf8');
for await (const chunk of process.stdin) {
  const text = pending + chunk;
  const cut = text.lastIndexOf('\n');
  if (cut < 0) {
    pending = text;
    continue;
  }
  pending = text.slice(cut + 1);
  const lines = resolveLines(text.slice(0, cut));
  if (lines !== '' && !process.stdout.write(lines)) await new Promise((resolve) => process.stdout.once('drain', resolve));
}
if (pending !== '') process.stdout.write(resolveLines(pending));
