// Tests of maintenance planning (pure): settings and their defaults, "0 or less = disabled",
// every cleanup rule and their order, protected entries, the disk budget, due resets, cron retention.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { assertConfigInvalid } from '../helpers.js';
import {
  planCleanup,
  planCronRetention,
  planDueResets,
  resolveCronRetentionMs,
  resolveMaintenanceSettings,
  snapshotWithoutEntries,
  type ArchiveSnapshot,
  type EntrySnapshot,
  type MaintenanceSettings,
  type MaintenanceSnapshot,
} from '../../src/policy/index.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const MB = 1024 * 1024;
const NOW = Date.parse('2026-11-30T12:00:00Z');


/** Everything off: each test switches on what it looks at. */
const OFF: MaintenanceSettings = {
  mode: 'enforce',
  pruneAfterMs: null,
  maxEntries: null,
  rotateBytes: null,
  rotateKeep: 3,
  resetArchiveRetentionMs: null,
  maxDiskBytes: null,
  highWaterBytes: null,
};

function entry(key: string, ageMs: number | null, fields: Partial<EntrySnapshot> & { bytes?: number; exists?: boolean } = {}): EntrySnapshot {
  const { bytes = 100, exists = true, ...rest } = fields;
  return {
    key,
    sessionId: `id-${key}`,
    updatedAt: ageMs === null ? null : NOW - ageMs,
    pinned: false,
    model: null,
    transcript: { name: `id-${key}.jsonl`, exists, bytes: exists ? bytes : 0 },
    ...rest,
  };
}

function archive(name: string, ageMs: number, bytes = 100, reason: 'reset' | 'deleted' = 'reset'): ArchiveSnapshot {
  return { name, reason, archivedAt: NOW - ageMs, bytes };
}

function snapshot(fields: Partial<MaintenanceSnapshot> = {}): MaintenanceSnapshot {
  return { storeFileName: 'sessions.json', storeBytes: 1000, entries: [], archives: [], unreferenced: [], storeBackups: [], protectedKeys: [], ...fields };
}

const actionsOf = (plan: ReturnType<typeof planCleanup>) => Object.fromEntries(plan.sessions.map((s) => [s.key, s.action]));
const stepNames = (plan: ReturnType<typeof planCleanup>) => plan.steps.map((s) => s.step);

