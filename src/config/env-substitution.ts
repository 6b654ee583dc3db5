// `${VAR}` in config string values, replaced from the environment as OpenClaw's loader does after
// resolving `$include` and before validating (docs: gateway/configuration/environment-variables).
// Facts kept from OpenClaw 2026.9.6:
//
// * Only names of upper-case letters, digits and `_` (not starting with a digit) are references;
//   `$${VAR}` is the escape and gives a literal `${VAR}`; any other `$` stays as written.
// * A variable that is unset or empty leaves the reference as written, with a warning.
// * Values come from the process environment; the config's own `env.vars` (and string entries
//   directly under `env`) fill in names the environment has no non-empty value for, except values
//   that themselves hold a reference. So does the state dir's `.env` file (OpenClaw reads
//   `~/.openclaw/.env`, which never overrides the environment either).
// * Keys are never substituted, only string values, at any depth (arrays included).

import path from 'node:path';
import { SwitchboardError } from '../core/index.js';
import { setOwn } from './own-keys.js';
import { readConfigText } from './read-file.js';
import { formatJsonPath } from './validators.js';

/** A name a reference may use. */
const VARIABLE_NAME = /^[A-Z_][A-Z0-9_]*$/;
/** What a config `env` entry may be named (a portable environment variable name). */
const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** A `.env` line: optional `export`, a name, `=`, the value. */
const DOTENV_LINE = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)?\s*$/;
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

/** `KEY=value` lines of a `.env` file (quotes stripped, `\n` in double quotes a newline, `#` comments); {} when absent or unreadable. */
function readDotEnv(file: string): Record<string, string> {
  let text: string;
  try {
    // The config files' own read: a regular file of bounded size, never a wait on a FIFO.
    text = readConfigText(file, MAX_DOTENV_BYTES);
  } catch {
    return {};
  }
  const values: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const match = DOTENV_LINE.exec(line);
    if (!match || line.trimStart().startsWith('#')) continue;
    let value = (match[2] ?? '').trim();
    const quote = value[0];
    if ((quote === '"' || quote === "'" || quote === '`') && value.length >= 2 && value.endsWith(quote)) {
      value = value.slice(1, -1);
      if (quote === '"') value = value.replace(/\\n/g, '\n').replace(/\\r/g, '\r');
    } else {
      const comment = value.indexOf(' #');
      if (comment >= 0) value = value.slice(0, comment).trimEnd();
    }
    values[match[1]!] = value;
  }
  return values;
}

/** The config's own `env.vars` and string `env` entries that may fill in the environment. */
function configEnvEntries(config: Record<string, unknown>): [string, string][] {
  const envSection = config.env;
  if (envSection === null || typeof envSection !== 'object' || Array.isArray(envSection)) return [];
  const entries: [string, string][] = [];
  const section = envSection as Record<string, unknown>;
  const vars = section.vars;
  if (vars !== null && typeof vars === 'object' && !Array.isArray(vars)) entries.push(...(Object.entries(vars).filter(([, v]) => typeof v === 'string') as [string, string][]));
  for (const [key, value] of Object.entries(section)) if (key !== 'vars' && key !== 'shellEnv' && typeof value === 'string') entries.push([key, value]);
  return entries.map(([key, value]): [string, string] => [key.trim(), value]).filter(([key, value]) => ENV_KEY.test(key) && value.trim() !== '' && !holdsReference(value));
}

/** The variables references are replaced from: the environment, filled in by the state dir's `.env` and the config's own `env`. */
export function substitutionEnv(config: Record<string, unknown>, env: NodeJS.ProcessEnv, stateDir: string): Record<string, string | undefined> {
  const merged: Record<string, string | undefined> = { ...env };
  const fillIn = (key: string, value: string): void => {
    if (!merged[key]?.trim()) merged[key] = value;
  };
  for (const [key, value] of Object.entries(readDotEnv(path.join(stateDir, '.env')))) fillIn(key, value);
  for (const [key, value] of configEnvEntries(config)) fillIn(key, value);
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

/** Whether a config text may hold a reference at all (most do not, and need no walk). */
export function mayReferenceEnv(text: string): boolean {
  return text.includes('${');
}
