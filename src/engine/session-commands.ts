// Session commands in a message (`/stop`, `/send …`, a `/queue` directive alone or an invalid
// one): applied to the entry inside the store transaction, and the reply records that answer them.

import { randomUUID } from 'node:crypto';
import {
  applyQueueDirective,
  describeQueueSettings,
  describeSendSetting,
  evaluateSendPolicy,
  parseControlCommand,
  resolveQueueSettings,
  type QueueDirective,
} from '../policy/index.js';
import { DELIVERY_MIRROR_MODEL, INJECTED_MODEL, transcriptOnlyMarks, type NewTranscriptEntry } from '../store/index.js';
import type { Addressed, AdmitEnv } from './admission-types.js';
import { claimedByActiveRun, droppedEventOf, noteRemoved, queueOf, setQueue, type QueueEvent, type QueuedEntry } from './queue-state.js';

export function commandReplyRecords(text: string, now: number, runId: string, delivered: boolean, policy: { decision: string; rule: number | null }, deliveryContext: unknown): NewTranscriptEntry[] {
  // A command's answer is no model output: marked so that OpenClaw never replays it (`command` tells it apart).
  const reply: Record<string, unknown> = { role: 'assistant', content: [{ type: 'text', text }], timestamp: now, runId, ...transcriptOnlyMarks(INJECTED_MODEL), command: true };
  if (!delivered) Object.assign(reply, { delivered: false, policy });
  const records: NewTranscriptEntry[] = [{ type: 'message', message: reply }];
  if (delivered) {
    records.push({ type: 'message', message: { role: 'assistant', content: [{ type: 'text', text }], timestamp: now, runId, ...transcriptOnlyMarks(DELIVERY_MIRROR_MODEL), deliveryContext: deliveryContext ?? null } });
  }
  return records;
}

/**
 * Whether a user message may hold a session command or a `/queue` directive (which may also stand
 * mid-text: "hello /queue collect world"). A cheap test, so that the record-only path parses
 * only what might be one; a false yes costs only the full admission.
 */
export function mayBeCommand(item: Addressed): boolean {
  const text = item.message.text;
  return item.message.kind === 'user' && text !== undefined && text.includes('/');
}

/** A session command (`/stop`, `/send …`, a `/queue` directive alone or an invalid one): applied now, answered with a reply. */
export function runCommand(
  entry: QueuedEntry,
  item: Addressed,
  env: AdmitEnv,
  command: { control: ReturnType<typeof parseControlCommand>; directive: QueueDirective },
  events: QueueEvent[],
): string {
  const { control, directive } = command;
  if (control?.kind === 'stop') {
    // Queued items first, then the run; items the run has already taken — for its next boundary,
    // or its own messages, claimed until its runner starts — go with it (injected if that
    // boundary comes first, else reported when it ends).
    const queue = queueOf(entry);
    const withTheRun = (waiting: (typeof queue)[number]): boolean => waiting.leasedBy !== undefined || claimedByActiveRun(entry, waiting);
    const cancelled = queue.filter((waiting) => !withTheRun(waiting));
    setQueue(entry, queue.filter(withTheRun));
    // Recorded in the same write as the removal (a `dropped` record through the outbox), like
    // every drop: a process that dies before printing the events leaves the report on disk.
    const stopped = cancelled.map((waiting) => droppedEventOf(waiting, 'stopped'));
    noteRemoved(entry, stopped, randomUUID);
    events.push(...stopped);
    let aborted: string | undefined;
    if (entry.activeRun) {
      aborted = entry.activeRun.runId;
      entry.abortRequested = aborted;
      entry.stopRequested = aborted;
      env.effects.aborts.push({ sessionKey: item.sessionKey, runId: aborted, reason: '/stop' });
    }
    return `Stopped: ${cancelled.length} queued message(s) cancelled; ${aborted ? `run ${aborted} aborted` : 'no run was active'}.`;
  }
  if (control?.kind === 'send-invalid') {
    return `Invalid /send argument "${control.argument}": use /send on, /send off or /send inherit. Nothing was changed.`;
  }
  if (control?.kind === 'send') {
    if (control.value === 'allow' || control.value === 'deny') entry.sendPolicy = control.value;
    else if (control.value === 'inherit') delete entry.sendPolicy;
    const effective = evaluateSendPolicy(
      { sessionKey: item.sessionKey, channel: [entry.channel, entry.lastChannel as string | undefined, item.message.route.channel], chatType: entry.chatType ?? null, entryOverride: entry.sendPolicy ?? null },
      env.ctx.config.session?.sendPolicy ?? null,
    );
    return describeSendSetting(entry.sendPolicy, effective);
  }
  if (directive.errors.length > 0) return `Invalid /queue directive: ${directive.errors.join('; ')}. Nothing was changed.`;
  const current = { queueMode: entry.queueMode, queueDebounceMs: entry.queueDebounceMs, queueCap: entry.queueCap, queueDrop: entry.queueDrop };
  const next = applyQueueDirective(current, directive) ?? current;
  for (const field of ['queueMode', 'queueDebounceMs', 'queueCap', 'queueDrop'] as const) {
    const value = (next as Record<string, unknown>)[field];
    if (value === undefined) delete entry[field];
    else (entry as Record<string, unknown>)[field] = value;
  }
  const settings = resolveQueueSettings({ channel: item.message.route.channel, entry, config: env.ctx.config.messages?.queue ?? null });
  return `Queue settings: ${describeQueueSettings(settings)}${directive.reset ? ' (session override cleared)' : ''}`;
}
