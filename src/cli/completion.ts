// `switchboard completion bash|zsh|fish`: shell scripts generated from the commander tree, so a
// command or option added later completes without anyone editing a script. Loaded on demand.

import type { Command, Option } from 'commander';
import { SwitchboardError } from '../core/index.js';

interface Level {
  /** Words typed so far that lead here ("" for the top, "sessions", "sessions cleanup"). */
  path: string;
  subcommands: string[];
  options: { long: string; short?: string; takesValue: boolean; description: string }[];
}

function optionsOf(command: Command, inherited: readonly Option[]): Level['options'] {
  return [...command.options, ...inherited]
    .filter((option) => option.long !== undefined && !option.hidden)
    .map((option) => ({ long: option.long as string, short: option.short, takesValue: option.required || option.optional, description: option.description }));
}

function levels(program: Command): Level[] {
  const out: Level[] = [];
  const walk = (command: Command, path: string[]) => {
    // Global options are accepted after any subcommand, so every level offers them.
    out.push({
      path: path.join(' '),
      subcommands: command.commands.map((sub) => sub.name()),
      options: optionsOf(command, command === program ? [] : program.options),
    });
    for (const sub of command.commands) walk(sub, [...path, sub.name()]);
  };
  walk(program, []);
  return out;
}

/** Shell words are our own command and option names: letters, digits, dashes; nothing to quote. */
function words(level: Level): string {
  const flags = level.options.flatMap((o) => (o.short ? [o.long, o.short] : [o.long]));
  return [...level.subcommands, ...flags].join(' ');
}

function shellCase(all: Level[], pick: (level: Level) => string, indent: string): string {
  return all.map((level) => `${indent}"${level.path}") echo "${pick(level)}" ;;`).join('\n');
}

/** The two lookup functions bash and zsh share: a command path's subcommands, and its words. */
function lookups(all: Level[]): string {
  return `_switchboard_subs() {
  case "$1" in
${shellCase(all, (l) => l.subcommands.join(' '), '    ')}
  esac
}
_switchboard_words() {
  case "$1" in
${shellCase(all, words, '    ')}
  esac
}`;
}

function bash(all: Level[]): string {
  return `# switchboard completion for bash: source <(switchboard completion bash)
${lookups(all)}
_switchboard() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" path="" w i subs
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    subs=" $(_switchboard_subs "$path") "
    [[ "$subs" == *" $w "* ]] && path="\${path:+$path }$w"
  done
  COMPREPLY=($(compgen -W "$(_switchboard_words "$path")" -- "$cur"))
}
complete -o default -F _switchboard switchboard
`;
}

function zsh(all: Level[]): string {
  return `#compdef switchboard
# switchboard completion for zsh: switchboard completion zsh > "\${fpath[1]}/_switchboard"
${lookups(all)}
_switchboard() {
  local path_="" w i subs
  for ((i = 2; i < CURRENT; i++)); do
    w="\${words[i]}"
    [[ "$w" == -* ]] && continue
    subs=" $(_switchboard_subs "$path_") "
    [[ "$subs" == *" $w "* ]] && path_="\${path_:+$path_ }$w"
  done
  compadd -- \${=$(_switchboard_words "$path_")}
}
if [[ "\${zsh_eval_context[-1]}" == loadautofunc ]]; then
  _switchboard "$@"
else
  compdef _switchboard switchboard
fi
`;
}

function fishQuote(text: string): string {
  return `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

function fish(all: Level[]): string {
  const lines = [
    '# switchboard completion for fish: switchboard completion fish > ~/.config/fish/completions/switchboard.fish',
    'function __switchboard_subs',
    '    switch "$argv[1]"',
    ...all.filter((l) => l.subcommands.length > 0).flatMap((l) => [`        case ${fishQuote(l.path)}`, `            printf "%s\\n" ${l.subcommands.join(' ')}`]),
    '    end',
    'end',
    'function __switchboard_at',
    '    set -l path ""',
    '    for w in (commandline -opc)[2..-1]',
    "        string match -q -- '-*' $w; and continue",
    '        if contains -- $w (__switchboard_subs "$path")',
    '            set path (string trim -- "$path $w")',
    '        end',
    '    end',
    '    test "$path" = "$argv[1]"',
    'end',
    'complete -c switchboard -f',
  ];
  for (const level of all) {
    const at = `-n ${fishQuote(`__switchboard_at ${fishQuote(level.path)}`)}`;
    if (level.subcommands.length > 0) lines.push(`complete -c switchboard ${at} -a ${fishQuote(level.subcommands.join(' '))}`);
    for (const option of level.options) {
      const short = option.short ? ` -s ${option.short.slice(1)}` : '';
      lines.push(`complete -c switchboard ${at} -l ${option.long.slice(2)}${short}${option.takesValue ? ' -r' : ''} -d ${fishQuote(option.description)}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

export function completionScript(program: Command, shell: string): string {
  const all = levels(program);
  if (shell === 'bash') return bash(all);
  if (shell === 'zsh') return zsh(all);
  if (shell === 'fish') return fish(all);
  throw new SwitchboardError('USAGE', `no completion for shell "${shell}": use bash, zsh or fish`);
}
