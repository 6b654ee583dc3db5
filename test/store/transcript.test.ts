// Transcript tests on real files: header + first entry, parentId chains, torn tails, the
// streaming reader's counts, lock rules, write errors, and 4 processes appending at once (P6).

import assert from 'node:assert/strict';
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fixedClock, SwitchboardError } from '../../src/core/index.js';
import {
  appendEntries,
  appendToTranscript,
  loadTranscript,
  lockPathFor,
  messageContentText,
  readTranscript,
  transcriptStats,
  withLock,
  type NewTranscriptEntry,
  type TranscriptRecord,
} from '../../src/store/index.js';
import { startChild, waitUntil, type ChildRun } from '../fixtures/store-child-process.js';
import { tempDir as makeTempDir } from '../helpers.js';

const tempDir = (): string => makeTempDir('sb-transcript-');

const session = { sessionId: '2f7c1d9e-0000-4000-8000-000000000001', sessionKey: 'agent:main:telegram:direct:42', agentId: 'main', cwd: '/srv/work' };
const clock = fixedClock(Date.parse('2026-03-01T09:30:00.000Z'));

function isCode(code: string, exitCode: number) {
  return (err: unknown): boolean => err instanceof SwitchboardError && err.code === code && err.exitCode === exitCode;
}

/** Independent oracle: the raw lines of the file, parsed or not. */
function rawLines(file: string): string[] {
  return readFileSync(file, 'utf8').split('\n').filter((line) => line !== '');
}

function parses(line: string): boolean {
  try {
    const value = JSON.parse(line) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) && typeof (value as { type?: unknown }).type === 'string';
  } catch {
    return false;
  }
}

function assertChained(entries: TranscriptRecord[]): void {
  entries.forEach((entry, i) => {
    assert.equal(entry.parentId, i === 0 ? null : entries[i - 1]!.id, `entry ${i} chains to the one before it`);
  });
}

