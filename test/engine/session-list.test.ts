// The session listing builds rows only for what --limit keeps: a bounded listing must be exactly
// the head of the full one (same order, same rows, damaged rows marked), with the same total.

import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fixedClock } from '../../src/core/index.js';
import { listSessions, type EngineContext } from '../../src/engine/index.js';
import { compileRoutingTable } from '../../src/routing/index.js';
import { tempDir } from '../helpers.js';

const NOW = Date.parse('2026-11-30T12:00:00Z');
const MINUTE = 60_000;

function storeWith(entries: Record<string, unknown>): EngineContext {
  const stateDir = tempDir('sb-list-');
  const dir = path.join(stateDir, 'agents', 'main', 'sessions');
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'sessions.json'), `${JSON.stringify(entries, null, 2)}\n`);
  for (const entry of Object.values(entries) as { sessionId?: unknown }[]) {
    if (typeof entry.sessionId === 'string' && /^[a-z0-9-]+$/.test(entry.sessionId) && !entry.sessionId.startsWith('gone')) {
      writeFileSync(path.join(dir, `${entry.sessionId}.jsonl`), `${'x'.repeat(entry.sessionId.length)}\n`);
    }
  }
  const config = {};
  return { stateDir, config, table: compileRoutingTable(config), clock: fixedClock(NOW) };
}

test('a bounded listing is the head of the full one: order, rows, marks of damaged entries, total', async () => {
  const entries: Record<string, unknown> = {};
  for (let i = 0; i < 40; i++) {
    // Equal times on purpose (ties are ordered by key), some damaged rows, some missing transcripts.
    const updatedAt = NOW - Math.floor(i / 3) * MINUTE;
    const sessionId = i % 7 === 0 ? `gone-${i}` : `s-${i}`;
    entries[`agent:main:telegram:direct:u${i}`] =
      i % 11 === 5 ? { sessionId: '../escape', updatedAt } : i % 13 === 4 ? { sessionId, updatedAt: 'yesterday' } : { sessionId, updatedAt, sessionStartedAt: updatedAt, model: 'm', totalTokens: i, contextTokens: 100 };
  }
  entries['agent:main:main'] = { sessionId: 's-main', updatedAt: NOW - 5 * MINUTE, pinned: true };
  const ctx = storeWith(entries);

  const all = await listSessions(ctx, {});
  assert.equal(all.total, 41);
  assert.equal(all.count, 41);
  // The damaged rows are listed and marked; a missing transcript is a null size.
  assert.ok(all.sessions.some((row) => row.problem !== undefined && row.transcriptBytes === null && row.sessionStartedAt === null));
  assert.ok(all.sessions.some((row) => row.problem === undefined && row.transcriptBytes === null));
  assert.ok(all.sessions.some((row) => row.problem === undefined && row.transcriptBytes !== null && row.transcriptBytes > 0));
  for (const limit of [0, 1, 5, 17, 40, 41, 100]) {
    const some = await listSessions(ctx, { limit });
    assert.equal(some.total, 41, `total at --limit ${limit}`);
    assert.equal(some.count, Math.min(limit, 41));
    assert.deepEqual(some.sessions, all.sessions.slice(0, limit), `--limit ${limit}`);
  }
  const recent = await listSessions(ctx, { activeMinutes: 4, limit: 3 });
  const recentAll = all.sessions.filter((row) => NOW - row.updatedAt <= 4 * MINUTE);
  assert.equal(recent.total, recentAll.length);
  assert.deepEqual(recent.sessions, recentAll.slice(0, 3));
});
