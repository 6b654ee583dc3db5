// `${VAR}` in config string values, replaced from the environment as OpenClaw's loader does after
// resolving `$include` and before validating (docs: gateway/configuration/environment-variables).
// Facts kept from OpenClaw 2026.9.6:
//
// * Only names of upper-case letters, digits and `_` (not starting with a digit) are references;
//   `$${VAR}` is the escape and gives a literal `${VAR}`; any other `$` stays as written.
// * A variable that is unset or empty leaves the reference as written, with a warning.
// * Values come from the process environment; the `.env` files of the state dir and of the
//   OpenClaw config's folder (OpenClaw reads `~/.openclaw/.env`, or the one beside
//   $OPENCLAW_CONFIG_PATH, with the `dotenv` package's rules) set names the environment does not
//   have at all; then the config's own string entries directly under `env`, and after them those
//   of `env.vars`, fill in names that are still unset or blank, except values that themselves
//   hold a reference.
// * Keys are never substituted, only string values, at any depth (arrays included).

import path from 'node:path';
import { SwitchboardError } from '../core/index.js';
import { getOwn, setOwn } from './own-keys.js';
import { readConfigText } from './read-file.js';
import { formatJsonPath } from './validators.js';

/** A name a reference may use. */
const VARIABLE_NAME = /^[A-Z_][A-Z0-9_]*$/;
/** What a config `env` entry may be named (a portable environment variable name). */
const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Far more than any `.env` holds; a larger file is not read. */
const MAX_DOTENV_BYTES = 1024 * 1024;
/**
 * Characters substitution may add to a config in all: a 1 MB value referenced many times made
 * strings past V8's limit, and the load failed as an INTERNAL error. A real config adds a few
 * tokens and ids.
 */
const MAX_ADDED_CHARS = 16 * 1024 * 1024;

type Token = { kind: 'escaped' | 'reference'; name: string; end: number };

/** The reference or escape starting at `text[at]` (a `$`), or undefined when it is neither. */
function tokenAt(text: string, at: number): Token | undefined {
  const escaped = text[at + 1] === '$' && text[at + 2] === '{';
  if (!escaped && text[at + 1] !== '{') return undefined;
  const start = at + (escaped ? 3 : 2);
  const end = text.indexOf('}', start);
  if (end < 0) return undefined;
  const name = text.slice(start, end);
  return VARIABLE_NAME.test(name) ? { kind: escaped ? 'escaped' : 'reference', name, end } : undefined;
}

/** Whether `text` holds a reference that is not escaped. */
function holdsReference(text: string): boolean {
  for (let i = text.indexOf('$'); i >= 0; i = text.indexOf('$', i + 1)) {
    const token = tokenAt(text, i);
    if (token?.kind === 'reference') return true;
    if (token) i = token.end;
  }
  return false;
}

/** What substitution has added so far, against MAX_ADDED_CHARS. */
interface Budget {
  added: number;
  /** The config file, for the error that ends the budget. */
  file: string;
}

function substitute(text: string, env: Record<string, string | undefined>, at: string, missing: Set<string>, budget: Budget): string {
  if (!text.includes('$')) return text;
  let out = '';
  let from = 0;
  for (let i = text.indexOf('$'); i >= 0; i = text.indexOf('$', i + 1)) {
    const token = tokenAt(text, i);
    if (!token) continue;
    const value = token.kind === 'reference' ? env[token.name] : undefined;
    if (token.kind === 'reference' && (value === undefined || value === '')) missing.add(`${token.name} (at ${at})`);
    if (value !== undefined && (budget.added += value.length) > MAX_ADDED_CHARS) {
      throw new SwitchboardError('CONFIG_INVALID', `${budget.file}: ${at}: \${${token.name}} and the other references make the config more than ${MAX_ADDED_CHARS} characters longer`, {
        details: { file: budget.file, path: at },
        hint: 'a reference stands for a token or an id; keep large values out of the environment variables a config names',
      });
    }
    out += text.slice(from, i) + (token.kind === 'escaped' || value === undefined || value === '' ? `\${${token.name}}` : value);
    from = token.end + 1;
    i = token.end;
  }
  return out + text.slice(from);
}

const SPACE = /\s/;
const KEY_CHAR = /[\w.-]/;

