// `$include` in an OpenClaw config: a key that pulls other files into the object holding it, as
// OpenClaw's loader does before it validates (docs: gateway/configuration, "Split config into
// multiple files"). Facts kept from OpenClaw 2026.9.6:
//
// * `$include: "./file.json5"` replaces the object holding it with the file's value;
//   `$include: ["a.json5", "b.json5"]` deep-merges the files in order (later wins).
// * Sibling keys next to `$include` are merged over what was included, which must then be an object.
// * The merge joins arrays (a later file's bindings come after an earlier one's), merges objects
//   key by key and lets the later scalar win; `__proto__`, `prototype` and `constructor` are dropped.
// * Paths are relative to the file that names them; they must stay inside the top config file's
//   folder (or a folder listed in OPENCLAW_INCLUDE_ROOTS), also once symbolic links are followed.
// * Included files may include others, 10 levels deep at most, never in a cycle; each must be a
//   regular file of at most 2 MiB with no other hard link; `$include` works inside arrays too.

import fs from 'node:fs';
import path from 'node:path';
import { SwitchboardError, expandHome, jsonDepthExceeds } from '../core/index.js';
import { setOwn } from './own-keys.js';
import { locateJsonPaths } from './positions.js';
import { ConfigFileProblem, readConfigText } from './read-file.js';
import { formatJsonPath } from './validators.js';

const INCLUDE_KEY = '$include';
const MAX_INCLUDE_DEPTH = 10;
const MAX_INCLUDE_BYTES = 2 * 1024 * 1024;
const MAX_INCLUDE_PATH_LENGTH = 4096;
/**
 * Inclusions one config may make in all. Depth alone does not bound the work: ten levels of files
 * that each include the next eight times is 8^10 inclusions, which kept a load busy for minutes
 * and ran it out of memory. A real config includes a handful of files.
 */
const MAX_INCLUSIONS = 256;
/** Bytes all included files may hold together (a config file alone may hold 64 MiB). */
const MAX_INCLUDED_BYTES = 64 * 1024 * 1024;
const BLOCKED_KEYS = new Set(['__proto__', 'prototype', 'constructor']);

/** A file an `$include` brought in, and where in the config its value went. */
export interface IncludedFile {
  file: string;
  text: string;
  /** The JSON path segments of the object that held the `$include`. */
  at: string[];
  /** Whether it was the `$include`'s only file (its value is then the object's, as written). */
  single: boolean;
}

export interface IncludeContext {
  /** Folders an included file may be in: the top config file's, then OPENCLAW_INCLUDE_ROOTS. */
  roots: string[];
  parse: (text: string, label: string) => Promise<unknown>;
  /** Every file included so far, in the order they were read. */
  included: IncludedFile[];
  /** The text of the file the walk starts in, to name where its own `$include`s are. */
  text?: string;
}

/** An `$include` being resolved: the file it is written in, and the keys to its object within that file. */
interface IncludeSite {
  file: string;
  local: string[];
  context: IncludeContext;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * Whether a config text may hold an `$include` at all: most do not, and need no walk. A key written
 * with an escape (`"\u0024include"`, `\u0024include:`, `"\$include"`) is `$include` once parsed,
 * as OpenClaw reads it, so a text with any backslash is walked too.
 */
export function mayInclude(text: string): boolean {
  return text.includes(INCLUDE_KEY) || text.includes('\\');
}

/**
 * The folders includes of `configFile` may come from: its own, then each OPENCLAW_INCLUDE_ROOTS
 * entry as OpenClaw 2026.9.6 reads the variable (entries trimmed, `~` the home folder, a relative
 * entry resolved against the working directory, blank entries skipped).
 */
export function includeRoots(configFile: string, env: NodeJS.ProcessEnv): string[] {
  const extra = (env.OPENCLAW_INCLUDE_ROOTS ?? '')
    .split(path.delimiter)
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry) => path.resolve(expandHome(entry)));
  return [path.dirname(configFile), ...extra].map((root) => path.normalize(root));
}

/** CONFIG_INVALID for the `$include` at `site`, named `file:line:column: path.$include:` (the line and column when the text shows where). */
function includeError(site: IncludeSite, message: string): SwitchboardError {
  const at = formatJsonPath([...site.local, INCLUDE_KEY]);
  const text = site.context.included.find((included) => included.file === site.file)?.text ?? site.context.text;
  const position = text === undefined ? undefined : locateJsonPaths(text).get(at);
  const where = position ? `${site.file}:${position.line}:${position.column}` : site.file;
  return new SwitchboardError('CONFIG_INVALID', `${where}: ${at}: ${message}`, {
    details: { file: site.file, path: at, ...(position ? { line: position.line, column: position.column } : {}) },
    hint: 'fix the $include (paths are relative to the file that names them and must stay in the config folder)',
  });
}

function isInside(root: string, candidate: string): boolean {
  const relative = path.relative(root, candidate);
  // `..x.json` is a name inside; only `..` itself or `../…` leads out.
  return relative === '' || (relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative));
}

function realpathOr(file: string): string | undefined {
  try {
    return fs.realpathSync(file);
  } catch {
    return undefined;
  }
}

