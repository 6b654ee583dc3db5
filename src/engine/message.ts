// Parsing and validating one inbound message (the NDJSON schema in cli.md). Every rejection is
// BAD_MESSAGE naming the JSON path; routing fields go through routing's own normaliser.

import { MAX_CLOCK_MS, MAX_JSON_DEPTH, SwitchboardError, jsonDepthExceeds, mayNestDeeperThan, parseIsoTime } from '../core/index.js';
import { describeType, normalizeRouteInput, type RouteInput } from '../routing/index.js';
import { isSessionId } from '../store/paths.js';

export type MessageKind = 'user' | 'heartbeat' | 'system' | 'cron';

const KINDS: readonly MessageKind[] = ['user', 'heartbeat', 'system', 'cron'];

export interface InboundMessage {
  route: RouteInput;
  kind: MessageKind;
  text?: string;
  sender?: { id?: string; name?: string };
  messageId?: string;
  /** Epoch ms given by the sender, if any. */
  timestamp?: number;
  runId?: string;
  /** The instance this message belongs to (a detached completion, an approval follow-up): the rebind check. */
  sessionId?: string;
  cronJobId?: string;
  sessionKey?: string;
  queue?: { mode?: string; debounceMs?: number; cap?: number; drop?: string };
  incognito: boolean;
  /** Listing labels of the conversation (a group's name, subject, space): the entry keeps the latest. */
  group?: ConversationLabels;
  /** Sub-agent lineage: the session that spawned this one and how deep it is nested. */
  lineage?: { parentSessionKey?: string; spawnDepth?: number };
}

export interface ConversationLabels {
  displayName?: string;
  subject?: string;
  space?: string;
}

/** A full session key, as sessions.json keys are written (`agent:<agentId>:<rest>`). */
const FULL_SESSION_KEY = /^agent:[a-z0-9_][a-z0-9_-]{0,63}:\S/;

function parseGroup(value: unknown): ConversationLabels | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value)) fail('group', `must be an object {displayName, subject, space}, got ${describeType(value)}`);
  const obj = value as Record<string, unknown>;
  const labels: ConversationLabels = {};
  for (const key of ['displayName', 'subject', 'space'] as const) {
    const text = optionalString(obj, key, `group.${key}`)?.trim();
    if (text) labels[key] = text;
  }
  return Object.keys(labels).length > 0 ? labels : undefined;
}

function parseLineage(obj: Record<string, unknown>): InboundMessage['lineage'] {
  const lineage: NonNullable<InboundMessage['lineage']> = {};
  const parent = optionalString(obj, 'parentSessionKey')?.trim().toLowerCase();
  if (parent !== undefined) {
    if (!FULL_SESSION_KEY.test(parent)) fail('parentSessionKey', 'must be a full session key agent:<agentId>:<rest>');
    lineage.parentSessionKey = parent;
  }
  const depth = obj.spawnDepth;
  if (depth !== undefined && depth !== null) {
    if (typeof depth !== 'number' || !Number.isSafeInteger(depth) || depth < 0) fail('spawnDepth', `must be a whole number ≥ 0, got ${typeof depth === 'number' ? String(depth) : JSON.stringify(depth)}`);
    lineage.spawnDepth = depth;
  }
  return Object.keys(lineage).length > 0 ? lineage : undefined;
}

function fail(path: string, problem: string): never {
  throw new SwitchboardError('BAD_MESSAGE', `"${path}" ${problem}`, { details: { path } });
}

function optionalString(obj: Record<string, unknown>, key: string, path = key): string | undefined {
  const value = obj[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value) && key !== 'text') return String(value);
  return fail(path, `must be a string, got ${describeType(value)}`);
}

/** Either form names an instant from 1970 to the end of year 9999 (the clock's own range, core/clock.ts). */
function parseTimestamp(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  let ms: number | undefined;
  if (typeof value === 'number' && Number.isFinite(value)) ms = Math.floor(value);
  else if (typeof value === 'string') ms = parseIsoTime(value.trim());
  if (ms !== undefined && ms >= 0 && ms <= MAX_CLOCK_MS) return ms;
  return fail('timestamp', 'must be an ISO-8601 time or epoch milliseconds between 1970 and the end of year 9999');
}

