// Agent ids as OpenClaw normalises them (trim, lower-case, runs of other characters → "-", edge
// dashes cut): such an id may start with "_" ("_x", "__proto__"), and every store file written for
// it must pass the store's own schemas, or doctor reports a healthy store as invalid. Account ids
// follow the same rules (their pattern in sessions.schema.json is the same).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { normalizeAgentId } from '../../src/core/index.js';
import { REPO_ROOT, jsonLines, runCli, tempDir, writeJson } from '../helpers.js';

function schemaPattern(file: string, ...at: string[]): RegExp {
  let node = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'store-format', file), 'utf8'));
  for (const key of at) node = node[key];
  return new RegExp(node.pattern);
}

test('every id the normaliser makes fits the schemas of the files written for it', () => {
  const agentId = schemaPattern('transcript-header.schema.json', 'properties', 'agentId');
  const headerKey = schemaPattern('transcript-header.schema.json', 'properties', 'sessionKey');
  const registryKey = schemaPattern('sessions.schema.json', 'propertyNames');
  for (const raw of ['main', 'Work', '_x', '__proto__', 'constructor', '--a--', 'Family Helper', '../../etc', 'ü-ber', 'x'.repeat(80), '_-_']) {
    const id = normalizeAgentId(raw);
    assert.match(id, agentId, `${JSON.stringify(raw)} → ${JSON.stringify(id)}`);
    assert.match(`agent:${id}:main`, headerKey);
    assert.match(`agent:${id}:main`, registryKey);
  }
});

test('agents named "_x", "__proto__" and "constructor" get their own stores, and doctor finds them healthy', async () => {
  const dir = tempDir();
  const config = writeJson(path.join(dir, 'openclaw.json'), {
    agents: { list: [{ id: 'work', default: true }, { id: '_x' }, { id: '__proto__' }, { id: 'constructor' }] },
    bindings: [
      { agentId: '_x', match: { channel: 'slack' } },
      { agentId: '__proto__', match: { channel: 'discord' } },
      { agentId: 'constructor', match: { channel: 'signal' } },
    ],
  });
  const input = ['slack', 'discord', 'signal', 'telegram'].map((channel, i) => JSON.stringify({ channel, peer: { kind: 'direct', id: 'u1' }, text: 'hi', messageId: `m${i}` })).join('\n');
  const ingest = await runCli(['ingest', '--no-wait', '--config', config, '--state-dir', dir], { input });
  assert.equal(ingest.code, 0, ingest.stderr);
  assert.deepEqual(jsonLines(ingest.stdout).map((event) => event.agentId), ['_x', '__proto__', 'constructor', 'work']);
  for (const agent of ['_x', '__proto__', 'constructor', 'work']) assert.ok(fs.existsSync(path.join(dir, 'agents', agent, 'sessions', 'sessions.json')), agent);
  const doctor = await runCli(['doctor', '--json', '--config', config, '--state-dir', dir]);
  assert.equal(doctor.code, 0, doctor.stdout);
  const listing = await runCli(['sessions', '--all-agents', '--json', '--config', config, '--state-dir', dir]);
  assert.equal(listing.code, 0, listing.stderr);
  assert.deepEqual(jsonLines(listing.stdout)[0].sessions.map((row: { agentId: string }) => row.agentId).sort(), ['__proto__', '_x', 'constructor', 'work']);
});
