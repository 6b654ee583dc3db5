// The two-file setup: a switchboard.json5 that `extends` an openclaw.json kept exactly as OpenClaw
// wants it, overlaying switchboard's own keys. Layers merge base first; each value remembers its file.

import path from 'node:path';
import { MAX_JSON_DEPTH, SwitchboardError, expandHome, jsonDepthExceeds } from '../core/index.js';
import { includeRoots, mayInclude, resolveIncludes, type IncludedFile } from './includes.js';
import { getOwn, setOwn } from './own-keys.js';
import { locateJsonPaths, type TextPosition } from './positions.js';
import { formatJsonPath } from './validators.js';

export interface ConfigLayer {
  file: string;
  text: string;
  /** The file's value with its `$include`s resolved. */
  data: Record<string, unknown>;
  /** The files its `$include`s brought in (their values are part of `data`). */
  included?: IncludedFile[];
}

const MAX_DEPTH = 8;

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The keys down to the first value nested one level past the cap (the walk stops there: at most MAX_JSON_DEPTH + 1 calls deep). */
function pathPastCap(value: unknown, depth = 1): string[] | null {
  if (value === null || typeof value !== 'object') return null;
  if (depth > MAX_JSON_DEPTH) return [];
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const below = pathPastCap((value as Record<string, unknown>)[key], depth + 1);
    if (below !== null) return [key, ...below];
  }
  return null;
}

/** CONFIG_INVALID for a config nested past the cap, at `file:line:column` of the first value that is. */
function tooDeep(file: string, text: string, data: unknown): SwitchboardError {
  const segments = pathPastCap(data) ?? [];
  const at: TextPosition | undefined = segments.length > 0 ? locateJsonPaths(text).get(formatJsonPath(segments)) : undefined;
  const where = at ? `${file}:${at.line}:${at.column}` : file;
  return new SwitchboardError('CONFIG_INVALID', `${where}: values are nested more than ${MAX_JSON_DEPTH} levels deep`, {
    details: { file, ...(at ? { line: at.line, column: at.column } : {}) },
    hint: 'a config needs no more than a few levels; look for a value pasted into itself',
  });
}

/** `~/x` → home, a relative path → next to the file that names it. */
export function resolveExtends(raw: string, fromFile: string): string {
  return path.resolve(path.dirname(fromFile), expandHome(raw.trim()));
}

/**
 * Loads `file` and every file it extends, base first, each with its `$include`s resolved (inside
 * its own folder, as OpenClaw resolves them for the file it loads). `read` returns a file's text
 * (NOT_FOUND/IO on failure), `parse` its JSON5 value. A cycle or a chain deeper than 8 files is
 * CONFIG_INVALID.
 */
export async function loadLayers(
  file: string,
  read: (file: string, why: string) => string,
  parse: (text: string, label: string) => Promise<unknown>,
  env: NodeJS.ProcessEnv = process.env,
): Promise<ConfigLayer[]> {
  const chain: ConfigLayer[] = [];
  let current = file;
  let why = 'config';
  for (;;) {
    if (chain.some((layer) => layer.file === current)) {
      throw new SwitchboardError('CONFIG_INVALID', `${current}: "extends" makes a cycle (${[...chain.map((l) => l.file), current].join(' → ')})`, {
        details: { path: 'extends' },
      });
    }
    if (chain.length >= MAX_DEPTH) throw new SwitchboardError('CONFIG_INVALID', `${file}: more than ${MAX_DEPTH} files chained by "extends"`, { details: { path: 'extends' } });
    const text = read(current, why);
    let data = await parse(text, current);
    // Every walk over a config (schema, merge, origins, `config show`) recurses: a value nested
    // thousands of levels deep would overflow the stack. No real config comes near the cap.
    if (jsonDepthExceeds(data)) throw tooDeep(current, text, data);
    let included: IncludedFile[] | undefined;
    if (mayInclude(text)) {
      included = [];
      data = await resolveIncludes(data, current, { roots: includeRoots(current, env), parse, included, text });
      // Each included file was held to the cap, but they nest into one another.
      if (jsonDepthExceeds(data)) {
        throw new SwitchboardError('CONFIG_INVALID', `${current}: with its $include files, values are nested more than ${MAX_JSON_DEPTH} levels deep`, { details: { file: current } });
      }
    }
    if (!isRecord(data)) {
      // The schema reports a non-object config with its own message; a base would be dropped by the merge.
      if (chain.length > 0) {
        throw new SwitchboardError('CONFIG_INVALID', `${current}: must hold an object (it is ${data === null ? 'null' : Array.isArray(data) ? 'an array' : typeof data}), as the file ${chain[chain.length - 1]!.file} extends`, {
          details: { file: current },
        });
      }
      chain.push({ file: current, text, data: data as Record<string, unknown>, included });
      break;
    }
    chain.push({ file: current, text, data, included });
    if (data.extends === undefined) break;
    if (typeof data.extends !== 'string' || data.extends.trim() === '') {
      throw new SwitchboardError('CONFIG_INVALID', `${current}: extends: must name the OpenClaw config file this one builds on`, { details: { path: 'extends' } });
    }
    // No file name holds one (the file system would refuse it as an I/O error, exit 74).
    if (data.extends.includes('\0')) throw new SwitchboardError('CONFIG_INVALID', `${current}: extends: a file name cannot contain a NUL character`, { details: { path: 'extends' } });
    why = `"extends" of ${current}`;
    current = resolveExtends(data.extends, current);
  }
  return chain.reverse();
}

