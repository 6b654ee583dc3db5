// Turns the `runner` sections of the config (an agent's over `agents.defaults`) into one
// RunnerSpec, or undefined when no runner is configured (record-only mode).

import { MAX_TIMER_MS, SwitchboardError } from '../core/index.js';
import { BUILTIN_RUNNERS, type BuiltinRunnerName, type RunnerSpec } from './types.js';

export const DEFAULT_RUNNER_TIMEOUT_SECONDS = 600;


/** A `runner` object of the config, as loaded (validated by the schema, but checked again here). */
export type RunnerConfigInput = { readonly [key: string]: unknown };

const FIELDS = ['command', 'timeoutSeconds', 'env', 'delayMs', 'toolCalls', 'steering'] as const;

/**
 * Merges an agent's runner (`agents.list[i].runner`, or `agents.entries.<id>.runner` from a
 * switchboard overlay; `agentPath` names it in errors) over `agents.defaults.runner`, field by field (`env` key by key,
 * the agent's value winning). Returns undefined when neither gives a `command`.
 * A string command is either a built-in name or split on whitespace into argv — no shell, no
 * quoting, no variable expansion; use an array when an argument contains spaces.
 */
export function resolveRunnerSpec(
  agentRunner: RunnerConfigInput | undefined,
  defaultsRunner: RunnerConfigInput | undefined,
  agentPath = 'agents.list[].runner',
): RunnerSpec | undefined {
  const merged: Record<string, { value: unknown; source: string }> = {};
  for (const [config, source] of [
    [defaultsRunner, 'agents.defaults.runner'],
    [agentRunner, agentPath],
  ] as const) {
    if (config === undefined || config === null) continue;
    if (typeof config !== 'object' || Array.isArray(config)) {
      throw invalid(source, 'must be an object');
    }
    for (const field of FIELDS) {
      const value = config[field];
      if (value === undefined) continue;
      if (field === 'env' && merged.env !== undefined) {
        merged.env = { value: { ...checkEnv(merged.env.value, merged.env.source), ...checkEnv(value, source) }, source };
      } else {
        merged[field] = { value, source };
      }
    }
  }
  if (merged.command === undefined) return undefined;

  const spec: RunnerSpec = {
    command: parseCommand(merged.command.value, merged.command.source),
    timeoutMs: DEFAULT_RUNNER_TIMEOUT_SECONDS * 1000,
  };
  if (merged.timeoutSeconds !== undefined) {
    const { value, source } = merged.timeoutSeconds;
    if (typeof value !== 'number' || !(value > 0) || !Number.isFinite(value)) {
      throw invalid(`${source}.timeoutSeconds`, 'must be a number of seconds greater than 0');
    }
    spec.timeoutMs = Math.min(MAX_TIMER_MS, Math.max(1, Math.round(value * 1000)));
  }
  if (merged.env !== undefined) spec.env = checkEnv(merged.env.value, merged.env.source);
  if (merged.delayMs !== undefined) {
    const { value, source } = merged.delayMs;
    if (typeof value !== 'number' || !(value >= 0) || !Number.isFinite(value)) {
      throw invalid(`${source}.delayMs`, 'must be a number of milliseconds, 0 or more');
    }
    spec.delayMs = Math.min(MAX_TIMER_MS, value);
  }
  if (merged.toolCalls !== undefined) {
    const { value, source } = merged.toolCalls;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
      throw invalid(`${source}.toolCalls`, 'must be a whole number, 0 or more');
    }
    spec.toolCalls = value;
  }
  if (merged.steering !== undefined) {
    const { value, source } = merged.steering;
    if (typeof value !== 'boolean') throw invalid(`${source}.steering`, 'must be true or false');
    spec.steering = value;
  }
  return spec;
}

/** `"llm -s brief"` → `["llm", "-s", "brief"]`; `"builtin:echo"` stays a built-in name. */
export function parseCommand(value: unknown, source = 'runner'): readonly string[] | BuiltinRunnerName {
  const where = `${source}.command`;
  let argv: string[];
  if (typeof value === 'string') {
    argv = value.trim().split(/\s+/).filter((part) => part !== '');
  } else if (Array.isArray(value) && value.every((part): part is string => typeof part === 'string')) {
    argv = [...value];
  } else {
    throw invalid(where, 'must be a string or an array of strings');
  }
  if (argv.length === 0 || argv[0] === '') throw invalid(where, 'names no program');
  if (argv.some((part) => part.includes('\0'))) throw invalid(where, 'contains a NUL character');
  if (argv[0].startsWith('builtin:')) {
    const name = argv[0] as BuiltinRunnerName;
    if (!BUILTIN_RUNNERS.includes(name)) {
      throw invalid(where, `"${argv[0]}" is not a built-in runner`, `built-ins: ${BUILTIN_RUNNERS.join(', ')}`);
    }
    if (argv.length > 1) throw invalid(where, `built-in runner "${name}" takes no arguments`, 'configure it with delayMs, toolCalls and steering');
    return name;
  }
  return argv;
}

export function isBuiltinRunner(command: RunnerSpec['command']): command is BuiltinRunnerName {
  return typeof command === 'string';
}

/**
 * Whether a run of this spec can ever take a steer: an external runner only with `steering: true`
 * (otherwise its stdin is closed after the run line), builtin:slow-echo unless told not to;
 * builtin:echo has no boundary to take one at.
 */
export function maySteer(spec: RunnerSpec): boolean {
  if (isBuiltinRunner(spec.command)) return spec.command === 'builtin:slow-echo' && spec.steering !== false;
  return spec.steering === true;
}

function checkEnv(value: unknown, source: string): Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid(`${source}.env`, 'must be an object of strings');
  }
  for (const [key, item] of Object.entries(value)) {
    if (typeof item !== 'string') throw invalid(`${source}.env.${key}`, 'must be a string');
    if (key === '' || key.includes('=') || key.includes('\0') || item.includes('\0')) {
      throw invalid(`${source}.env.${key}`, 'is not a valid environment variable');
    }
  }
  return value as Record<string, string>;
}

function invalid(path: string, problem: string, hint?: string): SwitchboardError {
  return new SwitchboardError('CONFIG_INVALID', `${path} ${problem}`, { hint, details: { path } });
}
