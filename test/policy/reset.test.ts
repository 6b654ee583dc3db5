// Tests of reset policy: session type, every resolution branch of store.md's precedence,
// daily/idle freshness with ties and future timestamps, DST days in two zones, and triggers.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SwitchboardError } from '../../src/core/index.js';
import { assertConfigInvalid } from '../helpers.js';
import type { SessionConfig } from '../../src/config/types.js';
import {
  DEFAULT_BEFORE_RESET_PROMPT,
  evaluateFreshness,
  hostTimeZone,
  resolveBeforeReset,
  parseResetTrigger,
  resolveResetPolicy,
  resolveResetTriggers,
  sessionTypeFor,
  validateResetConfig,
  type ResetPolicy,
} from '../../src/policy/index.js';

const at = (iso: string): number => {
  const ms = Date.parse(iso);
  assert.ok(!Number.isNaN(ms), iso);
  return ms;
};
const MINUTE = 60_000;

function policy(fields: Partial<ResetPolicy>): ResetPolicy {
  return { mode: 'daily', atHour: 4, idleMinutes: 0, timezone: 'UTC', source: 'session.reset', ...fields };
}


describe('sessionTypeFor', () => {
  it('is thread for :thread: and :topic: keys and for messages with a threadId', () => {
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:slack:channel:c1:thread:123' }), 'thread');
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:telegram:group:-100:topic:42', peerKind: 'group' }), 'thread');
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:main', threadId: '7' }), 'thread');
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:main', threadId: 0 }), 'thread');
    assert.equal(sessionTypeFor({ sessionKey: 'AGENT:MAIN:X:THREAD:1' }), 'thread');
  });

  it('is group for group and channel peers', () => {
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:discord:channel:c1', peerKind: 'channel' }), 'group');
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:telegram:group:-100', peerKind: 'group' }), 'group');
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:x', peerKind: ' Group ' }), 'group');
  });

  it('is group for a key that names a group or channel, as OpenClaw reads it, whatever the peer says', () => {
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:telegram:group:-100' }), 'group');
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:discord:channel:c1', peerKind: 'direct' }), 'group');
    assert.equal(sessionTypeFor({ sessionKey: 'Agent:Main:Slack:Channel:C1' }), 'group');
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:telegram:group:-100:thread:9' }), 'thread');
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:telegram:direct:groupie' }), 'direct');
  });

  it('is direct otherwise', () => {
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:main' }), 'direct');
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:direct:1', peerKind: 'direct' }), 'direct');
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:main', threadId: '  ' }), 'direct');
    assert.equal(sessionTypeFor({ sessionKey: 'agent:main:main', threadId: null, peerKind: null }), 'direct');
  });
});