/** Merges `over` into `base` the way OpenClaw's include merge does: arrays joined, objects merged, the later scalar wins. */
export function mergeIncluded(base: unknown, over: unknown): unknown {
  if (Array.isArray(base) && Array.isArray(over)) return [...base, ...over];
  if (!isRecord(base) || !isRecord(over)) return over;
  const merged: Record<string, unknown> = withoutBlockedKeys(base);
  for (const [key, value] of Object.entries(over)) {
    if (BLOCKED_KEYS.has(key)) continue;
    const current = merged[key];
    if (isRecord(value)) merged[key] = isRecord(current) ? mergeIncluded(current, value) : withoutBlockedKeys(value);
    else if (Array.isArray(current) && Array.isArray(value)) merged[key] = [...current, ...value];
    else merged[key] = value;
  }
  return merged;
}

function withoutBlockedKeys(value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) if (!BLOCKED_KEYS.has(key)) out[key] = isRecord(child) ? withoutBlockedKeys(child) : child;
  return out;
}

/**
 * `value` (parsed from `file`) with every `$include` in it resolved. `chain` is the files being
 * included, outermost first (a cycle is an error), and its length the nesting depth. `at` is where
 * `value` sits in the config, `rootAt` where `file`'s own value does.
 */
export async function resolveIncludes(value: unknown, file: string, context: IncludeContext, chain: string[] = [path.normalize(file)], at: string[] = [], rootAt: string[] = at): Promise<unknown> {
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    for (let i = 0; i < value.length; i++) out.push(await resolveIncludes(value[i], file, context, chain, [...at, String(i)], rootAt));
    return out;
  }
  if (!isRecord(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    if (key !== INCLUDE_KEY) setOwn(out, key, await resolveIncludes(child, file, context, chain, [...at, key], rootAt));
  }
  const site: IncludeSite = { file, local: at.slice(rootAt.length), context };
  if (!Object.hasOwn(value, INCLUDE_KEY)) return out;
  const names = value[INCLUDE_KEY];
  let included: unknown;
  if (typeof names === 'string') {
    included = await includeFile(names, true, site, chain, at);
  } else if (Array.isArray(names) && names.every((name) => typeof name === 'string')) {
    included = {};
    for (const name of names as string[]) included = mergeIncluded(included, await includeFile(name, false, site, chain, at));
  } else {
    throw includeError(site, `must be a file name or a list of file names, got ${JSON.stringify(names)}`);
  }
  if (Object.keys(out).length === 0) return included;
  if (!isRecord(included)) throw includeError(site, 'keys next to $include need the included file to hold an object');
  return mergeIncluded(included, out);
}

async function includeFile(name: string, single: boolean, site: IncludeSite, chain: string[], at: string[]): Promise<unknown> {
  const { file: from, context } = site;
  if (name.includes('\0')) throw includeError(site, 'a file name cannot contain a NUL character');
  if (name.length >= MAX_INCLUDE_PATH_LENGTH) throw includeError(site, `a file name must be shorter than ${MAX_INCLUDE_PATH_LENGTH} characters`);
  const file = path.normalize(path.resolve(path.dirname(from), name));
  if (file.length >= MAX_INCLUDE_PATH_LENGTH) throw includeError(site, `"${name}" resolves to a path of ${MAX_INCLUDE_PATH_LENGTH} characters or more`);
  if (!context.roots.some((root) => isInside(root, file))) throw includeError(site, `"${name}" is outside the config folder ${context.roots[0]} (OPENCLAW_INCLUDE_ROOTS can allow more folders)`);
  // Through links too (a missing file is left to the read, which says so, as OpenClaw does).
  const real = realpathOr(file);
  if (real !== undefined && !context.roots.some((root) => isInside(realpathOr(root) ?? root, real))) throw includeError(site, `"${name}" leads outside the config folder through a symbolic link`);
  if (chain.includes(file)) throw includeError(site, `"${name}" makes a cycle (${[...chain, file].join(' → ')})`);
  if (chain.length > MAX_INCLUDE_DEPTH) throw includeError(site, `"${name}" nests includes more than ${MAX_INCLUDE_DEPTH} levels deep`);
  if (context.included.length >= MAX_INCLUSIONS) throw includeError(site, `more than ${MAX_INCLUSIONS} files are included in all (files that include others several times multiply)`);
  const text = readIncludedFile(file, name, site);
  const total = context.included.reduce((sum, seen) => sum + seen.text.length, text.length);
  if (total > MAX_INCLUDED_BYTES) throw includeError(site, `the included files hold more than ${MAX_INCLUDED_BYTES} characters in all`);
  const data = await context.parse(text, file);
  // Every later walk recurses; the top file was checked for this, each included one is too.
  if (jsonDepthExceeds(data)) throw includeError(site, `"${name}" holds values nested too deeply`);
  context.included.push({ file, text, at, single });
  return resolveIncludes(data, file, context, [...chain, file], at);
}

/** An included file's text: a regular file of at most 2 MiB with no other hard link. */
function readIncludedFile(file: string, name: string, site: IncludeSite): string {
  try {
    return readConfigText(file, MAX_INCLUDE_BYTES, { refuseHardLinks: true });
  } catch (err) {
    if (!(err instanceof ConfigFileProblem)) throw err;
    if (err.kind === 'missing') throw includeError(site, `"${name}" does not exist (looked for ${file})`);
    if (err.kind === 'hard-linked') throw includeError(site, `"${name}" has other hard links, and OpenClaw refuses such a file`);
    throw includeError(site, `cannot read "${name}": ${err.message}`);
  }
}
