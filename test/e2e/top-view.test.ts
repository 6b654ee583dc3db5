// `switchboard top`'s ink view rendered with ink-testing-library from fixed snapshots: the
// panels, the selection under j/k and the arrow keys, and what c and a do (frames asserted).

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import React from 'react';
import { render } from 'ink-testing-library';
import { TopApp, TopView } from '../../src/cli/top/view.js';
import { age, allocateRows, screenLines } from '../../src/cli/top/layout.js';
import { eventFromPush, eventsBetween, type SelectableRow, type TopSnapshot } from '../../src/cli/top/snapshot.js';

const h = React.createElement;
const NOW = Date.parse('2026-11-30T10:00:00Z');
const DOWN = '\u001B[B';
const UP = '\u001B[A';

function snapshot(overrides: Partial<TopSnapshot> = {}): TopSnapshot {
  return {
    source: 'server',
    sourceLabel: 'server pid 4242 on /state/switchboard.sock (1 client(s), 2 run(s) in it)',
    stateDir: '/state',
    takenAt: NOW,
    lanes: [
      { lane: 'main', used: 2, capacity: 8 },
      { lane: 'cron', used: 0, capacity: 4 },
    ],
    active: [
      { runId: 'run-alice', sessionKey: 'agent:main:direct:alice', agentId: 'main', lane: 'main', startedAt: NOW - 65_000, pid: 4242, hostname: 'host-a', state: 'running' },
      { runId: 'run-bob', sessionKey: 'agent:main:direct:bob', agentId: 'main', lane: 'main', startedAt: NOW - 5_000, pid: 4242, hostname: 'host-a', state: 'aborting' },
    ],
    queued: [
      {
        runId: 'q-alice-1',
        sessionKey: 'agent:main:direct:alice',
        agentId: 'main',
        mode: 'followup',
        kind: 'user',
        state: 'queued',
        requester: 'alice',
        owner: { pid: 4242, hostname: 'host-a', alive: true },
        enqueuedAt: NOW - 30_000,
        position: 1,
      },
      {
        runId: 'q-carol-1',
        sessionKey: 'agent:main:direct:carol',
        agentId: 'main',
        mode: 'steer',
        kind: 'user',
        state: 'parked',
        requester: 'carol',
        owner: { pid: 999, hostname: 'host-b', alive: false },
        enqueuedAt: NOW - 3_000,
        position: 1,
      },
    ],
    locks: [
      { path: 'lanes/main/slot-0.lock', pid: 4242, hostname: 'host-a', sessionKey: 'agent:main:direct:alice', ageMs: 65_000, maxHoldMs: 720_000, state: 'held' },
      { path: 'agents/main/sessions/s1.jsonl.lock', pid: 777, hostname: 'host-a', sessionKey: null, ageMs: 900_000, maxHoldMs: 720_000, state: 'over-held' },
    ],
    events: [
      { at: NOW - 1_000, type: 'reply', sessionKey: 'agent:main:direct:bob', runId: 'run-bob', detail: 'slow-echo: hi' },
      { at: NOW - 2_000, type: 'run_started', sessionKey: 'agent:main:direct:bob', runId: 'run-bob', detail: 'lane main' },
      { at: NOW - 9_000, type: 'result', sessionKey: 'agent:main:direct:bob', runId: 'run-bob', detail: 'started' },
    ],
    ...overrides,
  };
}

