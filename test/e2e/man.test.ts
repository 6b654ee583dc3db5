// Every man page renders with groff without a warning, and each page documents a real command.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { REPO_ROOT } from '../helpers.js';

const manDir = path.join(REPO_ROOT, 'man');
const pages = fs.readdirSync(manDir).filter((name) => /\.\d$/.test(name));

test('man pages exist for the main command and every listed page in package.json', () => {
  assert.ok(pages.includes('switchboard.1'));
  const listed = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')).man as string[];
  for (const page of listed) assert.ok(fs.existsSync(path.join(REPO_ROOT, page)), `${page} listed in package.json exists`);
  for (const page of pages) assert.ok(listed.includes(`man/${page}`), `${page} is listed in package.json "man"`);
});

for (const page of pages) {
  test(`${page} renders without groff warnings`, () => {
    const result = spawnSync('groff', ['-man', '-Tutf8', '-ww', '-z', path.join(manDir, page)], { encoding: 'utf8' });
    assert.equal(result.error, undefined, 'groff is installed (Debian package groff-base)');
    assert.equal(result.status, 0);
    assert.equal(result.stderr, '');
  });
}
