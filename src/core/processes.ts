// Processes of this host as /proc shows them (Linux; elsewhere every reader says "unknown"): the
// lock code tells a live holder from a dead one or a reused pid, and runners are killed with every
// process of their session.

import { readFileSync, readdirSync } from 'node:fs';

export interface ProcStat {
  /** Field 3: R, S, D, Z (zombie), X (dead), T (stopped)… */
  state: string;
  /** Field 6: the process's session id. */
  session: number;
  /** Field 22: start time in clock ticks since boot; with the pid, it names one process for good. */
  startTicks: number;
}

/** /proc/<pid>/stat's state, session and start time; null where there is no such process or no /proc. */
export function readProcStat(pid: number | 'self'): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // Field 2 (comm) is in parentheses and may itself hold spaces and parentheses.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const session = Number(fields[3]);
  const startTicks = Number(fields[19]);
  if (fields[0] === undefined || !Number.isSafeInteger(session) || !Number.isSafeInteger(startTicks)) return null;
  return { state: fields[0], session, startTicks };
}

let ownStartTicks: number | null | undefined;

/** This process's start time in clock ticks (readProcStat's), read once; null without /proc. */
export function thisProcessStartTicks(): number | null {
  if (ownStartTicks === undefined) ownStartTicks = readProcStat('self')?.startTicks ?? null;
  return ownStartTicks;
}

/**
 * Whether `pid` runs on this host and is the process that started at `startTicks` (when given).
 * It is, unless /proc proves otherwise: a zombie has exited (it can do nothing more), a different
 * start time is another process that reused the pid. Without /proc or without a start time,
 * "alive" is the conservative reading; so is EPERM (a process of another user).
 */
export function isProcessAlive(pid: number, startTicks: number | null): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const proc = readProcStat(pid);
  if (proc === null) return true;
  if (proc.state === 'Z' || proc.state === 'X') return false;
  if (startTicks !== null && startTicks !== proc.startTicks) return false;
  return true;
}

/**
 * SIGKILLs the process group `sid` and every other process of session `sid` (whose leader it
 * is: runners are spawned detached). A job in a group of its own (`set -m`, setpgid) is still in
 * the session; only a process that made a session of its own (setsid, a daemon) leaves it.
 */
export function killProcessSession(sid: number): void {
  try {
    process.kill(-sid, 'SIGKILL');
  } catch {
    // no such group (any more)
  }
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return;
  }
  for (const pid of pids) {
    if (readProcStat(Number(pid))?.session !== sid) continue;
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // gone meanwhile, or not ours to signal
    }
  }
}