describe('resolveResetPolicy', () => {
  const direct = { channel: 'telegram', type: 'direct' as const };
  const group = { channel: 'telegram', type: 'group' as const };

  it('is none when nothing is configured', () => {
    for (const session of [undefined, {}, { reset: undefined }] as (SessionConfig | undefined)[]) {
      const resolved = resolveResetPolicy(session, direct);
      assert.deepEqual(resolved, { mode: 'none', atHour: 4, idleMinutes: 0, source: 'default' });
    }
  });

  it('takes the base block alone; a base block without a mode means daily', () => {
    assert.equal(resolveResetPolicy({ reset: {} }, direct).mode, 'daily');
    assert.equal(resolveResetPolicy({ reset: { atHour: 6 } }, direct).source, 'session.reset');
    assert.deepEqual(resolveResetPolicy({ reset: { mode: 'idle', idleMinutes: 30 } }, direct), {
      mode: 'idle', atHour: 4, idleMinutes: 30, source: 'session.reset',
    });
    assert.equal(resolveResetPolicy({ reset: { mode: 'none' } }, direct).mode, 'none');
  });

  it('reads the legacy session.idleMinutes as OpenClaw\'s doctor moves it into session.reset', () => {
    // Alone: an idle policy.
    assert.deepEqual(resolveResetPolicy({ idleMinutes: 30 }, direct), { mode: 'idle', atHour: 4, idleMinutes: 30, source: 'session.idleMinutes' });
    // With a reset block: its idleMinutes where the block has none.
    assert.deepEqual(resolveResetPolicy({ idleMinutes: 30, reset: { mode: 'daily', atHour: 5 } }, direct), {
      mode: 'daily', atHour: 5, idleMinutes: 30, source: 'session.reset',
    });
    assert.equal(resolveResetPolicy({ idleMinutes: 30, reset: { mode: 'idle', idleMinutes: 90 } }, direct).idleMinutes, 90);
    // Typed blocks inherit it through the base; a resetByChannel block replaces it with the base.
    assert.deepEqual(resolveResetPolicy({ idleMinutes: 30, resetByType: { group: { idleMinutes: 5 } } }, group), {
      mode: 'idle', atHour: 4, idleMinutes: 5, source: 'session.resetByType.group',
    });
    assert.equal(resolveResetPolicy({ idleMinutes: 30, resetByChannel: { telegram: { mode: 'daily' } } }, direct).idleMinutes, 0);
    assertConfigInvalid(() => resolveResetPolicy({ idleMinutes: '30' as unknown as number }, direct), 'session.idleMinutes');
    assertConfigInvalid(() => validateResetConfig({ idleMinutes: Number.NaN }), 'session.idleMinutes');
  });

  it('typed mode wins over the base mode', () => {
    const session: SessionConfig = { reset: { mode: 'daily' }, resetByType: { group: { mode: 'idle', idleMinutes: 5 } } };
    const resolved = resolveResetPolicy(session, group);
    assert.equal(resolved.mode, 'idle');
    assert.equal(resolved.source, 'session.resetByType.group');
    assert.equal(resolveResetPolicy(session, direct).mode, 'daily');
  });

  it('a typed block without a mode takes the base mode unless it is none, else daily', () => {
    assert.equal(resolveResetPolicy({ reset: { mode: 'idle' }, resetByType: { group: { atHour: 2 } } }, group).mode, 'idle');
    assert.equal(resolveResetPolicy({ reset: { mode: 'none' }, resetByType: { group: { atHour: 2 } } }, group).mode, 'daily');
    assert.equal(resolveResetPolicy({ reset: {}, resetByType: { group: {} } }, group).mode, 'daily');
    assert.equal(resolveResetPolicy({ resetByType: { group: {} } }, group).mode, 'daily');
    // A typed block of another type does not apply; base `none` stays none.
    assert.equal(resolveResetPolicy({ reset: { mode: 'none' }, resetByType: { group: {} } }, direct).mode, 'none');
  });

  it('atHour comes typed → base → 4, floored and clamped to 0–23', () => {
    assert.equal(resolveResetPolicy({ reset: { atHour: 6 }, resetByType: { group: { atHour: 2 } } }, group).atHour, 2);
    assert.equal(resolveResetPolicy({ reset: { atHour: 6 }, resetByType: { group: {} } }, group).atHour, 6);
    assert.equal(resolveResetPolicy({ resetByType: { group: {} } }, group).atHour, 4);
    assert.equal(resolveResetPolicy({ reset: { atHour: 5.9 } }, direct).atHour, 5);
    assert.equal(resolveResetPolicy({ reset: { atHour: -3 } }, direct).atHour, 0);
    assert.equal(resolveResetPolicy({ reset: { atHour: 30 } }, direct).atHour, 23);
    assert.equal(resolveResetPolicy({ reset: { atHour: 23.99 } }, direct).atHour, 23);
  });

  it('idleMinutes comes typed → base → 0, floored and at least 0', () => {
    assert.equal(resolveResetPolicy({ reset: { idleMinutes: 60 }, resetByType: { group: { idleMinutes: 10 } } }, group).idleMinutes, 10);
    assert.equal(resolveResetPolicy({ reset: { idleMinutes: 60 }, resetByType: { group: {} } }, group).idleMinutes, 60);
    assert.equal(resolveResetPolicy({ reset: { idleMinutes: 10.7 } }, direct).idleMinutes, 10);
    assert.equal(resolveResetPolicy({ reset: { idleMinutes: -5 } }, direct).idleMinutes, 0);
    assert.equal(resolveResetPolicy({ reset: {} }, direct).idleMinutes, 0);
  });

  it('reads the legacy dm block for direct sessions; direct wins when both exist', () => {
    const legacy = resolveResetPolicy({ resetByType: { dm: { mode: 'idle', idleMinutes: 15 } } }, direct);
    assert.equal(legacy.mode, 'idle');
    assert.equal(legacy.source, 'session.resetByType.dm');
    const both = resolveResetPolicy({ resetByType: { dm: { mode: 'idle' }, direct: { mode: 'daily' } } }, direct);
    assert.equal(both.mode, 'daily');
    assert.equal(both.source, 'session.resetByType.direct');
    assert.equal(resolveResetPolicy({ resetByType: { dm: { mode: 'idle' } } }, group).mode, 'none');
  });

  it('a resetByChannel block replaces both reset and resetByType', () => {
    const session: SessionConfig = {
      reset: { mode: 'idle', idleMinutes: 30, atHour: 7, timezone: 'Europe/Berlin' },
      resetByType: { group: { mode: 'idle', idleMinutes: 5 } },
      resetByChannel: { telegram: { atHour: 6 } },
    };
    assert.deepEqual(resolveResetPolicy(session, group), {
      mode: 'daily', atHour: 6, idleMinutes: 0, source: 'session.resetByChannel.telegram',
    });
    assert.deepEqual(resolveResetPolicy(session, { channel: 'discord', type: 'group' }), {
      mode: 'idle', atHour: 7, idleMinutes: 5, timezone: 'Europe/Berlin', source: 'session.resetByType.group',
    });
    assert.equal(resolveResetPolicy({ reset: { mode: 'daily' }, resetByChannel: { telegram: { mode: 'none' } } }, direct).mode, 'none');
    assert.equal(resolveResetPolicy({ resetByChannel: { telegram: {} } }, direct).atHour, 4);
  });

  it('finds the channel block case-insensitively and never through Object.prototype', () => {
    const session: SessionConfig = { reset: { mode: 'idle' }, resetByChannel: { Telegram: { mode: 'daily' } } };
    assert.equal(resolveResetPolicy(session, { channel: 'telegram', type: 'direct' }).mode, 'daily');
    assert.equal(resolveResetPolicy(session, { channel: 'constructor', type: 'direct' }).mode, 'idle');
    assert.equal(resolveResetPolicy(session, { channel: '__proto__', type: 'direct' }).mode, 'idle');
    assert.equal(resolveResetPolicy(session, { type: 'direct' }).mode, 'idle');
    const nullBlock = { reset: { mode: 'idle' }, resetByChannel: { telegram: null } } as unknown as SessionConfig;
    assert.equal(resolveResetPolicy(nullBlock, direct).mode, 'idle');
  });

  it('timezone comes typed → base and is validated', () => {
    const session: SessionConfig = { reset: { timezone: 'Europe/Berlin' }, resetByType: { group: { timezone: 'America/New_York' } } };
    assert.equal(resolveResetPolicy(session, group).timezone, 'America/New_York');
    assert.equal(resolveResetPolicy(session, direct).timezone, 'Europe/Berlin');
    assert.equal(resolveResetPolicy({ reset: {} }, direct).timezone, undefined);
    assertConfigInvalid(() => resolveResetPolicy({ reset: { timezone: 'Mars/Olympus_Mons' } }, direct), 'session.reset.timezone');
    assertConfigInvalid(() => resolveResetPolicy({ reset: { timezone: '' } }, direct), 'session.reset.timezone');
    assertConfigInvalid(
      () => resolveResetPolicy({ resetByChannel: { telegram: { timezone: 'Nowhere' } } }, direct),
      'session.resetByChannel.telegram.timezone',
    );
  });

  it('normalises mode case and rejects unknown modes and wrong types', () => {
    assert.equal(resolveResetPolicy({ reset: { mode: ' Daily ' as 'daily' } }, direct).mode, 'daily');
    assertConfigInvalid(() => resolveResetPolicy({ reset: { mode: 'weekly' as 'daily' } }, direct), 'session.reset.mode');
    assertConfigInvalid(() => resolveResetPolicy({ reset: { atHour: '4' as unknown as number } }, direct), 'session.reset.atHour');
    assertConfigInvalid(() => resolveResetPolicy({ reset: { idleMinutes: Number.NaN } }, direct), 'session.reset.idleMinutes');
    assertConfigInvalid(() => resolveResetPolicy({ reset: 'daily' as unknown as object }, direct), 'session.reset');
    assertConfigInvalid(
      () => resolveResetPolicy({ resetByType: { group: { mode: 'x' as 'daily' } } }, group),
      'session.resetByType.group.mode',
    );
  });
});