describe('appending', () => {
  test('the first append creates the file (0600) with the header and the first entry together', async () => {
    const file = path.join(tempDir(), `${session.sessionId}.jsonl`);
    const result = await appendToTranscript(
      file,
      { type: 'message', message: { role: 'user', content: [{ type: 'text', text: 'hi\nthere' }], timestamp: 1 } },
      { session, clock },
    );
    assert.equal(result.createdFile, true);
    assert.equal(result.wroteHeader, true);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const lines = readFileSync(file, 'utf8').split('\n');
    assert.equal(lines.length, 3, 'header line, entry line, final newline');
    assert.deepEqual(JSON.parse(lines[0]!), {
      type: 'session',
      version: 3,
      id: session.sessionId,
      timestamp: '2026-03-01T09:30:00.000Z',
      cwd: '/srv/work',
      sessionKey: session.sessionKey,
      agentId: 'main',
    });
    const entry = JSON.parse(lines[1]!);
    assert.deepEqual(Object.keys(entry).slice(0, 4), ['type', 'id', 'parentId', 'timestamp']);
    assert.equal(entry.parentId, null);
    assert.equal(entry.id, result.entries[0]!.id);
    assert.equal(entry.timestamp, '2026-03-01T09:30:00.000Z');
    assert.equal(entry.message.content[0].text, 'hi\nthere');
    assert.equal(lines[2], '');
    assert.equal(existsSync(lockPathFor(file)), false, 'the write lock was released');
  });

  test('a batch is one append (group commit) and chains inside and across batches', async () => {
    const file = path.join(tempDir(), 'batch.jsonl');
    const first = await appendToTranscript(file, [{ type: 'custom', n: 1 }, { type: 'custom', n: 2, id: 'given-id' }], { session, clock });
    const sizeAfterFirst = statSync(file).size;
    assert.equal(first.bytesWritten, sizeAfterFirst);
    const second = await appendToTranscript(file, [{ type: 'custom', n: 3 }, { type: 'custom', n: 4, parentId: 'ignored' }], { clock });
    assert.equal(second.wroteHeader, false);
    assert.equal(second.bytesWritten, statSync(file).size - sizeAfterFirst);
    const { header, entries, stats } = await loadTranscript(file);
    assert.equal(header?.id, session.sessionId);
    assert.deepEqual(entries.map((e) => e.n), [1, 2, 3, 4]);
    assert.equal(entries[1]!.id, 'given-id');
    assertChained(entries);
    assert.equal(stats.skipped, 0);
  });

  test('the chain continues from an entry another writer appended (the tail is re-read)', async () => {
    const file = path.join(tempDir(), 'other-writer.jsonl');
    await appendToTranscript(file, { type: 'custom', n: 1 }, { session, clock });
    // as another process would: a complete line appended behind this process's back
    appendFileSync(file, `${JSON.stringify({ type: 'custom', id: 'from-elsewhere', parentId: null, timestamp: 'x', n: 2 })}\n`);
    const result = await appendToTranscript(file, { type: 'custom', n: 3 }, { clock });
    assert.equal(result.entries[0]!.parentId, 'from-elsewhere');
  });

  test('after a torn tail the next append starts on a fresh line and chains to the last complete entry', async () => {
    const file = path.join(tempDir(), 'torn.jsonl');
    const first = await appendToTranscript(file, [{ type: 'custom', n: 1 }, { type: 'custom', n: 2 }], { session, clock });
    const intact = readFileSync(file, 'utf8');
    appendFileSync(file, '{"type":"custom","id":"torn","parentId":"x","pad":"aaaa'); // a crash mid-line

    const before = await transcriptStats(file);
    assert.deepEqual(before, { bytes: statSync(file).size, lines: 4, records: 3, skipped: 1, tornTail: true });

    const result = await appendToTranscript(file, { type: 'custom', n: 3 }, { clock });
    assert.equal(result.startedFreshLine, true);
    assert.equal(result.entries[0]!.parentId, first.entries[1]!.id);
    const text = readFileSync(file, 'utf8');
    assert.ok(text.startsWith(intact), 'complete lines are untouched');
    const lines = text.split('\n');
    assert.equal(lines[3], '{"type":"custom","id":"torn","parentId":"x","pad":"aaaa');
    assert.equal(JSON.parse(lines[4]!).n, 3, 'the new record is a line of its own');

    const { entries, stats } = await loadTranscript(file);
    assert.deepEqual(entries.map((e) => e.n), [1, 2, 3]);
    assert.deepEqual(stats, { bytes: statSync(file).size, lines: 5, records: 4, skipped: 1, tornTail: false });
  });

  test('the tail is found behind a last line longer than one read chunk', async () => {
    const file = path.join(tempDir(), 'long-line.jsonl');
    const big = await appendToTranscript(file, [{ type: 'custom', n: 1 }, { type: 'custom', pad: 'p'.repeat(300_000) }], { session, clock });
    appendFileSync(file, '{"garbage'); // and a torn tail after it
    const next = await appendToTranscript(file, { type: 'custom', n: 2 }, { clock });
    assert.equal(next.entries[0]!.parentId, big.entries[1]!.id);
  });

  test('a file holding only a torn header gets a fresh line and a new header', async () => {
    const file = path.join(tempDir(), 'torn-header.jsonl');
    writeFileSync(file, '{"type":"session","version":3,"id":"abc","times', { mode: 0o600 });
    const result = await appendToTranscript(file, { type: 'custom', n: 1 }, { session, clock });
    assert.equal(result.wroteHeader, true);
    assert.equal(result.startedFreshLine, true);
    const { header, entries, stats } = await loadTranscript(file);
    assert.equal(header?.id, session.sessionId);
    assert.equal(entries.length, 1);
    assert.equal(entries[0]!.parentId, null);
    assert.equal(stats.skipped, 1);
  });

  test('a missing transcript without session info, or bad entries, are refused and write nothing', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'never.jsonl');
    await assert.rejects(appendToTranscript(file, { type: 'custom' }), isCode('INTERNAL', 1));
    assert.equal(existsSync(file), false, 'no empty file left behind');
    await appendToTranscript(file, { type: 'custom', n: 1 }, { session, clock });
    const size = statSync(file).size;
    const circular: NewTranscriptEntry = { type: 'custom' };
    circular.self = circular;
    const bads: NewTranscriptEntry[] = [{ type: 'session' }, { type: '' }, { n: 1 } as never, circular, { type: 'custom', id: 7 } as never];
    for (const bad of bads) {
      await assert.rejects(appendToTranscript(file, [{ type: 'custom', n: 2 }, bad], { clock }), isCode('BAD_INPUT', 65));
    }
    assert.equal(statSync(file).size, size);
    assert.deepEqual(readdirSync(dir), ['never.jsonl']);
  });

  test('concurrent appends in one process keep their call order and the chain', async () => {
    const file = path.join(tempDir(), 'many.jsonl');
    await Promise.all(Array.from({ length: 40 }, (_, n) => appendToTranscript(file, { type: 'custom', n }, { session, clock })));
    const { entries } = await loadTranscript(file);
    assert.deepEqual(entries.map((e) => e.n), Array.from({ length: 40 }, (_, n) => n));
    assertChained(entries);
  });

  test('first appends to many new files of one folder at once (they share the folder fsyncs) all complete, each file whole', async () => {
    const dir = tempDir();
    const files = Array.from({ length: 60 }, (_, n) => path.join(dir, `s-${n}.jsonl`));
    const results = await Promise.all(files.map((file, n) => appendToTranscript(file, { type: 'custom', n }, { session: { ...session, sessionId: `s-${n}` }, clock })));
    assert.ok(results.every((result) => result.createdFile && result.wroteHeader));
    // A second wave while the first wave's folder fsyncs may still be settling.
    const more = Array.from({ length: 20 }, (_, n) => path.join(dir, `t-${n}.jsonl`));
    await Promise.all([...more.map((file, n) => appendToTranscript(file, { type: 'custom', n }, { session: { ...session, sessionId: `t-${n}` }, clock })), ...files.slice(0, 5).map((file) => appendToTranscript(file, { type: 'custom', again: true }, { clock }))]);
    for (const [n, file] of [...files, ...more].entries()) {
      const lines = rawLines(file);
      assert.equal(JSON.parse(lines[0]!).type, 'session', file);
      assert.equal(lines.length, n < 5 ? 3 : 2, file);
    }
  });
});

