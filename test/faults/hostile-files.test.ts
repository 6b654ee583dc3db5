// Hostile neighbours in the sessions folder: store files replaced by symlinks that point outside
// the state dir, by FIFOs, and sessions.json entries of the wrong shape. Real files, real links,
// real FIFOs (mkfifo) and the real CLI. Nothing outside the state dir may change, nothing may
// hang (every child runs under a kill timer and must have exited by itself), errors carry their
// documented code, and doctor finds and repairs it all while keeping originals as real copies.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { ingestAsOneBatch, jsonLines, runCli, seedPeers, tempDir, writeJson, type CliResult } from '../helpers.js';

/** Generous: a command that waits on a FIFO is killed by this and fails the "exited by itself" check. */
const KILL_AFTER_MS = 15_000;
const REPAIR_NOW = '2026-11-30T12:00:00Z';
const BACKUP_TS = '2026-11-30T12-00-00.000Z';

interface State {
  state: string;
  config: string;
  dir: string;
  storePath: string;
  /** A folder outside the state dir that links point into. */
  outside: string;
}

function newState(): State {
  // The state dir sits alone in a folder of its own, so "nothing was created next to it" counts
  // only what this test's commands could have made (the shared temp folder changes under us).
  const state = path.join(tempDir('sb-hostile-'), 'state');
  fs.mkdirSync(state);
  const config = writeJson(path.join(state, 'c.json'), { session: { dmScope: 'per-peer' } });
  const dir = path.join(state, 'agents', 'main', 'sessions');
  return { state, config, dir, storePath: path.join(dir, 'sessions.json'), outside: tempDir('sb-outside-') };
}

/**
 * A command against the hostile state `s`, killed if it waits past `killAfterMs`. Work on huge
 * files gets more than the FIFO check needs: reading 600 MiB took over 15 s on a loaded 2-core
 * machine once, and that is no hang.
 */
async function cli(s: State, ...args: string[]): Promise<CliResult> {
  return cliWithin(KILL_AFTER_MS, s, ...args);
}

async function cliWithin(killAfterMs: number, s: State, ...args: string[]): Promise<CliResult> {
  const r = await runCli([...args, '--state-dir', s.state, '--config', s.config], { timeoutMs: killAfterMs });
  assert.equal(r.signal, null, `switchboard ${args.join(' ')} exited by itself (no wait on a FIFO): ${r.stderr}`);
  return r;
}

/** From a file, so that the lines form one batch. */
const ingest = (s: State, messages: Record<string, unknown>[]) => ingestAsOneBatch((...args) => cli(s, ...args), s.state, messages);

const say = (peer: string, text: string) => ({ channel: 'telegram', peer: `direct:${peer}`, text });
const keyOf = (peer: string) => `agent:main:direct:${peer}`;

/** A store with one session per peer, written by the real CLI (twice, so sessions.json.bak exists). */
async function seeded(peers: string[]): Promise<State> {
  const s = newState();
  await seedPeers((messages) => ingest(s, messages), peers, say);
  return s;
}

function readStore(s: State): Record<string, any> {
  return JSON.parse(fs.readFileSync(s.storePath, 'utf8'));
}

/** Bytes and mtime of every file under a folder: proves nothing there was written. */
function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const name of fs.readdirSync(dir).sort()) {
    const full = path.join(dir, name);
    const stats = fs.lstatSync(full);
    out.set(name, `${stats.mtimeMs} ${stats.size} ${stats.isFile() ? fs.readFileSync(full).toString('base64') : 'not-a-file'}`);
  }
  return out;
}

function mkfifo(file: string): void {
  const r = spawnSync('mkfifo', ['-m', '600', file]);
  assert.equal(r.status, 0, `mkfifo ${file}: ${r.stderr?.toString()}`);
}

function errorOf(r: CliResult): { code: string; message: string; hint?: string } {
  return JSON.parse(r.stderr.trim().split('\n').at(-1)!).error;
}

