// readRouteInputLine reads the common route input lines without JSON.parse: whatever it returns must
// be what JSON.parse gives, and anything it is unsure of must be left to JSON.parse (undefined).

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { normalizeRouteInput, readRouteInputLine } from '../../src/routing/index.js';

const FIELDS = ['channel', 'accountId', 'peer', 'parentPeer', 'guildId', 'teamId', 'memberRoleIds', 'threadId'];

/** Fails unless `line` is read exactly as JSON.parse reads it, or left to JSON.parse. */
function check(line: string): boolean {
  const raw = readRouteInputLine(line);
  if (raw === undefined) return false;
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(line) as Record<string, unknown>;
  } catch {
    assert.fail(`read a line JSON.parse refuses: ${JSON.stringify(line)}`);
  }
  assert.ok(parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed), line);
  for (const key of Object.keys(parsed)) assert.ok(FIELDS.includes(key), `read a line with key ${key}: ${line}`);
  for (const field of FIELDS) assert.deepEqual((raw as unknown as Record<string, unknown>)[field], parsed[field], `${field} of ${line}`);
  // And routing sees the same input (or the same error).
  const outcome = (value: unknown) => {
    try {
      return JSON.stringify(normalizeRouteInput(value));
    } catch (err) {
      return `${(err as { code?: string }).code}: ${(err as Error).message}`;
    }
  };
  assert.equal(outcome(raw), outcome(parsed), line);
  return true;
}

const samples = [
  '{"channel":"telegram","peer":{"kind":"direct","id":"123"}}',
  '{"channel":"discord","accountId":"acct-3","peer":{"kind":"channel","id":"thread-9"},"parentPeer":{"kind":"group","id":"peer-1"}}',
  '{"channel":"discord","guildId":"g1","memberRoleIds":["r1","r2"],"peer":{"kind":"channel","id":"c5"}}',
  '{"channel":"msteams","teamId":"t1"}',
  '{"channel":"telegram","peer":"group:-100","threadId":42}',
  ' { "channel" : "Slack" , "accountId" : "ACME" , "peer" : { "id" : "U9" , "kind" : "dm" } } ',
  '{"channel":"signal","peer":{"kind":"direct","id":"say é 😀"},"memberRoleIds":[]}',
  '{"channel":"x","threadId":-0,"accountId":0,"peer":{"id":7,"kind":"group"}}',
  '{}',
];

describe('readRouteInputLine', () => {
  test('reads the common shapes', () => {
    for (const line of samples) assert.ok(check(line), line);
  });

  test('leaves escapes, other keys, repeats, literals, odd numbers and non-JSON to JSON.parse', () => {
    for (const line of [
      '{"channel":"a\\"b"}',
      '{"chan\\u006eel":"x"}',
      '{"channel":"x","text":"hi"}',
      '{"channel":"x","channel":"y"}',
      '{"channel":"x","peer":{"kind":"direct","id":"1","name":"n"}}',
      '{"channel":"x","peer":{"kind":"direct","kind":"group","id":"1"}}',
      '{"channel":null}',
      '{"channel":true}',
      '{"channel":"x","threadId":1.5}',
      '{"channel":"x","threadId":1e3}',
      '{"channel":"x","threadId":1234567890123456}',
      '{"channel":"x","threadId":01}',
      '{"channel":"x","peer":{}}',
      '{"channel":"x","peer":{"id":"1"}}',
      '{"channel":"x",}',
      '{"channel":"x"} x',
      '{"channel":"x"',
      '{"channel":"a\tb"}',
      '{"channel":{"kind":"direct","id":"1"}}',
      '{"memberRoleIds":"r1","channel":"x"}',
      '{"memberRoleIds":[1],"channel":"x"}',
      '{"__proto__":{"kind":"direct","id":"1"},"channel":"x"}',
      '\ufeff{"channel":"x"}',
      '[]',
      '"x"',
      '',
    ]) {
      assert.equal(readRouteInputLine(line), undefined, line);
    }
  });

  test('mutated lines: whatever is read equals JSON.parse (10 000 mutations)', () => {
    let seed = 5;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const alphabet = ['"', '\\', '{', '}', '[', ']', ':', ',', ' ', '\t', '0', '1', '-', '.', 'e', 'a', 'é', '\u0000', '\n', 'null', 'true', '"id"', '"kind"', '"peer"', '"channel"'];
    let read = 0;
    for (let i = 0; i < 10_000; i++) {
      let line = samples[rand(samples.length)]!;
      for (let m = 1 + rand(3); m > 0; m--) {
        const at = rand(line.length + 1);
        const op = rand(3);
        const piece = alphabet[rand(alphabet.length)]!;
        if (op === 0) line = line.slice(0, at) + piece + line.slice(at);
        else if (op === 1) line = line.slice(0, at) + line.slice(at + 1 + rand(3));
        else line = line.slice(0, at) + piece + line.slice(at + 1);
      }
      if (check(line)) read++;
    }
    // The mutations must leave a good share readable, or this test would check nothing.
    assert.ok(read > 500, `only ${read} mutated lines were read`);
  });
});
