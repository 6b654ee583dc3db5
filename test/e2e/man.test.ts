// Every man page renders with groff without a warning, each page documents a real command, and
// the pages' options agree with --help for every command and subcommand.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { BIN, REPO_ROOT } from '../helpers.js';

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

// ---------------------------------------------------------------------------------------------
// The man pages and --help agree: every option of every command and subcommand is documented in
// its page, and every option a page's SYNOPSIS gives a command is one that command accepts.

interface HelpOf {
  options: string[];
  commands: string[];
}

function helpOf(words: string[]): HelpOf {
  const r = spawnSync(process.execPath, [BIN, ...words, '--help'], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1', COLUMNS: '200' } });
  assert.equal(r.status, 0, `switchboard ${words.join(' ')} --help`);
  const sections = new Map<string, string[]>();
  let current = '';
  for (const line of r.stdout.split('\n')) {
    const heading = /^([A-Z][A-Za-z ]*):$/.exec(line);
    if (heading) {
      current = heading[1];
      sections.set(current, []);
    } else sections.get(current)?.push(line);
  }
  const options: string[] = [];
  for (const line of sections.get('Options') ?? []) {
    const match = /^ {2}(-\w)?(?:, )?(--[\w-]+)?/.exec(line);
    if (match?.[1]) options.push(match[1]);
    if (match?.[2]) options.push(match[2]);
  }
  const commands = (sections.get('Commands') ?? []).map((line) => /^ {2}([a-z][\w-]*)/.exec(line)?.[1]).filter((name): name is string => name !== undefined && name !== 'help');
  return { options: options.filter((option) => option !== '--help' && option !== '-h'), commands };
}

/** The page that documents a top-level command. */
const PAGE_OF: Record<string, string> = { send: 'switchboard-ingest.1', reset: 'switchboard-sessions.1', config: 'switchboard.1', completion: 'switchboard.1' };

function pageOf(command: string): string {
  return PAGE_OF[command] ?? (pages.includes(`switchboard-${command}.1`) ? `switchboard-${command}.1` : 'switchboard.1');
}

/** Every `--option` and `-x` a piece of roff names (`\-\-dry\-run` → `--dry-run`). */
function optionsIn(roff: string): Set<string> {
  const text = roff.replace(/\\-/g, '-').replace(/\\f[BIRP]/g, '');
  return new Set([...text.matchAll(/(?<![\w-])(--[a-z][\w-]*|-[a-zA-Z])(?![\w-])/g)].map((m) => m[1]));
}

/** SYNOPSIS lines as (command words, options named after them), split at `.br`. */
function synopsisOf(roff: string): { words: string[]; options: Set<string> }[] {
  const synopsis = /^\.SH SYNOPSIS\n([\s\S]*?)^\.SH /m.exec(roff)?.[1] ?? '';
  return synopsis.split(/^\.br\n/m).map((chunk) => {
    const first = chunk.replace(/\\f[BIRP]/g, '').replace(/\\-/g, '-').split('\n')[0].replace(/^\.B\s+/, '');
    const words = first.split(/\s+/).filter((word) => /^[a-z][a-z-]*$/.test(word)).slice(1);
    // `switchboard queue [list] …`: the options are those of the default subcommand named.
    const optional = /^\.RB \[ ([a-z]+) \]$/m.exec(chunk.split('\n')[1] ?? '');
    if (optional) words.push(optional[1]);
    return { words, options: optionsIn(chunk.split('\n').slice(1).join('\n') + first.replace(/^switchboard( [a-z][a-z-]*)*/, '')) };
  });
}

test('every option of every command and subcommand in --help is in its man page, and every SYNOPSIS option is accepted', () => {
  const top = helpOf([]);
  const globals = new Set([...top.options, '--version', '-V']);
  const problems: string[] = [];
  const accepted = new Map<string, Set<string>>();
  const visit = (words: string[]) => {
    const help = helpOf(words);
    accepted.set(words.join(' '), new Set(help.options));
    const page = pageOf(words[0]);
    const documented = optionsIn(fs.readFileSync(path.join(manDir, page), 'utf8'));
    for (const option of help.options) if (!documented.has(option)) problems.push(`switchboard ${words.join(' ')} ${option}: not in ${page}`);
    for (const sub of help.commands) visit([...words, sub]);
  };
  for (const command of top.commands) visit([command]);
  const mainPage = optionsIn(fs.readFileSync(path.join(manDir, 'switchboard.1'), 'utf8'));
  for (const option of globals) if (!mainPage.has(option)) problems.push(`global option ${option}: not in switchboard.1`);

  for (const page of pages) {
    for (const { words, options } of synopsisOf(fs.readFileSync(path.join(manDir, page), 'utf8'))) {
      // `sessions pin|unpin` and other alternatives: the first word names the command.
      let key = words.join(' ');
      while (key !== '' && !accepted.has(key)) key = key.split(' ').slice(0, -1).join(' ');
      if (key === '') continue; // the main page's generic `switchboard [options] command`
      for (const option of options) {
        if (!accepted.get(key)!.has(option) && !globals.has(option)) problems.push(`${page} SYNOPSIS: switchboard ${key} ${option} is not an option of that command`);
      }
    }
  }
  assert.deepEqual(problems, []);
});
