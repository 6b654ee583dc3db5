// The effective config as `config show` prints it: every known setting with its value and
// whether it came from the file or the built-in defaults.

import type { SwitchboardConfig } from './types.js';
import { DEFAULTS, DERIVED_DEFAULTS } from './defaults.js';

export interface EffectiveValue {
  path: string;
  value: unknown;
  source: 'file' | 'default';
}

function flattenLeaves(value: unknown, prefix: string, out: Map<string, unknown>): void {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length > 0) {
    for (const [key, child] of Object.entries(value)) flattenLeaves(child, prefix ? `${prefix}.${key}` : key, out);
  } else if (prefix) {
    out.set(prefix, value);
  }
}

/** File values first-class, defaults filled in for every setting the file leaves out, sorted by path. */
export function effectiveValues(config: SwitchboardConfig): EffectiveValue[] {
  const fromFile = new Map<string, unknown>();
  flattenLeaves(config, '', fromFile);
  const values: EffectiveValue[] = [...fromFile].map(([path, value]) => ({ path, value, source: 'file' as const }));
  const covered = (path: string) => [...fromFile.keys()].some((p) => p === path || p.startsWith(`${path}.`));
  for (const [path, value] of Object.entries(DEFAULTS)) {
    if (!covered(path)) values.push({ path, value, source: 'default' });
  }
  for (const [path, value] of Object.entries(DERIVED_DEFAULTS)) {
    if (!covered(path)) values.push({ path, value: `(${value})`, source: 'default' });
  }
  return values.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
