// The one error type of switchboard: a stable `code` for programs and an `exitCode` for shells.
// Code paths branch on `code`; messages are for people and may change.

export const EXIT_CODES = {
  INTERNAL: 1,
  USAGE: 2,
  BAD_MESSAGE: 65,
  BAD_INPUT: 65,
  STORE_CORRUPT: 65,
  NOT_FOUND: 66,
  UNAVAILABLE: 69,
  IO: 74,
  SESSION_BUSY: 75,
  STORE_BUSY: 75,
  CONFIG_INVALID: 78,
  /** Several agents, explicit ownership, no system agent, and no binding claims the message. */
  NO_OWNER: 78,
} as const;

export type ErrorCode = keyof typeof EXIT_CODES;

export interface ErrorOptions {
  hint?: string;
  cause?: unknown;
  /** Extra machine-readable facts (line numbers, JSON paths, lock holders). */
  details?: Record<string, unknown>;
}

export class SwitchboardError extends Error {
  readonly code: ErrorCode;
  readonly exitCode: number;
  readonly hint?: string;
  readonly details?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: ErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SwitchboardError';
    this.code = code;
    this.exitCode = EXIT_CODES[code];
    this.hint = options.hint;
    this.details = options.details;
  }

  toJSON(): { code: ErrorCode; message: string; hint?: string } {
    return this.hint === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, hint: this.hint };
  }
}

/**
 * What to do about an error that carries no hint of its own, by code: the JSON error shape of the
 * CLI contract always has `hint`, so scripts and people get a next step for every failure.
 */
const DEFAULT_HINTS: Record<ErrorCode, string> = {
  INTERNAL: 'this is a bug in switchboard; please report it with the stack printed by --verbose',
  USAGE: 'run `switchboard --help` for usage',
  BAD_MESSAGE: 'fix the input at the line and field the message names; the other lines were handled',
  BAD_INPUT: 'fix the input the message names, then run the command again',
  STORE_CORRUPT: 'run `switchboard doctor` to see what is damaged; `switchboard doctor --repair` fixes it, keeping the original bytes',
  NOT_FOUND: 'check the name or path; `switchboard sessions --all-agents` lists the sessions',
  UNAVAILABLE: 'start the server with `switchboard serve` (same --state-dir), or give the right --socket',
  IO: 'check free disk space and the permissions of the state dir, then retry',
  SESSION_BUSY: 'another process holds the lock: try again, or see who holds it with `switchboard locks`',
  STORE_BUSY: 'another process holds the lock: try again, or see who holds it with `switchboard locks`',
  CONFIG_INVALID: 'fix the config, then check it with `switchboard config validate`',
  NO_OWNER: 'name an owner: a binding for this channel, or agents.defaults.systemAgent; see `switchboard route explain`',
};

/** The error's own hint, else the default next step for its code. */
export function hintOf(error: SwitchboardError): string {
  return error.hint ?? DEFAULT_HINTS[error.code];
}

export function isSwitchboardError(err: unknown, code?: ErrorCode): err is SwitchboardError {
  return err instanceof SwitchboardError && (code === undefined || err.code === code);
}

/** Wraps anything thrown into a SwitchboardError; unknown errors become INTERNAL (a bug). */
export function toSwitchboardError(err: unknown): SwitchboardError {
  if (err instanceof SwitchboardError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new SwitchboardError('INTERNAL', `internal error: ${message}`, {
    cause: err,
    hint: 'this is a bug in switchboard; please report it with the stack printed by --verbose',
  });
}

/**
 * File-system errors (an errno code: ENOTDIR, EACCES, …) are IO (exit 74), not bugs; anything
 * else as toSwitchboardError. For steps that walk the state dir (doctor, maintain, cleanup), where
 * a folder replaced by a file is the user's business, not an INTERNAL error.
 */
export function asSwitchboardError(err: unknown): SwitchboardError {
  if (err instanceof SwitchboardError) return err;
  const errno = errnoOf(err);
  // Node's own error codes (ERR_INVALID_ARG_TYPE, …) are bugs, not the file system's answer.
  if (errno !== undefined && /^E[A-Z0-9]+$/.test(errno)) return new SwitchboardError('IO', err instanceof Error ? err.message : String(err), { cause: err, details: { errno } });
  return toSwitchboardError(err);
}

/** The errno code of a file-system error (`ENOENT`, `ENOSPC`, …), if it has one. */
export function errnoOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** A failed file-system operation as IO (exit 74); the errno is appended and kept in details. */
export function ioError(message: string, cause: unknown, details: Record<string, unknown> = {}): SwitchboardError {
  if (cause instanceof SwitchboardError) return cause;
  const code = errnoOf(cause);
  return new SwitchboardError('IO', code === undefined ? message : `${message}: ${code}`, {
    cause,
    details: { ...details, errno: code ?? null },
  });
}
