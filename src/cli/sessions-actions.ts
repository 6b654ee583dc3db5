// The `sessions` subcommands other than the listing: show, transcript, history, reset, pin, unpin,
// delete. Loaded when one of them runs, so that `sessions --json` starts without their code.

import { SwitchboardError } from '../core/index.js';
import {
  claimedByActiveRun,
  configureQueue,
  deleteSession,
  findInstance,
  findSession,
  resetSession,
  sessionHistory,
  setPinned,
  showSession,
  tokenCountsOf,
  transcriptFileOf,
  waitForQueueWork,
  type FoundSession,
  type QueuedEntry,
  type SessionDetails,
} from '../engine/index.js';
import { followTranscript, messageContentText, pause, readTranscript, type TranscriptRecord } from '../store/index.js';
import { dryRunOrConfirm } from './confirm.js';
import type { CliContext } from './context.js';
import { displayTimeZone, formatInstant } from '../policy/index.js';
import { beforeResetText, expiredText, formatBytes, formatTime as formatTimeIn, printable, printableLines, table } from './format.js';
import { whenOutputCloses, writeJsonLine } from './output.js';
import { formatTokens, positiveInt, selectionOf } from './sessions.js';

/**
 * Every target is looked up before anything changes, so a mistyped key stops the whole command
 * (NOT_FOUND) instead of half of it; then a dry run says per line what would happen, or the
 * person at a terminal is asked once for all of them.
 */
async function planTargets(ctx: CliContext, keys: string[], verb: string): Promise<FoundSession[] | null> {
  const engine = await ctx.engine();
  const found: FoundSession[] = [];
  for (const key of keys) {
    const target = await findSession(engine, key, selectionOf(ctx));
    if (!found.some((f) => f.key === target.key && f.location.storePath === target.location.storePath)) found.push(target);
  }
  const steps = found.map((target) => ({
    text: `${verb} ${target.key} (session ${target.entry.sessionId})`,
    json: { action: verb, sessionKey: target.key, sessionId: target.entry.sessionId, agentId: target.location.agentId },
  }));
  if (!(await dryRunOrConfirm(ctx, { steps, question: `${verb} ${found.length === 1 ? 'this session' : `these ${found.length} sessions`}?` }))) return null;
  return found;
}

/**
 * Why a fresh session stays fresh: its next reset, no policy at all, or a policy that cannot be
 * applied because the times it is measured from are missing or ahead of the clock (an OpenClaw
 * row without them, a clock stepped back).
 */
function freshnessNote(nextResetAt: number | undefined, mode: string, formatTime: (ms: number) => string): string {
  if (nextResetAt !== undefined) return `(next reset ${formatTime(nextResetAt)})`;
  if (mode === 'none') return '(no reset policy)';
  return `(${mode} policy, but no reset is due: the times it is measured from are missing or ahead of the clock)`;
}