describe('validateResetConfig', () => {
  it('accepts a good config and reports the first bad block anywhere', () => {
    validateResetConfig(undefined);
    validateResetConfig({
      reset: { mode: 'daily', atHour: 4, timezone: 'UTC' },
      resetByType: { dm: { mode: 'idle', idleMinutes: 5 } },
      resetByChannel: { slack: { mode: 'none' } },
      resetTriggers: ['/new'],
    });
    assertConfigInvalid(() => validateResetConfig({ resetByChannel: { slack: { timezone: 'Bad/Zone' } } }),
      'session.resetByChannel.slack.timezone');
    assertConfigInvalid(() => validateResetConfig({ resetByType: { thread: { atHour: 'x' as unknown as number } } }),
      'session.resetByType.thread.atHour');
    assertConfigInvalid(() => validateResetConfig({ resetTriggers: ['/new', ''] }), 'session.resetTriggers[1]');
  });
});

describe('evaluateFreshness', () => {
  const now = at('2026-03-10T05:00:00Z');

  it('mode none never expires, whatever idleMinutes says', () => {
    const result = evaluateFreshness({ sessionStartedAt: 0, lastInteractionAt: 0 }, policy({ mode: 'none', idleMinutes: 1 }), now);
    assert.deepEqual(result, { fresh: true });
  });

  it('daily: stale when started before the most recent atHour:00 at or before now', () => {
    const daily = policy({});
    assert.deepEqual(evaluateFreshness({ sessionStartedAt: at('2026-03-10T03:59:59.999Z') }, daily, now), {
      fresh: false, staleReason: 'daily',
    });
    assert.deepEqual(evaluateFreshness({ sessionStartedAt: at('2026-03-10T04:00:00Z') }, daily, now), {
      fresh: true, nextResetAt: at('2026-03-11T04:00:00Z'),
    });
    // Before today's boundary the most recent one is yesterday's.
    const early = at('2026-03-10T03:00:00Z');
    assert.equal(evaluateFreshness({ sessionStartedAt: at('2026-03-09T05:00:00Z') }, daily, early).fresh, true);
    assert.equal(evaluateFreshness({ sessionStartedAt: at('2026-03-09T03:00:00Z') }, daily, early).fresh, false);
    // A boundary exactly at now counts.
    const boundary = at('2026-03-10T04:00:00Z');
    assert.equal(evaluateFreshness({ sessionStartedAt: boundary - 1 }, daily, boundary).fresh, false);
  });

  it('daily uses atHour', () => {
    const at23 = policy({ atHour: 23 });
    assert.equal(evaluateFreshness({ sessionStartedAt: at('2026-03-09T22:59:00Z') }, at23, now).fresh, false);
    assert.equal(evaluateFreshness({ sessionStartedAt: at('2026-03-09T23:00:00Z') }, at23, now).fresh, true);
  });

  it('idle: stale only strictly after lastInteractionAt + idleMinutes', () => {
    const idle = policy({ mode: 'idle', idleMinutes: 30 });
    const last = at('2026-03-10T04:00:00Z');
    assert.deepEqual(evaluateFreshness({ sessionStartedAt: last, lastInteractionAt: last }, idle, last + 30 * MINUTE), {
      fresh: true, nextResetAt: last + 30 * MINUTE + 1,
    });
    assert.deepEqual(evaluateFreshness({ sessionStartedAt: last, lastInteractionAt: last }, idle, last + 30 * MINUTE + 1), {
      fresh: false, staleReason: 'idle',
    });
  });

  it('idle mode ignores the daily boundary; idleMinutes 0 means no expiry', () => {
    const started = at('2026-01-01T00:00:00Z');
    assert.deepEqual(evaluateFreshness({ sessionStartedAt: started, lastInteractionAt: now - MINUTE }, policy({ mode: 'idle', idleMinutes: 5 }), now), {
      fresh: true, nextResetAt: now + 4 * MINUTE + 1,
    });
    assert.deepEqual(evaluateFreshness({ sessionStartedAt: started, lastInteractionAt: started }, policy({ mode: 'idle', idleMinutes: 0 }), now), {
      fresh: true,
    });
  });

  it('daily + idle: the earlier expiry names the reason, daily on a tie', () => {
    const both = policy({ idleMinutes: 30 });
    const startedAt = at('2026-03-10T03:00:00Z'); // daily expiry 04:00
    assert.equal(evaluateFreshness({ sessionStartedAt: startedAt, lastInteractionAt: at('2026-03-10T03:30:00Z') }, both, now).staleReason, 'daily');
    assert.equal(evaluateFreshness({ sessionStartedAt: startedAt, lastInteractionAt: at('2026-03-10T03:29:59.999Z') }, both, now).staleReason, 'idle');
    assert.equal(evaluateFreshness({ sessionStartedAt: startedAt, lastInteractionAt: at('2026-03-10T03:45:00Z') }, both, now).staleReason, 'daily');
    // Only one of them stale.
    assert.equal(evaluateFreshness({ sessionStartedAt: at('2026-03-10T04:10:00Z'), lastInteractionAt: at('2026-03-10T04:20:00Z') }, both, now).staleReason, 'idle');
    assert.equal(evaluateFreshness({ sessionStartedAt: startedAt, lastInteractionAt: at('2026-03-10T04:50:00Z') }, both, now).staleReason, 'daily');
  });

  it('nextResetAt is the earlier of the next boundary and the idle expiry', () => {
    const both = policy({ idleMinutes: 120 });
    const startedAt = at('2026-03-10T04:30:00Z');
    assert.equal(evaluateFreshness({ sessionStartedAt: startedAt, lastInteractionAt: now }, both, now).nextResetAt, now + 120 * MINUTE + 1);
    const late = at('2026-03-11T03:00:00Z');
    assert.equal(evaluateFreshness({ sessionStartedAt: startedAt, lastInteractionAt: late }, both, late).nextResetAt, at('2026-03-11T04:00:00Z'));
  });

  it('ignores timestamps in the future or before 1970, falling back to the other time (as OpenClaw does)', () => {
    const future = now + 3_600_000;
    // A future start alone: no anchor, no boundary is predicted from it.
    assert.deepEqual(evaluateFreshness({ sessionStartedAt: future }, policy({}), now), { fresh: true });
    // A future last interaction is ignored: the idle check is measured from the start.
    assert.deepEqual(
      evaluateFreshness({ sessionStartedAt: at('2020-01-01T00:00:00Z'), lastInteractionAt: future }, policy({ mode: 'idle', idleMinutes: 5 }), now),
      { fresh: false, staleReason: 'idle' },
    );
    assert.deepEqual(
      evaluateFreshness({ sessionStartedAt: now - MINUTE, lastInteractionAt: future }, policy({ mode: 'idle', idleMinutes: 5 }), now),
      { fresh: true, nextResetAt: now + 4 * MINUTE + 1 },
    );
    // A future start is ignored: the daily check is measured from the last interaction.
    assert.equal(evaluateFreshness({ sessionStartedAt: future, lastInteractionAt: now - 2 * 86_400_000 }, policy({}), now).staleReason, 'daily');
    assert.equal(evaluateFreshness({ sessionStartedAt: future, lastInteractionAt: now - MINUTE }, policy({}), now).fresh, true);
    // A time before 1970 is no time: it neither expires a session nor anchors a check.
    assert.deepEqual(
      evaluateFreshness({ sessionStartedAt: now - MINUTE, lastInteractionAt: -5 }, policy({ mode: 'idle', idleMinutes: 60 }), now),
      { fresh: true, nextResetAt: now + 59 * MINUTE + 1 },
    );
    assert.equal(evaluateFreshness({ sessionStartedAt: -5, lastInteractionAt: now - MINUTE }, policy({}), now).fresh, true);
    assert.deepEqual(evaluateFreshness({ sessionStartedAt: -1, lastInteractionAt: -1 }, policy({ idleMinutes: 1 }), now), { fresh: true });
    // 1970 itself is a time.
    assert.equal(evaluateFreshness({ sessionStartedAt: 0 }, policy({}), now).staleReason, 'daily');
  });

  it('falls back to sessionStartedAt for idle when there was never an interaction', () => {
    const idle = policy({ mode: 'idle', idleMinutes: 60 });
    assert.equal(evaluateFreshness({ sessionStartedAt: now - 2 * 3_600_000 }, idle, now).staleReason, 'idle');
    assert.equal(evaluateFreshness({ sessionStartedAt: now - 30 * MINUTE, lastInteractionAt: null }, idle, now).fresh, true);
  });

  it('a missing sessionStartedAt switches the daily check off', () => {
    assert.deepEqual(evaluateFreshness({}, policy({}), now), { fresh: true });
    assert.deepEqual(evaluateFreshness({ sessionStartedAt: Number.NaN }, policy({}), now), { fresh: true });
  });

  it('without a sessionStartedAt (OpenClaw\'s reset writes none) the daily check is anchored at lastInteractionAt', () => {
    assert.equal(evaluateFreshness({ lastInteractionAt: now - 2 * 86_400_000 }, policy({}), now).staleReason, 'daily');
    assert.equal(evaluateFreshness({ lastInteractionAt: now - MINUTE }, policy({}), now).fresh, true);
  });

  it('without a sessionStartedAt, the transcript header\'s time is the start (before the last interaction)', () => {
    const header = now - 2 * 86_400_000;
    assert.equal(evaluateFreshness({ transcriptStartedAt: header, lastInteractionAt: now - MINUTE }, policy({}), now).staleReason, 'daily');
    assert.equal(evaluateFreshness({ transcriptStartedAt: now - MINUTE }, policy({ mode: 'idle', idleMinutes: 5 }), now).fresh, true);
    assert.equal(evaluateFreshness({ transcriptStartedAt: now - 10 * MINUTE }, policy({ mode: 'idle', idleMinutes: 5 }), now).staleReason, 'idle');
    // A usable sessionStartedAt wins; a header in the future or before 1970 is ignored like any time.
    assert.equal(evaluateFreshness({ sessionStartedAt: now - MINUTE, transcriptStartedAt: header }, policy({}), now).fresh, true);
    assert.equal(evaluateFreshness({ transcriptStartedAt: now + MINUTE, lastInteractionAt: now - MINUTE }, policy({}), now).fresh, true);
    assert.deepEqual(evaluateFreshness({ transcriptStartedAt: -1 }, policy({}), now), { fresh: true });
  });

  it('rejects a policy with an invalid zone and a non-finite now', () => {
    assertConfigInvalid(() => evaluateFreshness({ sessionStartedAt: 0 }, policy({ timezone: 'Not/AZone', source: 'session.reset' }), now),
      'session.reset.timezone');
    assert.throws(() => evaluateFreshness({ sessionStartedAt: 0 }, policy({}), Number.NaN), (error: unknown) =>
      error instanceof SwitchboardError && error.code === 'BAD_INPUT');
  });

  it('nextResetAt is exact: fresh one millisecond before, stale at it', () => {
    const cases: [ResetPolicy, number, number][] = [
      [policy({ timezone: 'Europe/Berlin', atHour: 2 }), at('2026-03-28T12:00:00Z'), at('2026-03-28T12:00:00Z')],
      [policy({ timezone: 'America/New_York', atHour: 1, idleMinutes: 600 }), at('2026-10-31T20:00:00Z'), at('2026-10-31T21:00:00Z')],
      [policy({ timezone: 'Australia/Lord_Howe', atHour: 2 }), at('2026-10-03T05:00:00Z'), at('2026-10-03T06:00:00Z')],
      [policy({ mode: 'idle', idleMinutes: 17 }), at('2026-05-01T00:00:00Z'), at('2026-05-01T00:05:00Z')],
    ];
    for (const [rule, startedAt, evaluatedAt] of cases) {
      const times = { sessionStartedAt: startedAt, lastInteractionAt: startedAt };
      const { fresh, nextResetAt } = evaluateFreshness(times, rule, evaluatedAt);
      assert.equal(fresh, true);
      assert.ok(nextResetAt !== undefined && nextResetAt > evaluatedAt);
      assert.equal(evaluateFreshness(times, rule, nextResetAt - 1).fresh, true, `${rule.timezone} before`);
      assert.equal(evaluateFreshness(times, rule, nextResetAt).fresh, false, `${rule.timezone} at`);
    }
  });
});

