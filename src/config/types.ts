// The shape of a switchboard config: a compatible subset of OpenClaw's openclaw.json.
// Everything is optional; defaults are applied by the readers in routing/ and policy/.

export type PeerKind = 'direct' | 'group' | 'channel';
export type DmScope = 'main' | 'per-peer' | 'per-channel-peer' | 'per-account-channel-peer';
export type ResetMode = 'none' | 'daily' | 'idle';

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
  incognito?: boolean;
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
}

export interface SendPolicyRule {
  action: 'allow' | 'deny';
  match?: { channel?: string; chatType?: string; keyPrefix?: string; rawKeyPrefix?: string };
}

export interface SessionConfig {
  dmScope?: DmScope;
  mainKey?: string;
  identityLinks?: Record<string, string[]>;
  store?: string;
  reset?: ResetConfig;
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
    defaults?: { runner?: RunnerConfig; maxConcurrent?: number; [key: string]: unknown };
    list?: AgentConfig[];
    [key: string]: unknown;
  };
  bindings?: Binding[];
  session?: SessionConfig;
  messages?: { queue?: QueueConfig; [key: string]: unknown };
  cron?: { maxConcurrent?: number; sessionRetention?: string | number | false; [key: string]: unknown };
  [key: string]: unknown;
}
