// What `switchboard sessions cleanup` and `switchboard maintain` do (their flags are in
// sessions.ts and maintain.ts): the plan table and summaries in text, OpenClaw's summary shape in
// JSON, and progress on a terminal (progress.ts).

import path from 'node:path';
import { SwitchboardError } from '../core/index.js';
import {
  cleanupSessions,
  configureQueue,
  isCleanupFailure,
  runMaintain,
  waitForQueueWork,
  type CleanupProgress,
  type CleanupStoreResult,
  type CleanupStoreSummary,
  type MaintainReport,
} from '../engine/index.js';
import type { CleanupPlan, PlannedSession } from '../policy/index.js';
import type { StoreLocation } from '../store/index.js';
import type { CliContext } from './context.js';
import { formatAge, formatBytes, table } from './format.js';
import { writeJsonLine } from './output.js';
import { beforeResetText, expiredText } from './format.js';
import { progressFor } from './progress.js';
import { storeSelection } from './store-selection.js';

interface CleanupFlags {
  agent?: string;
  allAgents?: boolean;
  store?: string;
  dryRun?: boolean;
  enforce?: boolean;
  activeKey?: string[];
  fixMissing?: boolean;
}


/** Cleanup's stages as progress lines: "main: scan [####....] 300/1200". */
function cleanupProgress(ctx: CliContext): { onProgress: (progress: CleanupProgress) => void; done: () => Promise<void> } {
  const progress = progressFor(ctx);
  return {
    onProgress: ({ agentId, stage, done, total }) => progress.update({ label: `${agentId}: ${stage}`, done, total }),
    done: () => progress.stop(),
  };
}

export async function runCleanup(ctx: CliContext): Promise<number> {
  const flags = ctx.options as unknown as CleanupFlags;
  const selection = storeSelection(flags);
  const progress = cleanupProgress(ctx);
  const plans = new Map<string, CleanupPlan>();
  let report;
  try {
    report = await cleanupSessions(await ctx.engine(), {
      ...selection,
      dryRun: flags.dryRun === true,
      enforce: flags.enforce === true,
      activeKeys: flags.activeKey ?? [],
      fixMissing: flags.fixMissing === true,
      onProgress: progress.onProgress,
      onPlan: (location: StoreLocation, plan: CleanupPlan) => plans.set(location.storePath, plan),
    });
  } finally {
    await progress.done();
  }
  const several = selection.allAgents === true;
  if (!several) {
    // One store: its failure is the command's failure, reported the usual way.
    const only = report.stores[0];
    if (only !== undefined && isCleanupFailure(only)) {
      throw new SwitchboardError(only.error.code, only.error.message, { hint: only.error.hint });
    }
  }
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, several ? { allAgents: true, mode: report.mode, dryRun: report.dryRun, stores: report.stores } : report.stores[0]);
    return report.exitCode;
  }
  const out: string[] = [];
  for (const result of report.stores) {
    if (isCleanupFailure(result)) {
      out.push(`${result.agentId}: FAILED ${result.error.code}: ${result.error.message}${result.error.hint ? `\n  hint: ${result.error.hint}` : ''}`);
      continue;
    }
    const plan = plans.get(result.storePath);
    const applied = result.applied === true;
    if (plan !== undefined && (!applied || result.actions.length > 0)) {
      out.push((await planTable(plan, applied ? new Set(result.actions.map((a) => a.key)) : null)).trimEnd());
    }
    out.push(...summaryLines(result, flags.fixMissing === true));
    out.push('');
  }
  ctx.streams.stdout.write(`${out.join('\n').trimEnd()}\n`);
  return report.exitCode;
}

function flagsOf(session: PlannedSession): string {
  const flags: string[] = [...session.protectedBy];
  if (!session.transcript.exists) flags.push('missing');
  return flags.join(',') || '-';
}

/**
 * Every session with its action (dry run / warn), or only what was done (applied). The Action
 * cell is the action's name alone (cli.md's keep|prune-missing|…), one word for scripts that
 * split columns; the summary under it says whether it was done or would be.
 */
