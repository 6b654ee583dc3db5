// Asking before a destructive change: only when a person is at a terminal (stdin and stderr are
// TTYs), never in a pipe or cron job; --yes answers for them. readline is loaded only to ask.

import type { Command } from 'commander';
import type { CliContext } from './context.js';
import { writeJsonLine } from './output.js';

/**
 * True when the change may go ahead: --yes, or no terminal to ask at, or the person said yes.
 * The question and the plan go to stderr so that stdout stays data.
 */
export async function confirm(ctx: CliContext, question: string): Promise<boolean> {
  if ((ctx.options as { yes?: boolean }).yes === true) return true;
  const stdin = ctx.streams.stdin as NodeJS.ReadableStream & { isTTY?: boolean };
  if (stdin.isTTY !== true || ctx.streams.stderr.isTTY !== true) return true;
  const { createInterface } = await import('node:readline/promises');
  const rl = createInterface({ input: stdin, output: ctx.streams.stderr, terminal: true });
  try {
    const answer = await rl.question(`${question} [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } catch (err) {
    // Ctrl+D or Ctrl+C at the question (readline rejects it with an AbortError): the person
    // did not say yes, so nothing is changed — it was an INTERNAL error with a stack trace.
    if ((err as { code?: unknown } | null)?.code === 'ABORT_ERR') {
      ctx.streams.stderr.write('\n');
      return false;
    }
    throw err;
  } finally {
    rl.close();
  }
}

/** --dry-run and --yes, the flags of every destructive command. */
export function addDestructiveFlags(command: Command, what = 'per target'): Command {
  return command.option('--dry-run', `say what would be done, ${what}; change nothing`).option('-y, --yes', 'do not ask for confirmation on a terminal');
}

/** The help line every destructive command shows. */
export const ASKS_FIRST = 'Asks first on a terminal (--yes skips); never asks in a pipe or from cron.\nAnswering no changes nothing (exit 0).';

/** What a destructive command is about to do, one entry per change. */
export interface DestructivePlan {
  /** Per change: the text line (a verb phrase: "delete KEY (session ID)") and its JSON form. */
  steps: { text: string; json: Record<string, unknown> }[];
  /** The question asked once for all of them on a terminal ("delete these 2 sessions?"). */
  question: string;
}

/**
 * The one path of every destructive command once its targets are checked: with --dry-run each
 * change is printed as "would …" (JSON: `{dryRun: true, …}` per change) and nothing happens;
 * otherwise a person at a terminal sees the list and is asked once. True = go ahead.
 * Declining prints "nothing changed" on stderr; the command then exits 0.
 */
export async function dryRunOrConfirm(ctx: CliContext, plan: DestructivePlan): Promise<boolean> {
  if ((ctx.options as { dryRun?: boolean }).dryRun === true) {
    for (const step of plan.steps) {
      if (ctx.json) writeJsonLine(ctx.streams.stdout, { dryRun: true, ...step.json });
      else ctx.streams.stdout.write(`would ${step.text}\n`);
    }
    return false;
  }
  const listing = plan.steps.map((step) => `  ${step.text}`).join('\n');
  if (!(await confirm(ctx, `${listing}\n${plan.question}`))) {
    ctx.note('nothing changed');
    return false;
  }
  return true;
}