function mergeInto(target: Record<string, unknown>, overlay: Record<string, unknown>, file: string, prefix: string[], origins: Map<string, string>): void {
  for (const [key, value] of Object.entries(overlay)) {
    if (prefix.length === 0 && key === 'extends') continue;
    const at = [...prefix, key];
    const current = getOwn(target, key);
    if (isRecord(value) && isRecord(current)) {
      const copy = { ...(current as Record<string, unknown>) };
      mergeInto(copy, value, file, at, origins);
      setOwn(target, key, copy);
    } else {
      // Arrays and scalars are replaced whole: merging two bindings lists would reorder tiers.
      setOwn(target, key, value);
      for (const known of [...origins.keys()]) if (known.startsWith(`${formatJsonPath(at)}.`) || known.startsWith(`${formatJsonPath(at)}[`)) origins.delete(known);
      recordOrigins(value, at, file, origins);
    }
  }
}

function recordOrigins(value: unknown, at: string[], file: string, origins: Map<string, string>): void {
  if (isRecord(value) && Object.keys(value).length > 0) {
    for (const [key, child] of Object.entries(value)) recordOrigins(child, [...at, key], file, origins);
  } else {
    origins.set(formatJsonPath(at), file);
  }
}

/** The merged config (without `extends`) and, for every leaf path, the file its value came from. */
export function mergeLayers(layers: ConfigLayer[]): { data: Record<string, unknown>; origins: Map<string, string> } {
  const data: Record<string, unknown> = {};
  const origins = new Map<string, string>();
  for (const layer of layers) if (isRecord(layer.data)) mergeInto(data, layer.data, layer.file, [], origins);
  return { data, origins };
}

/** A text a config path may be written in, with its positions. */
interface PositionSource {
  file: string;
  positions: Map<string, TextPosition>;
}

/**
 * The texts a config's paths are written in, searched in this order: the layers, last first, then
 * the files single `$include`s brought in (a list of includes is merged, joining arrays, so its
 * files' own positions no longer name the merged items).
 */
function positionSources(layers: ConfigLayer[]): PositionSource[] {
  const sources: PositionSource[] = [];
  for (let i = layers.length - 1; i >= 0; i--) sources.push({ file: layers[i].file, positions: locateJsonPaths(layers[i].text) });
  for (let i = layers.length - 1; i >= 0; i--) {
    for (const included of [...(layers[i].included ?? [])].reverse()) {
      if (included.single) sources.push({ file: included.file, positions: locateJsonPaths(included.text, included.at) });
    }
  }
  return sources;
}

/** Where a path sits: the first source that has it, else its nearest ancestor that one has. */
function positionOfPath(sources: PositionSource[], fallbackFile: string, jsonPath: string): { file: string; at?: TextPosition } {
  let current = jsonPath;
  for (;;) {
    for (const source of sources) {
      const at = source.positions.get(current);
      if (at) return { file: source.file, at };
    }
    const cut = Math.max(current.lastIndexOf('.'), current.lastIndexOf('['));
    if (cut <= 0) return { file: fallbackFile };
    current = current.slice(0, cut);
  }
}

/** `path: problem` lines named by the file, line and column where that path is written. */
export function locateLayeredProblems(layers: ConfigLayer[], problems: string[]): string[] {
  const sources = positionSources(layers);
  const top = layers[layers.length - 1].file;
  return problems.map((problem) => {
    const jsonPath = problem.slice(0, Math.max(0, problem.indexOf(': ')));
    const { file, at } = jsonPath === '' ? { file: top, at: undefined } : positionOfPath(sources, top, jsonPath);
    return at ? `${file}:${at.line}:${at.column}: ${problem}` : `${file}: ${problem}`;
  });
}
