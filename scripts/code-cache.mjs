// Build step, after bundle.mjs: makes the V8 code caches bin/load-bundle.cjs starts commands from
// (for the bundle's chunks and the schema validators).
// A few everyday commands run with SWITCHBOARD_CODE_CACHE=write in a scratch state dir; each saves,
// at exit, the code of every chunk it loaded as compiled by then (a later run starts from the
// earlier one's cache, so the caches add up). A chunk no run loaded has no cache and is compiled
// from source, as before.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'bin', 'switchboard');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'switchboard-code-cache-'));
const config = path.join(scratch, 'config.json');
fs.writeFileSync(config, JSON.stringify({ bindings: [{ agentId: 'main', match: { channel: 'telegram', peer: { kind: 'direct', id: 'u1' } } }] }));
const message = (id) => JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: 'u1' }, text: 'hello', messageId: id });

const runs = [
  { args: ['route', 'resolve', '--channel', 'telegram', '--peer', 'direct:u1', '--json'] },
  { args: ['route', 'resolve', '--batch'], input: `${JSON.stringify({ channel: 'telegram', peer: { kind: 'direct', id: 'u1' } })}\n`.repeat(50) },
  { args: ['ingest', '--no-wait'], input: `${message('m1')}\n${message('m2')}\n` },
  { args: ['sessions', '--json'] },
];
try {
  for (const { args, input } of runs) {
    const run = spawnSync(process.execPath, [bin, ...args, '--config', config, '--state-dir', scratch], {
      input,
      encoding: 'utf8',
      env: { ...process.env, SWITCHBOARD_CODE_CACHE: 'write', NO_COLOR: '1' },
    });
    if (run.status !== 0) throw new Error(`code cache: \`switchboard ${args.join(' ')}\` exited ${run.status}: ${run.stderr}`);
  }
} finally {
  fs.rmSync(scratch, { recursive: true, force: true });
}
