// What a run writes to its transcript, under the run's lock: its runner's events as records (tool
// calls and results, assistant text, usage), replies through sendPolicy with their delivery mirror,
// and the outbox records owed to the session. The first failed append stops every later write.

import { applyUsageReport, evaluateSendPolicy, type SendPolicyDecision, type UsageReport } from '../policy/index.js';
import type { RunEndEvent, RunEvent } from '../runner/index.js';
import {
  DELIVERY_MIRROR_MODEL,
  appendEntries,
  readSessionStore,
  transcriptOnlyMarks,
  type LockHandle,
  type NewTranscriptEntry,
  type TranscriptSessionInfo,
} from '../store/index.js';
import type { EngineContext } from './context.js';
import { peekOutbox, type QueueEvent, type QueuedEntry } from './queue-state.js';
import { commitClaim, updateStore } from './run-store.js';
import type { TurnSpec } from './turn-spec.js';

/** A run's runner stderr lines logged; the rest are counted in one line. */
const MAX_STDERR_LINES = 200;
/** Characters of one logged stderr line. */
const MAX_STDERR_CHARS = 2000;

/** Appends under the run's lock; the first failure (lock lost, disk) stops every later write. */
export class TurnWriter {
  failure: unknown;
  private readonly file: string;
  private readonly session: TranscriptSessionInfo;
  private lastAssistant: string | undefined;
  /** Outbox items this run has taken to append (ids): never appended twice by it. */
  private readonly outboxAppended = new Set<string>();
  /**
   * The session entry as the run last saw it: read under its lock when it started, then every
   * update of this process and every poll (about 250 ms) brings the newer one. A reply's
   * sendPolicy is decided on it. Reading sessions.json again for each reply cost a parse of the
   * whole registry per reply (164 ms each with 20 000 sessions), and when that read failed (a
   * damaged or half-replaced file) the entry's own `/send off` was not seen and the reply went
   * out: the policy failed open.
   */
  private entry: QueuedEntry | undefined;

  /** The entry as the run sees it now (LocalRun.observe). */
  seeEntry(entry: QueuedEntry): void {
    this.entry = entry;
  }

  constructor(
    private readonly ctx: EngineContext,
    private readonly turn: TurnSpec,
    private readonly handle: LockHandle,
    private readonly emit: (event: QueueEvent) => void,
    private readonly onFailure: (err: unknown) => void,
  ) {
    this.file = turn.transcript;
    this.session = { sessionId: turn.sessionId, sessionKey: turn.ref.sessionKey, agentId: turn.ref.agentId };
  }

  get failed(): boolean {
    return this.failure !== undefined;
  }

  async append(entries: readonly NewTranscriptEntry[]): Promise<boolean> {
    if (this.failed) return false;
    if (entries.length === 0) return true;
    try {
      // resumesFile: a run writes to its entry's instance, so a file missing with a `.deleted.`
      // archive is an interrupted `sessions delete`, put back first (a new instance has no archive).
      await appendEntries(this.file, entries, { handle: this.handle, session: this.session, clock: this.ctx.clock, resumesFile: true });
      return true;
    } catch (err) {
      this.failure = err;
      this.onFailure(err);
      return false;
    }
  }

  /** Records one runner event as it happened at `at` (boundaries and the end are the run's). */
  async record(event: Exclude<RunEvent, RunEndEvent | { type: 'boundary' }>, at: number): Promise<void> {
    const runId = this.turn.runId;
    const timestamp = new Date(at).toISOString();
    switch (event.type) {
      case 'tool_call':
        await this.append([{ type: 'tool_call', timestamp, runId, toolCallId: event.id, name: event.name, args: event.args ?? null }]);
        return;
      case 'tool_result': {
        const record: NewTranscriptEntry = { type: 'tool_result', timestamp, runId, toolCallId: event.id, output: event.output ?? null };
        if (event.isError !== undefined) record.isError = event.isError;
        await this.append([record]);
        return;
      }
      case 'assistant':
        this.lastAssistant = event.text;
        await this.append([assistantRecord(event.text, at, { runId })]);
        return;
      case 'reply':
        await this.deliver(event.text, at);
        return;
      case 'usage':
        await this.recordUsage(event.usage, timestamp);
        return;
      case 'stderr':
        this.logStderr(event.line);
        return;
      default:
        return; // hello: nothing to record
    }
  }

  private stderrLines = 0;

  /**
   * A runner's stderr line, logged with the run (queue.md: "stderr is logged"): one diagnostic
   * line each, cut to a readable length, at most MAX_STDERR_LINES per run, then one line saying
   * that more are not shown — a runner that floods stderr must not flood the command's.
   */
  private logStderr(line: string): void {
    const log = this.ctx.log;
    if (log === undefined) return;
    this.stderrLines += 1;
    const { runId, ref } = this.turn;
    if (this.stderrLines <= MAX_STDERR_LINES) {
      const text = line.length > MAX_STDERR_CHARS ? `${line.slice(0, MAX_STDERR_CHARS)}… (${line.length} characters)` : line;
      log(`switchboard: runner ${ref.agentId} run ${runId} (${ref.sessionKey}) stderr: ${text}`);
    } else if (this.stderrLines === MAX_STDERR_LINES + 1) {
      log(`switchboard: runner ${ref.agentId} run ${runId} (${ref.sessionKey}): more stderr lines are not shown`);
    }
  }

