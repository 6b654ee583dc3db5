// The runner protocol's wire format: classifies one stdout line as an event, plain text or a
// malformed event, and builds the lines switchboard writes to a runner's stdin.

import { MAX_JSON_DEPTH, jsonDepthExceeds, mayNestDeeperThan } from '../core/index.js';
import type { RunEvent, RunInit, RunMessage, RunUsage } from './types.js';

/** Events a runner may send, as parsed from one line (`done` ends the run; it is not re-emitted). */
export type RunnerLineEvent = Exclude<RunEvent, { type: 'stderr' } | { type: 'end' }> | { type: 'done' };

export type ParsedLine =
  | { kind: 'event'; event: RunnerLineEvent }
  | { kind: 'plain'; text: string }
  | { kind: 'invalid'; message: string };

const KNOWN_TYPES = new Set(['hello', 'tool_call', 'tool_result', 'boundary', 'assistant', 'reply', 'usage', 'done']);

const USAGE_COUNTS = ['inputTokens', 'outputTokens', 'totalTokens', 'contextTokens'] as const;

/**
 * A line is an event when it is a JSON object whose `type` is one of the runner → switchboard
 * types. Anything else — not JSON, a JSON array/string/number, an object without `type` or with
 * another `type` (so the `run` line echoed by `cat`) — is plain text. An object with a known type
 * but wrong fields is a protocol violation. Unknown extra fields are ignored.
 */
export function parseRunnerLine(text: string): ParsedLine {
  const trimmed = text.trim();
  if (!trimmed.startsWith('{')) return { kind: 'plain', text };
  let value: unknown;
  try {
    value = JSON.parse(trimmed);
  } catch {
    return { kind: 'plain', text };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { kind: 'plain', text };
  const record = value as Record<string, unknown>;
  const type = record.type;
  if (typeof type !== 'string' || !KNOWN_TYPES.has(type)) return { kind: 'plain', text };
  // An event is recorded in the transcript as JSON, and an argument nested thousands of levels
  // deep overflows the serialiser: it failed the run as a transcript write error. Messages are
  // held to the same depth (MAX_JSON_DEPTH).
  if (mayNestDeeperThan(trimmed) && jsonDepthExceeds(value)) return bad(`${type}: the line nests objects/arrays deeper than ${MAX_JSON_DEPTH} levels`);

  switch (type) {
    case 'hello':
      if (record.steering !== undefined && typeof record.steering !== 'boolean') return bad('hello: "steering" must be true or false');
      return event({ type: 'hello', steering: record.steering === true });
    case 'tool_call':
      if (!isId(record.id)) return bad('tool_call: "id" must be a non-empty string');
      if (typeof record.name !== 'string' || record.name === '') return bad('tool_call: "name" must be a non-empty string');
      return event({ type: 'tool_call', id: record.id, name: record.name, args: record.args === undefined ? {} : record.args });
    case 'tool_result': {
      if (!isId(record.id)) return bad('tool_result: "id" must be a non-empty string');
      if (record.isError !== undefined && typeof record.isError !== 'boolean') return bad('tool_result: "isError" must be true or false');
      const output = record.output === undefined ? null : record.output;
      return event(
        record.isError === undefined
          ? { type: 'tool_result', id: record.id, output }
          : { type: 'tool_result', id: record.id, output, isError: record.isError },
      );
    }
    case 'boundary':
      return event({ type: 'boundary' });
    case 'assistant':
    case 'reply':
      if (typeof record.text !== 'string') return bad(`${type}: "text" must be a string`);
      return event({ type, text: record.text });
    case 'usage': {
      const usage: RunUsage = {};
      for (const field of ['model', 'provider'] as const) {
        const value = record[field];
        if (value === undefined || value === null) continue;
        if (typeof value !== 'string' || value.trim() === '') return bad(`usage: "${field}" must be a non-empty string`);
        usage[field] = value.trim();
      }
      for (const field of USAGE_COUNTS) {
        const value = record[field];
        if (value === undefined || value === null) continue;
        if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) return bad(`usage: "${field}" must be a whole number ≥ 0`);
        usage[field] = value;
      }
      return event({ type: 'usage', usage });
    }
    default:
      return event({ type: 'done' });
  }
}

export function runLine(init: RunInit): string {
  return `${JSON.stringify({
    type: 'run',
    runId: init.runId,
    sessionKey: init.sessionKey,
    sessionId: init.sessionId,
    agentId: init.agentId,
    deliveryContext: init.deliveryContext ?? null,
    messages: init.messages,
  })}\n`;
}

export function steerLine(messages: readonly RunMessage[]): string {
  return `${JSON.stringify({ type: 'steer', messages })}\n`;
}

export function abortLine(reason: string): string {
  return `${JSON.stringify({ type: 'abort', reason })}\n`;
}

function isId(value: unknown): value is string {
  return typeof value === 'string' && value !== '';
}

function event(value: RunnerLineEvent): ParsedLine {
  return { kind: 'event', event: value };
}

function bad(message: string): ParsedLine {
  return { kind: 'invalid', message };
}