describe('the write lock', () => {
  test('appendEntries refuses to run outside the session write lock', async () => {
    const file = path.join(tempDir(), 'nolock.jsonl');
    await assert.rejects(appendEntries(file, [{ type: 'custom' }], { session }), isCode('INTERNAL', 1));
    assert.equal(existsSync(file), false);
    await withLock(path.join(path.dirname(file), 'other.jsonl'), {}, async (otherHandle) => {
      await assert.rejects(appendEntries(file, [{ type: 'custom' }], { session, handle: otherHandle }), isCode('INTERNAL', 1));
    });
  });

  test('a run holding the lock appends through the re-entrant lock', async () => {
    const file = path.join(tempDir(), 'run.jsonl');
    await withLock(file, { acquireTimeoutMs: 1_000 }, async () => {
      await appendEntries(file, [{ type: 'custom', n: 1 }], { session, clock }); // lock found in the async context
      await appendToTranscript(file, { type: 'custom', n: 2 }, { lockOptions: { acquireTimeoutMs: 1_000 }, clock });
    });
    const { entries } = await loadTranscript(file);
    assert.deepEqual(entries.map((e) => e.n), [1, 2]);
  });

  test('a holder that lost its lock (max hold passed) writes nothing', async () => {
    const file = path.join(tempDir(), 'lost.jsonl');
    await appendToTranscript(file, { type: 'custom', n: 1 }, { session, clock });
    const before = readFileSync(file, 'utf8');
    await withLock(file, { maxHoldMs: 100 }, async (handle) => {
      await new Promise((resolve) => handle.signal.addEventListener('abort', resolve));
      await assert.rejects(appendEntries(file, [{ type: 'custom', n: 2 }], { handle }), isCode('SESSION_BUSY', 75));
    });
    assert.equal(readFileSync(file, 'utf8'), before);
  });
});