  /**
   * A usage report: recorded first (a `custom` record, customType `usage`), then copied onto the
   * entry (model, token counts) if the entry still names this run's instance.
   */
  private async recordUsage(usage: UsageReport, timestamp: string): Promise<void> {
    const turn = this.turn;
    if (!(await this.append([{ type: 'custom', timestamp, customType: 'usage', data: { runId: turn.runId, ...usage } }]))) return;
    try {
      await updateStore(this.ctx, turn.ref.location, (store) => {
        const entry = store[turn.ref.sessionKey];
        if (entry !== undefined && entry.sessionId === turn.sessionId && applyUsageReport(entry, usage)) entry.updatedAt = this.ctx.clock.now();
      });
    } catch {
      // The record is on disk; the entry's copy is only a summary, refreshed by the next report.
    }
  }

  /** sendPolicy, the reply record, the delivery mirror, then the reply event. */
  /** `at`: when the runner produced the reply (its record's time; the mirror is stamped when delivered). */
  private async deliver(text: string, at: number): Promise<void> {
    const turn = this.turn;
    if (turn.shape === 'before-reset') {
      // The conversation is ending: what the agent says now is kept in the transcript, not sent.
      await this.append([assistantRecord(text, at, { runId: turn.runId, reply: true, delivered: false, beforeReset: true })]);
      return;
    }
    const entry = this.entry;
    const deliveryContext = (turn.deliveryContext ?? entry?.deliveryContext ?? null) as Record<string, unknown> | null;
    // Never seen (sessions.json unreadable since the run began): its own setting is unknown, so
    // the reply is held, never sent on the config's word alone.
    const policy: SendPolicyDecision =
      entry === undefined
        ? { decision: 'deny', rule: null, source: 'unknown' }
        : evaluateSendPolicy(
            {
              sessionKey: turn.ref.sessionKey,
              // The channel the reply goes out on: a rule denying Slack stops a Slack reply of a linked session.
              // An entry without one (an older OpenClaw row) falls back to its last channel, then the key.
              channel: [deliveryContext?.channel as string | undefined, entry.channel, entry.lastChannel as string | undefined],
              chatType: entry.chatType ?? null,
              entryOverride: entry.sendPolicy ?? null,
            },
            this.ctx.config.session?.sendPolicy ?? null,
          );
    const delivered = policy.decision === 'allow';
    const now = this.ctx.clock.now();
    const records: NewTranscriptEntry[] = [];
    if (!delivered) {
      records.push(assistantRecord(text, at, { runId: turn.runId, reply: true, delivered: false, policy: { decision: policy.decision, rule: policy.rule, source: policy.source } }));
    } else {
      if (text !== this.lastAssistant) records.push(assistantRecord(text, at, { runId: turn.runId, reply: true }));
      records.push(assistantRecord(text, now, { runId: turn.runId, ...transcriptOnlyMarks(DELIVERY_MIRROR_MODEL), deliveryContext }));
    }
    if (!(await this.append(records))) return;
    this.emit({
      type: 'reply',
      runId: turn.runId,
      sessionKey: turn.ref.sessionKey,
      sessionId: turn.sessionId,
      text,
      deliveryContext,
      delivered,
      policy: { decision: policy.decision, rule: policy.rule },
    });
  }

  /**
   * The entry as stored now and its outbox's records (left in the outbox until appended), but
   * none this run has appended already: their removal from the store may still be under way.
   */
  /** `unreadable`: sessions.json could not be read (the entry is then unknown, not gone). */
  async readOutbox(): Promise<{ records: NewTranscriptEntry[]; ids: string[]; entry: QueuedEntry | undefined; unreadable?: true }> {
    try {
      const { storePath } = this.turn.ref.location;
      const key = this.turn.ref.sessionKey;
      const owed = (candidate: QueuedEntry | undefined): boolean => Array.isArray(candidate?.outbox) && candidate.outbox.some((item) => !this.outboxAppended.has(item.id));
      let entry = (await readSessionStore(storePath))[key] as QueuedEntry | undefined;
      // Items owed: read again under the store lock. A drain elsewhere appends outbox items in a
      // store transaction (the session had no lock when it began) and takes them out in the same
      // write; read without the lock, that write could still be on its way, and the items were
      // appended twice. (Items are only ever added under that lock, so an empty outbox read
      // without it is empty for this run; what comes later is the next holder's or drain's.)
      if (owed(entry)) entry = await updateStore(this.ctx, this.turn.ref.location, (store) => structuredClone(store[key]) as QueuedEntry | undefined);
      const fresh = entry && Array.isArray(entry.outbox) ? { ...entry, outbox: entry.outbox.filter((item) => !this.outboxAppended.has(item.id)) } : entry;
      const peeked = peekOutbox(fresh);
      for (const id of peeked.ids) this.outboxAppended.add(id);
      return { ...peeked, entry };
    } catch {
      return { records: [], ids: [], entry: undefined, unreadable: true }; // they stay in the outbox for the next holder
    }
  }

  /** Appends what waits in the outbox, then takes it out of the outbox (in that order). */
  async flushOutbox(): Promise<void> {
    const { records, ids } = await this.readOutbox();
    if (records.length > 0 && (await this.append(records))) await commitClaim(this.ctx, this.turn.ref, undefined, ids);
  }
}

function assistantRecord(text: string, at: number, extra: Record<string, unknown>): NewTranscriptEntry {
  return { type: 'message', timestamp: new Date(at).toISOString(), message: { role: 'assistant', content: [{ type: 'text', text }], timestamp: at, ...extra } };
}
