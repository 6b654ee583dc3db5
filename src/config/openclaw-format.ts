// Which OpenClaw config generation a file is (the `agents.list` shape or the `agents.entries` shape
// of OpenClaw 2026.9.6), and the strict rules of the current one, checked once when the file loads.

import { normalizeAgentId } from '../core/index.js';
import type { SwitchboardConfig } from './types.js';

export type ConfigGeneration = 'list' | 'entries';

/** Roster keys as OpenClaw 2026.9.6 accepts them (case-insensitive; a leading `_` is allowed). */
export const ROSTER_KEY = /^[a-z0-9_][a-z0-9_-]{0,63}$/i;

/**
 * Keys OpenClaw 2026.9.6 accepts inside an `agents.entries` entry. An entry is strict there, so a
 * key outside this list (`runner`, `routing`, `bindings`, a typo) makes OpenClaw refuse the file;
 * switchboard refuses it too rather than route on a config its owner cannot start.
 */
const ENTRY_KEYS = new Set([
  'default', 'name', 'description', 'workspace', 'cwd', 'agentDir', 'model', 'utilityModel', 'decisionModel', 'models',
  'modelPolicy', 'thinkingDefault', 'verboseDefault', 'toolProgressDetail', 'reasoningDefault', 'fastModeDefault',
  'contextInjection', 'bootstrapMaxChars', 'bootstrapTotalMaxChars', 'experimental', 'skills', 'subagents', 'embeddedAgent',
  'params', 'runtime', 'memory', 'humanDelay', 'typingMode', 'tts', 'skillsLimits', 'contextLimits', 'heartbeat', 'identity',
  'groupChat', 'sandbox', 'tools',
]);

/** Binding keys of the current format; `incognito` is switchboard's own (a per-binding privacy switch). */
const ROUTE_BINDING_KEYS = new Set(['type', 'agentId', 'comment', 'match', 'session', 'incognito']);
const ACP_BINDING_KEYS = new Set(['type', 'agentId', 'comment', 'match', 'acp']);
const ACP_KEYS = new Set(['mode', 'label', 'cwd', 'backend']);
const PEER_KINDS = new Set(['direct', 'group', 'channel']);

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function keyPath(prefix: string, key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${prefix}.${key}` : `${prefix}[${JSON.stringify(key)}]`;
}

/**
 * The file's shape decides which rules apply: `agents.entries` is the current format, `agents.list`
 * the older one. With neither roster, an empty `agents: {}` or keys only the current format knows
 * (ownership, systemAgent, per-binding session or type, groupScope) mark it as current; anything
 * else (no agents section, or one with only defaults) keeps today's rules.
 */
export function configGeneration(config: SwitchboardConfig): ConfigGeneration {
  const agents = config.agents;
  if (isRecord(agents)) {
    if (agents.entries !== undefined) return 'entries';
    if (agents.list !== undefined) return 'list';
    if (agents.ownership !== undefined) return 'entries';
    // An empty agents section: no roster in either shape, which OpenClaw 2026.9.6 loads as { main: {} }.
    if (Object.keys(agents).length === 0) return 'entries';
    if (isRecord(agents.defaults) && agents.defaults.systemAgent !== undefined) return 'entries';
  }
  if (isRecord(config.session) && config.session.groupScope !== undefined) return 'entries';
  const bindings = Array.isArray(config.bindings) ? config.bindings : [];
  return bindings.some((b) => isRecord(b) && (b.session !== undefined || b.type !== undefined || b.acp !== undefined)) ? 'entries' : 'list';
}

/**
 * The keys of `agents.entries` that are agents: every own key but `__proto__`, which OpenClaw
 * 2026.9.6's loader drops (a roster of only that key is "no configured agent"; beside others it is
 * no agent). JSON.parse makes it an own key like any other, so it is left out here, once.
 */
export function agentEntryKeys(entries: unknown): string[] {
  return isRecord(entries) ? Object.keys(entries).filter((key) => key !== '__proto__') : [];
}

/** Agent ids a binding or the system agent may name: the roster, or `main` when there is none. */
export function rosterIds(config: SwitchboardConfig): string[] {
  const keys = agentEntryKeys(config.agents?.entries);
  return keys.length > 0 ? keys.map((key) => normalizeAgentId(key)) : ['main'];
}

/**
 * Where switchboard's own keys may sit in an agents.entries config: `ownKeyAllowed(path)` is true
 * when the key at that JSON path comes from a switchboard overlay (a file that `extends` the
 * OpenClaw file), so the OpenClaw file itself stays one OpenClaw accepts.
 */
export type OwnKeyCheck = (path: string[]) => boolean;

function checkRoster(config: SwitchboardConfig, problems: string[], ownKeyAllowed: OwnKeyCheck): void {
  const agents = config.agents ?? {};
  if (agents.list !== undefined && agents.entries !== undefined) {
    problems.push('agents.list: not allowed next to agents.entries (the current format keeps its roster in agents.entries only)');
  }
  const explicit = agents.ownership === 'explicit';
  const entries = isRecord(agents.entries) ? agents.entries : {};
  const keys = agentEntryKeys(entries);
  if (keys.length === 0 && explicit) {
    problems.push('agents.entries: must contain at least one agent when agents.ownership is "explicit"');
  } else if (keys.length === 0 && Object.hasOwn(entries, '__proto__')) {
    problems.push('agents.entries: must contain at least one agent ("__proto__" is no agent id: OpenClaw drops that key)');
  }
  const firstKeyById = new Map<string, string>();
  const marked: string[] = [];
  for (const key of keys) {
    const path = keyPath('agents.entries', key);
    if (!ROSTER_KEY.test(key)) {
      problems.push(`${path}: invalid agent id key ${JSON.stringify(key)} (use letters, digits, _ and -, at most 64, no spaces)`);
      continue;
    }
    const id = normalizeAgentId(key);
    const first = firstKeyById.get(id);
    if (first !== undefined) problems.push(`${path}: keys "${first}" and "${key}" are the same agent id "${id}"; rename one`);
    else firstKeyById.set(id, key);
    const entry = entries[key];
    if (!isRecord(entry)) continue; // the schema already reports a non-object entry
    for (const entryKey of Object.keys(entry)) {
      if (ENTRY_KEYS.has(entryKey)) continue;
      if (entryKey === 'runner') {
        // switchboard's own key: fine in the overlay, refused where OpenClaw would read it.
        if (!ownKeyAllowed(['agents', 'entries', key, 'runner'])) {
          problems.push(`${keyPath(path, entryKey)}: OpenClaw refuses this key in its config; put the agent's runner in a switchboard.json5 that extends this file`);
        }
        continue;
      }
      problems.push(`${keyPath(path, entryKey)}: unknown key in an agent entry`);
    }
    if (entry.default === true) marked.push(key);
  }
  if (marked.length > 1) problems.push(`agents.entries: at most one entry may have default: true (found ${marked.length}: ${marked.join(', ')})`);
  if (explicit && marked.length > 0) {
    problems.push(`agents.ownership: "explicit" cannot be combined with default: true (on ${marked.join(', ')}); name the owner in agents.defaults.systemAgent.agentId instead`);
  }
  if (keys.length > 1 && marked.length === 0 && !explicit) {
    problems.push('agents.ownership: several agents need agents.ownership: "explicit" (owners named by bindings and agents.defaults.systemAgent) or exactly one entry with default: true');
  }
  const system = agents.defaults?.systemAgent?.agentId;
  if (typeof system === 'string' && !rosterIds(config).includes(normalizeAgentId(system))) {
    problems.push(`agents.defaults.systemAgent.agentId: agent "${system}" is not in agents.entries (known: ${rosterIds(config).join(', ')})`);
  }
}

