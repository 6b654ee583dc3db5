// `switchboard config show|validate`: the effective config with the source of every value, and
// a check of a config file (schema, semantic rules, unknown keys) that exits 0 or 78.

import path from 'node:path';
import type { Command } from 'commander';
import { agentEntryKeys, configProblems, effectiveValues, findUnknownKeys, type LoadedConfig, type SwitchboardConfig } from '../config/index.js';
import { normalizeAgentId } from '../core/index.js';
import { agentRunnerConfig, sharedDmWarnings } from '../engine/index.js';
import { queueConfigWarnings } from '../policy/index.js';
import { resolveRunnerSpec, type RunnerConfigInput } from '../runner/index.js';
import type { CliContext } from './context.js';
import { collectProblem, sessionSettingProblems } from './session-settings.js';
import type { ProgramHooks } from './main.js';
import { printable, writeJsonLine } from './output.js';

export function registerConfigCommands(program: Command, hooks: ProgramHooks): void {
  const config = program
    .command('config')
    .description('inspect and check the configuration')
    .addHelpText('after', '\nExample:\n  $ switchboard config validate --config ~/.switchboard/openclaw.json');

  config
    .command('show')
    .description('print the effective config: every setting, its value, and whether it came from the file or the defaults')
    .addHelpText('after', '\nExample:\n  $ switchboard config show --json | jq \'.values[] | select(.source == "file")\'')
    .action(hooks.action((ctx: CliContext) => runShow(ctx)));

  config
    .command('validate')
    .description('check the config file: syntax, schema (with JSON paths), bindings to unknown agents; warn about unknown keys and DM sessions several senders share')
    .addHelpText('after', '\nExample:\n  $ switchboard config validate --config examples/switchboard.json5 && echo ok')
    .action(hooks.action((ctx: CliContext) => runValidate(ctx)));
}

/** Warnings worth a person's attention: unknown keys and routing oddities. */
async function configWarnings(ctx: CliContext): Promise<string[]> {
  const loaded = await ctx.config();
  const table = await ctx.routingTable();
  // An OpenClaw file has many keys switchboard does not use: one line for all of them, not one each.
  const unused = findUnknownKeys(loaded.config);
  const unusedLine = unused.length > 0 ? [`${unused.length} key${unused.length > 1 ? 's' : ''} not used by switchboard (ignored): ${unused.join(', ')}`] : [];
  return [...table.warnings, ...unusedLine, ...queueConfigWarnings(loaded.config.messages?.queue)];
}

async function runShow(ctx: CliContext): Promise<number> {
  const loaded = await ctx.config();
  const table = await ctx.routingTable();
  const warnings = await configWarnings(ctx);
  const values = effectiveValues(loaded.config, { origins: loaded.origins, unused: findUnknownKeys(loaded.config) });
  const agents = table.agents.length > 0 ? table.agents.map((a) => a.id) : [table.defaultAgentId];
  const files = loaded.layers.map((layer) => layer.file);
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, {
      path: loaded.path,
      files,
      source: loaded.source,
      stateDir: ctx.stateDir,
      generation: table.generation,
      agents,
      defaultAgentId: table.defaultAgentId,
      owner: table.owner ?? null,
      values,
      warnings,
    });
    return 0;
  }
  const paint = await ctx.painter();
  const out: string[] = [];
  out.push(`config: ${loaded.path ?? '(none: built-in defaults)'}`);
  if (files.length > 1) out.push(`layers: ${files.join(' <- ')} (later files win)`);
  out.push(`format: ${table.generation === 'entries' ? 'agents.entries (OpenClaw 2026.9.6 rules)' : 'agents.list'}`);
  out.push(`state dir: ${ctx.stateDir}`);
  out.push(`agents: ${agents.join(', ')} (${table.owner === undefined ? 'no fallback owner: unclaimed messages are refused' : `owner of unclaimed messages: ${table.owner}`})`);
  out.push('');
  const width = Math.min(48, Math.max(0, ...values.map((v) => v.path.length)) + 2);
  for (const value of values) {
    // Keys and values come from the file: a control character or a bidi override in one is shown
    // escaped, never sent to the terminal.
    const rendered = printable(JSON.stringify(value.value) ?? String(value.value));
    const shown = rendered.length > 100 ? `${rendered.slice(0, 97)}...` : rendered;
    const shownPath = printable(value.path);
    // A path longer than the column still gets two spaces before its value.
    const label = shownPath.length + 2 > width ? `${shownPath}  ` : shownPath.padEnd(width);
    const origin = value.source === 'file' && value.file !== undefined ? path.basename(value.file) : value.source;
    const notes = [origin, ...(value.used === false ? ['not used by switchboard'] : []), ...(value.redacted ? ['redacted'] : [])];
    out.push(`${label}${shown}  ${paint.dim(`(${notes.join(', ')})`)}`);
  }
  for (const warning of warnings) out.push(`${paint.yellow('warning:')} ${printable(warning)}`);
  ctx.streams.stdout.write(`${out.join('\n')}\n`);
  return 0;
}

/** The agent ids of either roster, as the engine normalises them. */
function configuredAgentIds(config: SwitchboardConfig): string[] {
  const list = Array.isArray(config.agents?.list) ? config.agents.list.map((agent) => normalizeAgentId(agent?.id)) : [];
  const entries = agentEntryKeys(config.agents?.entries).map((key) => normalizeAgentId(key));
  return [...new Set([...list, ...entries])];
}

/** Everything a command checks when it uses a setting: the policy settings, and the runner specs. */
function semanticProblems(config: SwitchboardConfig): string[] {
  const problems = sessionSettingProblems(config);
  const check = (action: () => unknown, pathOverride?: (path: string) => string) => collectProblem(problems, action, pathOverride);
  // Runners as every command resolves them (runnerFor): each agent's own section over the defaults,
  // for both rosters; the agent's section alone too, so its own problems are named at its path.
  const defaults = config.agents?.defaults?.runner as RunnerConfigInput | undefined;
  check(() => resolveRunnerSpec(undefined, defaults));
  for (const agentId of configuredAgentIds(config)) {
    const own = agentRunnerConfig(config.agents, agentId);
    if (own === undefined) continue;
    check(() => resolveRunnerSpec(own.runner, undefined, own.path));
    check(() => resolveRunnerSpec(own.runner, defaults, own.path));
  }
  return [...new Set(problems)];
}

/** CONFIG_INVALID naming, at its file:line:column, every problem any command would find (`config validate`, `doctor`). */
export function checkConfigSettings(loaded: LoadedConfig): void {
  const problems = semanticProblems(loaded.config);
  if (problems.length > 0) throw configProblems(loaded.path ?? 'config', problems, loaded.layers);
}

async function runValidate(ctx: CliContext): Promise<number> {
  const loaded = await ctx.config();
  checkConfigSettings(loaded);
  // With a store at hand: sessions that several DM senders share under dmScope "main" (privacy).
  const warnings = [...(await configWarnings(ctx)), ...(await sharedDmWarnings(await ctx.engine()))];
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, { ok: true, path: loaded.path, warnings, unusedKeys: findUnknownKeys(loaded.config) });
  } else {
    for (const warning of warnings) ctx.note(`warning: ${printable(warning)}`);
    ctx.streams.stdout.write(`ok: ${loaded.path ?? 'no config file (built-in defaults)'}${warnings.length ? ` (${warnings.length} warning${warnings.length > 1 ? 's' : ''})` : ''}\n`);
  }
  return 0;
}
