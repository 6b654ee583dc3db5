// LineSplitter decodes a run of whole lines at once: every way of cutting the same bytes into
// chunks must give the same lines, errors and line numbers as feeding them one byte at a time
// (which never forms a run), including BOMs, CRLF, invalid UTF-8, lines over the cap and blank lines.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LineSplitter, type NdjsonLine } from '../../src/core/index.js';

function split(bytes: Buffer, cuts: number[], maxLineBytes: number): NdjsonLine[] {
  const splitter = new LineSplitter(maxLineBytes);
  const out: NdjsonLine[] = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    out.push(...splitter.push(bytes.subarray(from, cut)));
    from = cut;
  }
  out.push(...splitter.end());
  // When a line arrived is the clock's business, not the framing's: compare everything else.
  return out.map((line) => ('text' in line ? { line: line.line, text: line.text } : line));
}

function byteAtATime(bytes: Buffer, maxLineBytes: number): NdjsonLine[] {
  return split(bytes, Array.from({ length: bytes.length }, (_, i) => i), maxLineBytes);
}

/** Deterministic pseudo-random numbers, so a failure names a reproducible seed. */
function rng(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

const PIECES: Buffer[] = [
  Buffer.from('{"channel":"a"}\n'),
  Buffer.from('\n'),
  Buffer.from('{"channel":"crlf"}\r\n'),
  Buffer.from('\ufeff{"channel":"bom"}\n'),
  Buffer.from('\ufeff\ufeff{"channel":"two boms"}\n'),
  Buffer.from('{"text":"h\u00e9llo \u{1F600} \u4e16\u754c"}\n'),
  Buffer.from([0x7b, 0xff, 0xfe, 0x7d, 0x0a]), // invalid UTF-8
  Buffer.from([0xe4, 0xb8, 0x0a]), // a sequence cut short by the newline
  Buffer.from(`{"big":"${'x'.repeat(300)}"}\n`), // over a 256-byte cap
  Buffer.from('   \n'),
  Buffer.from('\r\n'),
];

describe('LineSplitter runs of whole lines', () => {
  test('any chunking gives the lines of a byte-at-a-time read', () => {
    for (let seed = 1; seed <= 60; seed++) {
      const rand = rng(seed);
      const parts: Buffer[] = [];
      for (let i = 0; i < 40; i++) parts.push(PIECES[rand(PIECES.length)]!);
      if (rand(2) === 0) parts.push(Buffer.from('{"last":"no newline"}'));
      const bytes = Buffer.concat(parts);
      for (const maxLineBytes of [256, 1024 * 1024]) {
        const expected = byteAtATime(bytes, maxLineBytes);
        const cuts = [...new Set(Array.from({ length: rand(8) }, () => rand(bytes.length)))].sort((a, b) => a - b);
        assert.deepEqual(split(bytes, cuts, maxLineBytes), expected, `seed ${seed}, cap ${maxLineBytes}, cuts ${cuts}`);
        assert.deepEqual(split(bytes, [], maxLineBytes), expected, `seed ${seed}, cap ${maxLineBytes}, one chunk`);
      }
    }
  });

  test('every line a chunk completes carries that chunk\'s arrival time', () => {
    const splitter = new LineSplitter(1024);
    const before = Date.now();
    const lines = [...splitter.push(Buffer.from('{"a":1}\n{"b":')), ...splitter.push(Buffer.from('2}\n{"c":3}\n\n'))];
    assert.equal(lines.length, 4);
    for (const line of lines) assert.ok('receivedAt' in line && typeof line.receivedAt === 'number' && line.receivedAt >= before);
  });

  test('a BOM is dropped once per line, CR before the newline too, and bad lines keep their numbers', () => {
    const bytes = Buffer.concat([PIECES[3]!, PIECES[4]!, PIECES[2]!, PIECES[6]!, PIECES[0]!]);
    assert.deepEqual(split(bytes, [], 1024), [
      { line: 1, text: '{"channel":"bom"}' },
      { line: 2, text: '\ufeff{"channel":"two boms"}' },
      { line: 3, text: '{"channel":"crlf"}' },
      { line: 4, error: 'invalid-utf8', bytes: 4 },
      { line: 5, text: '{"channel":"a"}' },
    ]);
  });
});
