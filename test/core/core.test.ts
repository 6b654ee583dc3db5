// Unit tests of core/: the error type, the --now parser and NDJSON framing.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EXIT_CODES, LineSplitter, SwitchboardError, parseNow, toSwitchboardError, type NdjsonLine } from '../../src/core/index.js';

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
