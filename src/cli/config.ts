// `switchboard config show|validate`: the effective config with the source of every value, and
// a check of a config file (schema, semantic rules, unknown keys) that exits 0 or 78.

import type { Command } from 'commander';
import { effectiveValues, findUnknownKeys } from '../config/index.js';
import type { CliContext } from './context.js';
import type { ProgramHooks } from './main.js';
import { writeJsonLine } from './output.js';

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
    .description('check the config file: syntax, schema (with JSON paths), bindings to unknown agents; warn about unknown keys')
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
  return [...table.warnings, ...unusedLine];
}

async function runShow(ctx: CliContext): Promise<number> {
  const loaded = await ctx.config();
  const table = await ctx.routingTable();
  const warnings = await configWarnings(ctx);
  const values = effectiveValues(loaded.config);
  const agents = table.agents.length > 0 ? table.agents.map((a) => a.id) : [table.defaultAgentId];
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, { path: loaded.path, source: loaded.source, stateDir: ctx.stateDir, agents, defaultAgentId: table.defaultAgentId, values, warnings });
    return 0;
  }
  const paint = await ctx.painter();
  const out: string[] = [];
  out.push(`config: ${loaded.path ?? '(none: built-in defaults)'}`);
  out.push(`state dir: ${ctx.stateDir}`);
  out.push(`agents: ${agents.join(', ')} (default: ${table.defaultAgentId})`);
  out.push('');
  const width = Math.min(48, Math.max(...values.map((v) => v.path.length)) + 2);
  for (const value of values) {
    const rendered = JSON.stringify(value.value);
    const shown = rendered.length > 100 ? `${rendered.slice(0, 97)}...` : rendered;
    out.push(`${value.path.padEnd(width)}${shown}  ${paint.dim(`(${value.source})`)}`);
  }
  for (const warning of warnings) out.push(`${paint.yellow('warning:')} ${warning}`);
  ctx.streams.stdout.write(`${out.join('\n')}\n`);
  return 0;
}

async function runValidate(ctx: CliContext): Promise<number> {
  const loaded = await ctx.config();
  const warnings = await configWarnings(ctx);
  if (ctx.json) {
    writeJsonLine(ctx.streams.stdout, { ok: true, path: loaded.path, warnings, unusedKeys: findUnknownKeys(loaded.config) });
  } else {
    for (const warning of warnings) ctx.streams.stderr.write(`warning: ${warning}\n`);
    ctx.streams.stdout.write(`ok: ${loaded.path ?? 'no config file (built-in defaults)'}${warnings.length ? ` (${warnings.length} warning${warnings.length > 1 ? 's' : ''})` : ''}\n`);
  }
  return 0;
}