function skipSpace(text: string, at: number): number {
  while (at < text.length && SPACE.test(text[at]!)) at++;
  return at;
}

/** The line break at or after `at` (U+2028 and U+2029 end a line too, except inside an unquoted value), or the text's end. */
function lineEndOf(text: string, at: number): number {
  const rest = text.slice(at).search(/[\n\u2028\u2029]/);
  return rest < 0 ? text.length : at + rest;
}

/** The name at `at` and where its value starts (after `=`, blanks and line breaks allowed before it, or after `:` and one blank), or undefined. */
function entryHead(text: string, at: number): { key: string; valueAt: number } | undefined {
  let end = at;
  while (end < text.length && KEY_CHAR.test(text[end]!)) end++;
  if (end === at) return undefined;
  const key = text.slice(at, end);
  if (text[end] === ':' && end + 1 < text.length && SPACE.test(text[end + 1]!)) return { key, valueAt: end + 2 };
  const equals = skipSpace(text, end);
  return text[equals] === '=' ? { key, valueAt: equals + 1 } : undefined;
}

/**
 * Where a quote opened just before `from` may close, the longest first: at the first quote not
 * escaped by a backslash, else (when what follows that one is not a comment) at an escaped one.
 */
function closingQuotes(text: string, from: number, quote: string): number[] {
  const escaped: number[] = [];
  for (let i = from; i < text.length; i++) {
    if (text[i] === '\\' && text[i + 1] === quote) escaped.push(++i);
    else if (text[i] === quote) return [i, ...escaped.reverse()];
  }
  return escaped.reverse();
}