async function planTable(plan: CleanupPlan, onlyKeys: Set<string> | null): Promise<string> {
  const rows = plan.sessions
    .filter((s) => onlyKeys === null || onlyKeys.has(s.key))
    .sort((a, b) => (b.updatedAt ?? -Infinity) - (a.updatedAt ?? -Infinity) || (a.key < b.key ? -1 : 1))
    .map((s) => [s.action, s.key, formatAge(s.ageMs), s.model ?? '-', flagsOf(s)]);
  if (rows.length === 0) return 'no sessions\n';
  return await table(['Action', 'Key', 'Age', 'Model', 'Flags'], rows);
}

function summaryLines(s: CleanupStoreSummary, fixMissing: boolean): string[] {
  const verb = s.applied === true ? '' : 'would be ';
  const lines = [
    `${s.agentId}: ${s.beforeCount} → ${s.afterCount} sessions (mode ${s.mode}${s.dryRun ? ', dry run' : ''}) — ${s.storePath}`,
    `  ${verb}pruned ${s.pruned} stale, ${s.missing} missing, capped ${s.capped}${s.diskBudget ? `, evicted ${s.diskBudget.removedEntries}` : ''}; ` +
      `${s.archived} transcript(s) ${verb}archived; ${s.purgedArchives} old archive(s) ${verb}purged` +
      `${s.rotatedTo !== null ? `; store ${verb}rotated to ${s.rotatedTo}` : ''}`,
    `  ${s.protected} protected (pinned/locked/running/queued/active), ${s.missingTranscripts} without a transcript${s.missingTranscripts > 0 && !fixMissing ? ' (use --fix-missing to remove them)' : ''}`,
  ];
  if (s.unusable > 0) lines.push(`  ${s.unusable} unusable (wrong shape, or sharing a transcript): kept; see \`switchboard doctor\``);
  if (s.diskBudget !== null) {
    const b = s.diskBudget;
    lines.push(
      `  disk budget: ${formatBytes(b.totalBytesBefore)} removable of max ${formatBytes(b.maxBytes)} (high water ${formatBytes(b.highWaterBytes)})` +
        `${b.overBudget ? ` — over budget, ${verb}freeing ${formatBytes(b.freedBytes)} in ${b.removedFiles} file(s) → ${formatBytes(b.totalBytesAfter)}` : ''}` +
        `; ${formatBytes(b.protectedBytes)} protected`,
    );
  }
  if (s.skipped.length > 0) lines.push(`  skipped ${s.skipped.length} (changed or busy meanwhile): ${s.skipped.slice(0, 5).map((k) => `${k.key} (${k.reason})`).join(', ')}${s.skipped.length > 5 ? ', …' : ''}`);
  if (s.applied !== true && !s.dryRun && s.wouldMutate) {
    lines.push('  nothing was changed: mode is "warn" (run with --enforce, or set session.maintenance.mode to "enforce")');
  }
  if (!s.wouldMutate) lines.push('  nothing to do');
  return lines;
}

export async function runMaintainCommand(ctx: CliContext): Promise<number> {
  const flags = ctx.options as { dryRun?: boolean };
  const progress = cleanupProgress(ctx);
  let result;
  const engine = await ctx.engine();
  // Turns before resets (session.reset.beforeReset) are runs: their events go to stderr.
  configureQueue(engine, { sink: (event) => writeJsonLine(ctx.streams.stderr, event) });
  try {
    result = await runMaintain(engine, { dryRun: flags.dryRun === true, onProgress: progress.onProgress });
  } finally {
    await progress.done();
  }
  await waitForQueueWork(engine);
  // A bad setting fails its stage only (cron keeps the rest); it is named at its place in the file.
  for (const error of result.report.errors) {
    if (error.code !== 'CONFIG_INVALID') continue;
    const located = await ctx.locateConfigError(new SwitchboardError('CONFIG_INVALID', error.message));
    error.message = (located as SwitchboardError).message;
  }
  if (ctx.json) writeJsonLine(ctx.streams.stdout, result.report);
  else ctx.streams.stdout.write(maintainText(result.report));
  return result.exitCode;
}