describe('resolveMaintenanceSettings', () => {
  it('has the documented defaults', () => {
    assert.deepEqual(resolveMaintenanceSettings(undefined), {
      mode: 'warn',
      pruneAfterMs: 30 * DAY,
      maxEntries: 500,
      rotateBytes: 10 * MB,
      rotateKeep: 3,
      resetArchiveRetentionMs: 30 * DAY,
      maxDiskBytes: null,
      highWaterBytes: null,
    });
  });

  it('reads durations and sizes; retention follows pruneAfter; high water is 80% of maxDiskBytes', () => {
    const s = resolveMaintenanceSettings({ mode: 'ENFORCE' as 'enforce', pruneAfter: '7d', maxEntries: 50, rotateBytes: '1mb', maxDiskBytes: '1gb' });
    assert.equal(s.mode, 'enforce');
    assert.equal(s.pruneAfterMs, 7 * DAY);
    assert.equal(s.resetArchiveRetentionMs, 7 * DAY);
    assert.equal(s.maxEntries, 50);
    assert.equal(s.rotateBytes, MB);
    assert.equal(s.maxDiskBytes, 1024 * MB);
    assert.equal(s.highWaterBytes, Math.floor(1024 * MB * 0.8));
    assert.equal(resolveMaintenanceSettings({ maxDiskBytes: 1000, highWaterBytes: 600 }).highWaterBytes, 600);
    // a high water above the budget is clamped to it
    assert.equal(resolveMaintenanceSettings({ maxDiskBytes: 1000, highWaterBytes: 5000 }).highWaterBytes, 1000);
    assert.equal(resolveMaintenanceSettings({ resetArchiveRetention: '2d' }).resetArchiveRetentionMs, 2 * DAY);
  });

  it('quotes a non-finite value JSON5 read (Infinity, NaN) as written, not as null', () => {
    for (const [value, shown] of [[Infinity, 'Infinity'], [-Infinity, '-Infinity'], [NaN, 'NaN']] as const) {
      assert.throws(
        () => resolveMaintenanceSettings({ maxEntries: value }),
        (err: any) => err.code === 'CONFIG_INVALID' && err.message.includes(`${shown} is not`) && !err.message.includes('null'),
      );
    }
  });

  it('any value of 0 or less (or false) disables its limit — never "delete everything"', () => {
    const cases: [number | string, number | string, number][] = [
      [0, 0, 0],
      [-1, -1, -1],
      ['0', '0', -10],
      ['-3d', '-1kb', 0],
      ['0s', '0mb', 0.4],
    ];
    for (const [duration, size, count] of cases) {
      const zero = `${duration}/${size}/${count}`;
      const s = resolveMaintenanceSettings({ pruneAfter: duration, maxEntries: count, rotateBytes: size, maxDiskBytes: size, resetArchiveRetention: duration });
      assert.equal(s.pruneAfterMs, null, `pruneAfter ${zero}`);
      assert.equal(s.maxEntries, null, `maxEntries ${zero}`);
      assert.equal(s.rotateBytes, null, `rotateBytes ${zero}`);
      assert.equal(s.maxDiskBytes, null, `maxDiskBytes ${zero}`);
      assert.equal(s.highWaterBytes, null);
      assert.equal(s.resetArchiveRetentionMs, null, `resetArchiveRetention ${zero}`);
    }
    // resetArchiveRetention: false keeps archives forever; a disabled pruneAfter does too
    assert.equal(resolveMaintenanceSettings({ resetArchiveRetention: false }).resetArchiveRetentionMs, null);
    assert.equal(resolveMaintenanceSettings({ pruneAfter: 0 }).resetArchiveRetentionMs, null);
    // a high water of 0 or less means no hysteresis: clean down to the budget itself
    assert.equal(resolveMaintenanceSettings({ maxDiskBytes: 1000, highWaterBytes: 0 }).highWaterBytes, 1000);
    assert.equal(resolveMaintenanceSettings({ maxDiskBytes: 1000, highWaterBytes: -5 }).highWaterBytes, 1000);
  });

  it('bad values are CONFIG_INVALID naming the config path', () => {
    assertConfigInvalid(() => resolveMaintenanceSettings({ mode: 'strict' as 'warn' }), 'session.maintenance.mode');
    assertConfigInvalid(() => resolveMaintenanceSettings({ pruneAfter: '5 weeks' }), 'session.maintenance.pruneAfter');
    assertConfigInvalid(() => resolveMaintenanceSettings({ maxEntries: 'many' as unknown as number }), 'session.maintenance.maxEntries');
    assertConfigInvalid(() => resolveMaintenanceSettings({ rotateBytes: {} as unknown as string }), 'session.maintenance.rotateBytes');
    assertConfigInvalid(() => resolveMaintenanceSettings({ highWaterBytes: 'lots' }), 'session.maintenance.highWaterBytes');
    assertConfigInvalid(() => resolveMaintenanceSettings({ resetArchiveRetention: '1 fortnight' }), 'session.maintenance.resetArchiveRetention');
    assertConfigInvalid(() => resolveMaintenanceSettings([] as unknown as object), 'session.maintenance');
  });

  it('cron.sessionRetention defaults to 24h; false or 0 or less disables it', () => {
    assert.equal(resolveCronRetentionMs(undefined), DAY);
    assert.equal(resolveCronRetentionMs({ sessionRetention: '2h' }), 2 * HOUR);
    assert.equal(resolveCronRetentionMs({ sessionRetention: false }), null);
    assert.equal(resolveCronRetentionMs({ sessionRetention: 0 }), null);
    assert.equal(resolveCronRetentionMs({ sessionRetention: '-1h' }), null);
    assertConfigInvalid(() => resolveCronRetentionMs({ sessionRetention: 'daily' }), 'cron.sessionRetention');
  });
});

