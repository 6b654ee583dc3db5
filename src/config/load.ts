// Finding, parsing and validating the config file. JSON5 syntax errors and schema errors are
// CONFIG_INVALID (exit 78) naming the file position or JSON path; unknown keys are warnings.

import fs from 'node:fs';
import path from 'node:path';
import { SwitchboardError, expandHome, packageRoot } from '../core/index.js';
import { ConfigFileProblem, readConfigText } from './read-file.js';
import type { SwitchboardConfig } from './types.js';
import { checkCurrentFormat, configGeneration } from './openclaw-format.js';
import { loadLayers, locateLayeredProblems, mergeLayers, type ConfigLayer } from './layers.js';
import { mayReferenceEnv, substituteEnvReferences, substitutionEnv } from './env-substitution.js';
import { describeSchemaErrors, jsonPathOf, schemaValidator } from './validators.js';

export type ConfigSource = 'flag' | 'env' | 'state-dir' | 'openclaw' | 'none';

export interface LoadedConfig {
  config: SwitchboardConfig;
  /** The file the config came from, or null when running on built-in defaults. */
  path: string | null;
  /** Every file of the config, base first (one unless it `extends` an OpenClaw file): later checks name `file:line:column`. */
  layers: ConfigLayer[];
  /** For each leaf path the file its value came from (only when several files are layered). */
  origins?: Map<string, string>;
  source: ConfigSource;
  /** What loading noticed without refusing the file (a `${VAR}` that is not set). */
  warnings: string[];
}

export interface LocateOptions {
  configFlag?: string;
  stateDir: string;
  env?: NodeJS.ProcessEnv;
}

/**
 * `--config`, else $SWITCHBOARD_CONFIG, else `<state>/switchboard.json5`, else `<state>/openclaw.json`.
 * A leading `~` is the home folder, as in `--state-dir` (`--config=~/x` reaches no shell expansion).
 */
export function locateConfig({ configFlag, stateDir, env = process.env }: LocateOptions): { path: string | null; source: ConfigSource } {
  if (configFlag) return { path: path.resolve(expandHome(configFlag)), source: 'flag' };
  if (env.SWITCHBOARD_CONFIG) return { path: path.resolve(expandHome(env.SWITCHBOARD_CONFIG)), source: 'env' };
  const own = path.join(stateDir, 'switchboard.json5');
  if (fs.existsSync(own)) return { path: own, source: 'state-dir' };
  const openclaw = path.join(stateDir, 'openclaw.json');
  if (fs.existsSync(openclaw)) return { path: openclaw, source: 'openclaw' };
  return { path: null, source: 'none' };
}

let json5Parse: ((text: string) => unknown) | undefined;

async function parseJson5(text: string): Promise<unknown> {
  if (!json5Parse) json5Parse = (await import('json5')).default.parse;
  return json5Parse(text);
}

/** Parses JSON (fast path) or JSON5 text; a syntax error is CONFIG_INVALID naming line and column. */
async function parseText(text: string, label: string): Promise<unknown> {
  try {
    // Plain JSON is the common case (openclaw.json) and JSON.parse is much faster than JSON5.
    return JSON.parse(text);
  } catch {
    try {
      return await parseJson5(text);
    } catch (err) {
      const e = err as { lineNumber?: number; columnNumber?: number; message?: string };
      const where = e.lineNumber ? `${label}:${e.lineNumber}:${e.columnNumber ?? 0}` : label;
      throw new SwitchboardError('CONFIG_INVALID', `${where}: not valid JSON5: ${(e.message ?? String(err)).replace(/^JSON5: /, '')}`, {
        details: { file: label, line: e.lineNumber, column: e.columnNumber },
        hint: 'fix the syntax, then check with `switchboard config validate`',
      });
    }
  }
}

/** Schema, then (for agents.entries configs) the current format's own rules; every problem at once. */
function validateConfigData(data: unknown, label: string, layers: ConfigLayer[]): SwitchboardConfig {
  const validate = schemaValidator('config');
  const problems = validate(data) ? [] : describeSchemaErrors(validate.errors, { namedUnknownKeys: true });
  // The current format's own rules (roster keys, ownership, binding agents) need a well-typed file.
  if (problems.length === 0 && configGeneration(data as SwitchboardConfig) === 'entries') {
    problems.push(...checkCurrentFormat(data as SwitchboardConfig, (at) => writtenOnlyInOverlays(layers, at)));
  }
  if (problems.length > 0) throw configProblems(label, problems, layers);
  return data as SwitchboardConfig;
}

/**
 * True when the value at `at` is written in an overlay only: there are several files and the base
 * one (the OpenClaw file the others extend) does not have it. One file alone is treated as
 * OpenClaw's, since nothing tells it apart from one.
 */
function writtenOnlyInOverlays(layers: ConfigLayer[], at: string[]): boolean {
  if (layers.length < 2) return false;
  let value: unknown = layers[0].data;
  for (const key of at) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, key)) return true;
    value = (value as Record<string, unknown>)[key];
  }
  return false;
}

/** Parses and validates one config text; `label` names the file in messages. */
export async function parseConfigText(text: string, label: string): Promise<SwitchboardConfig> {
  const data = await parseText(text, label);
  return validateConfigData(data, label, [{ file: label, text, data: data as Record<string, unknown> }]);
}