function maintainText(r: MaintainReport): string {
  const verb = r.dryRun ? 'would be ' : '';
  const lines = [`switchboard maintain${r.dryRun ? ' (dry run)' : ''} at ${r.now}`];
  const reasons = r.locks.released.map((l) => l.reason);
  lines.push(`  locks: ${r.locks.released.length} ${verb}released${reasons.length > 0 ? ` (${[...new Set(reasons)].join(', ')})` : ''}, ${r.locks.kept} live kept`);
  if (r.leftovers.removed.length > 0) {
    const kinds = [...new Set(r.leftovers.removed.map((l) => (l.kind === 'temp-file' ? 'temp files' : 'lock tombstones')))];
    lines.push(`  leftovers of interrupted writes: ${r.leftovers.removed.length} ${verb}removed (${kinds.join(', ')})`);
  }
  for (const done of r.rotations.finished) lines.push(`  interrupted rotation of ${done.sessionKey}: old instance ${done.sessionId} ${verb}archived${done.archivedTo ? ` as ${path.basename(done.archivedTo)}` : ''}`);
  lines.push(
    r.cronRetention.retentionMs === null
      ? '  cron retention: off'
      : `  cron retention (${formatAge(r.cronRetention.retentionMs)}): ${r.cronRetention.removed.length} session(s) ${verb}removed${r.cronRetention.skipped.length > 0 ? `, ${r.cronRetention.skipped.length} skipped` : ''}`,
  );
  for (const store of r.cleanup.stores as CleanupStoreResult[]) {
    if (isCleanupFailure(store)) lines.push(`  cleanup ${store.agentId}: FAILED ${store.error.code}: ${store.error.message}`);
    else {
      const removed = store.pruned + store.missing + store.capped + (store.diskBudget?.removedEntries ?? 0);
      const did = store.applied === true ? '' : store.dryRun ? 'would be ' : 'would be (in enforce mode) ';
      // Warn mode and dry runs change nothing: every figure says "would".
      const count = store.applied === true ? `${store.beforeCount} → ${store.afterCount} sessions` : `${store.beforeCount} sessions, ${store.afterCount} would remain`;
      lines.push(`  cleanup ${store.agentId} (${store.mode}): ${count}, ${removed} ${did}removed, ${store.purgedArchives} old archive(s) ${did}purged`);
    }
  }
  lines.push(`  resets: ${r.resets.reset.length} ${verb}applied, ${r.resets.deferred.length} deferred (active run)${r.resets.skipped.length > 0 ? `, ${r.resets.skipped.length} no longer due` : ''}`);
  for (const done of r.resets.reset) {
    // A reset gets a line of its own only for a turn before it that did not go well, or for what expired with it.
    const turnFailed = done.beforeReset !== undefined && done.beforeReset.status !== 'done';
    if (turnFailed || (done.expired?.length ?? 0) > 0) lines.push(`    reset ${done.sessionKey}${turnFailed ? beforeResetText(done.beforeReset) : ''}${expiredText(done.expired)}`);
  }
  for (const deferred of r.resets.deferred) {
    lines.push(`    deferred ${deferred.sessionKey} (${deferred.reason}${deferred.deferredBecause === 'busy' ? ', busy: the turn before the reset waits' : ''})${deferred.holder.pid !== null ? `: held by pid ${deferred.holder.pid}${deferred.holder.runId ? `, run ${deferred.holder.runId}` : ''}` : ''}`);
  }
  for (const error of r.errors) lines.push(`  FAILED ${error.stage}${error.agentId ? ` ${error.agentId}` : ''}: ${error.code}: ${error.message}`);
  if (r.ok) lines.push('  ok');
  return `${lines.join('\n')}\n`;
}