/** One entry starting at `at` (a line start) and the index its text ends at, or undefined when none starts there. */
function dotEnvEntry(text: string, at: number): { key: string; value: string; end: number } | undefined {
  const start = skipSpace(text, at);
  let head = entryHead(text, start);
  if (text.startsWith('export', start) && SPACE.test(text[start + 6] ?? '')) head = entryHead(text, skipSpace(text, start + 6)) ?? head;
  if (!head) return undefined;
  // A quoted value may follow blanks and line breaks, may span lines, and needs nothing but a comment after it.
  const quoteAt = skipSpace(text, head.valueAt);
  const quote = text[quoteAt];
  let raw: string | undefined;
  let end = 0;
  if (quote === '"' || quote === "'" || quote === '`') {
    for (const close of closingQuotes(text, quoteAt + 1, quote)) {
      const rest = text.slice(close + 1, lineEndOf(text, close)).trim();
      if (rest === '' || rest.startsWith('#')) {
        raw = text.slice(quoteAt, close + 1);
        end = lineEndOf(text, close);
        break;
      }
    }
  }
  if (raw === undefined) {
    // Otherwise the value is the rest of its line up to a `#` (a comment there ends the entry).
    const newline = text.indexOf('\n', head.valueAt) < 0 ? text.length : text.indexOf('\n', head.valueAt);
    const hash = text.indexOf('#', head.valueAt);
    const commented = hash >= 0 && hash < newline;
    raw = text.slice(head.valueAt, commented ? hash : newline);
    end = commented ? lineEndOf(text, hash) : newline;
  }
  const trimmed = raw.trim();
  // Surrounding quotes go (where a line of the value starts with one and ends with it, for a value
  // that holds U+2028 line separators), and in double quotes `\n` and `\r` are escapes.
  const value = trimmed.replace(/^(["'`])([\s\S]*)\1$/gm, '$2');
  return { key: head.key, value: trimmed[0] === '"' ? value.replace(/\\n/g, '\n').replace(/\\r/g, '\r') : value, end };
}

/**
 * The entries of a `.env` file, read as OpenClaw 2026.9.6 reads its state dir's (the `dotenv`
 * package's rules, checked against it): `KEY=value` or `KEY: value`, an optional `export `; a
 * value in quotes (', ", `) may span lines and keeps a `#`, and in double quotes `\\n` and `\\r` are
 * a newline and a carriage return; an unquoted value ends at a `#` and is trimmed; a later entry
 * wins; lines that are none of these are skipped, and so are names that are not portable (`A.B`).
 */
export function parseDotEnv(source: string): Map<string, string> {
  const text = source.replace(/\r\n?/g, '\n');
  const values = new Map<string, string>();
  for (let at = 0; at < text.length; ) {
    const entry = dotEnvEntry(text, at);
    if (entry && ENV_KEY.test(entry.key)) values.set(entry.key, entry.value);
    at = (entry ? entry.end : lineEndOf(text, at)) + 1;
  }
  return values;
}

/** The state dir's `.env` entries; none when it is absent or unreadable. */
function readDotEnv(file: string): Map<string, string> {
  try {
    // The config files' own read: a regular file of bounded size, never a wait on a FIFO.
    return parseDotEnv(readConfigText(file, MAX_DOTENV_BYTES));
  } catch {
    return new Map();
  }
}

/**
 * The config's own `env.vars` and string `env` entries that may fill in the environment, one value
 * per name: an entry directly under `env` wins over `env.vars` (as OpenClaw 2026.9.6 applies them,
 * wherever each is written). Entries that are blank, hold a reference or have no portable name are
 * skipped, so they never hide another.
 */
function configEnvEntries(config: Record<string, unknown>): Map<string, string> {
  const entries = new Map<string, string>();
  const envSection = config.env;
  if (envSection === null || typeof envSection !== 'object' || Array.isArray(envSection)) return entries;
  const take = (rawKey: string, value: unknown): void => {
    const key = rawKey.trim();
    if (typeof value === 'string' && ENV_KEY.test(key) && value.trim() !== '' && !holdsReference(value)) entries.set(key, value);
  };
  const section = envSection as Record<string, unknown>;
  const vars = section.vars;
  if (vars !== null && typeof vars === 'object' && !Array.isArray(vars)) for (const [key, value] of Object.entries(vars)) take(key, value);
  for (const [key, value] of Object.entries(section)) if (key !== 'vars' && key !== 'shellEnv') take(key, value);
  return entries;
}

/**
 * The variables references are replaced from: the environment, filled in by the `.env` files of
 * `dotEnvDirs` (the state dir, then the OpenClaw config's folder, where OpenClaw reads its own;
 * the first file with a name wins) and the config's own `env`.
 */
export function substitutionEnv(config: Record<string, unknown>, env: NodeJS.ProcessEnv, dotEnvDirs: string[]): Record<string, string | undefined> {
  const merged: Record<string, string | undefined> = { ...env };
  // A `.env` entry only sets a variable the environment lacks (one set to "" stays empty); the
  // config's own entries also fill in one that is blank.
  for (const dir of new Set(dotEnvDirs.map((entry) => path.resolve(entry)))) {
    for (const [key, value] of readDotEnv(path.join(dir, '.env'))) if (!Object.hasOwn(merged, key)) setOwn(merged, key, value);
  }
  for (const [key, value] of configEnvEntries(config)) {
    const current = getOwn(merged, key);
    if (typeof current !== 'string' || current.trim() === '') setOwn(merged, key, value);
  }
  return merged;
}

/**
 * The config with every `${VAR}` in its string values replaced, and a warning per variable that
 * was referenced but unset or empty (its references stay as written). `file` names the config in
 * the error for a substitution that would grow it past MAX_ADDED_CHARS.
 */
export function substituteEnvReferences(config: Record<string, unknown>, env: Record<string, string | undefined>, file: string): { config: Record<string, unknown>; warnings: string[] } {
  const missing = new Set<string>();
  const budget: Budget = { added: 0, file };
  const visit = (value: unknown, at: string[]): unknown => {
    if (typeof value === 'string') return substitute(value, env, formatJsonPath(at), missing, budget);
    if (Array.isArray(value)) return value.map((item, i) => visit(item, [...at, String(i)]));
    if (value === null || typeof value !== 'object') return value;
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(value)) setOwn(out, key, visit(child, [...at, key]));
    return out;
  };
  const substituted = visit(config, []) as Record<string, unknown>;
  const warnings = [...missing].map((what) => `environment variable ${what} is not set or empty; the reference is kept as written`);
  return { config: substituted, warnings };
}

/**
 * Whether a config text may hold a reference at all (most do not, and need no walk). A string
 * written with escapes (`"\u0024{PEER}"`, `"\x24{PEER}"`) holds `${PEER}` once parsed, and OpenClaw
 * replaces it, so a text with any backslash is walked too.
 */
export function mayReferenceEnv(text: string): boolean {
  return text.includes('${') || text.includes('\\');
}
