// What the engine needs to act: the loaded config and its routing table, the state dir and the
// clock. Built once per command (or per server) and shared by every engine operation.

import path from 'node:path';
import { SwitchboardError, type Clock } from '../core/index.js';
import type { SwitchboardConfig } from '../config/index.js';
import type { RoutingTable } from '../routing/index.js';
import { isTranscriptFileName, resolveInside, resolveStoreLocation, resolveThreadTranscriptPath, resolveTranscriptPath, transcriptFileNameIn, type LockOptions, type StoreLocation, type UpdateSessionStoreOptions } from '../store/index.js';

export interface EngineContext {
  stateDir: string;
  config: SwitchboardConfig;
  table: RoutingTable;
  clock: Clock;
  /**
   * Root of the memory volume that holds incognito sessions (`serve` mounts one). Without it an
   * incognito message is routed and nothing is kept (a one-shot `ingest`).
   */
  incognitoRoot?: string;
  /**
   * Where diagnostics of the work go (a runner's stderr lines): the command's stderr, unless
   * `--quiet`. Without it they are dropped. The sink escapes what a terminal would act on.
   */
  log?: (line: string) => void;
}

/** The sessions store of one agent (honours `session.store` with `{agentId}`). */
export function storeFor(ctx: EngineContext, agentId: string): StoreLocation {
  return resolveStoreLocation(ctx.stateDir, agentId, { storeTemplate: ctx.config.session?.store });
}

/** Where an agent's incognito sessions live: the same layout, inside the memory volume. */
export function incognitoStoreFor(incognitoRoot: string, agentId: string): StoreLocation {
  return resolveStoreLocation(incognitoRoot, agentId);
}

/**
 * The agent a command means when it names none (a bare session key, a listing without --agent):
 * the fallback owner, the same agent a bare `sessionKey` on a message gets. An agents.entries config
 * with several agents and no owner has none, and guessing one would act on the wrong store: that is
 * NO_OWNER, asking for the agent (as OpenClaw's own CLI asks for --agent).
 */
export function commandAgentId(ctx: EngineContext, what: string): string {
  if (ctx.table.owner !== undefined) return ctx.table.owner;
  throw noCommandAgent(ctx, what);
}

/** The NO_OWNER error of commandAgentId: `what` names what lacks its agent. */
export function noCommandAgent(ctx: EngineContext, what: string): SwitchboardError {
  const agents = ctx.table.agents.map((agent) => agent.id);
  return new SwitchboardError('NO_OWNER', `${what} names no agent, and with several agents (${agents.join(', ')}) and no fallback owner there is no default one`, {
    hint: 'name it: pass --agent <id> (or --all-agents), or write the key as agent:<id>:<key>; or set agents.defaults.systemAgent.agentId',
    details: { agents },
  });
}

/** The NOT_FOUND of a session key or id that no store holds (`sessions show`, `queue …`, `locks release`). */
export function noSuchSession(wanted: string): SwitchboardError {
  return new SwitchboardError('NOT_FOUND', `no session "${wanted}"`, { hint: 'list sessions with `switchboard sessions --all-agents`' });
}

/** Every agent that may have a store: the configured agents, else the default agent. */
export function knownAgentIds(ctx: EngineContext): string[] {
  const ids = ctx.table.agents.map((agent) => agent.id);
  return ids.length > 0 ? [...new Set(ids)] : [ctx.table.defaultAgentId];
}

/**
 * A transcript file named by an entry, resolved inside its sessions folder. Only a transcript
 * name passes (never sessions.json, a lock, an archive or a path elsewhere): a name from a damaged
 * row is STORE_CORRUPT here rather than a write into the wrong file. OpenClaw's absolute paths
 * pass when they point into this very folder.
 */
export function transcriptPathIn(location: StoreLocation, sessionFile: string): string {
  const name = typeof sessionFile === 'string' ? transcriptFileNameIn(sessionFile, location.sessionsDir) : null;
  if (name === null || !isTranscriptFileName(name)) {
    const name: unknown = sessionFile;
    const shown = typeof name === 'string' ? `"${name.slice(0, 80)}"` : typeof name;
    throw new SwitchboardError('STORE_CORRUPT', `${shown} in ${location.storePath} is not a transcript file name`, {
      hint: 'run `switchboard doctor` to see the entry that names it',
      details: { path: location.storePath, sessionFile: shown },
    });
  }
  return resolveInside(location.sessionsDir, name);
}

/** Locks, lock tombstones and archives add at most this many bytes to a transcript's name. */
const NAME_SUFFIX_RESERVE_BYTES = 64;
const MAX_FILE_NAME_BYTES = 255;

/**
 * The transcript file name of a new instance (thread sessions get a topic suffix). A name that
 * leaves no room for the suffixes its lock and archives will add is refused now (BAD_INPUT), not
 * when the first lock or archive of that session fails.
 */
export function transcriptNameFor(location: StoreLocation, sessionId: string, threadId?: string): string {
  const name = path.basename(threadId ? resolveThreadTranscriptPath(location.sessionsDir, sessionId, threadId) : resolveTranscriptPath(location.sessionsDir, sessionId));
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes > MAX_FILE_NAME_BYTES - NAME_SUFFIX_RESERVE_BYTES) {
    throw new SwitchboardError('BAD_INPUT', `the transcript name would be ${bytes} bytes long; at most ${MAX_FILE_NAME_BYTES - NAME_SUFFIX_RESERVE_BYTES} leave room for its lock and archive suffixes`, {
      details: { bytes },
    });
  }
  return name;
}

/**
 * The options of every engine write of a store: the store lock waits as long as configured
 * (`session.writeLock.acquireTimeoutMs`). Before, `sessions reset`, `delete`, `pin` and the queue
 * commands waited a fixed 30 s while ingest honoured the setting.
 */
export function storeWriteOptions(ctx: EngineContext, extra: Omit<UpdateSessionStoreOptions, 'lock'> = {}): UpdateSessionStoreOptions {
  return { ...extra, lock: { acquireTimeoutMs: ctx.config.session?.writeLock?.acquireTimeoutMs } };
}

/** Session write-lock settings from `session.writeLock`. */
export function sessionLockOptions(ctx: EngineContext, owner?: { sessionKey?: string; runId?: string }): LockOptions {
  const writeLock = ctx.config.session?.writeLock ?? {};
  return {
    busyCode: 'SESSION_BUSY',
    acquireTimeoutMs: writeLock.acquireTimeoutMs,
    staleMs: writeLock.staleMs,
    maxHoldMs: writeLock.maxHoldMs,
    owner,
  };
}