describe('write errors', () => {
  test('a transcript that is a link (here to /dev/full) is STORE_CORRUPT (exit 65), never written through, and harms nothing else', async () => {
    // (store files are opened without following links: the append never reaches /dev/full)
    const dir = tempDir();
    const healthy = path.join(dir, 'healthy.jsonl');
    await appendToTranscript(healthy, { type: 'custom', n: 1 }, { session, clock });
    const healthyBefore = readFileSync(healthy);
    const full = path.join(dir, 'full.jsonl');
    symlinkSync('/dev/full', full);

    await assert.rejects(appendToTranscript(full, { type: 'custom', n: 1 }, { session, clock }), (err: unknown) => {
      assert.ok(isCode('STORE_CORRUPT', 65)(err));
      assert.equal((err as SwitchboardError).details?.fileKind, 'symlink');
      return true;
    });
    assert.deepEqual(readdirSync(dir).sort(), ['full.jsonl', 'healthy.jsonl'], 'no lock or temp file left');
    assert.deepEqual(readFileSync(healthy), healthyBefore);
    await appendToTranscript(healthy, { type: 'custom', n: 2 }, { clock });
    const { entries } = await loadTranscript(healthy);
    assert.deepEqual(entries.map((e) => e.n), [1, 2]);
  });

  test('a transcript path that cannot be created is an IO error (exit 74); a folder in its place is STORE_CORRUPT (exit 65)', async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, 'a-file'), '');
    const file = path.join(dir, 'a-file', 'x.jsonl');
    // (lock and transcript share the folder, so here the lock fails first — with the same code)
    await assert.rejects(appendToTranscript(file, { type: 'custom' }, { session }), isCode('IO', 74));
    // the lock can be taken but a folder is where the transcript belongs: not a regular file
    mkdirSync(path.join(dir, 'a-directory'));
    await assert.rejects(appendToTranscript(path.join(dir, 'a-directory'), { type: 'custom' }, { session }), (err: unknown) => {
      assert.ok(isCode('STORE_CORRUPT', 65)(err));
      assert.equal((err as SwitchboardError).details?.fileKind, 'directory');
      return true;
    });
    assert.deepEqual(readdirSync(dir).sort(), ['a-directory', 'a-file']);
  });
});

