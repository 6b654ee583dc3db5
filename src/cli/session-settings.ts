// The settings every engine command checks before it acts — reset blocks and triggers, the
// display time zone, maintenance, the maintain schedule, cron retention — the same checks
// `config validate` makes (it adds the runner specs). A module of its own so that loading it
// loads those checks, not the whole policy layer.

import { configProblems, type LoadedConfig, type SwitchboardConfig } from '../config/index.js';
import { toSwitchboardError } from '../core/index.js';
import { displayTimeZone, resolveCronRetentionMs, resolveMaintainEveryMs, resolveMaintenanceSettings, validateResetConfig } from '../policy/index.js';

/** A failed check as `json.path: problem` (checks word their messages `path problem` or `path: problem`). */
export function problemOf(err: unknown, pathOverride?: (path: string) => string): string {
  const error = toSwitchboardError(err);
  const path = typeof error.details?.path === 'string' ? error.details.path : undefined;
  if (path === undefined || !error.message.startsWith(path)) return error.message;
  const shown = pathOverride ? pathOverride(path) : path;
  return `${shown}: ${error.message.slice(path.length).replace(/^:?\s*/, '')}`;
}

/** Runs `action`, adding what it throws to `problems` as `json.path: problem`. */
export function collectProblem(problems: string[], action: () => unknown, pathOverride?: (path: string) => string): void {
  try {
    action();
  } catch (err) {
    problems.push(problemOf(err, pathOverride));
  }
}

/** Every problem of the policy settings, each area on its own so that all are listed, not the first. */
export function sessionSettingProblems(config: SwitchboardConfig): string[] {
  const problems: string[] = [];
  const check = (action: () => unknown) => collectProblem(problems, action);
  const session = config.session ?? {};
  check(() => validateResetConfig({ reset: session.reset }));
  for (const [name, block] of Object.entries(session.resetByType ?? {})) check(() => validateResetConfig({ resetByType: { [name]: block } }));
  for (const [name, block] of Object.entries(session.resetByChannel ?? {})) check(() => validateResetConfig({ resetByChannel: { [name]: block } }));
  check(() => validateResetConfig({ resetTriggers: session.resetTriggers }));
  check(() => displayTimeZone(config));
  for (const [key, value] of Object.entries(session.maintenance ?? {})) check(() => resolveMaintenanceSettings({ [key]: value }));
  check(() => resolveMaintenanceSettings(session.maintenance));
  check(() => resolveMaintainEveryMs(session.maintenance));
  check(() => resolveCronRetentionMs(config.cron));
  return [...new Set(problems)];
}

/**
 * CONFIG_INVALID naming every bad policy setting at its `file:line:column`. A setting is checked
 * before any command acts, not when it is first used: a typo in `maxDiskBytes` used to switch the
 * enforce-mode caps off for `ingest` without a word, while `sessions cleanup` refused the file.
 */
export function checkSessionSettings(loaded: LoadedConfig): void {
  const problems = sessionSettingProblems(loaded.config);
  if (problems.length > 0) throw configProblems(loaded.path ?? 'config', problems, loaded.layers);
}