describe('planCleanup rules', () => {
  it('prunes entries older than pruneAfter by updatedAt (strictly older), keeps unknown ages', () => {
    const plan = planCleanup(
      snapshot({ entries: [entry('a', 10 * DAY + 1), entry('b', 10 * DAY), entry('c', DAY), entry('d', null)] }),
      { ...OFF, pruneAfterMs: 10 * DAY },
      NOW,
    );
    assert.deepEqual(actionsOf(plan), { a: 'prune-stale', b: 'keep', c: 'keep', d: 'keep' });
    assert.equal(plan.pruned, 1);
    assert.equal(plan.afterCount, 3);
    assert.deepEqual(stepNames(plan), ['prune-stale', 'archive-transcripts']);
    assert.deepEqual(plan.steps[1], { step: 'archive-transcripts', files: [{ key: 'a', name: 'id-a.jsonl', bytes: 100 }] });
  });

  it('drops entries whose transcript is missing only with fixMissing; a stale one is pruned as stale first', () => {
    const snap = snapshot({ entries: [entry('gone', DAY, { exists: false }), entry('old-gone', 40 * DAY, { exists: false }), entry('ok', DAY)] });
    const without = planCleanup(snap, { ...OFF, pruneAfterMs: 30 * DAY }, NOW);
    assert.deepEqual(actionsOf(without), { gone: 'keep', 'old-gone': 'prune-stale', ok: 'keep' });
    assert.equal(without.missingTranscripts, 2);
    assert.equal(without.missing, 0);
    const withFix = planCleanup(snap, { ...OFF, pruneAfterMs: 30 * DAY }, NOW, { fixMissing: true });
    assert.deepEqual(actionsOf(withFix), { gone: 'prune-missing', 'old-gone': 'prune-stale', ok: 'keep' });
    assert.equal(withFix.missing, 1);
    // nothing to archive: neither transcript exists
    assert.deepEqual(stepNames(withFix), ['prune-stale', 'prune-missing']);
  });

  it('caps to maxEntries, oldest first; protected entries count but are never capped', () => {
    const entries = [entry('n1', 1 * HOUR), entry('n2', 2 * HOUR), entry('n3', 3 * HOUR), entry('n4', 4 * HOUR), entry('p5', 5 * HOUR, { pinned: true }), entry('u', null)];
    const plan = planCleanup(snapshot({ entries }), { ...OFF, maxEntries: 3 }, NOW);
    // 6 entries, cap 3: the oldest unprotected go — unknown age first, then n4, n3; p5 stays
    assert.deepEqual(actionsOf(plan), { n1: 'keep', n2: 'keep', n3: 'cap-overflow', n4: 'cap-overflow', p5: 'keep', u: 'cap-overflow' });
    assert.deepEqual(plan.steps[0], { step: 'cap-overflow', keys: ['u', 'n4', 'n3'] });
    assert.equal(plan.afterCount, 3);
  });

  it('purges .reset/.deleted archives older than resetArchiveRetention, oldest first; false keeps them', () => {
    const archives = [archive('x.jsonl.reset.a', 40 * DAY), archive('y.jsonl.deleted.b', 31 * DAY, 5, 'deleted'), archive('z.jsonl.reset.c', 29 * DAY)];
    const plan = planCleanup(snapshot({ archives }), { ...OFF, resetArchiveRetentionMs: 30 * DAY }, NOW);
    assert.deepEqual(plan.steps, [
      {
        step: 'purge-archives',
        files: [
          { name: 'x.jsonl.reset.a', bytes: 100, archivedAt: NOW - 40 * DAY },
          { name: 'y.jsonl.deleted.b', bytes: 5, archivedAt: NOW - 31 * DAY },
        ],
      },
    ]);
    assert.deepEqual(planCleanup(snapshot({ archives }), { ...OFF, resetArchiveRetentionMs: null }, NOW).steps, []);
  });

  it('rotates the store file when over rotateBytes, keeping 3 rotated copies (2 old + the new one)', () => {
    const storeBackups = [1, 2, 3, 4].map((n) => ({ name: `sessions.json.bak.${NOW - n * DAY}`, createdAt: NOW - n * DAY, bytes: 10 }));
    const plan = planCleanup(snapshot({ storeBytes: 2 * MB, storeBackups }), { ...OFF, rotateBytes: MB }, NOW);
    assert.deepEqual(plan.steps, [
      { step: 'rotate-store', backupName: `sessions.json.bak.${NOW}`, dropBackups: [`sessions.json.bak.${NOW - 3 * DAY}`, `sessions.json.bak.${NOW - 4 * DAY}`] },
    ]);
    // a taken name moves on by 1 ms; a small store is not rotated
    const taken = planCleanup(snapshot({ storeBytes: 2 * MB, storeBackups: [{ name: `sessions.json.bak.${NOW}`, createdAt: NOW, bytes: 1 }] }), { ...OFF, rotateBytes: MB }, NOW);
    assert.equal((taken.steps[0] as { backupName: string }).backupName, `sessions.json.bak.${NOW + 1}`);
    assert.deepEqual(planCleanup(snapshot({ storeBytes: MB }), { ...OFF, rotateBytes: MB }, NOW).steps, []);
  });

  it('runs the steps in store.md order', () => {
    const plan = planCleanup(
      snapshot({
        storeBytes: 5 * MB,
        entries: [entry('stale', 40 * DAY), entry('missing', DAY, { exists: false }), entry('old', 3 * DAY, { bytes: 5000 }), entry('new', HOUR, { bytes: 5000 })],
        archives: [archive('a.jsonl.reset.x', 50 * DAY), archive('b.jsonl.reset.y', 2 * DAY, 4000)],
        unreferenced: [{ name: 'orphan.jsonl', bytes: 3000, mtimeMs: NOW - DAY }],
      }),
      { ...OFF, pruneAfterMs: 30 * DAY, maxEntries: 1, rotateBytes: MB, resetArchiveRetentionMs: 30 * DAY, maxDiskBytes: 6000, highWaterBytes: 5000 },
      NOW,
      { fixMissing: true },
    );
    assert.deepEqual(stepNames(plan), ['prune-stale', 'prune-missing', 'cap-overflow', 'archive-transcripts', 'purge-archives', 'rotate-store', 'disk-budget']);
    assert.deepEqual(actionsOf(plan), { stale: 'prune-stale', missing: 'prune-missing', old: 'cap-overflow', new: 'keep' });
    const budget = plan.steps.at(-1) as Extract<(typeof plan.steps)[number], { step: 'disk-budget' }>;
    // removable: b (4000) + new archives of stale (100) and old (5000) + orphan (3000) + new's transcript (5000) = 17100;
    // archives go first (oldest first: b, then this run's), then the orphan; 17100 - 4000 - 100 - 5000 - 3000 = 5000 ≤ high water
    assert.deepEqual(
      budget.removals.map((r) => [r.kind, r.name]),
      [['archive', 'b.jsonl.reset.y'], ['new-archive', 'id-stale.jsonl'], ['new-archive', 'id-old.jsonl'], ['unreferenced', 'orphan.jsonl']],
    );
    assert.equal(plan.diskBudget?.totalBytesBefore, 17_100);
    assert.equal(plan.diskBudget?.totalBytesAfter, 5000);
    assert.equal(plan.diskBudget?.freedBytes, 12_100);
    assert.equal(plan.wouldMutate, true);
  });

  it('never archives or evicts a transcript another kept entry still names (hand-edited stores)', () => {
    const shared = { name: 'shared.jsonl', exists: true, bytes: 500 };
    const pruned = planCleanup(
      snapshot({ entries: [entry('old', 40 * DAY, { transcript: shared }), entry('new', HOUR, { transcript: shared })] }),
      { ...OFF, pruneAfterMs: 30 * DAY },
      NOW,
    );
    assert.deepEqual(actionsOf(pruned), { old: 'prune-stale', new: 'keep' });
    assert.deepEqual(stepNames(pruned), ['prune-stale'], 'no archive step: "new" still uses the file');
    const budget = planCleanup(
      snapshot({ entries: [entry('a', 2 * DAY, { transcript: shared }), entry('b', HOUR, { transcript: shared })] }),
      { ...OFF, maxDiskBytes: 10, highWaterBytes: 5 },
      NOW,
    );
    // a file the budget may not remove does not count toward it either
    assert.deepEqual(actionsOf(budget), { a: 'keep', b: 'keep' });
    assert.equal(budget.diskBudget?.totalBytesBefore, 0);
    assert.deepEqual(budget.steps, []);
  });

  it('with every limit at 0 or less nothing is planned, however old and big the store', () => {
    const settings = { ...resolveMaintenanceSettings({ pruneAfter: 0, maxEntries: 0, rotateBytes: 0, resetArchiveRetention: -1, maxDiskBytes: 0, highWaterBytes: 0 }), mode: 'enforce' as const };
    const entries = Array.from({ length: 50 }, (_, i) => entry(`k${i}`, 1000 * DAY + i, { bytes: 10 * MB }));
    const plan = planCleanup(snapshot({ storeBytes: 1024 * MB, entries, archives: [archive('z.jsonl.reset.q', 999 * DAY)] }), settings, NOW);
    assert.deepEqual(plan.steps, []);
    assert.equal(plan.wouldMutate, false);
    assert.equal(plan.afterCount, 50);
    assert.equal(plan.diskBudget, null);
    assert.ok(plan.sessions.every((s) => s.action === 'keep'));
  });
});

