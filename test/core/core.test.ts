// Unit tests of core/: the error type, the --now parser and NDJSON framing.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DEFAULT_MAX_BATCH_BYTES,
  EXIT_CODES,
  LineSplitter,
  MAX_JSON_DEPTH,
  SwitchboardError,
  batchLength,
  jsonDepthExceeds,
  maxBatchBytesFrom,
  normalizeAccountId,
  normalizeAgentId,
  parseNow,
  toSwitchboardError,
  asSwitchboardError,
  type NdjsonLine,
} from '../../src/core/index.js';

describe('SwitchboardError', () => {
  test('every code has its documented exit code', () => {
    assert.deepEqual(EXIT_CODES, {
      INTERNAL: 1,
      USAGE: 2,
      BAD_MESSAGE: 65,
      BAD_INPUT: 65,
      STORE_CORRUPT: 65,
      NOT_FOUND: 66,
      UNAVAILABLE: 69,
      IO: 74,
      SESSION_BUSY: 75,
      STORE_BUSY: 75,
      CONFIG_INVALID: 78,
      NO_OWNER: 78,
    });
    assert.equal(new SwitchboardError('SESSION_BUSY', 'x').exitCode, 75);
  });

  test('unknown errors become INTERNAL (exit 1); SwitchboardErrors pass through', () => {
    const wrapped = toSwitchboardError(new TypeError('boom'));
    assert.equal(wrapped.code, 'INTERNAL');
    assert.equal(wrapped.exitCode, 1);
    const own = new SwitchboardError('IO', 'disk');
    assert.equal(toSwitchboardError(own), own);
    assert.deepEqual(new SwitchboardError('USAGE', 'm', { hint: 'h' }).toJSON(), { code: 'USAGE', message: 'm', hint: 'h' });
  });

  test('asSwitchboardError: a file-system error (errno code) is IO; Node\'s own ERR_ codes and the rest stay INTERNAL', () => {
    const notDir = Object.assign(new Error('ENOTDIR: not a directory, scandir'), { code: 'ENOTDIR' });
    assert.equal(asSwitchboardError(notDir).code, 'IO');
    assert.equal(asSwitchboardError(notDir).exitCode, 74);
    const misuse = Object.assign(new TypeError('bad argument'), { code: 'ERR_INVALID_ARG_TYPE' });
    assert.equal(asSwitchboardError(misuse).code, 'INTERNAL');
    assert.equal(asSwitchboardError(new Error('plain')).code, 'INTERNAL');
    const own = new SwitchboardError('STORE_BUSY', 'busy');
    assert.equal(asSwitchboardError(own), own);
  });
});

describe('ids', () => {
  test('a valid lower-case id comes back as is; anything else is trimmed, lower-cased and cleaned', () => {
    const long = 'a'.repeat(64);
    const cases: [unknown, string, string][] = [
      ['work', 'work', 'work'],
      ['a-1_b', 'a-1_b', 'a-1_b'],
      [long, long, long],
      [`${long}b`, long, long],
      ['Work', 'work', 'work'],
      [' work ', 'work', 'work'],
      ['-work', 'work', 'work'],
      ['_work', '_work', '_work'],
      ['İ', 'i', 'i'],
      ['Family Helper', 'family-helper', 'family-helper'],
      ['../../etc', 'etc', 'etc'],
      // Reserved words are agent ids as OpenClaw keeps them; only account ids fold them.
      ['constructor', 'constructor', 'default'],
      ['prototype', 'prototype', 'default'],
      ['__proto__', '__proto__', 'default'],
      ['', 'main', 'default'],
      [null, 'main', 'default'],
      [42, '42', '42'],
      ['é', 'main', 'default'],
    ];
    for (const [raw, agent, account] of cases) {
      assert.equal(normalizeAgentId(raw), agent, `agent ${String(raw)}`);
      assert.equal(normalizeAccountId(raw), account, `account ${String(raw)}`);
    }
  });
});

describe('parseNow', () => {
  test('ISO times and epoch milliseconds', () => {
    assert.equal(parseNow('2026-11-30T07:00:00Z'), Date.parse('2026-11-30T07:00:00Z'));
    assert.equal(parseNow(' 1796022000000 '), 1796022000000);
  });

  test('anything else is USAGE', () => {
    for (const bad of ['yesterday', '', '-5', '2026-13-45T99:99:99Z', '1e12']) {
      assert.throws(() => parseNow(bad), (err: SwitchboardError) => err.code === 'USAGE', bad);
    }
  });

  test('a time before 1970 is USAGE: the store keeps times as epoch milliseconds of 0 or more', () => {
    for (const bad of ['1969-12-31T23:59:59Z', '1970-01-01T00:59:59+01:00', '0001-01-01']) {
      assert.throws(() => parseNow(bad), (err: SwitchboardError) => err.code === 'USAGE' && /before 1970/.test(err.message), bad);
    }
    assert.equal(parseNow('1970-01-01T00:00:00Z'), 0);
  });

  test('a date that is not on the calendar, or text after the time, is USAGE (never rolled over or cut off)', () => {
    for (const bad of ['2026-02-30', '2026-04-31T00:00:00Z', '2026-11-30T24:00:00Z', '2026-11-30,', '2026-11-30 (note)', '2026-11-30T07:00:00Zjunk', '2026-11-30T07:00:00+25:00']) {
      assert.throws(() => parseNow(bad), (err: SwitchboardError) => err.code === 'USAGE', bad);
    }
  });

  test('the ISO-8601 forms people write: date only, minutes, seconds, fractions, Z or an offset, T or a space', () => {
    const at = Date.parse('2026-11-30T07:00:00Z');
    for (const good of ['2026-11-30T07:00Z', '2026-11-30T07:00:00Z', '2026-11-30 07:00:00Z', '2026-11-30t07:00:00z', '2026-11-30T07:00:00.000Z', '2026-11-30T09:00:00+02:00', '2026-11-30T09:00:00+0200']) {
      assert.equal(parseNow(good), at, good);
    }
    assert.equal(parseNow('2026-11-30'), Date.parse('2026-11-30T00:00:00Z'));
    assert.equal(parseNow('2028-02-29T00:00:00Z'), Date.parse('2028-02-29T00:00:00Z'));
    assert.equal(parseNow('2026-11-30T07:00:00.123456Z'), at + 123);
  });
});

