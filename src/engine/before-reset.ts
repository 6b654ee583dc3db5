// The agent's turn before a reset (`session.reset.beforeReset`): one run on the old instance, so
// the agent can save what it wants to keep, before any rotation — a daily/idle one found by ingest,
// `/new` and `/reset`, `maintain` and `sessions reset`. It is an ordinary run (the session's
// activeRun claim, its write lock, a lane slot), recorded in the old transcript; whatever becomes of
// it (done, failed, timeout, no lock) the reset goes on afterwards, and a failure is reported.

import { randomUUID } from 'node:crypto';
import { resolveBeforeReset, type BeforeResetSettings } from '../policy/index.js';
import type { RunnerSpec } from '../runner/index.js';
import type { NewTranscriptEntry } from '../store/index.js';
import type { EngineContext } from './context.js';
import { runnerFor, type SessionRef } from './queue-state.js';
import type { TurnSpec } from './turn-spec.js';

/** The runner message's `kind`, so a runner can tell this turn from a user's. */
export const BEFORE_RESET_KIND = 'before-reset';

export interface BeforeResetPlan extends BeforeResetSettings {
  /** The agent's runner, with the turn's own timeout. */
  spec: RunnerSpec;
}

/** The turn an agent gets before its sessions reset, or undefined (not configured, or no runner). */
export function beforeResetFor(ctx: EngineContext, agentId: string): BeforeResetPlan | undefined {
  const settings = resolveBeforeReset(ctx.config.session);
  if (settings === undefined) return undefined;
  const spec = runnerFor(ctx, agentId);
  if (spec === undefined) return undefined;
  return { ...settings, spec: { ...spec, timeoutMs: Math.min(spec.timeoutMs, settings.timeoutMs) } };
}

export interface BeforeResetTurn {
  ref: SessionRef;
  runId?: string;
  /** The instance about to be rotated away, and its transcript (the turn is recorded there). */
  sessionId: string;
  transcript: string;
  /** Why it is reset: `daily`, `idle`, `command` (`/new`, `/reset`, `sessions reset`). */
  reason: string;
}

/** The TurnSpec of the turn: a `before_reset` record opens it, the prompt is its one message. */
export function beforeResetTurnSpec(plan: BeforeResetPlan, turn: BeforeResetTurn): TurnSpec {
  const runId = turn.runId ?? randomUUID();
  const record: NewTranscriptEntry = { type: 'custom', customType: 'before_reset', data: { runId, reason: turn.reason, prompt: plan.prompt } };
  return {
    ref: turn.ref,
    sessionId: turn.sessionId,
    transcript: turn.transcript,
    runId,
    lane: 'main',
    spec: plan.spec,
    messages: [{ role: 'user', text: plan.prompt, runId, kind: BEFORE_RESET_KIND, reason: turn.reason }],
    startRecords: [record],
    items: [],
    shape: 'before-reset',
  };
}