describe('planCleanup protection', () => {
  const settings: MaintenanceSettings = { ...OFF, pruneAfterMs: DAY, maxEntries: 1, maxDiskBytes: 10, highWaterBytes: 5 };
  const entries = [
    entry('pinned', 90 * DAY, { pinned: true, exists: false }),
    entry('locked', 90 * DAY, { exists: false }),
    entry('running', 90 * DAY, { bytes: 1000 }),
    entry('queued', 90 * DAY, { bytes: 1000 }),
    entry('active', 90 * DAY, { bytes: 1000 }),
    entry('free', 90 * DAY, { bytes: 1000 }),
  ];
  const snap = snapshot({
    entries,
    protectedKeys: [
      { key: 'locked', reason: 'locked' },
      { key: 'running', reason: 'running' },
      { key: 'queued', reason: 'queued' },
    ],
  });

  it('pinned, locked, running, queued and active entries are never pruned, capped or evicted', () => {
    const plan = planCleanup(snap, settings, NOW, { fixMissing: true, activeKeys: ['active'] });
    assert.deepEqual(actionsOf(plan), { pinned: 'keep', locked: 'keep', running: 'keep', queued: 'keep', active: 'keep', free: 'prune-stale' });
    assert.equal(plan.protectedCount, 5);
    const byKey = Object.fromEntries(plan.sessions.map((s) => [s.key, s.protectedBy]));
    assert.deepEqual(byKey, { pinned: ['pinned'], locked: ['locked'], running: ['running'], queued: ['queued'], active: ['active'], free: [] });
  });

  it('only removable bytes count toward the disk budget: protected transcripts never trigger it', () => {
    const plan = planCleanup(snap, { ...OFF, maxDiskBytes: 10, highWaterBytes: 5 }, NOW, { activeKeys: ['active', 'free'] });
    // 4000 protected bytes far above the 10-byte budget, nothing removable: nothing to do
    assert.equal(plan.diskBudget?.totalBytesBefore, 0);
    assert.equal(plan.diskBudget?.protectedBytes, 4000);
    assert.equal(plan.diskBudget?.overBudget, false);
    assert.deepEqual(plan.steps, []);
  });
});