export async function runShow(ctx: CliContext, key: string): Promise<number> {
  const details = await showSession(await ctx.engine(), key, selectionOf(ctx));
  const result = {
    agentId: details.location.agentId,
    key: details.key,
    storePath: details.location.storePath,
    transcriptPath: details.transcriptPath,
    entry: details.entry,
    freshness: details.freshness,
    lock: details.lock,
    queue: queueSummary(details.entry),
    transcript: details.transcript,
  };
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, result);
    return 0;
  }
  const { entry, freshness, lock, transcript } = details;
  const zone = displayTimeZone((await ctx.config()).config);
  const formatTime = (ms: number | null | undefined) => formatTimeIn(ms, zone);
  const rows: [string, string][] = [
    ['key', details.key],
    ['agent', details.location.agentId],
    ['sessionId', entry.sessionId],
    ['started', formatTime(entry.sessionStartedAt)],
    ['last interaction', formatTime(entry.lastInteractionAt)],
    ['updated', formatTime(entry.updatedAt)],
    ['fresh', freshness.fresh ? `yes ${freshnessNote(freshness.nextResetAt, details.resetPolicy.mode, formatTime)}` : `no: ${freshness.staleReason} (rotates on the next message)`],
    // OpenClaw's rows name the channel and account only in origin (provider) and deliveryContext.
    ['chat', `${entry.chatType ?? entry.origin?.chatType ?? '-'} on ${entry.channel ?? entry.origin?.channel ?? entry.origin?.provider ?? entry.deliveryContext?.channel ?? '-'} (${entry.accountId ?? entry.origin?.accountId ?? entry.deliveryContext?.accountId ?? '-'})`],
    // `to` is in OpenClaw's target form, which may itself start with the channel (telegram:111).
    // The session's address (cron/heartbeat output); each message is answered on its own route.
    // OpenClaw leaves `to` out until it has a target (a Telegram group it only recorded).
    ['address', entry.deliveryContext ? `${entry.deliveryContext.to ?? '(no target yet)'} on ${entry.deliveryContext.channel}${entry.deliveryContext.threadId !== undefined ? ` thread ${String(entry.deliveryContext.threadId)}` : ''}${entry.deliveryOwner?.peer ? `, owner ${entry.deliveryOwner.channel}:${entry.deliveryOwner.peer.kind}:${entry.deliveryOwner.peer.id}${entry.deliveryOwner.pinned ? ' (pinned)' : ''}` : ''}` : '-'],
    ['labels', labelsLine(entry)],
    ['first sender', senderLine(entry.origin)],
    // Sub-agent lineage (OpenClaw also names the parent as `spawnedBy`): only sub-agents have it.
    ...(lineageLine(entry) !== null ? [['spawned by', lineageLine(entry)!] as [string, string]] : []),
    ['model', modelLine(entry)],
    ['tokens', tokensLine(tokenCountsOf(entry))],
    ['pinned', entry.pinned ? 'yes' : 'no'],
    ['queue', `${result.queue.waiting} waiting${result.queue.activeRunId !== null ? `, run ${result.queue.activeRunId} active` : ''} (see \`switchboard queue --session ${details.key}\`)`],
    ['lock', lock ? (lock.owner ? `held by pid ${lock.owner.pid} since ${formatTime(lock.owner.acquiredAt)}` : 'present (no owner record)') : 'free'],
    ['transcript', transcript ? `${details.transcriptPath} (${formatBytes(transcript.bytes)}, ${transcript.records} records${transcript.skipped ? `, ${transcript.skipped} damaged lines` : ''})` : `${details.transcriptPath} (missing)`],
  ];
  ctx.streams.stdout.write(rows.map(([k, v]) => `${k.padEnd(18)}${printable(v)}\n`).join(''));
  return 0;
}

/**
 * The session's queue as `show` reports it: how many items wait (not the active run's own
 * messages, claimed by it until its runner starts) and the active run's id. The items themselves
 * are in `entry.queue` and `switchboard queue --session`.
 */
function queueSummary(entry: Record<string, unknown>): { waiting: number; activeRunId: string | null } {
  const queued = entry as QueuedEntry;
  const waiting = Array.isArray(queued.queue) ? queued.queue.filter((item) => !claimedByActiveRun(queued, item)).length : 0;
  const active = entry.activeRun as { runId?: unknown } | undefined;
  return { waiting, activeRunId: active ? (typeof active.runId === 'string' ? active.runId : '') : null };
}

/** The model the session uses: an override first; a value of another type is shown, not used. */
function modelLine(entry: Record<string, unknown>): string {
  const model = entry.modelOverride ?? entry.model;
  return model === undefined || model === null ? '-' : printable(model as string);
}

function labelsLine(entry: Record<string, unknown>): string {
  const parts = (['displayName', 'subject', 'space'] as const).filter((k) => typeof entry[k] === 'string' && entry[k] !== '').map((k) => `${k} "${String(entry[k])}"`);
  return parts.length > 0 ? parts.join(', ') : '-';
}

function senderLine(origin: unknown): string {
  const o = (origin ?? {}) as { sender?: unknown; senderId?: unknown };
  const label = typeof o.sender === 'string' ? o.sender : undefined;
  const id = typeof o.senderId === 'string' ? o.senderId : undefined;
  if (label === undefined) return id ?? '-';
  return id !== undefined && id !== label ? `${label} (id ${id})` : label;
}

function lineageLine(entry: Record<string, unknown>): string | null {
  const parent = typeof entry.parentSessionKey === 'string' ? entry.parentSessionKey : typeof entry.spawnedBy === 'string' ? entry.spawnedBy : undefined;
  const depth = typeof entry.spawnDepth === 'number' ? entry.spawnDepth : undefined;
  if (parent === undefined && depth === undefined) return null;
  return `${parent ?? '(unknown parent)'}${depth !== undefined ? ` (depth ${depth})` : ''}`;
}

function tokensLine(counts: ReturnType<typeof tokenCountsOf>): string {
  const { inputTokens, outputTokens, totalTokens, contextTokens } = counts;
  if ([inputTokens, outputTokens, totalTokens, contextTokens].every((n) => n === null)) return '-';
  const parts = [`context ${formatTokens(totalTokens, contextTokens)}`];
  if (inputTokens !== null) parts.push(`in ${inputTokens}`);
  if (outputTokens !== null) parts.push(`out ${outputTokens}`);
  return parts.join(', ');
}

