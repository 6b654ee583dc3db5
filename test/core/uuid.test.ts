import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newUuid } from '../../src/core/index.js';

test('newUuid gives distinct version 4 UUIDs in the form crypto.randomUUID gives', () => {
  const seen = new Set<string>();
  // Past several draws of the random pool.
  for (let i = 0; i < 5_000; i++) {
    const id = newUuid();
    assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    seen.add(id);
  }
  assert.equal(seen.size, 5_000);
  // Every hex digit turns up in every free position: the digits are not stuck.
  const id = [...seen];
  for (const position of [0, 7, 9, 15, 20, 35]) assert.equal(new Set(id.map((u) => u[position])).size, 16, `position ${position}`);
});