/** Waits for React to apply input: polls the last frame until it satisfies `check` (generous deadline). */
async function frameWhere(lastFrame: () => string | undefined, check: (frame: string) => boolean, what: string): Promise<string> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const frame = lastFrame() ?? '';
    if (check(frame)) return frame;
    if (Date.now() > deadline) assert.fail(`no frame ${what}; last frame:\n${frame}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The line of the frame that holds `text`. */
function lineWith(frame: string, text: string): string {
  const line = frame.split('\n').find((candidate) => candidate.includes(text));
  assert.ok(line !== undefined, `a line with ${text} in:\n${frame}`);
  return line;
}

function selectedLine(frame: string): string | undefined {
  return frame.split('\n').find((line) => line.startsWith('> '));
}

describe('top view: panels from a snapshot', () => {
  test('every panel shows its rows: runs with age, lane occupancy, queued items with owners, locks with age and max hold, events newest first', () => {
    const { lastFrame, unmount } = render(h(TopView, { snapshot: snapshot(), selected: null, status: null, width: 120, height: 40, color: false }));
    const frame = lastFrame() ?? '';
    unmount();
    assert.match(lineWith(frame, 'switchboard top'), /source: server pid 4242 on \/state\/switchboard\.sock/);
    assert.match(lineWith(frame, 'main '), /main\s+\[##------\] 2\/8/);
    assert.match(lineWith(frame, 'cron '), /cron\s+\[----\] 0\/4/);
    assert.ok(frame.includes('Active runs (2)'));
    assert.match(lineWith(frame, 'run-alice'), /agent:main:direct:alice\s+run-alice\s+main\s+1m05s\s+4242@host-a\s+running/);
    assert.match(lineWith(frame, 'run-bob '), /aborting/);
    assert.ok(frame.includes('Queued (2)'));
    assert.match(lineWith(frame, 'q-alice-1'), /q-alice-1\s+1\s+followup\/user\s+queued\s+4242@host-a\s+alice\s+30s/);
    assert.match(lineWith(frame, 'q-carol-1'), /steer\/user\s+parked\s+999@host-b \(dead\)/);
    assert.ok(frame.includes('Locks (2)'));
    assert.match(lineWith(frame, 'slot-0.lock'), /lanes\/main\/slot-0\.lock\s+4242@host-a\s+1m05s\s+12m00s\s+held/);
    assert.match(lineWith(frame, 's1.jsonl.lock'), /777@host-a\s+15m00s\s+12m00s\s+over-held/);
    const lines = frame.split('\n');
    const events = [/1s ago\s+reply/, /2s ago\s+run_started/, /9s ago\s+result/].map((pattern) => lines.findIndex((line) => pattern.test(line)));
    assert.ok(events[0] > 0 && events[0] < events[1] && events[1] < events[2], `events newest first: ${events}`);
    assert.match(lineWith(frame, 'slow-echo: hi'), /1s ago\s+reply\s+agent:main:direct:bob\s+run run-bob/);
  });

  test('runs and queued items of a server\'s incognito sessions carry a marker', () => {
    const base = snapshot();
    const { lastFrame, unmount } = render(
      h(TopView, {
        snapshot: { ...base, active: [{ ...base.active[0]!, incognito: true }, base.active[1]!], queued: [{ ...base.queued[0]!, incognito: true }, base.queued[1]!] },
        selected: null,
        status: null,
        width: 140,
        height: 40,
        color: false,
      }),
    );
    const frame = lastFrame() ?? '';
    unmount();
    assert.match(lineWith(frame, 'run-alice'), /\(incognito\) agent:main:direct:alice\s+run-alice/);
    assert.match(lineWith(frame, 'q-alice-1'), /\(incognito\) agent:main:direct:alice\s+q-alice-1/);
    assert.doesNotMatch(lineWith(frame, 'run-bob '), /incognito/);
    assert.doesNotMatch(lineWith(frame, 'q-carol-1'), /incognito/);
  });

  test('empty panels say so, and a failed refresh is shown under the header', () => {
    const { lastFrame, unmount } = render(
      h(TopView, {
        snapshot: snapshot({ source: 'store', sourceLabel: 'store /state (no server at /state/switchboard.sock)', active: [], queued: [], locks: [], events: [], error: 'the store is corrupt' }),
        selected: null,
        status: null,
        width: 100,
        height: 40,
        color: false,
      }),
    );
    const frame = lastFrame() ?? '';
    unmount();
    const lines = frame.split('\n');
    assert.match(lines[0], /source: store \/state \(no server/);
    assert.equal(lines[1], 'refresh failed: the store is corrupt');
    for (const text of ['no active runs', 'nothing queued', 'no locks held', 'none yet', 'status: nothing to select']) assert.ok(frame.includes(text), text);
  });

  test('a short terminal cuts panels to fit ("... N more") and keeps the selected row visible', () => {
    const many = snapshot({
      queued: Array.from({ length: 12 }, (_, i) => ({ ...snapshot().queued[0], runId: `q-${i}`, position: i + 1 })),
    });
    const selected: SelectableRow = { kind: 'queued', runId: 'q-11', sessionKey: 'agent:main:direct:alice' };
    const lines = screenLines({ snapshot: many, selected, status: null, width: 100, height: 24 });
    assert.ok(lines.length <= 23, `fits in 24 rows with one to spare: ${lines.length}`);
    const text = lines.map((line) => line.text).join('\n');
    assert.match(text, /\.\.\. \d+ more/);
    assert.match(selectedLine(text) ?? '', /q-11/);
    assert.ok(!text.includes('q-0 '), 'the first items scrolled out to show the selection');
  });
});

describe('top view: 80 columns', () => {
  test('every column of every panel stays on screen: long keys and run ids give up room, nothing is cut off the right', () => {
    const long = snapshot({
      active: [{ ...snapshot().active[0], runId: '0f8e4c1a-5b7d-4e2f-9a3c-6d1b2e8f7a90', sessionKey: 'agent:main:telegram:group:-1001234567890:topic:42' }],
      queued: [{ ...snapshot().queued[0], runId: '7c9d2e4f-1a3b-4c5d-8e6f-0a1b2c3d4e5f', sessionKey: 'agent:main:telegram:group:-1001234567890:topic:42', requester: 'a-very-long-sender-name' }],
      locks: [{ ...snapshot().locks[1], path: 'agents/main/sessions/0f8e4c1a-5b7d-4e2f-9a3c-6d1b2e8f7a90-topic-42.jsonl.lock', sessionKey: 'agent:main:telegram:group:-1001234567890:topic:42' }],
    });
    const lines = screenLines({ snapshot: long, selected: null, status: null, width: 80, height: 40 }).map((line) => line.text);
    for (const line of lines) assert.ok(line.length <= 80, `fits 80 columns: ${JSON.stringify(line)}`);
    const row = (text: string) => lines.find((line) => line.includes(text)) ?? assert.fail(`a line with ${text}:\n${lines.join('\n')}`);
    assert.match(row('Run  '), /Session\s+Run\s+Lane\s+Age\s+Pid\s+State$/);
    assert.match(row('0f8e4c1a'), /main\s+1m05s\s+4242@host-a\s+running$/, 'the last column of an active run is whole');
    assert.match(row('7c9d2e4f'), /\s1\s+followup\/user\s+queued\s+4242@\S*\s+a-very\S*\s+30s$/, 'the queued row ends with its age');
    assert.match(row('MaxHold'), /Lock\s+Holder\s+Age\s+MaxHold\s+State\s+Session$/);
    assert.match(row('over-held'), /^  agents\/\S+\s+777@host-a\s+15m00s\s+12m00s\s+over-held\s+agent:\S+$/);
    assert.match(lines[0], /^switchboard top  10:00:00Z  source: server/, 'the time is never what gets cut');
    assert.ok(lines.includes('up/down or j/k select   c cancel queued item   a abort session   q quit'));
  });

  test('never as tall as the terminal (a full screen would make ink clear it, scrollback included)', () => {
    for (const height of [5, 10, 16]) {
      const lines = screenLines({ snapshot: snapshot(), selected: null, status: null, width: 80, height });
      assert.ok(lines.length <= height - 1, `${lines.length} lines in ${height} rows`);
      assert.match(lines[lines.length - 1].text, /^up\/down/, 'the keys line stays');
    }
  });
});

describe('top app: keys', () => {
  test('j, k and the arrow keys move the selection over active runs and queued items', async () => {
    const noop = async () => 'ok';
    const { lastFrame, stdin, unmount } = render(h(TopApp, { snapshot: snapshot(), onCancel: noop, onAbort: noop, width: 120, color: false }));
    try {
      assert.match(selectedLine(lastFrame() ?? '') ?? '', /run-alice/);
      stdin.write('j');
      await frameWhere(lastFrame, (f) => /run-bob/.test(selectedLine(f) ?? ''), 'with run-bob selected after j');
      stdin.write(DOWN);
      await frameWhere(lastFrame, (f) => /q-alice-1/.test(selectedLine(f) ?? ''), 'with q-alice-1 selected after down');
      stdin.write(DOWN);
      stdin.write(DOWN); // stops at the last row
      await frameWhere(lastFrame, (f) => /q-carol-1/.test(selectedLine(f) ?? ''), 'with q-carol-1 selected');
      stdin.write('k');
      await frameWhere(lastFrame, (f) => /q-alice-1/.test(selectedLine(f) ?? ''), 'with q-alice-1 selected after k');
      stdin.write(UP);
      const frame = await frameWhere(lastFrame, (f) => /run-bob/.test(selectedLine(f) ?? ''), 'with run-bob selected after up');
      assert.equal(frame.split('\n').filter((line) => line.startsWith('> ')).length, 1, 'one selected row');
      assert.match(frame, /status: selected run run-bob of agent:main:direct:bob/);
    } finally {
      unmount();
    }
  });

  test('c asks, then cancels the selected queued item on y and shows the outcome; on an active run it only explains', async () => {
    const cancelled: SelectableRow[] = [];
    const onCancel = async (row: SelectableRow) => {
      cancelled.push(row);
      return `cancelled ${row.runId} (${row.sessionKey})`;
    };
    const { lastFrame, stdin, unmount } = render(h(TopApp, { snapshot: snapshot(), onCancel, onAbort: async () => 'unused', width: 120, color: false }));
    try {
      stdin.write('c');
      await frameWhere(lastFrame, (f) => f.includes('status: run-alice is an active run, not a queued item'), 'explaining that c needs a queued item');
      assert.deepEqual(cancelled, []);
      stdin.write('j');
      stdin.write('j');
      await frameWhere(lastFrame, (f) => /q-alice-1/.test(selectedLine(f) ?? ''), 'with q-alice-1 selected');
      stdin.write('c');
      await frameWhere(lastFrame, (f) => f.includes('status: cancel queued item q-alice-1 of agent:main:direct:alice? y/n'), 'asking first');
      stdin.write('n');
      await frameWhere(lastFrame, (f) => f.includes('status: cancel q-alice-1: not done'), 'saying n changed nothing');
      assert.deepEqual(cancelled, [], 'n (or any key but y) cancels nothing');
      stdin.write('c');
      await frameWhere(lastFrame, (f) => f.includes('q-alice-1 of agent:main:direct:alice? y/n'), 'asking again');
      stdin.write('y');
      await frameWhere(lastFrame, (f) => f.includes('status: cancelled q-alice-1 (agent:main:direct:alice)'), 'with the cancel outcome');
      assert.deepEqual(cancelled, [{ kind: 'queued', runId: 'q-alice-1', sessionKey: 'agent:main:direct:alice' }]);
    } finally {
      unmount();
    }
  });

  test('a asks, then aborts the selected session on y; a failure is shown in the status line', async () => {
    const aborted: string[] = [];
    const onAbort = async (row: SelectableRow) => {
      aborted.push(row.sessionKey);
      if (row.sessionKey.endsWith('bob')) throw Object.assign(new Error('no session "agent:main:direct:bob"'), { hint: 'list them with `switchboard sessions`' });
      return `aborted ${row.sessionKey}: 1 queued item(s) cancelled, run ${row.runId} asked to abort`;
    };
    const { lastFrame, stdin, unmount } = render(h(TopApp, { snapshot: snapshot(), onCancel: async () => 'unused', onAbort, width: 120, color: false }));
    try {
      stdin.write('a');
      await frameWhere(lastFrame, (f) => f.includes('status: abort agent:main:direct:alice (its queued items, then its run)? y/n'), 'asking first');
      assert.deepEqual(aborted, []);
      stdin.write('y');
      await frameWhere(lastFrame, (f) => f.includes('status: aborted agent:main:direct:alice: 1 queued item(s) cancelled, run run-alice asked to abort'), 'with the abort outcome');
      stdin.write('j');
      await frameWhere(lastFrame, (f) => /run-bob/.test(selectedLine(f) ?? ''), 'with run-bob selected');
      stdin.write('a');
      await frameWhere(lastFrame, (f) => f.includes('abort agent:main:direct:bob (its queued items, then its run)? y/n'), 'asking for bob');
      stdin.write('y');
      await frameWhere(lastFrame, (f) => f.includes('status: abort agent:main:direct:bob failed: no session "agent:main:direct:bob" (list them with'), 'with the failure');
      assert.deepEqual(aborted, ['agent:main:direct:alice', 'agent:main:direct:bob']);
    } finally {
      unmount();
    }
  });

  test('the selection follows its row when a new snapshot reorders the rows', async () => {
    const noop = async () => 'ok';
    const props = { onCancel: noop, onAbort: noop, width: 120, color: false };
    const { lastFrame, stdin, rerender, unmount } = render(h(TopApp, { ...props, snapshot: snapshot() }));
    try {
      stdin.write('j');
      await frameWhere(lastFrame, (f) => /run-bob/.test(selectedLine(f) ?? ''), 'with run-bob selected');
      const first = snapshot();
      rerender(h(TopApp, { ...props, snapshot: { ...first, active: [first.active[1], first.active[0]] } }));
      const frame = await frameWhere(lastFrame, (f) => f.indexOf('run-bob ') < f.indexOf('run-alice '), 'with the runs reordered');
      assert.match(selectedLine(frame) ?? '', /run-bob/);
    } finally {
      unmount();
    }
  });
});

describe('top: pure helpers', () => {
  test('ages keep their two largest units', () => {
    assert.deepEqual([age(999), age(42_000), age(187_000), age(7_500_000), age(3 * 86_400_000 + 4 * 3_600_000), age(null)], ['0s', '42s', '3m07s', '2h05m', '3d04h', '-']);
  });

  test('rows are shared so that no panel starves the others', () => {
    assert.deepEqual(allocateRows([10, 10, 0, 10], 7), [3, 2, 0, 2]);
    assert.deepEqual(allocateRows([1, 20, 2, 3], 100), [1, 20, 2, 3]);
    assert.deepEqual(allocateRows([5, 5], 0), [0, 0]);
  });

  test('pushes become event lines; the store source reports what changed between two readings', () => {
    // A run someone aborted is shown as aborted, not as a failure.
    assert.deepEqual(eventFromPush({ event: 'run_failed', runId: 'r1', sessionKey: 'k', status: 'aborted', reason: 'aborted', message: 'run aborted: queue abort' }, NOW), {
      at: NOW,
      type: 'aborted',
      sessionKey: 'k',
      runId: 'r1',
      detail: 'run aborted: queue abort',
    });
    assert.equal(eventFromPush({ event: 'run_failed', runId: 'r2', sessionKey: 'k', status: 'failed', reason: 'exit', message: 'runner exited 1' }, NOW).type, 'run_failed');
    const before = snapshot();
    const after = { active: [before.active[0], { ...before.active[1], runId: 'run-new' }], queued: [before.queued[1]] };
    const events = eventsBetween(before, after, NOW);
    assert.deepEqual(
      events.map((event) => [event.type, event.runId]),
      [
        ['dequeued', 'q-alice-1'],
        ['run_gone', 'run-bob'],
        ['run_seen', 'run-new'],
      ],
    );
    assert.deepEqual(eventsBetween(null, after, NOW), [], 'the first reading is the baseline');
  });
});