/** A record's stored time as shown: in the configured zone when one is set, to the second. */
function shownTime(timestamp: unknown, zone: string | undefined): string {
  if (typeof timestamp !== 'string') return '';
  const ms = zone === undefined ? Number.NaN : Date.parse(timestamp);
  const text = Number.isFinite(ms) ? formatInstant(ms, zone) : timestamp;
  return text.replace('T', ' ').replace(/\.\d+(?=Z$|[+-]\d\d:\d\d$)/, '');
}

/** Where the later lines of a record's text start: never at the margin, where a record's line does. */
const CONTINUATION_INDENT = '    ';

/** One readable line per record: time, who, text. `key`: the session asked for (OpenClaw's headers name none). */
function renderRecord(record: TranscriptRecord, key: string, zone?: string): string {
  const time = shownTime(record.timestamp, zone);
  if (record.type === 'session') return `── session ${String(record.id)} (${typeof record.sessionKey === 'string' ? record.sessionKey : key}) started ${time}`;
  if (record.type === 'message') {
    const message = (record.message ?? {}) as { role?: string; content?: unknown; sender?: { name?: string; id?: string }; channel?: string; model?: string };
    const text = messageContentText(message.content);
    const who =
      message.role === 'user'
        ? `${message.sender?.name ?? message.sender?.id ?? 'user'}${message.channel ? ` via ${message.channel}` : ''}`
        : message.model === 'delivery-mirror'
          ? 'delivered'
          : (message.role ?? '?');
    return `${time}  ${who}: ${text}`;
  }
  // OpenClaw's settings records.
  if (record.type === 'model_change') return `${time}  ── model ${[record.provider, record.modelId].filter((part) => typeof part === 'string').join('/')}`;
  if (record.type === 'thinking_level_change') return `${time}  ── thinking ${String(record.thinkingLevel)}`;
  if (record.type === 'reset_notice') {
    return `${time}  ── reset (${String(record.reason)}) ${typeof record.previousSessionId === 'string' ? `after session ${record.previousSessionId}` : 'as the first message: nothing before it'}`;
  }
  if (record.type === 'custom') {
    const data = (record.data ?? {}) as { text?: string };
    return `${time}  [${String(record.customType)}] ${data.text ?? ''}`.trimEnd();
  }
  return `${time}  [${record.type}]`;
}

/** How often `--follow` looks for the key's next instance once the one it followed has ended. */
const FOLLOW_RECHECK_MS = 300;

export async function runHistory(ctx: CliContext, key: string): Promise<number> {
  const history = await sessionHistory(await ctx.engine(), key, selectionOf(ctx));
  const zone = displayTimeZone((await ctx.config()).config);
  const formatTime = (ms: number | null | undefined) => formatTimeIn(ms, zone);
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, history);
    return 0;
  }
  const rows = history.instances.map((i) => [
    i.sessionId,
    formatTime(i.startedAt),
    i.current ? 'current' : i.endedAt === null ? '-' : formatTime(i.endedAt),
    i.reason ?? (i.state === 'detached' ? 'not archived' : '-'),
    formatBytes(i.bytes),
  ]);
  ctx.streams.stdout.write(`${history.sessionKey} (agent ${history.agentId}): ${history.instances.length} instance${history.instances.length === 1 ? '' : 's'}, oldest first\n`);
  ctx.streams.stdout.write(await table(['SessionId', 'Started', 'Ended', 'Reason', 'Size'], rows));
  return 0;
}

/** The transcript to print: the current instance of a key or id, else an archived instance by its id. */
async function transcriptTarget(ctx: CliContext, key: string): Promise<{ details: SessionDetails | null; file: string; key: string }> {
  const engine = await ctx.engine();
  try {
    const details = await showSession(engine, key, selectionOf(ctx));
    return { details, file: details.transcriptPath, key: details.key };
  } catch (err) {
    if (!(err instanceof SwitchboardError && err.code === 'NOT_FOUND')) throw err;
    const instance = await findInstance(engine, key.trim(), selectionOf(ctx));
    if (instance === null) throw err;
    return { details: null, file: instance.file, key: instance.sessionKey ?? '' };
  }
}

