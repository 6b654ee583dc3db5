// The socket protocol's shapes and limits: NDJSON requests {id, op, …}, responses {id, result} or
// {id, error}, pushes {event, …}; parsing a request line into either a request or an error answer.

import { MAX_LINE_BYTES, SwitchboardError, describeLineError, jsonDepthExceeds, toSwitchboardError, type NdjsonLine } from '../core/index.js';

/** A request line may carry one message of up to MAX_LINE_BYTES plus its envelope ({id, op, line}). */
export const MAX_REQUEST_BYTES = MAX_LINE_BYTES + 64 * 1024;

/** Every op the server answers; documented in store-format/socket-protocol.md. */
export const OPS = [
  'ingest',
  'route.resolve',
  'route.explain',
  'sessions.list',
  'queue.list',
  'queue.show',
  'queue.cancel',
  'queue.abort',
  'subscribe',
  'unsubscribe',
  'status',
] as const;

export type Op = (typeof OPS)[number];

export type RequestId = string | number;

export interface Request {
  id: RequestId;
  op: Op;
  /** The whole request object; each op reads its own fields from it. */
  params: Record<string, unknown>;
}

export interface ErrorBody {
  code: string;
  message: string;
  hint?: string;
}

export type Response = { id: RequestId | null; result: unknown } | { id: RequestId | null; error: ErrorBody };

/** A server-initiated line: no id, an `event` name first. */
export interface Push {
  event: string;
  [field: string]: unknown;
}

/** Ids are echoed back verbatim, so they are kept small and simple. */
const MAX_ID_LENGTH = 256;

export function errorBody(err: unknown): ErrorBody {
  const error = toSwitchboardError(err);
  return error.hint === undefined ? { code: error.code, message: error.message } : { code: error.code, message: error.message, hint: error.hint };
}

export function badRequest(message: string, hint?: string): SwitchboardError {
  return new SwitchboardError('BAD_INPUT', message, hint === undefined ? {} : { hint });
}

function validId(value: unknown): value is RequestId {
  if (typeof value === 'string') return value.length > 0 && value.length <= MAX_ID_LENGTH;
  return typeof value === 'number' && Number.isFinite(value);
}

/**
 * One request line → a request to run, or the error answer to send instead (with the id when it
 * could be read, else null). Never throws.
 */
export function parseRequestLine(item: NdjsonLine): { request: Request } | { answer: Response } | { blank: true } {
  if ('error' in item) {
    return { answer: { id: null, error: errorBody(badRequest(`request ${item.line}: ${describeLineError(item.error, item.bytes, MAX_REQUEST_BYTES)}`)) } };
  }
  if (item.text.trim() === '') return { blank: true };
  let raw: unknown;
  try {
    raw = JSON.parse(item.text);
  } catch (err) {
    return { answer: { id: null, error: errorBody(badRequest(`request ${item.line}: not JSON: ${(err as Error).message}`, 'send one JSON object per line: {"id":1,"op":"status"}')) } };
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    return { answer: { id: null, error: errorBody(badRequest(`request ${item.line}: must be a JSON object {id, op, …}`)) } };
  }
  const obj = raw as Record<string, unknown>;
  if (!validId(obj.id)) {
    const problem = obj.id === undefined || obj.id === null ? 'has no "id"' : `"id" must be a non-empty string (≤ ${MAX_ID_LENGTH} characters) or a number`;
    return { answer: { id: null, error: errorBody(badRequest(`request ${item.line}: ${problem}`, 'every request needs an id; its answer carries the same id')) } };
  }
  const id = obj.id;
  if (typeof obj.op !== 'string') {
    return { answer: { id, error: errorBody(badRequest(`"op" must be a string, one of ${OPS.join(', ')}`)) } };
  }
  if (!(OPS as readonly string[]).includes(obj.op)) {
    return {
      answer: {
        id,
        error: errorBody(new SwitchboardError('USAGE', `unknown op "${obj.op.slice(0, 64)}"`, { hint: `ops: ${OPS.join(', ')}` })),
      },
    };
  }
  return { request: { id, op: obj.op as Op, params: obj } };
}

// Parameter readers for the ops: a wrong type is BAD_INPUT naming the field.

export function optionalStringParam(params: Record<string, unknown>, name: string): string | undefined {
  const value = params[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value.trim() === '') throw badRequest(`"${name}" must be a non-empty string`);
  return value;
}

/**
 * Refuses params other than `known`: for ops where an ignored, mistyped one changes what the op
 * does (`subscribe` with `sessionKeys` would subscribe to every session).
 */
export function onlyParams(params: Record<string, unknown>, known: readonly string[]): void {
  // A request's params are its own fields beside `id` and `op`.
  const unknown = Object.keys(params).filter((name) => name !== 'id' && name !== 'op' && !known.includes(name));
  if (unknown.length > 0) throw badRequest(`unknown param${unknown.length > 1 ? 's' : ''} ${unknown.map((name) => JSON.stringify(name)).join(', ')} (this op takes ${known.map((name) => `"${name}"`).join(', ')})`);
}

export function requiredStringParam(params: Record<string, unknown>, name: string): string {
  const value = optionalStringParam(params, name);
  if (value === undefined) throw badRequest(`"${name}" is required`);
  return value;
}

export function optionalBooleanParam(params: Record<string, unknown>, name: string): boolean | undefined {
  const value = params[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw badRequest(`"${name}" must be true or false`);
  return value;
}

export function optionalCountParam(params: Record<string, unknown>, name: string, minimum = 0): number | undefined {
  const value = params[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < minimum) throw badRequest(`"${name}" must be a whole number ≥ ${minimum}`);
  return value;
}

/**
 * A message of an `ingest` request as the NDJSON line the CLI would have read: its JSON text, or a
 * bad line when that text is over the per-line cap or nests too deep. The server judges each
 * message so, and `ingest --socket` judges each message it is about to send the same way (the text
 * it sends can be longer than the line it read: JSON.stringify writes 1e20 as 21 digits).
 */
export function messageLine(line: number, message: unknown): NdjsonLine {
  // Too deep to stringify (the stack would overflow): a bad line, not an internal error.
  if (jsonDepthExceeds(message)) return { line, error: 'too-deep', bytes: 0 };
  const text = JSON.stringify(message) ?? 'null';
  const bytes = Buffer.byteLength(text);
  return bytes > MAX_LINE_BYTES ? { line, error: 'too-long', bytes } : { line, text, receivedAt: Date.now() };
}

export function encodeLine(value: Response | Push): string {
  return `${JSON.stringify(value)}\n`;
}
