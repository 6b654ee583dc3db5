// `switchboard doctor [--repair]`: a health check of config, stores, transcripts and locks, and
// the repairs that keep every original byte. Exit 0 when healthy (or all repaired), 65 otherwise.

import path from 'node:path';
import type { Command } from 'commander';
import { EXIT_CODES } from '../core/index.js';
import { runDoctor, type DoctorProblem, type DoctorReport } from '../engine/index.js';
import { checkConfigSettings } from './config.js';
import type { CliContext } from './context.js';
import type { ProgramHooks } from './main.js';
import { writeJsonLine, type Painter } from './output.js';
import { progressFor } from './progress.js';
import { addSelectionFlags, storeSelection } from './store-selection.js';

/** Exit status when problems remain (bad data / corrupt store, as in cli.md). */
const PROBLEMS_EXIT_CODE = 65;

interface DoctorFlags {
  repair?: boolean;
  fix?: boolean;
  agent?: string;
  allAgents?: boolean;
  store?: string;
}

export function registerDoctorCommand(program: Command, hooks: ProgramHooks): void {
  const command = program
    .command('doctor')
    .description('check config, sessions.json, transcripts and locks against store-format; --repair fixes what it can, keeping the original bytes')
    .option('--repair', 'fix what can be fixed: torn/malformed transcripts, corrupt sessions.json, orphans, missing transcripts, stale locks, leftovers')
    .option('--fix', 'same as --repair (the name OpenClaw\'s doctor uses)');
  addSelectionFlags(command, { agent: "only this agent's store", allAgents: 'every configured agent and every agent folder in the state dir (the default)', store: 'only this sessions.json file' })
    .addHelpText(
      'after',
      `
Exit status: 0 when healthy (or everything was repaired), 65 when problems remain.
Repairs keep the original bytes: <transcript>.bak-<ts>, sessions.json.corrupt-<ts>.
On a terminal a long check shows a progress line on stderr (never in a pipe or with --json).

Example:
  $ switchboard doctor --repair`,
    )
    .action(hooks.action((ctx: CliContext) => runDoctorCommand(ctx)));
}


async function runDoctorCommand(ctx: CliContext): Promise<number> {
  const flags = ctx.options as unknown as DoctorFlags;
  const selection = storeSelection(flags);
  const loaded = await ctx.config();
  // The config is checked as `config validate` checks it: a doctor that says "ok" to a file every
  // command using the bad setting refuses would send the user looking in the wrong place.
  checkConfigSettings(loaded);
  const progress = progressFor(ctx);
  let report: DoctorReport;
  try {
    report = await runDoctor(await ctx.engine(), {
      ...selection,
      repair: flags.repair === true || flags.fix === true,
      configPath: loaded.path,
      onProgress: ({ agentId, step, done, total }) => progress.update({ label: `${agentId}: ${step}`, done, total }),
    });
  } finally {
    await progress.stop();
  }
  if (ctx.json) writeJsonLine(ctx.streams.stdout, report);
  else ctx.streams.stdout.write(renderReport(report, await ctx.painter()));
  if (!report.ok && !report.repair && report.summary.repairable > 0) {
    ctx.note(`hint: \`switchboard doctor --repair\` can fix ${report.summary.repairable} of ${report.summary.problems} problem(s), keeping the original bytes`);
  }
  if (report.ok) return 0;
  // A file doctor could not read or repair for want of permission or space is an I/O failure
  // (74, as every other command reports it), not a damaged store: it wins over the findings.
  const ioFailure = report.stores.some((store) => store.problems.some((problem) => problem.error?.code === 'IO'));
  return ioFailure ? EXIT_CODES.IO : PROBLEMS_EXIT_CODE;
}

function renderProblem(problem: DoctorProblem, dir: string, paint: Painter): string[] {
  const relative = path.relative(dir, problem.file);
  const where = `${relative === '' || relative.startsWith('..') ? problem.file : relative}${problem.line !== undefined ? `:${problem.line}` : ''}`;
  const mark = problem.repaired === true ? paint.green('fixed') : problem.repairable ? paint.yellow('problem') : paint.red('problem');
  const oneLine = (text: string) => text.replace(/\s*\n\s*/g, ' ');
  const out = [`  ${mark}  ${paint.bold(problem.kind)}  ${where}`, `      ${oneLine(problem.message)}`];
  if (problem.lines !== undefined && problem.lines.length > 1) {
    const more = (problem.count ?? problem.lines.length) - problem.lines.length;
    out.push(`      lines ${problem.lines.join(', ')}${more > 0 ? ` and ${more} more` : ''}`);
  }
  if (problem.repaired === true && problem.action) out.push(`      ${paint.green('repaired:')} ${oneLine(problem.action)}`);
  if (problem.error) out.push(`      ${paint.red('not repaired:')} ${problem.error.code}: ${oneLine(problem.error.message)}`);
  else if (problem.repaired === false && !problem.repairable) out.push(`      ${paint.dim('not repairable by doctor')}`);
  return out;
}

/** Problems grouped by store, then what was repaired, then one summary line. */
export function renderReport(report: DoctorReport, paint: Painter): string {
  const out: string[] = [];
  out.push(`config: ${report.config.path ?? '(none: built-in defaults)'} ${paint.green('ok')}`);
  for (const warning of report.config.warnings) out.push(`  ${paint.yellow('warning:')} ${warning}`);
  for (const store of report.stores) {
    out.push('');
    const counts = store.exists ? `${store.sessions ?? '?'} session(s), ${store.transcripts} transcript(s)` : 'nothing written yet';
    const state = store.problems.length === 0 ? paint.green('ok') : store.problems.every((p) => p.repaired === true) ? paint.green('repaired') : paint.red(`${store.problems.filter((p) => p.repaired !== true).length} problem(s)`);
    out.push(`agent ${paint.bold(store.agentId)}: ${store.storePath} (${counts}) ${state}`);
    for (const warning of store.warnings) out.push(`  ${paint.yellow('warning:')} ${warning}`);
    for (const problem of store.problems) out.push(...renderProblem(problem, store.sessionsDir, paint));
    if (store.changes.length > 0) {
      out.push(`  changes:`);
      for (const change of store.changes) {
        const from = change.from !== undefined ? ` (from ${path.basename(change.from)})` : '';
        out.push(`    ${change.action.padEnd(9)} ${path.relative(store.sessionsDir, change.file) || change.file}${from}`);
      }
    }
  }
  out.push('');
  const { problems, repaired, unrepaired } = report.summary;
  if (problems === 0) out.push(paint.green(`healthy: ${report.summary.stores} store(s) checked, no problems`));
  else if (report.repair) out.push(`${problems} problem(s): ${repaired} repaired, ${unrepaired} left`);
  else out.push(`${problems} problem(s) found, ${report.summary.repairable} repairable with --repair`);
  return `${out.join('\n')}\n`;
}