export async function runTranscript(ctx: CliContext, key: string): Promise<number> {
  const flags = ctx.options as { tail?: string; follow?: boolean; raw?: boolean };
  const target = await transcriptTarget(ctx, key);
  if (target.details === null && flags.follow) {
    throw new SwitchboardError('USAGE', `${key.trim()} is an archived instance: it does not grow`, { hint: 'follow its key instead: `switchboard sessions transcript KEY --follow`' });
  }
  const tail = flags.tail !== undefined ? positiveInt(flags.tail, '--tail') : undefined;
  const zone = displayTimeZone((await ctx.config()).config);
  const print = (record: TranscriptRecord) => {
    if (ctx.json || flags.raw) ctx.streams.stdout.write(`${JSON.stringify(record)}\n`);
    else ctx.streams.stdout.write(`${printableLines(renderRecord(record, target.key, zone), CONTINUATION_INDENT)}\n`);
  };
  const reader = readTranscript(target.file);
  const kept: TranscriptRecord[] = [];
  for await (const record of reader) {
    if (tail === undefined) print(record);
    else {
      kept.push(record);
      if (kept.length > tail) kept.shift();
    }
  }
  kept.forEach(print);
  if (reader.stats.skipped > 0) ctx.note(`switchboard: skipped ${reader.stats.skipped} damaged line(s) in ${target.file}${reader.stats.tornTail ? ' (torn tail: run `switchboard doctor --repair`)' : ''}`);
  const details = target.details;
  if (flags.follow && details !== null) {
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    // `transcript --follow | head` ends when head does, like `tail -f | head`.
    void whenOutputCloses(ctx.streams.stdout).then(onSignal);
    try {
      // Like `tail -F`: when the instance ends (a reset archives its file), follow the key into
      // its next instance, with a notice on stderr; a deleted key is waited for.
      let file = details.transcriptPath;
      let offset = reader.stats.bytes;
      while (!stop.signal.aborted) {
        await followTranscript(file, offset, print, stop.signal);
        while (!stop.signal.aborted) {
          const next = await findSession(await ctx.engine(), details.key, { storePath: details.location.storePath }).catch(() => null);
          const nextFile = next === null ? null : transcriptFileOf(next.location, next.entry, next.key);
          if (next !== null && nextFile !== file) {
            ctx.note(`switchboard: ${details.key} is now session ${String(next.entry.sessionId)}; following it`);
            file = nextFile!;
            offset = 0;
            break;
          }
          await pause(FOLLOW_RECHECK_MS, stop.signal);
        }
      }
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  }
  return 0;
}

export async function runReset(ctx: CliContext, keys: string[]): Promise<number> {
  const flags = ctx.options as { reason?: string; model?: string };
  const targets = await planTargets(ctx, keys, 'reset');
  const engine = await ctx.engine();
  // The turn before a reset (session.reset.beforeReset) is a run: its events, and those of
  // messages that queued behind it and run here afterwards, go to stderr as JSON lines.
  configureQueue(engine, { sink: (event) => writeJsonLine(ctx.streams.stderr, event) });
  for (const target of targets ?? []) {
    const outcome = await resetSession(engine, target.key, { storePath: target.location.storePath, reason: flags.reason, model: flags.model });
    if (ctx.json) writeJsonLine(ctx.streams.stdout, outcome);
    else ctx.streams.stdout.write(`reset ${outcome.sessionKey}: ${outcome.previousSessionId} → ${outcome.sessionId}${outcome.archivedTo ? ` (archived ${outcome.archivedTo})` : ''}${beforeResetText(outcome.beforeReset)}${expiredText(outcome.expired)}\n`);
  }
  await waitForQueueWork(engine);
  return 0;
}

export async function runPin(ctx: CliContext, key: string, pinned: boolean): Promise<number> {
  const outcome = await setPinned(await ctx.engine(), key, pinned, selectionOf(ctx));
  if (ctx.json) writeJsonLine(ctx.streams.stdout, outcome);
  else ctx.streams.stdout.write(`${pinned ? 'pinned' : 'unpinned'} ${outcome.sessionKey}\n`);
  return 0;
}

export async function runDelete(ctx: CliContext, keys: string[]): Promise<number> {
  const targets = await planTargets(ctx, keys, 'delete');
  for (const target of targets ?? []) {
    const outcome = await deleteSession(await ctx.engine(), target.key, { storePath: target.location.storePath });
    if (ctx.json) writeJsonLine(ctx.streams.stdout, outcome);
    else {
      const archived = outcome.archivedTo ? ` (transcript archived as ${outcome.archivedTo})` : '';
      const dropped = outcome.dropped.length > 0 ? `; dropped ${outcome.dropped.length} waiting message(s): ${outcome.dropped.map((event) => event.runId).join(', ')}` : '';
      ctx.streams.stdout.write(`deleted ${outcome.sessionKey}${archived}${dropped}\n`);
    }
  }
  return 0;
}
