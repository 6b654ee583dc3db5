// Help that helps: "did you mean" under every command group, `switchboard help <cmd> <sub>`, and
// `switchboard completion bash|zsh|fish` (its generator is loaded only when asked for).

import type { Command } from 'commander';
import type { CliContext } from './context.js';
import type { ProgramHooks } from './main.js';

/**
 * A group with a default subcommand (`sessions` → `list`) hands every unknown word to that
 * default, which then complains about "too many arguments". When the first word is not an option
 * and the default takes no arguments, it was a subcommand typed wrong: say so, with a suggestion.
 */
export function suggestSubcommands(root: Command): void {
  for (const group of allCommands(root)) {
    const defaultName = (group as unknown as { _defaultCommandName?: string | null })._defaultCommandName;
    if (!defaultName) continue;
    group.hook('preSubcommand', (thisCommand, subcommand) => {
      const first = thisCommand.args[0];
      if (subcommand.name() !== defaultName || first === undefined || first.startsWith('-')) return;
      if (subcommand.registeredArguments.length > 0) return;
      if (thisCommand.commands.some((sub) => sub.name() === first || sub.aliases().includes(first))) return; // typed it right
      unknownCommand(thisCommand); // commander's own message and suggestion; exits via exitOverride
    });
  }
}

/** commander's message for an unknown subcommand (with its "did you mean"); public in JS, untyped. */
function unknownCommand(command: Command): never {
  (command as unknown as { unknownCommand(): never }).unknownCommand();
  throw new Error('unreachable: unknownCommand exits');
}

export function allCommands(root: Command): Command[] {
  return [root, ...root.commands.flatMap((command) => allCommands(command))];
}

/**
 * The names of the (sub)commands argv runs, as far as they are known (`['sessions', 'cleanup']`):
 * words after the options that take a value in `valueOptions` are skipped, the walk stops at the
 * first word that names no subcommand.
 */
export function commandPathOf(root: Command, argv: readonly string[], valueOptions: ReadonlySet<string>): string[] {
  const names: string[] = [];
  let command = root;
  for (let i = 2; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') break;
    if (arg.startsWith('-')) {
      if (valueOptions.has(arg)) i++;
      continue;
    }
    const next = command.commands.find((sub) => sub.name() === arg || sub.aliases().includes(arg));
    if (next === undefined) break;
    names.push(next.name());
    command = next;
  }
  return names;
}

/** The subcommands a group offers, for "missing command" errors. */
export function subcommandNames(root: Command, path: readonly string[]): string[] {
  let command = root;
  for (const name of path) command = command.commands.find((sub) => sub.name() === name) ?? command;
  return command.commands.map((sub) => sub.name()).filter((name) => name !== 'help');
}

/** The command a path of names (or aliases) leads to; an unknown name is a usage error with a suggestion. */
function commandAt(root: Command, path: string[]): Command {
  let command = root;
  for (const name of path) {
    const next = command.commands.find((sub) => sub.name() === name || sub.aliases().includes(name));
    if (next === undefined) {
      command.args = [name];
      unknownCommand(command);
    }
    command = next as Command;
  }
  return command;
}

/** `switchboard help [command...]`: commander's own help command only looks one level down. */
export function registerHelpCommand(program: Command, hooks: ProgramHooks): void {
  program.helpCommand(false);
  program
    .command('help')
    .argument('[command...]', 'a command and subcommand, e.g. "sessions cleanup"')
    .description('show the help of a command or subcommand')
    .addHelpText('after', '\nExamples:\n  $ switchboard help sessions cleanup\n  $ switchboard help locks release')
    .action(
      hooks.action(async (_ctx: CliContext, path: string[]) => {
        commandAt(program, path).outputHelp();
        return 0;
      }),
    );
}

export function registerCompletionCommand(program: Command, hooks: ProgramHooks): void {
  program
    .command('completion')
    .argument('<shell>', 'bash, zsh or fish')
    .description('print a shell completion script for commands, subcommands and options')
    .addHelpText(
      'after',
      `
Examples:
  $ switchboard completion bash > ~/.local/share/bash-completion/completions/switchboard
  $ switchboard completion zsh > "\${fpath[1]}/_switchboard"     # then start a new zsh
  $ switchboard completion fish > ~/.config/fish/completions/switchboard.fish
  (or, for the current bash only: source <(switchboard completion bash))`,
    )
    .action(
      hooks.action(async (ctx: CliContext, shell: string) => {
        const { completionScript } = await import('./completion.js');
        ctx.streams.stdout.write(completionScript(program, shell));
        return 0;
      }),
    );
}