describe('planCleanup disk budget', () => {
  const budget = (maxDiskBytes: number, highWaterBytes: number): MaintenanceSettings => ({ ...OFF, maxDiskBytes, highWaterBytes });
  const snap = snapshot({
    entries: [entry('e-old', 5 * DAY, { bytes: 300 }), entry('e-mid', 3 * DAY, { bytes: 300 }), entry('e-empty', 9 * DAY, { bytes: 0 }), entry('e-new', HOUR, { bytes: 300 })],
    archives: [archive('a2.jsonl.reset.2', 2 * DAY, 100), archive('a1.jsonl.reset.1', 4 * DAY, 100)],
    unreferenced: [{ name: 'o.jsonl', bytes: 100, mtimeMs: NOW - DAY }],
  });

  it('under maxDiskBytes nothing happens, even above high water (hysteresis)', () => {
    const plan = planCleanup(snap, budget(1200, 500), NOW);
    assert.equal(plan.diskBudget?.totalBytesBefore, 1200);
    assert.equal(plan.diskBudget?.overBudget, false);
    assert.deepEqual(plan.steps, []);
  });

  it('over it: archives (oldest first), unreferenced files, then oldest entries, down to high water', () => {
    const plan = planCleanup(snap, budget(1000, 500), NOW);
    const step = plan.steps[0] as Extract<(typeof plan.steps)[number], { step: 'disk-budget' }>;
    assert.deepEqual(
      step.removals.map((r) => r.name),
      ['a1.jsonl.reset.1', 'a2.jsonl.reset.2', 'o.jsonl', 'id-e-old.jsonl', 'id-e-mid.jsonl'],
    );
    // the empty transcript frees nothing, so its (older) session is not evicted
    assert.deepEqual(actionsOf(plan), { 'e-old': 'evict-budget', 'e-mid': 'evict-budget', 'e-empty': 'keep', 'e-new': 'keep' });
    assert.deepEqual(
      { ...plan.diskBudget },
      { totalBytesBefore: 1200, totalBytesAfter: 300, removedFiles: 5, removedEntries: 2, freedBytes: 900, maxBytes: 1000, highWaterBytes: 500, overBudget: true, protectedBytes: 0 },
    );
    assert.equal(plan.afterCount, 2);
  });

  it('stops as soon as the total is at or below high water', () => {
    const plan = planCleanup(snap, budget(1100, 1000), NOW);
    const step = plan.steps[0] as Extract<(typeof plan.steps)[number], { step: 'disk-budget' }>;
    assert.deepEqual(step.removals.map((r) => r.name), ['a1.jsonl.reset.1', 'a2.jsonl.reset.2']);
    assert.equal(plan.diskBudget?.totalBytesAfter, 1000);
  });
});