describe('evaluateFreshness across DST changes', () => {
  function boundaryCheck(timezone: string, atHour: number, boundaryIso: string): void {
    const rule = policy({ timezone, atHour });
    const boundary = at(boundaryIso);
    const later = boundary + 30 * MINUTE;
    assert.equal(evaluateFreshness({ sessionStartedAt: boundary - 1 }, rule, boundary).fresh, false, `${timezone} ${atHour}: stale at the boundary`);
    assert.equal(evaluateFreshness({ sessionStartedAt: boundary - 1 }, rule, boundary - 1).fresh, true, `${timezone} ${atHour}: not before it`);
    assert.equal(evaluateFreshness({ sessionStartedAt: boundary }, rule, later).fresh, true, `${timezone} ${atHour}: fresh after it`);
    // Predicted the day before.
    const dayBefore = boundary - 20 * 3_600_000;
    assert.equal(evaluateFreshness({ sessionStartedAt: dayBefore }, rule, dayBefore).nextResetAt, boundary, `${timezone} ${atHour}: predicted`);
  }

  it('America/New_York spring forward (2026-03-08, 02:00 EST → 03:00 EDT)', () => {
    boundaryCheck('America/New_York', 4, '2026-03-08T08:00:00Z'); // 04:00 EDT, not 09:00Z
    boundaryCheck('America/New_York', 1, '2026-03-08T06:00:00Z'); // 01:00 EST
    boundaryCheck('America/New_York', 2, '2026-03-08T07:00:00Z'); // skipped: when clocks jump to 03:00
    boundaryCheck('America/New_York', 3, '2026-03-08T07:00:00Z'); // 03:00 EDT
    boundaryCheck('America/New_York', 0, '2026-03-08T05:00:00Z');
    // The day after is an ordinary EDT day.
    boundaryCheck('America/New_York', 2, '2026-03-09T06:00:00Z');
  });

  it('America/New_York fall back (2026-11-01, 02:00 EDT → 01:00 EST)', () => {
    boundaryCheck('America/New_York', 1, '2026-11-01T05:00:00Z'); // first 01:00 (EDT)
    boundaryCheck('America/New_York', 2, '2026-11-01T07:00:00Z'); // 02:00 EST
    boundaryCheck('America/New_York', 4, '2026-11-01T09:00:00Z');
    // A session started in the first 01:xx is not reset again at the second 01:00.
    const rule = policy({ timezone: 'America/New_York', atHour: 1 });
    const result = evaluateFreshness({ sessionStartedAt: at('2026-11-01T05:30:00Z') }, rule, at('2026-11-01T06:30:00Z'));
    assert.deepEqual(result, { fresh: true, nextResetAt: at('2026-11-02T06:00:00Z') });
    // The 25-hour day: from 04:00 EDT on the 31st to 04:00 EST on the 1st.
    const rule4 = policy({ timezone: 'America/New_York', atHour: 4 });
    assert.equal(evaluateFreshness({ sessionStartedAt: at('2026-10-31T08:00:00Z') }, rule4, at('2026-10-31T08:00:00Z')).nextResetAt,
      at('2026-11-01T09:00:00Z'));
  });

  it('Europe/Berlin spring forward (2026-03-29, 02:00 CET → 03:00 CEST)', () => {
    boundaryCheck('Europe/Berlin', 2, '2026-03-29T01:00:00Z'); // skipped: when clocks jump to 03:00
    boundaryCheck('Europe/Berlin', 3, '2026-03-29T01:00:00Z');
    boundaryCheck('Europe/Berlin', 4, '2026-03-29T02:00:00Z');
    boundaryCheck('Europe/Berlin', 1, '2026-03-29T00:00:00Z');
  });

  it('Europe/Berlin fall back (2026-10-25, 03:00 CEST → 02:00 CET)', () => {
    boundaryCheck('Europe/Berlin', 2, '2026-10-25T00:00:00Z'); // first 02:00 (CEST)
    boundaryCheck('Europe/Berlin', 3, '2026-10-25T02:00:00Z'); // 03:00 CET, shown once
    boundaryCheck('Europe/Berlin', 4, '2026-10-25T03:00:00Z');
    const rule = policy({ timezone: 'Europe/Berlin', atHour: 2 });
    const result = evaluateFreshness({ sessionStartedAt: at('2026-10-25T00:30:00Z') }, rule, at('2026-10-25T01:30:00Z'));
    assert.deepEqual(result, { fresh: true, nextResetAt: at('2026-10-26T01:00:00Z') });
  });

  it('reads the host clock from Date when Intl cannot name the zone of TZ', () => {
    const saved = process.env.TZ;
    try {
      const rule: ResetPolicy = { mode: 'daily', atHour: 4, idleMinutes: 0, source: 'session.reset' };
      process.env.TZ = 'JST-9';
      // 04:00 at UTC+9 = 19:00Z the day before, as for Asia/Tokyo.
      assert.equal(evaluateFreshness({ sessionStartedAt: at('2026-03-07T18:59:00Z') }, rule, at('2026-03-07T19:00:00Z')).fresh, false);
      assert.equal(evaluateFreshness({ sessionStartedAt: at('2026-03-07T19:00:00Z') }, rule, at('2026-03-07T20:00:00Z')).nextResetAt, at('2026-03-08T19:00:00Z'));
      for (const unnamed of ['', 'Not/AZone']) {
        process.env.TZ = unnamed;
        assert.equal(evaluateFreshness({ sessionStartedAt: at('2026-03-07T03:59:00Z') }, rule, at('2026-03-07T04:00:00Z')).fresh, false, unnamed);
      }
    } finally {
      if (saved === undefined) delete process.env.TZ;
      else process.env.TZ = saved;
    }
  });

  it('uses the host zone from TZ when the policy names none', () => {
    const saved = process.env.TZ;
    try {
      process.env.TZ = 'America/New_York';
      assert.equal(hostTimeZone(), 'America/New_York');
      const rule: ResetPolicy = { mode: 'daily', atHour: 4, idleMinutes: 0, source: 'session.reset' };
      assert.equal(evaluateFreshness({ sessionStartedAt: at('2026-03-08T07:59:00Z') }, rule, at('2026-03-08T08:00:00Z')).fresh, false);
      assert.equal(evaluateFreshness({ sessionStartedAt: at('2026-03-08T08:00:00Z') }, rule, at('2026-03-08T08:30:00Z')).fresh, true);
      process.env.TZ = 'Asia/Tokyo';
      assert.equal(hostTimeZone(), 'Asia/Tokyo');
      // 04:00 JST = 19:00Z the day before.
      assert.equal(evaluateFreshness({ sessionStartedAt: at('2026-03-07T18:59:00Z') }, rule, at('2026-03-07T19:00:00Z')).fresh, false);
    } finally {
      if (saved === undefined) delete process.env.TZ;
      else process.env.TZ = saved;
    }
  });
});