function checkMatch(match: unknown, path: () => string, problems: string[]): void {
  if (!isRecord(match)) return; // the schema reports a missing or non-object match
  if (typeof match.channel !== 'string') problems.push(`${path()}.channel: is required`);
  for (const key of MATCH_TEXT_KEYS) {
    if (match[key] !== undefined && typeof match[key] !== 'string') problems.push(`${path()}.${key}: must be a string`);
  }
  if (Array.isArray(match.roles) && match.roles.some((role) => typeof role !== 'string')) problems.push(`${path()}.roles: must be an array of strings`);
  const peer = match.peer;
  if (isRecord(peer)) {
    if (!PEER_KINDS.has(peer.kind as string)) problems.push(`${path()}.peer.kind: must be one of direct, group, channel, got ${JSON.stringify(peer.kind)}`);
    if (typeof peer.id !== 'string') problems.push(`${path()}.peer.id: must be a string`);
  }
}

const MATCH_TEXT_KEYS = ['accountId', 'guildId', 'teamId'] as const;

/** Every binding is checked, so paths are written only for a binding with a problem (10 000 bindings load in a blink). */
function checkBindings(config: SwitchboardConfig, problems: string[]): void {
  if (!Array.isArray(config.bindings)) return;
  const known = rosterIds(config);
  const knownSet = new Set(known);
  const bindings = config.bindings;
  for (let i = 0; i < bindings.length; i++) {
    const binding = bindings[i];
    if (!isRecord(binding)) continue;
    const path = (): string => `bindings[${i}]`;
    const acp = binding.type === 'acp';
    const allowed = acp ? ACP_BINDING_KEYS : ROUTE_BINDING_KEYS;
    for (const key in binding) {
      if (Object.hasOwn(binding, key) && !allowed.has(key)) problems.push(`${keyPath(path(), key)}: unknown key in ${acp ? 'an acp' : 'a route'} binding`);
    }
    const agentId = binding.agentId;
    // OpenClaw's exceptions: the literal "main" always routes to main; a blank id (which
    // normalises to main) stands for the fallback owner.
    if (typeof agentId === 'string' && agentId !== 'main' && !knownSet.has(normalizeAgentId(agentId))) {
      problems.push(`${path()}.agentId: agent "${agentId}" is not in agents.entries (known: ${known.join(', ')})`);
    }
    checkMatch(binding.match, () => `${path()}.match`, problems);
    if (acp) {
      const peerId = isRecord(binding.match) && isRecord(binding.match.peer) ? binding.match.peer.id : undefined;
      if (typeof peerId !== 'string' || peerId.trim() === '') problems.push(`${path()}.match.peer.id: an acp binding must name one conversation`);
      if (isRecord(binding.acp)) {
        for (const key of Object.keys(binding.acp)) if (!ACP_KEYS.has(key)) problems.push(`${keyPath(`${path()}.acp`, key)}: unknown key`);
      }
    }
  }
}

/**
 * The rules OpenClaw 2026.9.6 enforces when it loads an `agents.entries` config (routing.md), as
 * `path: problem` lines. The ignored mainKey is a routing warning, reported by the routing table.
 */
export function checkCurrentFormat(config: SwitchboardConfig, ownKeyAllowed: OwnKeyCheck = () => false): string[] {
  const problems: string[] = [];
  checkRoster(config, problems, ownKeyAllowed);
  checkBindings(config, problems);
  return problems;
}