/** Validates a parsed JSON value as an inbound message. */
export function parseInboundMessage(raw: unknown): InboundMessage {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) fail('$', `message must be a JSON object, got ${describeType(raw)}`);
  const obj = raw as Record<string, unknown>;
  const route = normalizeRouteInput(obj, 'BAD_MESSAGE');

  const cron = obj.cron;
  let cronJobId: string | undefined;
  if (cron !== undefined && cron !== null) {
    if (typeof cron !== 'object' || Array.isArray(cron)) fail('cron', `must be an object {jobId}, got ${describeType(cron)}`);
    cronJobId = optionalString(cron as Record<string, unknown>, 'jobId', 'cron.jobId')?.trim();
    if (!cronJobId) fail('cron.jobId', 'is required for a cron message');
  }

  const kindRaw = obj.kind ?? (cronJobId ? 'cron' : 'user');
  if (typeof kindRaw !== 'string' || !KINDS.includes(kindRaw as MessageKind)) {
    fail('kind', `must be one of ${KINDS.join(', ')}, got ${JSON.stringify(kindRaw)}`);
  }
  const kind = kindRaw as MessageKind;
  if (kind === 'cron' && !cronJobId) fail('cron.jobId', 'is required when kind is "cron"');

  const text = optionalString(obj, 'text');
  if (kind === 'user' && (text === undefined || text.trim() === '')) fail('text', 'is required for kind "user"');

  let sender: InboundMessage['sender'];
  if (obj.sender !== undefined && obj.sender !== null) {
    if (typeof obj.sender !== 'object' || Array.isArray(obj.sender)) fail('sender', `must be an object {id, name}, got ${describeType(obj.sender)}`);
    const s = obj.sender as Record<string, unknown>;
    sender = { id: optionalString(s, 'id', 'sender.id'), name: optionalString(s, 'name', 'sender.name') };
  }

  let queue: InboundMessage['queue'];
  if (obj.queue !== undefined && obj.queue !== null) {
    if (typeof obj.queue !== 'object' || Array.isArray(obj.queue)) fail('queue', `must be an object, got ${describeType(obj.queue)}`);
    const q = obj.queue as Record<string, unknown>;
    queue = { mode: optionalString(q, 'mode', 'queue.mode') };
    if (q.debounceMs !== undefined) {
      if (typeof q.debounceMs !== 'number' || !Number.isFinite(q.debounceMs) || q.debounceMs < 0) fail('queue.debounceMs', 'must be a number ≥ 0');
      queue.debounceMs = q.debounceMs;
    }
    // The message is the top layer for every queue setting (docs/decisions.md, Queue settings); a
    // drop policy that does not normalise falls through to the next layer, as a mode does.
    if (q.cap !== undefined && q.cap !== null) {
      if (typeof q.cap !== 'number' || !Number.isSafeInteger(q.cap) || q.cap < 1) fail('queue.cap', 'must be a whole number ≥ 1');
      queue.cap = q.cap;
    }
    const drop = optionalString(q, 'drop', 'queue.drop');
    if (drop !== undefined) queue.drop = drop;
  }

  if (obj.incognito !== undefined && obj.incognito !== null && typeof obj.incognito !== 'boolean') {
    fail('incognito', `must be a boolean, got ${describeType(obj.incognito)}`);
  }

  const sessionKey = optionalString(obj, 'sessionKey')?.trim();
  if (sessionKey !== undefined && sessionKey === '') fail('sessionKey', 'must not be blank');
  const messageId = optionalString(obj, 'messageId')?.trim() || undefined;
  const runId = optionalString(obj, 'runId')?.trim() || undefined;
  if (runId !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(runId)) {
    fail('runId', 'must be 1–128 characters of letters, digits, ".", "_", ":" or "-", starting with a letter or digit');
  }

  const sessionId = optionalString(obj, 'sessionId')?.trim() || undefined;
  if (sessionId !== undefined && !isSessionId(sessionId)) {
    fail('sessionId', 'must be a session id (letters and digits of any script, combining marks, ".", "_" or "-", starting with a letter or digit, at most 128, in Unicode NFC)');
  }

  return {
    route,
    kind,
    text,
    sender,
    messageId,
    timestamp: parseTimestamp(obj.timestamp),
    runId,
    ...(sessionId !== undefined ? { sessionId } : {}),
    cronJobId,
    sessionKey,
    queue,
    incognito: obj.incognito === true,
    ...optional('group', parseGroup(obj.group)),
    ...optional('lineage', parseLineage(obj)),
  };
}

function optional<K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, V>);
}

/** Parses one NDJSON line into a message; JSON syntax errors are BAD_MESSAGE too. */
export function parseMessageLine(text: string): InboundMessage {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new SwitchboardError('BAD_MESSAGE', `not JSON: ${(err as Error).message}`, { details: { path: '$' } });
  }
  // Checked before anything walks the value: deep nesting would overflow the stack further on.
  // A text too short to nest that deep (most messages) needs no walk.
  if (mayNestDeeperThan(text) && jsonDepthExceeds(raw)) fail('$', `nests objects/arrays deeper than ${MAX_JSON_DEPTH} levels`);
  return parseInboundMessage(raw);
}