describe('parseResetTrigger', () => {
  it('matches a trigger alone, case-insensitively and trimmed', () => {
    assert.deepEqual(parseResetTrigger('/new'), { trigger: '/new', rest: '' });
    assert.deepEqual(parseResetTrigger('/reset'), { trigger: '/reset', rest: '' });
    assert.deepEqual(parseResetTrigger('  /RESET \n'), { trigger: '/reset', rest: '' });
  });

  it('passes the rest on', () => {
    assert.deepEqual(parseResetTrigger('/new let us start over'), { trigger: '/new', rest: 'let us start over' });
    assert.deepEqual(parseResetTrigger('/new\nwhat is up?'), { trigger: '/new', rest: 'what is up?' });
    assert.deepEqual(parseResetTrigger('/reset gpt-4o'), { trigger: '/reset', rest: 'gpt-4o' });
  });

  it('reads one model-like token after /new as a model', () => {
    assert.deepEqual(parseResetTrigger('/new gpt-4o'), { trigger: '/new', rest: '', model: 'gpt-4o' });
    assert.deepEqual(parseResetTrigger('/New openai/gpt-5'), { trigger: '/new', rest: '', model: 'openai/gpt-5' });
    assert.deepEqual(parseResetTrigger('/new llama3:8b'), { trigger: '/new', rest: '', model: 'llama3:8b' });
    assert.deepEqual(parseResetTrigger('/new Opus'), { trigger: '/new', rest: '', model: 'Opus' });
    assert.deepEqual(parseResetTrigger('/new ok.'), { trigger: '/new', rest: 'ok.' });
    assert.deepEqual(parseResetTrigger('/new why?'), { trigger: '/new', rest: 'why?' });
    assert.deepEqual(parseResetTrigger('/new gpt-4o summarise this'), { trigger: '/new', rest: 'gpt-4o summarise this' });
  });

  it('lets the caller narrow models to known ones', () => {
    const isKnownModel = (token: string): boolean => ['opus', 'gpt-4o'].includes(token.toLowerCase());
    assert.deepEqual(parseResetTrigger('/new hello', undefined, { isKnownModel }), { trigger: '/new', rest: 'hello' });
    assert.deepEqual(parseResetTrigger('/new opus', undefined, { isKnownModel }), { trigger: '/new', rest: '', model: 'opus' });
  });

  it('does not match other words or a trigger later in the text', () => {
    assert.equal(parseResetTrigger('/newer'), null);
    assert.equal(parseResetTrigger('/new-session'), null);
    assert.equal(parseResetTrigger('hello /new'), null);
    assert.equal(parseResetTrigger(''), null);
    assert.equal(parseResetTrigger('   '), null);
    assert.equal(parseResetTrigger(undefined as unknown as string), null);
  });

  it('takes a colon after a slash trigger, as OpenClaw\'s commands do', () => {
    assert.deepEqual(parseResetTrigger('/new: let us start over'), { trigger: '/new', rest: 'let us start over' });
    assert.deepEqual(parseResetTrigger('/RESET:start again'), { trigger: '/reset', rest: 'start again' });
    assert.deepEqual(parseResetTrigger('/reset:'), { trigger: '/reset', rest: '' });
    assert.deepEqual(parseResetTrigger('/fresh: start', ['/fresh']), { trigger: '/fresh', rest: 'start' });
    assert.deepEqual(parseResetTrigger('/new: gpt-4o'), { trigger: '/new', rest: '', model: 'gpt-4o' });
    // Only right after the trigger, and only for a slash command.
    assert.equal(parseResetTrigger('/newer: hi'), null);
    assert.equal(parseResetTrigger('reset: hi', ['reset']), null);
    assert.equal(parseResetTrigger('/:new'), null);
  });

  it('leaves /reset soft alone: OpenClaw\'s soft reset keeps the session', () => {
    assert.equal(parseResetTrigger('/reset soft'), null);
    assert.equal(parseResetTrigger('  /RESET  Soft  keep the plan in mind'), null);
    assert.equal(parseResetTrigger('/reset soft\nnote'), null);
    assert.equal(parseResetTrigger('/reset: soft'), null);
    // Any other word after /reset is the message of a real reset.
    assert.deepEqual(parseResetTrigger('/reset softly'), { trigger: '/reset', rest: 'softly' });
    assert.deepEqual(parseResetTrigger('/reset hard'), { trigger: '/reset', rest: 'hard' });
    assert.deepEqual(parseResetTrigger('/new soft'), { trigger: '/new', rest: '', model: 'soft' });
  });

  it('uses the configured triggers instead of the defaults', () => {
    assert.equal(parseResetTrigger('/new', ['/fresh']), null);
    assert.deepEqual(parseResetTrigger('/FRESH start', [' /Fresh ']), { trigger: '/fresh', rest: 'start' });
    // Only /new reads a model.
    assert.deepEqual(parseResetTrigger('/fresh gpt-4o', ['/fresh']), { trigger: '/fresh', rest: 'gpt-4o' });
  });
});