/** One CONFIG_INVALID naming every problem (not just the first), each as `file:line:column: json.path: what is wrong`. */
export function configProblems(label: string, problems: string[], layers: ConfigLayer[] = []): SwitchboardError {
  const located = layers.length > 0 ? locateLayeredProblems(layers, problems) : problems.map((p) => `${label}: ${p}`);
  const message = located.length === 1 ? located[0] : `${label}: ${located.length} problems:\n${located.map((p) => `  ${p}`).join('\n')}`;
  return new SwitchboardError('CONFIG_INVALID', message, {
    details: { file: label, problems, path: problems[0]?.split(':')[0] },
    hint: `fix the file, then check it with \`switchboard config validate --config ${label}\``,
  });
}

/** Far beyond any real config (OpenClaw's are a few KB; P1's 10 000 bindings are 1 MB). */
const MAX_CONFIG_BYTES = 64 * 1024 * 1024;

/** A config file's text (the config or a file it extends), with its problems as typed errors. */
function readConfigFile(file: string, why: string, source: ConfigSource): string {
  try {
    return readConfigText(file, MAX_CONFIG_BYTES);
  } catch (err) {
    if (!(err instanceof ConfigFileProblem)) throw err;
    if (err.kind === 'missing') {
      const hint = why !== 'config' ? `${why} names a file that does not exist` : source === 'env' ? 'SWITCHBOARD_CONFIG names a file that does not exist' : 'check the --config path';
      throw new SwitchboardError('NOT_FOUND', `config file not found: ${file}`, { hint });
    }
    if (err.kind === 'too-large') throw new SwitchboardError('CONFIG_INVALID', `config ${file} is ${err.size} bytes, more than the ${MAX_CONFIG_BYTES} a config may be`, { details: { file } });
    if (err.kind === 'not-regular') throw new SwitchboardError('IO', `cannot read config ${file}: ${err.message}`, { hint: 'point --config (or extends) at a JSON or JSON5 file' });
    throw new SwitchboardError('IO', `cannot read config ${file}: ${err.message}`, { cause: err });
  }
}

export async function loadConfig(options: LocateOptions): Promise<LoadedConfig> {
  const located = locateConfig(options);
  if (!located.path) return { config: {}, path: null, source: 'none', layers: [], warnings: [] };
  const env = options.env ?? process.env;
  const layers = await loadLayers(located.path, (file, why) => readConfigFile(file, why, located.source), parseText, env);
  const { data, origins } = layers.length === 1 ? { data: layers[0].data, origins: undefined } : mergeLayers(layers);
  const { config, warnings } = withEnvReferences(data, layers, env, options.stateDir, located.path);
  return { config: validateConfigData(config, located.path, layers), path: located.path, layers, ...(origins ? { origins } : {}), source: located.source, warnings };
}

/** `${VAR}` references replaced, as OpenClaw does before it validates; skipped when no text of the config holds one. */
function withEnvReferences(data: unknown, layers: ConfigLayer[], env: NodeJS.ProcessEnv, stateDir: string, file: string): { config: unknown; warnings: string[] } {
  const texts = layers.flatMap((layer) => [layer.text, ...(layer.included ?? []).map((included) => included.text)]);
  if (data === null || typeof data !== 'object' || Array.isArray(data) || !texts.some(mayReferenceEnv)) return { config: data, warnings: [] };
  const record = data as Record<string, unknown>;
  // layers[0] is the OpenClaw file (the base of an `extends` chain): OpenClaw reads the `.env` beside it.
  return substituteEnvReferences(record, substitutionEnv(record, env, [stateDir, path.dirname(layers[0]!.file)]), file);
}

interface SchemaNode {
  type?: string | string[];
  properties?: Record<string, SchemaNode>;
  additionalProperties?: boolean | SchemaNode;
  items?: SchemaNode;
  $ref?: string;
  oneOf?: SchemaNode[];
}

let configSchema: SchemaNode | undefined;

function loadConfigSchema(): SchemaNode {
  if (!configSchema) {
    const file = path.join(packageRoot(), 'store-format', 'config.schema.json');
    configSchema = JSON.parse(fs.readFileSync(file, 'utf8')) as SchemaNode;
  }
  return configSchema;
}

/** Keys the schema does not know (OpenClaw has many we ignore): one warning each, with its path. */
export function findUnknownKeys(config: SwitchboardConfig): string[] {
  const root = loadConfigSchema() as SchemaNode & { definitions?: Record<string, SchemaNode> };
  const deref = (node: SchemaNode): SchemaNode =>
    node.$ref ? deref(root.definitions![node.$ref.replace('#/definitions/', '')]) : node;
  const unknown: string[] = [];
  const walk = (value: unknown, node: SchemaNode, instancePath: string): void => {
    node = deref(node);
    if (Array.isArray(value)) {
      if (node.items) value.forEach((item, i) => walk(item, node.items!, `${instancePath}/${i}`));
      return;
    }
    if (value === null || typeof value !== 'object') return;
    for (const [key, child] of Object.entries(value)) {
      // Own keys only: `toString` or `constructor` in a config is unknown, not Object.prototype's.
      const known = node.properties !== undefined && Object.hasOwn(node.properties, key) ? node.properties[key] : undefined;
      if (known) walk(child, known, `${instancePath}/${key}`);
      else if (typeof node.additionalProperties === 'object') walk(child, node.additionalProperties, `${instancePath}/${key}`);
      else if (node.properties && node.additionalProperties === undefined) unknown.push(jsonPathOf(`${instancePath}/${key}`));
    }
  };
  walk(config, root, '');
  return unknown;
}
