// Asking before a destructive change: only when a person is at a terminal (stdin and stderr are
// TTYs), never in a pipe or cron job; --yes answers for them. readline is loaded only to ask.

import type { CliContext } from './context.js';

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
  } finally {
    rl.close();
  }
}