describe('resolveResetTriggers', () => {
  it('defaults, normalises and validates', () => {
    assert.deepEqual(resolveResetTriggers(undefined), ['/new', '/reset']);
    assert.deepEqual(resolveResetTriggers({ resetTriggers: [' /New', '/RESET'] }), ['/new', '/reset']);
    // An empty list is unset, as in OpenClaw (its default applies to an empty list too).
    assert.deepEqual(resolveResetTriggers({ resetTriggers: [] }), ['/new', '/reset']);
    assertConfigInvalid(() => resolveResetTriggers({ resetTriggers: '/new' as unknown as string[] }), 'session.resetTriggers');
    assertConfigInvalid(() => resolveResetTriggers({ resetTriggers: ['/new', 'two words'] }), 'session.resetTriggers[1]');
    assertConfigInvalid(() => resolveResetTriggers({ resetTriggers: [3 as unknown as string] }), 'session.resetTriggers[0]');
  });
});

describe('session.reset.beforeReset', () => {
  it('is off unless asked for; true takes the defaults; an object overrides field by field', () => {
    assert.equal(resolveBeforeReset(undefined), undefined);
    assert.equal(resolveBeforeReset({ reset: { mode: 'daily' } }), undefined);
    assert.equal(resolveBeforeReset({ reset: { beforeReset: false } }), undefined);
    assert.deepEqual(resolveBeforeReset({ reset: { beforeReset: true } }), { prompt: DEFAULT_BEFORE_RESET_PROMPT, timeoutMs: 120_000 });
    assert.deepEqual(resolveBeforeReset({ reset: { beforeReset: { prompt: 'save', timeoutSeconds: 1.5 } } }), { prompt: 'save', timeoutMs: 1500 });
  });

  it('refuses wrong shapes and misplaced blocks with their path', () => {
    assertConfigInvalid(() => resolveBeforeReset({ reset: { beforeReset: 'yes' as never } }), 'session.reset.beforeReset');
    assertConfigInvalid(() => resolveBeforeReset({ reset: { beforeReset: { timeoutSeconds: 0 } } }), 'session.reset.beforeReset.timeoutSeconds');
    assertConfigInvalid(() => resolveBeforeReset({ reset: { beforeReset: { prompt: '  ' } } }), 'session.reset.beforeReset.prompt');
    assertConfigInvalid(() => resolveBeforeReset({ reset: { beforeReset: { runner: {} } as never } }), 'session.reset.beforeReset.runner');
    assertConfigInvalid(() => validateResetConfig({ resetByChannel: { slack: { beforeReset: true } as never } }), 'session.resetByChannel.slack.beforeReset');
  });
});
