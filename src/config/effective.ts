// The effective config as `config show` prints it: every known setting with its value and
// whether it came from the file or the built-in defaults.

import type { SwitchboardConfig } from './types.js';
import { DEFAULTS, DERIVED_DEFAULTS } from './defaults.js';

export interface EffectiveValue {
  path: string;
  value: unknown;
  source: 'file' | 'default';
  /** With layered files (`extends`): the file this value came from. */
  file?: string;
  /** false for a key switchboard does not use (kept for OpenClaw, ignored here). */
  used?: false;
  /** The value was a secret (token, key, password, secret ref, runner env) and is not shown. */
  redacted?: true;
}

/** What `config show` prints instead of a secret: OpenClaw's own placeholder, so both tools agree. */
export const REDACTED = '__OPENCLAW_REDACTED__';

// OpenClaw's rule for secret-looking config paths, plus runner environments (often API keys).
const SECRET_PATTERNS = [/token$/i, /password/i, /secret/i, /api.?key/i, /encrypt.?key/i, /private.?key/i, /serviceaccount(?:ref)?$/i, /authorization/i, /bearer/i];
const NOT_SECRET_SUFFIXES = ['maxtokens', 'maxoutputtokens', 'maxinputtokens', 'maxcompletiontokens', 'contexttokens', 'totaltokens', 'tokencount', 'tokenlimit', 'tokenbudget', 'passwordfile'];

function segmentIsSecret(prefix: string): boolean {
  const lower = prefix.toLowerCase();
  return !NOT_SECRET_SUFFIXES.some((suffix) => lower.endsWith(suffix)) && SECRET_PATTERNS.some((pattern) => pattern.test(prefix));
}

/** A path is secret when it, or any enclosing key (a secret ref object `{source, id}`), looks secret. */
export function isSecretPath(path: string): boolean {
  if (/(^|\.)runner\.env(\.|\[|$)/.test(path) || /localService\.env\./i.test(path)) return true;
  const cuts = [...path.matchAll(/[.[]/g)].map((m) => m.index!);
  return [...cuts, path.length].some((cut) => cut > 0 && segmentIsSecret(path.slice(0, cut)));
}

function flattenLeaves(value: unknown, prefix: string, out: Map<string, unknown>): void {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length > 0) {
    for (const [key, child] of Object.entries(value)) flattenLeaves(child, prefix ? `${prefix}.${key}` : key, out);
  } else if (prefix) {
    out.set(prefix, value);
  }
}

export interface EffectiveOptions {
  /** Leaf path → file, from a layered (`extends`) config. */
  origins?: Map<string, string>;
  /** Paths switchboard does not use (from findUnknownKeys); values under them are marked. */
  unused?: string[];
}

/** File values first-class (secrets redacted), defaults filled in for every setting the file leaves out, sorted by path. */
export function effectiveValues(config: SwitchboardConfig, options: EffectiveOptions = {}): EffectiveValue[] {
  const fromFile = new Map<string, unknown>();
  flattenLeaves(config, '', fromFile);
  const unused = options.unused ?? [];
  const isUnused = (path: string) => unused.some((u) => path === u || path.startsWith(`${u}.`) || path.startsWith(`${u}[`));
  const values: EffectiveValue[] = [...fromFile].map(([path, value]) => {
    const entry: EffectiveValue = { path, value, source: 'file' };
    const file = options.origins?.get(path);
    if (file !== undefined) entry.file = file;
    if (isUnused(path)) entry.used = false;
    if (isSecretPath(path) && value !== null && value !== '') {
      entry.value = REDACTED;
      entry.redacted = true;
    }
    return entry;
  });
  const covered = (path: string) => [...fromFile.keys()].some((p) => p === path || p.startsWith(`${path}.`));
  for (const [path, value] of Object.entries(DEFAULTS)) {
    if (!covered(path)) values.push({ path, value, source: 'default' });
  }
  for (const [path, value] of Object.entries(DERIVED_DEFAULTS)) {
    // An agents.entries roster has no agents.list to default.
    if (path === 'agents.list' && config.agents?.entries !== undefined) continue;
    if (!covered(path)) values.push({ path, value: `(${value})`, source: 'default' });
  }
  return values.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
