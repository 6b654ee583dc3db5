import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { sha256Base64url } from '../../src/core/index.js';

test('the store digest is SHA-256 of the UTF-8 bytes in base64url, the same as journals written before it used crypto.hash', () => {
  // A journal names entries by this digest: an older journal must still match after an upgrade.
  for (const text of ['', 'abc', 'é日本😀', 'x'.repeat(5000), '\ud800 lone surrogate', '{"sessionId":"a","updatedAt":1}']) {
    assert.equal(sha256Base64url(text), createHash('sha256').update(text).digest('base64url'), JSON.stringify(text.slice(0, 12)));
  }
  assert.equal(sha256Base64url('abc'), 'ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0');
});