describe('LineSplitter', () => {
  const texts = (lines: NdjsonLine[]) => lines.map((l) => ('text' in l ? `${l.line}:${l.text}` : `${l.line}!${l.error}`));

  test('joins lines split across chunks, strips CR, numbers lines from 1', () => {
    const splitter = new LineSplitter();
    const out = [...splitter.push(Buffer.from('{"a":1}\r\n{"b"')), ...splitter.push(Buffer.from(':2}\n\n{"c":3}')), ...splitter.end()];
    assert.deepEqual(texts(out), ['1:{"a":1}', '2:{"b":2}', '3:', '4:{"c":3}']);
  });

  test('a line over the cap is reported without buffering it; the next line is unaffected', () => {
    const splitter = new LineSplitter(10);
    const out = [...splitter.push(Buffer.from('x'.repeat(6))), ...splitter.push(Buffer.from('y'.repeat(6))), ...splitter.push(Buffer.from('\nok\n'))];
    assert.deepEqual(texts(out), ['1!too-long', '2:ok']);
    assert.equal((out[0] as { bytes: number }).bytes, 12);
  });

  test('invalid UTF-8 is reported for its line only, also when a multi-byte character spans chunks', () => {
    const splitter = new LineSplitter();
    const euro = Buffer.from('€\n');
    const out = [...splitter.push(Buffer.from([0xff, 0x0a])), ...splitter.push(euro.subarray(0, 2)), ...splitter.push(euro.subarray(2))];
    assert.deepEqual(texts(out), ['1!invalid-utf8', '2:€']);
  });
});

describe('batch bounds', () => {
  const line = (n: number, chars: number): NdjsonLine => ({ line: n, text: 'x'.repeat(chars) });

  test('jsonDepthExceeds: counts object and array levels, without recursion, at any depth', () => {
    const nested = (depth: number): unknown => {
      let value: unknown = 'leaf';
      for (let i = 0; i < depth; i++) value = i % 2 === 0 ? { a: value } : [value];
      return value;
    };
    assert.equal(jsonDepthExceeds(nested(MAX_JSON_DEPTH)), false);
    assert.equal(jsonDepthExceeds(nested(MAX_JSON_DEPTH + 1)), true);
    assert.equal(jsonDepthExceeds(JSON.parse(`${'['.repeat(200_000)}${']'.repeat(200_000)}`)), true);
    assert.equal(jsonDepthExceeds('a string'), false);
    assert.equal(jsonDepthExceeds(null), false);
  });

  test('batchLength: bounded by lines and by bytes, never empty, a line above the byte bound alone', () => {
    const lines = [line(1, 40), line(2, 40), line(3, 40), line(4, 200), line(5, 10)];
    assert.equal(batchLength(lines, 10, 100), 2);
    assert.equal(batchLength(lines, 2, 1_000), 2);
    assert.equal(batchLength(lines.slice(3), 10, 100), 1, 'a line over the bound forms a batch of its own');
    assert.equal(batchLength([{ line: 1, error: 'too-long', bytes: 5_000_000 }, line(2, 10)], 10, 100), 2, 'a rejected line holds no text');
    assert.equal(batchLength([], 10, 100), 0);
  });

  test('SWITCHBOARD_MAX_BATCH_BYTES: a whole number ≥ 1, else USAGE; unset = 64 MiB', () => {
    assert.equal(maxBatchBytesFrom({}), DEFAULT_MAX_BATCH_BYTES);
    assert.equal(DEFAULT_MAX_BATCH_BYTES, 64 * 1024 * 1024);
    assert.equal(maxBatchBytesFrom({ SWITCHBOARD_MAX_BATCH_BYTES: '2097152' }), 2_097_152);
    for (const bad of ['0', '-1', '1.5', 'lots', '1e6']) {
      assert.throws(() => maxBatchBytesFrom({ SWITCHBOARD_MAX_BATCH_BYTES: bad }), (err: SwitchboardError) => err.code === 'USAGE');
    }
  });
});