async function doctor(s: State, ...args: string[]): Promise<{ code: number | null; report: any }> {
  const r = await cli(s, 'doctor', '--json', ...args);
  assert.ok(r.stdout.trim() !== '', `doctor printed a report (exit ${r.code}): ${r.stderr}`);
  return { code: r.code, report: jsonLines(r.stdout)[0] };
}

function problemsOf(report: any): any[] {
  return report.stores.flatMap((store: any) => store.problems);
}

function kindsAndFiles(report: any): string[] {
  return problemsOf(report).map((p: any) => `${p.kind} ${path.basename(p.file)}`).sort();
}

const isLink = (file: string) => fs.lstatSync(file).isSymbolicLink();
const isRegular = (file: string) => fs.lstatSync(file).isFile();

// Independent stores: run side by side to keep the file short.
describe('links and FIFOs in place of store files', { concurrency: 2 }, () => {
  test('sessions.json as a symlink to a file outside the state dir: STORE_CORRUPT, never written through; doctor --repair keeps a real copy and replaces the link', async () => {
    const s = await seeded(['a', 'b']);
    const target = path.join(s.outside, 'registry.json');
    fs.copyFileSync(s.storePath, target);
    const targetBytes = fs.readFileSync(target);
    fs.unlinkSync(s.storePath);
    fs.symlinkSync(target, s.storePath);
    const outsideBefore = snapshot(s.outside);

    const refused = await ingest(s, [say('a', 'through the link?')]);
    assert.equal(refused.code, 65, refused.stderr);
    assert.deepEqual(refused.events.map((e) => [e.type, e.code]), [['error', 'STORE_CORRUPT']]);
    const listed = await cli(s, 'sessions', '--json');
    assert.equal(listed.code, 65);
    assert.equal(errorOf(listed).code, 'STORE_CORRUPT');
    assert.match(errorOf(listed).hint ?? '', /switchboard doctor/);
    assert.ok(isLink(s.storePath), 'the link is left as it was');
    assert.deepEqual(snapshot(s.outside), outsideBefore, 'nothing outside the state dir changed');

    const checked = await doctor(s);
    assert.equal(checked.code, 65);
    assert.ok(kindsAndFiles(checked.report).includes('not-regular-file sessions.json'), kindsAndFiles(checked.report).join(', '));
    assert.ok(isLink(s.storePath), 'a check writes nothing');

    const repaired = await doctor(s, '--repair', '--now', REPAIR_NOW);
    assert.equal(repaired.code, 0, JSON.stringify(problemsOf(repaired.report)));
    assert.ok(isRegular(s.storePath), 'sessions.json is a regular file again');
    const kept = `${s.storePath}.corrupt-${BACKUP_TS}`;
    assert.ok(isRegular(kept), 'the original is kept as a real file, not as a link');
    assert.deepEqual(fs.readFileSync(kept), targetBytes, 'with the bytes the link pointed at');
    assert.deepEqual(Object.keys(readStore(s)).sort(), [keyOf('a'), keyOf('b')]);
    assert.deepEqual(snapshot(s.outside), outsideBefore, 'the repair changed nothing outside the state dir');

    const after = await ingest(s, [say('a', 'now on a real file')]);
    assert.equal(after.code, 0, after.stderr);
    assert.deepEqual(snapshot(s.outside), outsideBefore);
  });

  test('sessions.json as a FIFO: commands fail at once with STORE_CORRUPT; doctor reports it and --repair restores the store', async () => {
    const s = await seeded(['a', 'b']);
    fs.unlinkSync(s.storePath);
    mkfifo(s.storePath);

    const refused = await ingest(s, [say('a', 'into a pipe?')]);
    assert.equal(refused.code, 65, refused.stderr);
    assert.deepEqual(refused.events.map((e) => [e.type, e.code]), [['error', 'STORE_CORRUPT']]);
    for (const args of [['sessions', '--json'], ['sessions', 'show', keyOf('a'), '--json'], ['reset', keyOf('a'), '--json']]) {
      const r = await cli(s, ...args);
      assert.equal(r.code, 65, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(errorOf(r).code, 'STORE_CORRUPT', args.join(' '));
    }
    assert.ok(fs.lstatSync(s.storePath).isFIFO());

    const checked = await doctor(s);
    assert.equal(checked.code, 65);
    assert.ok(kindsAndFiles(checked.report).includes('not-regular-file sessions.json'), kindsAndFiles(checked.report).join(', '));

    const repaired = await doctor(s, '--repair', '--now', REPAIR_NOW);
    assert.equal(repaired.code, 0, JSON.stringify(problemsOf(repaired.report)));
    assert.ok(isRegular(s.storePath));
    assert.deepEqual(Object.keys(readStore(s)).sort(), [keyOf('a'), keyOf('b')]);
    const listed = await cli(s, 'sessions', '--json');
    assert.equal(listed.code, 0, listed.stderr);
  });

  test('a transcript as a symlink to a file outside: an error for that session only, never written through; doctor --repair keeps a real copy', async () => {
    const s = await seeded(['a', 'b']);
    const aFile = path.join(s.dir, readStore(s)[keyOf('a')].sessionFile);
    const target = path.join(s.outside, 'notes.jsonl');
    fs.copyFileSync(aFile, target);
    const targetBytes = fs.readFileSync(target);
    fs.unlinkSync(aFile);
    fs.symlinkSync(target, aFile);
    const outsideBefore = snapshot(s.outside);

    const mixed = await ingest(s, [say('a', 'through the link?'), say('b', 'a normal message')]);
    assert.equal(mixed.code, 65, mixed.stderr);
    assert.deepEqual(mixed.events.map((e) => [e.line, e.type, e.code ?? null]), [[1, 'error', 'STORE_CORRUPT'], [2, 'result', null]]);
    for (const args of [['sessions', 'show', keyOf('a'), '--json'], ['sessions', 'transcript', keyOf('a'), '--json']]) {
      const r = await cli(s, ...args);
      assert.equal(r.code, 65, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(errorOf(r).code, 'STORE_CORRUPT', args.join(' '));
    }
    assert.ok(isLink(aFile));
    assert.deepEqual(snapshot(s.outside), outsideBefore, 'nothing outside the state dir changed');

    const checked = await doctor(s);
    assert.equal(checked.code, 65);
    assert.ok(kindsAndFiles(checked.report).includes(`not-regular-file ${path.basename(aFile)}`), kindsAndFiles(checked.report).join(', '));

    const repaired = await doctor(s, '--repair', '--now', REPAIR_NOW);
    assert.equal(repaired.code, 0, JSON.stringify(problemsOf(repaired.report)));
    const kept = `${aFile}.bak-${BACKUP_TS}`;
    assert.ok(isRegular(kept), 'the original is kept as a real file');
    assert.deepEqual(fs.readFileSync(kept), targetBytes);
    assert.ok(isRegular(aFile), 'the session has a real transcript again');
    assert.deepEqual(snapshot(s.outside), outsideBefore, 'the repair changed nothing outside the state dir');
    const after = await ingest(s, [say('a', 'now on a real file')]);
    assert.equal(after.code, 0, after.stderr);
    assert.deepEqual(snapshot(s.outside), outsideBefore);
  });

  test('a transcript as a symlink to a file over 64 MiB (sparse): doctor --repair copies none of it and leaves the link for a person', async () => {
    const s = await seeded(['a', 'b']);
    const aFile = path.join(s.dir, readStore(s)[keyOf('a')].sessionFile);
    const target = path.join(s.outside, 'huge.jsonl');
    fs.closeSync(fs.openSync(target, 'w'));
    fs.truncateSync(target, 3 * 1024 * 1024 * 1024); // a hole: no disk used until someone fills it
    fs.unlinkSync(aFile);
    fs.symlinkSync(target, aFile);
    const repaired = await doctor(s, '--repair', '--now', REPAIR_NOW);
    assert.equal(repaired.code, 65, 'not repaired');
    const problem = problemsOf(repaired.report).find((p: any) => p.kind === 'not-regular-file');
    assert.ok(problem && problem.repaired === false && /more than doctor copies/.test(problem.error?.message ?? ''), JSON.stringify(problem));
    assert.ok(isLink(aFile), 'the link is left alone');
    assert.deepEqual(fs.readdirSync(s.dir).filter((name) => name.includes('.bak-')), [], 'nothing was copied');
    assert.equal(fs.statSync(target).size, 3 * 1024 * 1024 * 1024);
  });

  test('a transcript as a FIFO: an error for that session only, nobody waits; doctor --repair replaces it', async () => {
    const s = await seeded(['a', 'b']);
    const aFile = path.join(s.dir, readStore(s)[keyOf('a')].sessionFile);
    fs.unlinkSync(aFile);
    mkfifo(aFile);

    const mixed = await ingest(s, [say('a', 'into a pipe?'), say('b', 'a normal message')]);
    assert.equal(mixed.code, 65, mixed.stderr);
    assert.deepEqual(mixed.events.map((e) => [e.line, e.type, e.code ?? null]), [[1, 'error', 'STORE_CORRUPT'], [2, 'result', null]]);
    for (const args of [['sessions', 'show', keyOf('a'), '--json'], ['sessions', 'transcript', keyOf('a'), '--json']]) {
      const r = await cli(s, ...args);
      assert.equal(r.code, 65, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(errorOf(r).code, 'STORE_CORRUPT', args.join(' '));
    }
    const listed = await cli(s, 'sessions', '--json');
    assert.equal(listed.code, 0, listed.stderr);

    const checked = await doctor(s);
    assert.equal(checked.code, 65);
    assert.ok(kindsAndFiles(checked.report).includes(`not-regular-file ${path.basename(aFile)}`), kindsAndFiles(checked.report).join(', '));
    const repaired = await doctor(s, '--repair', '--now', REPAIR_NOW);
    assert.equal(repaired.code, 0, JSON.stringify(problemsOf(repaired.report)));
    assert.ok(isRegular(aFile));
    const after = await ingest(s, [say('a', 'now on a real file')]);
    assert.equal(after.code, 0, after.stderr);
  });

  test('a transcript as a folder: an error for that session only whose hint does not promise what --repair will not do (it leaves a folder alone)', async () => {
    const s = await seeded(['a']);
    const aFile = path.join(s.dir, readStore(s)[keyOf('a')].sessionFile);
    fs.unlinkSync(aFile);
    fs.mkdirSync(aFile);
    fs.writeFileSync(path.join(aFile, 'someone.txt'), 'a person put this here');
    const r = await cli(s, 'sessions', 'transcript', keyOf('a'), '--json');
    assert.equal(r.code, 65, r.stderr);
    const error = errorOf(r);
    assert.equal(error.code, 'STORE_CORRUPT');
    assert.doesNotMatch(error.hint ?? '', /--repair/);
    const repaired = await doctor(s, '--repair', '--now', REPAIR_NOW);
    assert.equal(repaired.code, 65);
    assert.ok(problemsOf(repaired.report).some((p: any) => p.kind === 'not-regular-file' && p.repairable === false));
    assert.equal(fs.readFileSync(path.join(aFile, 'someone.txt'), 'utf8'), 'a person put this here');
  });

  test('sessions.json.bak as a symlink to a file outside: the next write replaces the link, never the file it points at; doctor reports it', async () => {
    const s = await seeded(['a']);
    const target = path.join(s.outside, 'old-registry.json');
    fs.writeFileSync(target, '{"not": "yours"}\n');
    const bak = `${s.storePath}.bak`;
    fs.unlinkSync(bak);
    fs.symlinkSync(target, bak);
    const outsideBefore = snapshot(s.outside);

    const checked = await doctor(s);
    assert.equal(checked.code, 65);
    assert.ok(kindsAndFiles(checked.report).includes('not-regular-file sessions.json.bak'), kindsAndFiles(checked.report).join(', '));
    const written = await ingest(s, [say('a', 'one more')]);
    assert.equal(written.code, 0, written.stderr);
    assert.ok(isRegular(bak), 'the backup is a real file again');
    assert.deepEqual(snapshot(s.outside), outsideBefore, 'nothing outside the state dir changed');
  });
});

describe('the journal and the locks as links and FIFOs', { concurrency: 2 }, () => {
  for (const kind of ['fifo', 'symlink'] as const) {
    test(`sessions.json.journal as a ${kind}: STORE_CORRUPT at once (no wait, nothing written through); doctor --repair removes it`, async () => {
      const s = await seeded(['a', 'b']);
      const journal = `${s.storePath}.journal`;
      fs.rmSync(journal, { force: true });
      const target = path.join(s.outside, 'journal-target');
      fs.writeFileSync(target, 'outside bytes\n');
      if (kind === 'fifo') mkfifo(journal);
      else fs.symlinkSync(target, journal);
      const outsideBefore = snapshot(s.outside);

      const refused = await ingest(s, [say('a', 'journal?'), say('c', 'new session')]);
      assert.equal(refused.code, 65, refused.stderr);
      assert.deepEqual(refused.events.map((e) => [e.type, e.code]), [['error', 'STORE_CORRUPT'], ['error', 'STORE_CORRUPT']]);
      assert.deepEqual(snapshot(s.outside), outsideBefore, 'nothing outside the state dir changed');

      const checked = await doctor(s);
      assert.ok(kindsAndFiles(checked.report).includes('not-regular-file sessions.json.journal'), kindsAndFiles(checked.report).join(', '));
      const repaired = await doctor(s, '--repair', '--now', REPAIR_NOW);
      assert.equal(repaired.code, 0, JSON.stringify(problemsOf(repaired.report)));
      const after = await ingest(s, [say('a', 'journal is a file again')]);
      assert.equal(after.code, 0, after.stderr);
      assert.ok(isRegular(journal));
      assert.deepEqual(snapshot(s.outside), outsideBefore);
    });

    test(`sessions.json.lock as a ${kind}: STORE_CORRUPT at once, never waited on or followed; doctor reports it and --repair removes it`, async () => {
      const s = await seeded(['a']);
      const lock = `${s.storePath}.lock`;
      const target = path.join(s.outside, 'lock-target');
      fs.mkdirSync(target);
      if (kind === 'fifo') mkfifo(lock);
      else fs.symlinkSync(target, lock);
      const outsideBefore = snapshot(s.outside);

      const refused = await ingest(s, [say('a', 'locked out?')]);
      assert.equal(refused.code, 65, refused.stderr);
      assert.deepEqual(refused.events.map((e) => [e.type, e.code]), [['error', 'STORE_CORRUPT']]);
      const reset = await cli(s, 'reset', keyOf('a'), '--json');
      assert.equal(reset.code, 65, reset.stderr);
      assert.equal(errorOf(reset).code, 'STORE_CORRUPT');

      const checked = await doctor(s);
      assert.ok(kindsAndFiles(checked.report).includes('not-regular-file sessions.json.lock'), kindsAndFiles(checked.report).join(', '));
      const repaired = await doctor(s, '--repair', '--now', REPAIR_NOW);
      assert.equal(repaired.code, 0, JSON.stringify(problemsOf(repaired.report)));
      assert.equal(fs.existsSync(lock), false);
      const after = await ingest(s, [say('a', 'unlocked')]);
      assert.equal(after.code, 0, after.stderr);
      assert.deepEqual(snapshot(s.outside), outsideBefore, 'nothing outside the state dir changed');
      assert.deepEqual(fs.readdirSync(target), [], 'nothing was written into the folder the link pointed at');
    });
  }

  test('a FIFO as the owner record of a lock: nobody waits on it; writers give up with a busy error, locks and doctor answer', async () => {
    const s = await seeded(['a', 'b']);
    writeJson(s.config, { session: { dmScope: 'per-peer', writeLock: { acquireTimeoutMs: 1_000 } } });
    const transcript = path.join(s.dir, readStore(s)[keyOf('b')].sessionFile);
    for (const lock of [`${s.storePath}.lock`, `${transcript}.lock`]) {
      fs.mkdirSync(lock);
      mkfifo(path.join(lock, 'owner.json'));
    }
    const busy = await ingest(s, [say('a', 'store lock held by a pipe?')]);
    assert.equal(busy.code, 75, busy.stderr);
    assert.deepEqual(busy.events.map((e) => [e.type, e.code]), [['error', 'STORE_BUSY']]);
    const locks = await cli(s, 'locks', '--json');
    assert.equal(locks.code, 0, locks.stderr);
    assert.equal(jsonLines(locks.stdout).length > 0, true, locks.stdout);
    await doctor(s); // answers (a report is printed) instead of waiting on the pipe

    fs.rmSync(`${s.storePath}.lock`, { recursive: true });
    const sessionBusy = await ingest(s, [say('b', 'session lock held by a pipe?'), say('a', 'free session')]);
    assert.deepEqual(sessionBusy.events.map((e) => e.code ?? e.disposition), ['SESSION_BUSY', 'recorded'], sessionBusy.stderr);
  });
});

describe('entries of the wrong shape', () => {
  test('a bad entry is STORE_CORRUPT for that entry only: never a crash, never a write into the wrong file', async () => {
    const peers = ['a', 'b', 'c', 'd', 'e', 'f'];
    const s = await seeded(peers);
    const store = readStore(s);
    const bId = store[keyOf('b')].sessionId as string;
    // a: names the registry; b: a number; c: a date in words; d: an archive of its own transcript;
    // e: a sessionId that climbs out; f: healthy.
    store[keyOf('a')].sessionFile = 'sessions.json';
    store[keyOf('b')].sessionFile = 5;
    store[keyOf('c')].updatedAt = 'yesterday';
    store[keyOf('d')].sessionFile = `${store[keyOf('d')].sessionId}.jsonl.reset.2026-01-01T00-00-00.000Z`;
    store[keyOf('e')].sessionId = '../../../evil';
    fs.writeFileSync(s.storePath, `${JSON.stringify(store, null, 2)}\n`);
    const bad = ['a', 'b', 'c', 'd', 'e'];
    const badEntries = Object.fromEntries(bad.map((p) => [keyOf(p), store[keyOf(p)]]));
    const stateBefore = fs.readdirSync(path.dirname(s.state)).length;

    const r = await ingest(s, peers.map((p) => say(p, `to ${p}`)));
    assert.notEqual(r.code, 1, r.stderr);
    assert.equal(r.code, 65, r.stderr);
    assert.deepEqual(
      r.events.map((e) => [e.line, e.type, e.code ?? null]),
      [...bad.map((_, i) => [i + 1, 'error', 'STORE_CORRUPT']), [6, 'result', null]],
    );
    const after = readStore(s); // still parses: nothing was appended to it
    for (const p of bad) assert.deepEqual(after[keyOf(p)], badEntries[keyOf(p)], `${p}: the bad entry is left as it was`);
    assert.equal(fs.readdirSync(path.dirname(s.state)).length, stateBefore, 'nothing was created next to the state dir');
    assert.ok(!fs.existsSync(path.join(s.dir, '5')));
    assert.ok(!fs.readdirSync(s.dir).some((n) => n.startsWith('sessions.json.reset')), 'the registry was never archived');
    void bId;

    // Listing shows every row (the bad ones marked), show names the problem, nothing crashes.
    const listed = await cli(s, 'sessions', '--json');
    assert.equal(listed.code, 0, listed.stderr);
    const rows = JSON.parse(listed.stdout).sessions;
    assert.equal(rows.length, peers.length);
    for (const row of rows) assert.equal(typeof row.problem === 'string', bad.some((p) => row.key === keyOf(p)), row.key);
    const text = await cli(s, 'sessions');
    assert.equal(text.code, 0, text.stderr);
    // One command per bad entry, so that each kind of use is tried on some bad shape.
    const uses = [['sessions', 'show'], ['sessions', 'show', '--json'], ['reset', '--json'], ['sessions', 'transcript', '--json'], ['sessions', 'pin', '--json']];
    for (const [i, p] of bad.entries()) {
      const args = [...uses[i]!, keyOf(p)];
      const used = await cli(s, ...args);
      assert.equal(used.code, 65, `${args.join(' ')}: ${used.stderr}`);
    }
    assert.ok(!fs.readdirSync(s.dir).some((n) => n.startsWith('sessions.json.reset')), 'reset never archives the registry');
    const cleanup = await cli(s, 'sessions', 'cleanup', '--enforce', '--fix-missing', '--json');
    assert.notEqual(cleanup.code, 1, cleanup.stderr);
    assert.ok(fs.existsSync(s.storePath) && !fs.readdirSync(s.dir).some((n) => n.startsWith('sessions.json.deleted')), 'cleanup never archives the registry');

    const checked = await doctor(s);
    assert.equal(checked.code, 65);
    const invalid = problemsOf(checked.report).filter((p: any) => p.kind === 'invalid-entry').map((p: any) => p.sessionKey).sort();
    assert.deepEqual(invalid, bad.map(keyOf).filter((k) => Object.hasOwn(readStore(s), k)).sort());
    const repaired = await doctor(s, '--repair', '--now', REPAIR_NOW);
    assert.notEqual(repaired.code, 1);
    assert.ok(!fs.readdirSync(s.dir).some((n) => n === '5' || n.startsWith('sessions.json.reset')));
    JSON.parse(fs.readFileSync(s.storePath, 'utf8'));
  });
});

describe('a transcript line longer than any record', () => {
  const huge = (s: State, ...args: string[]) => cliWithin(120_000, s, ...args);
  // 600 MiB of NULs and no newline, sparse (truncate extends without writing): decoded as one
  // string it passes V8's limit (~512 MiB). Before, every reader of the session failed with a raw
  // RangeError (exit 1) and every append with IO (ERR_STRING_TOO_LONG), and doctor could not help.
  for (const ending of ['a torn tail', 'a complete line'] as const) {
    test(`as ${ending}: readers skip and count it, appends go on from the record before it`, async () => {
      const s = await seeded(['a']);
      const file = path.join(s.dir, readStore(s)[keyOf('a')].sessionFile);
      const recordsBefore = jsonLines(fs.readFileSync(file, 'utf8'));
      fs.truncateSync(file, fs.statSync(file).size + 600 * 1024 * 1024);
      if (ending === 'a complete line') fs.appendFileSync(file, '\n');

      const shown = await huge(s, 'sessions', 'transcript', keyOf('a'), '--json');
      assert.equal(shown.code, 0, shown.stderr);
      assert.deepEqual(jsonLines(shown.stdout).map((r) => r.id), recordsBefore.map((r) => r.id));
      const details = await huge(s, 'sessions', 'show', keyOf('a'), '--json');
      assert.equal(details.code, 0, details.stderr);

      const r = await ingestAsOneBatch((...args) => huge(s, ...args), s.state, [say('a', 'after the long line')]);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(r.events.map((e: any) => e.disposition), ['recorded']);
      const again = await huge(s, 'sessions', 'transcript', keyOf('a'), '--json');
      const records = jsonLines(again.stdout);
      const last = records.at(-1);
      assert.equal(last.message.content[0].text, 'after the long line', 'on a fresh line after the long one');
      assert.equal(last.parentId, recordsBefore.at(-1).id, 'chained to the record before the long line');
    });
  }
});
