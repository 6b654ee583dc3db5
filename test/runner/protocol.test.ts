// The runner protocol's line parser on lines nested past the depth every JSON input of switchboard
// is held to: such an event is a protocol violation with its reason, not a transcript write error.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_JSON_DEPTH } from '../../src/core/index.js';
import { parseRunnerLine } from '../../src/runner/protocol.js';

function nested(levels: number): string {
  return `${'['.repeat(levels)}${']'.repeat(levels)}`;
}

test(`an event nested deeper than ${MAX_JSON_DEPTH} levels is a protocol violation naming the depth; one within it is an event`, () => {
  const deep = parseRunnerLine(`{"type":"tool_call","id":"t1","name":"x","args":${nested(6000)}}`);
  assert.deepEqual(deep, { kind: 'invalid', message: `tool_call: the line nests objects/arrays deeper than ${MAX_JSON_DEPTH} levels` });
  const fine = parseRunnerLine(`{"type":"tool_call","id":"t1","name":"x","args":${nested(MAX_JSON_DEPTH - 1)}}`);
  assert.equal(fine.kind, 'event');
  // Not an event at all (no known type): plain text, whatever its depth.
  assert.equal(parseRunnerLine(`{"other":${nested(6000)}}`).kind, 'plain');
});