describe('reading', () => {
  test('the reader skips and counts every kind of bad line and never throws', async () => {
    const file = path.join(tempDir(), 'messy.jsonl');
    const good = (n: number): string => JSON.stringify({ type: 'custom', id: `e${n}`, parentId: null, timestamp: 't', n });
    const bytes = Buffer.concat([
      Buffer.from(`${JSON.stringify({ type: 'session', version: 3, id: 's', timestamp: 't', cwd: '/' })}\n`),
      Buffer.from(`${good(1)}\r\n`),
      Buffer.from('not json\n'),
      Buffer.from('\n   \n'),
      Buffer.from('123\n["array"]\n"string"\nnull\n{"no":"type"}\n'),
      Buffer.from([0, 0, 0, 0x0a]),
      Buffer.from([0xff, 0xfe, 0x7b, 0x0a]), // invalid UTF-8
      Buffer.from(`${good(2)}\n`),
      Buffer.from('{"type":"custom","id":"e3","pad":"trunc'),
    ]);
    writeFileSync(file, bytes);
    const reader = readTranscript(file);
    const seen: unknown[] = [];
    for await (const record of reader) seen.push(record.n ?? record.type);
    assert.deepEqual(seen, ['session', 1, 2]);
    assert.deepEqual(reader.stats, { bytes: bytes.length, lines: 12, records: 3, skipped: 9, tornTail: true });
    assert.deepEqual(await transcriptStats(file), reader.stats);
  });

  test('a missing transcript is NOT_FOUND; an empty one has no records', async () => {
    const dir = tempDir();
    await assert.rejects(transcriptStats(path.join(dir, 'nope.jsonl')), isCode('NOT_FOUND', 66));
    writeFileSync(path.join(dir, 'empty.jsonl'), '');
    assert.deepEqual(await transcriptStats(path.join(dir, 'empty.jsonl')), { bytes: 0, lines: 0, records: 0, skipped: 0, tornTail: false });
  });

  test('a reader can stop early without leaking the file', async () => {
    const file = path.join(tempDir(), 'early.jsonl');
    await appendToTranscript(file, Array.from({ length: 50 }, (_, n) => ({ type: 'custom', n })), { session, clock });
    let count = 0;
    for await (const _record of readTranscript(file)) {
      count += 1;
      if (count === 3) break;
    }
    assert.equal(count, 3);
    const openOnFile = (): number =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === file;
        } catch {
          return false; // the listing's own descriptor, already closed
        }
      }).length;
    await waitUntil(() => openOnFile() === 0, 5_000, 'the reader to close the transcript');
  });
});

describe('P6: several processes append to one transcript at once', () => {
  test('4 processes × 200 appends: every line once, none interleaved, each writer in order', async () => {
    const file = path.join(tempDir(), 'shared.jsonl');
    const writers: ChildRun[] = ['a', 'b', 'c', 'd'].map((writer) => startChild('transcript-writer-child.js', ['count', file, writer, '200']));
    try {
      await Promise.all(writers.map((w) => w.waitForLine((l) => l === 'ready', 15_000, 'writer ready')));
      for (const w of writers) w.send('go'); // all start together
      await Promise.all(writers.map((w) => w.waitForLine((l) => l === 'done', 60_000, 'writer done')));
      const exits = await Promise.all(writers.map((w) => w.exited));
      assert.deepEqual(exits.map((e) => e.code), [0, 0, 0, 0]);
    } finally {
      for (const w of writers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
    }

    const lines = rawLines(file);
    assert.equal(lines.length, 1 + 4 * 200);
    assert.ok(lines.every(parses), 'no line is interleaved or torn');
    const { header, entries, stats } = await loadTranscript(file);
    assert.equal(header?.type, 'session');
    assert.equal(stats.skipped, 0);
    assertChained(entries);
    for (const [i, writer] of ['a', 'b', 'c', 'd'].entries()) {
      const mine = entries.filter((e) => e.writer === writer);
      assert.deepEqual(mine.map((e) => e.seq), Array.from({ length: 200 }, (_, n) => n), `writer ${writer} in order, once each`);
      const acked = new Set(writers[i]!.lines.filter((l) => l.startsWith('ack ')).map((l) => l.split(' ')[2]));
      assert.deepEqual(new Set(mine.map((e) => e.id)), acked);
    }
  });
});

test('messageContentText shows every kind of content another writer may leave, never "[undefined]"', () => {
  assert.equal(messageContentText('plain'), 'plain');
  assert.equal(messageContentText([{ type: 'text', text: 'a' }, { type: 'image' }, 'b']), 'a [image] b');
  // A nested list, a block without a type or with a non-string one: shown as a block of unknown type.
  assert.equal(messageContentText([['x'], { text: 'no type' }, { type: 5 }, { type: '' }]), '[?] [?] [?] [?]');
  assert.equal(messageContentText([null, 3]), '');
  assert.equal(messageContentText({ type: 'text' }), '');
});