describe('maintain planning', () => {
  it('due resets: daily and idle expiry with no message; cron sessions are left to retention', () => {
    const session = { reset: { mode: 'daily' as const, atHour: 4, timezone: 'UTC' }, resetByChannel: { slack: { mode: 'idle' as const, idleMinutes: 30 } } };
    const due = planDueResets(
      [
        { key: 'agent:main:main', sessionId: 's1', sessionStartedAt: Date.parse('2026-11-30T03:59:00Z') },
        { key: 'agent:main:direct:bob', sessionId: 's2', sessionStartedAt: Date.parse('2026-11-30T04:00:00Z') },
        { key: 'agent:main:slack:channel:c1', sessionId: 's3', sessionStartedAt: NOW - HOUR, lastInteractionAt: NOW - 31 * MINUTE, origin: { channel: 'slack' } },
        { key: 'agent:main:cron:digest', sessionId: 's4', sessionStartedAt: NOW - 3 * DAY },
      ],
      session,
      NOW,
    );
    assert.deepEqual(due, [
      { key: 'agent:main:main', sessionId: 's1', staleReason: 'daily' },
      { key: 'agent:main:slack:channel:c1', sessionId: 's3', staleReason: 'idle' },
    ]);
    assert.deepEqual(planDueResets([{ key: 'agent:main:main', sessionId: 's1', sessionStartedAt: 0 }], undefined, NOW), [], 'no reset policy: never');
  });

  it('cron retention: cron-family entries idle longer than retention, never protected ones', () => {
    const snap = snapshot({
      entries: [
        entry('agent:main:cron:old', 2 * DAY),
        entry('agent:main:cron:fresh', HOUR),
        entry('agent:main:cron:pinned', 2 * DAY, { pinned: true }),
        entry('agent:main:cron:locked', 2 * DAY),
        entry('agent:main:main', 9 * DAY),
      ],
      protectedKeys: [{ key: 'agent:main:cron:locked', reason: 'locked' }],
    });
    assert.deepEqual(planCronRetention(snap, DAY, NOW), ['agent:main:cron:old']);
    assert.deepEqual(planCronRetention(snap, null, NOW), []);
    assert.deepEqual(planCronRetention(snap, 0, NOW), []);
    const after = snapshotWithoutEntries(snap, ['agent:main:cron:old'], NOW);
    assert.equal(after.entries.length, 4);
    assert.equal(after.archives.length, 1);
    assert.equal(after.archives[0]!.archivedAt, NOW);
  });
});
