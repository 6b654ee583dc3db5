// Access to the schema validators that the build compiles from store-format/*.schema.json
// (scripts/build-validators.mjs). Loaded on first use so commands that never validate pay nothing.

import { createRequire } from 'node:module';
import path from 'node:path';
import { packageRoot } from '../core/index.js';

export interface SchemaError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

export interface CompiledValidator {
  (data: unknown): boolean;
  errors?: SchemaError[] | null;
}

const loaded = new Map<string, CompiledValidator>();

/** The validator for `store-format/<name>.schema.json`. */
export function schemaValidator(name: string): CompiledValidator {
  let validator = loaded.get(name);
  if (!validator) {
    const file = path.join(packageRoot(), 'dist', 'validators', `${name}.cjs`);
    validator = createRequire(file)(file) as CompiledValidator;
    loaded.set(name, validator);
  }
  return validator;
}

/** `/bindings/3/match/channel` → `bindings[3].match.channel`. */
export function jsonPathOf(instancePath: string, extraKey?: string): string {
  const segments = instancePath.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (extraKey !== undefined) segments.push(extraKey);
  return formatJsonPath(segments);
}

/** `['bindings', '3', 'match']` → `bindings[3].match`; keys that are not identifiers are quoted. */
export function formatJsonPath(segments: string[]): string {
  let out = '';
  for (const segment of segments) {
    if (/^\d+$/.test(segment)) out += `[${segment}]`;
    else if (/^[A-Za-z_$][\w$]*$/.test(segment)) out += out === '' ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out === '' ? '$' : out;
}

/**
 * One readable line per schema error: `bindings[3].match.channel: must be string`. With
 * `namedUnknownKeys`, an unexpected key is reported at its own path (`…match.guild: unknown key`).
 */
export function describeSchemaErrors(errors: SchemaError[] | null | undefined, options: { namedUnknownKeys?: boolean } = {}): string[] {
  const lines: string[] = [];
  for (const error of errors ?? []) {
    const missing = error.keyword === 'required' ? String(error.params.missingProperty) : undefined;
    const extra = options.namedUnknownKeys && error.keyword === 'additionalProperties' ? String(error.params.additionalProperty) : undefined;
    const path = jsonPathOf(error.instancePath, missing ?? extra);
    let message = error.message ?? error.keyword;
    // A typo'd key in a strict object (a binding's match, a sendPolicy rule) must be named, not summarised.
    if (extra !== undefined) message = 'unknown key';
    // Infinity and NaN (JSON5 literals, or 1e400 in JSON) are numbers to JavaScript, never to a setting.
    if (error.keyword === 'type' && (error.params.type === 'number' || error.params.type === 'integer')) message = `must be a finite ${error.params.type}`;
    if (error.keyword === 'enum') message += `: ${(error.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    if (missing !== undefined) message = 'is required';
    const line = `${path}: ${message}`;
    if (!lines.includes(line)) lines.push(line);
  }
  return lines;
}
