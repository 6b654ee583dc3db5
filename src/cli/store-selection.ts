// Which stores a command works on: `--agent`, `--all-agents` or `--store` (one of them at most),
// the same flags and the same rule for sessions, doctor and cleanup.

import { InvalidArgumentError, Option, type Command } from 'commander';
import { SwitchboardError } from '../core/index.js';
import type { StoreSelection } from '../engine/index.js';

export interface SelectionFlags {
  agent?: string;
  allAgents?: boolean;
  store?: string;
}

/** A blank value would quietly be read as the default agent (or the current folder). */
function nonBlank(what: string): (value: string) => string {
  return (value) => {
    if (value.trim() === '') throw new InvalidArgumentError(`${what} is empty`);
    return value;
  };
}

/** Adds the three flags; `help` words them for a command whose default differs. */
export function addSelectionFlags(command: Command, help: { agent?: string; allAgents?: string; store?: string } = {}): Command {
  return command
    .addOption(new Option('--agent <id>', help.agent ?? "the agent's store (default: the default agent)").argParser(nonBlank('the agent id')))
    .option('--all-agents', help.allAgents ?? 'every configured agent')
    .addOption(new Option('--store <path>', help.store ?? 'a sessions.json file').argParser(nonBlank('the sessions.json path')));
}

export function storeSelection(flags: SelectionFlags): StoreSelection {
  const chosen = [flags.agent !== undefined, flags.allAgents === true, flags.store !== undefined].filter(Boolean).length;
  if (chosen > 1) throw new SwitchboardError('USAGE', '--agent, --all-agents and --store exclude each other');
  return { agent: flags.agent, allAgents: flags.allAgents, storePath: flags.store };
}
