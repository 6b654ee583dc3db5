// The shape of a switchboard config: a compatible subset of OpenClaw's openclaw.json.
// Everything is optional; defaults are applied by the readers in routing/ and policy/.

export type PeerKind = 'direct' | 'group' | 'channel';
export type DmScope = 'main' | 'per-peer' | 'per-channel-peer' | 'per-account-channel-peer';
export type ResetMode = 'none' | 'daily' | 'idle';
/** How group and channel peers are keyed (OpenClaw 2026.9.6 configs): one session per group, or the main session. */
export type GroupScope = 'per-group' | 'main';

export interface BindingMatch {
  channel?: string;
  accountId?: string;
  peer?: { kind?: string; id?: string | number };
  guildId?: string;
  teamId?: string;
  roles?: string[];
}

export interface Binding {
  agentId: string;
  match: BindingMatch;
  /** `route` (default) or `acp`; acp bindings attach a conversation to a runtime and never route. */
  type?: 'route' | 'acp';
  comment?: string;
  /** Per-binding session scope (OpenClaw 2026.9.6): wins over the global value when this binding matches. */
  session?: { dmScope?: DmScope; groupScope?: GroupScope };
  incognito?: boolean;
  [key: string]: unknown;
}

/** One entry of `agents.entries` (the current roster shape): the key is the agent id. */
export interface AgentEntry {
  default?: boolean;
  name?: string;
  [key: string]: unknown;
}

export interface RunnerConfig {
  command?: string[] | string;
  timeoutSeconds?: number;
  [key: string]: unknown;
}

export interface AgentConfig {
  id: string;
  default?: boolean;
  name?: string;
  runner?: RunnerConfig;
  [key: string]: unknown;
}

export interface ResetConfig {
  mode?: ResetMode;
  atHour?: number;
  idleMinutes?: number;
  timezone?: string;
  /** Only in `session.reset`: one agent turn on the old instance before any reset (`true` = defaults). */
  beforeReset?: boolean | { prompt?: string; timeoutSeconds?: number } | null;
}

export interface SendPolicyRule {
  action: 'allow' | 'deny';
  match?: { channel?: string; chatType?: string; keyPrefix?: string; rawKeyPrefix?: string };
}

export interface SessionConfig {
  dmScope?: DmScope;
  groupScope?: GroupScope;
  mainKey?: string;
  identityLinks?: Record<string, string[]>;
  store?: string;
  reset?: ResetConfig;
  /** Legacy: `session.reset.idleMinutes` where that is unset; without `session.reset`, mode idle. */
  idleMinutes?: number;
  resetByType?: { direct?: ResetConfig; dm?: ResetConfig; group?: ResetConfig; thread?: ResetConfig };
  resetByChannel?: Record<string, ResetConfig>;
  resetTriggers?: string[];
  writeLock?: { acquireTimeoutMs?: number; staleMs?: number; maxHoldMs?: number };
  sendPolicy?: { rules?: SendPolicyRule[]; default?: 'allow' | 'deny' };
  maintenance?: {
    mode?: 'warn' | 'enforce';
    pruneAfter?: string | number;
    maxEntries?: number;
    rotateBytes?: string | number;
    resetArchiveRetention?: string | number | false;
    maxDiskBytes?: string | number;
    highWaterBytes?: string | number;
    /** How often `serve` runs `maintain` (default 1h); false or ≤ 0 turns it off. */
    maintainEvery?: string | number | false;
  };
  [key: string]: unknown;
}

export interface QueueConfig {
  mode?: string;
  byChannel?: Record<string, string>;
  debounceMs?: number;
  debounceMsByChannel?: Record<string, number>;
  debounceMaxWaitMs?: number;
  cap?: number;
  drop?: string;
}

export interface SwitchboardConfig {
  agents?: {
    defaults?: { runner?: RunnerConfig; maxConcurrent?: number; systemAgent?: { agentId?: string }; userTimezone?: string; [key: string]: unknown };
    list?: AgentConfig[];
    entries?: Record<string, AgentEntry>;
    ownership?: 'explicit';
    [key: string]: unknown;
  };
  bindings?: Binding[];
  session?: SessionConfig;
  messages?: { queue?: QueueConfig; [key: string]: unknown };
  channels?: Record<string, unknown>;
  cron?: { maxConcurrent?: number; sessionRetention?: string | number | false; [key: string]: unknown };
  [key: string]: unknown;
}
