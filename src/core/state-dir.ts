// Which folder is the state dir: `--state-dir`, $SWITCHBOARD_STATE_DIR or ~/.switchboard. A pure
// function of options, environment and home dir, kept here (re-exported by store/) so that the CLI
// can know it at start without loading the store and its lock and atomic-write libraries.

import os from 'node:os';
import path from 'node:path';
import { SwitchboardError } from './errors.js';

export const STATE_DIR_ENV = 'SWITCHBOARD_STATE_DIR';
export const DEFAULT_STATE_DIR_NAME = '.switchboard';

export interface StateDirOptions {
  /** Value of `--state-dir`, if given. */
  stateDir?: string;
  env?: NodeJS.ProcessEnv;
  /** Defaults to os.homedir(); injectable so tests never touch the real home. */
  homeDir?: string;
}

/** Shortens attacker-sized values before they go into messages and details. */
export function previewValue(value: string): string {
  const printable = value.replace(/\0/g, '\\0');
  return printable.length > 80 ? `${printable.slice(0, 77)}...` : printable;
}

/** `~` and `~/x` become the home dir; nothing else is touched (no `~user`). */
export function expandHome(value: string, homeDir: string = os.homedir()): string {
  if (value === '~') return homeDir;
  if (value.startsWith('~/') || value.startsWith(`~${path.sep}`)) return path.join(homeDir, value.slice(2));
  return value;
}

/** The state dir from `--state-dir`, else $SWITCHBOARD_STATE_DIR, else ~/.switchboard (absolute). */
export function resolveStateDir(options: StateDirOptions = {}): string {
  const env = options.env ?? process.env;
  const homeDir = options.homeDir ?? os.homedir();
  // As `--state-dir " "` is refused: a blank value would be a folder named by spaces in the current directory.
  const fromEnv = env[STATE_DIR_ENV];
  if (fromEnv !== undefined && fromEnv !== '' && fromEnv.trim() === '' && (options.stateDir === undefined || options.stateDir === '')) {
    throw new SwitchboardError('USAGE', `${STATE_DIR_ENV} is blank`, { hint: `unset it, or set it to the state directory's path` });
  }
  const chosen =
    options.stateDir !== undefined && options.stateDir !== ''
      ? options.stateDir
      : env[STATE_DIR_ENV] !== undefined && env[STATE_DIR_ENV] !== ''
        ? env[STATE_DIR_ENV]
        : path.join(homeDir, DEFAULT_STATE_DIR_NAME);
  if (chosen.includes('\0')) {
    throw new SwitchboardError('BAD_INPUT', 'state dir contains a NUL byte', { details: { stateDir: previewValue(chosen) } });
  }
  return path.resolve(expandHome(chosen, homeDir));
}
