// The agents a config defines and the fallback owner the `default` tier routes to, for both config
// generations: `agents.list` (first or default-marked agent) and `agents.entries` (explicit owners).

import { normalizeAgentId } from '../core/index.js';
import type { Binding, SwitchboardConfig } from '../config/types.js';
import { agentEntryKeys } from '../config/index.js';

export interface AgentInfo {
  id: string;
  configIndex: number;
  isDefault: boolean;
}

/** Why the fallback owner is who it is; `undefined` when there is none (the message is refused). */
export type OwnerSource = 'default-marker' | 'first-agent' | 'implicit-main' | 'sole-agent' | 'system-agent' | 'legacy-marker';

export interface Roster {
  agents: AgentInfo[];
  /** The agent of the `default` tier and of blank binding agent ids; undefined: no owner. */
  owner?: string;
  ownerSource?: OwnerSource;
  warnings: string[];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** `agents.list`: the first entry with `default: true`, else the first entry, else `main`. */
export function listRoster(config: SwitchboardConfig): Roster {
  const list = Array.isArray(config.agents?.list) ? config.agents!.list : [];
  const agents = list.map((agent, configIndex) => ({ id: normalizeAgentId(agent?.id), configIndex, isDefault: agent?.default === true }));
  const markedAll = agents.filter((agent) => agent.isDefault);
  const marked = markedAll[0];
  const warnings: string[] = [];
  const seen = new Map<string, number>();
  agents.forEach((agent, index) => {
    const first = seen.get(agent.id);
    if (first === undefined) seen.set(agent.id, index);
    else warnings.push(`agents.list[${first}] and agents.list[${index}] are both agent "${agent.id}" (ids are compared lower-cased and cleaned): they are one agent`);
  });
  // OpenClaw 2026.9.6 moves such a file's list to agents.entries when it starts (and 2026.7.1
  // refuses it): the current rules would then apply, not these. Said, not guessed at.
  const currentOnly = [
    config.agents?.ownership !== undefined ? 'agents.ownership' : undefined,
    config.agents?.defaults?.systemAgent !== undefined ? 'agents.defaults.systemAgent' : undefined,
    config.session?.groupScope !== undefined ? 'session.groupScope' : undefined,
  ].filter((key): key is string => key !== undefined);
  if (currentOnly.length > 0) {
    warnings.push(`${currentOnly.join(', ')} ${currentOnly.length > 1 ? 'belong' : 'belongs'} to the agents.entries format and ${currentOnly.length > 1 ? 'are' : 'is'} ignored with agents.list; OpenClaw 2026.9.6 would move this file to agents.entries and route by those rules (move the roster to agents.entries to have them here)`);
  }
  if (markedAll.length > 1) warnings.push(`several agents are marked default: true (${markedAll.map((a) => a.id).join(', ')}): "${marked!.id}" (the first) is used`);
  if (agents.length > 1 && !marked) {
    warnings.push(`several agents (${agents.map((a) => a.id).join(', ')}) and none marked default: "${agents[0].id}" (the first) is used`);
  }
  if (marked) return { agents, owner: marked.id, ownerSource: 'default-marker', warnings };
  if (agents.length > 0) return { agents, owner: agents[0].id, ownerSource: 'first-agent', warnings };
  return { agents, owner: 'main', ownerSource: 'implicit-main', warnings };
}

/**
 * The agents a binding in `agents.list` can name: the entries with a non-blank id. OpenClaw's
 * resolver leaves a blank-id entry out when it looks a binding's agent up (its loader still counts
 * that entry as `main`), so a binding to `main` that only a blank entry defines goes to the default
 * agent. With no such entry at all, every binding keeps its own id (which the loader allows only as `main`).
 */
export function namedListAgents(config: SwitchboardConfig): Set<string> {
  const list = Array.isArray(config.agents?.list) ? config.agents!.list : [];
  return new Set(list.filter((agent) => typeof agent?.id === 'string' && agent.id.trim() !== '').map((agent) => normalizeAgentId(agent.id)));
}

/**
 * `agents.entries` (OpenClaw 2026.9.6): no "first agent wins". The owner is the system agent under
 * explicit ownership, the agent with the legacy `default: true` marker among several, or the only
 * agent; otherwise there is none and a message no binding claims is refused.
 */
export function entriesRoster(config: SwitchboardConfig): Roster {
  const raw = isRecord(config.agents?.entries) ? config.agents!.entries! : {};
  const keys = agentEntryKeys(raw);
  const agents: AgentInfo[] = keys.length > 0
    ? keys.map((key, configIndex) => ({ id: normalizeAgentId(key), configIndex, isDefault: isRecord(raw[key]) && raw[key].default === true }))
    : [{ id: 'main', configIndex: -1, isDefault: false }];
  const ids = agents.map((agent) => agent.id);
  const explicit = config.agents?.ownership === 'explicit';
  if (explicit) {
    const system = config.agents?.defaults?.systemAgent?.agentId;
    const systemId = typeof system === 'string' && system.trim() !== '' ? normalizeAgentId(system) : undefined;
    if (systemId !== undefined && ids.includes(systemId)) return { agents, owner: systemId, ownerSource: 'system-agent', warnings: [] };
    return agents.length === 1 ? { agents, owner: ids[0], ownerSource: 'sole-agent', warnings: [] } : { agents, warnings: [] };
  }
  const marked = agents.filter((agent) => agent.isDefault);
  // The marker only decides among several agents; a system agent is then ignored for routing.
  if (agents.length > 1 && marked.length === 1) return { agents, owner: marked[0].id, ownerSource: 'legacy-marker', warnings: [] };
  if (agents.length === 1) return { agents, owner: ids[0], ownerSource: keys.length === 0 ? 'implicit-main' : 'sole-agent', warnings: [] };
  return { agents, warnings: [] };
}

/** OpenClaw's channel aliases, folded when a `channels.<id>` section is matched with bindings. */
const CHANNEL_ALIASES: Record<string, string> = {
  lark: 'feishu', qywx: 'wecom', wework: 'wecom', 'enterprise-wechat': 'wecom', gchat: 'googlechat', 'google-chat': 'googlechat',
  teams: 'msteams', 'nc-talk': 'nextcloud-talk', nc: 'nextcloud-talk', weixin: 'openclaw-weixin', wechat: 'openclaw-weixin',
  微信: 'openclaw-weixin', zl: 'zalo', zaloclawbot: 'openclaw-zaloclawbot', 'zalo-clawbot': 'openclaw-zaloclawbot', yb: 'yuanbao',
  'tencent-yuanbao': 'yuanbao', 元宝: 'yuanbao', zlu: 'zalouser', imsg: 'imessage', 'internet-relay-chat': 'irc', 'twitch-chat': 'twitch',
};
/** Keys of `channels` that hold shared settings, not a channel. */
const CHANNEL_METADATA_KEYS = new Set(['defaults', 'modelByChannel']);

function channelIdOf(raw: unknown): string {
  const id = typeof raw === 'string' ? raw.trim().toLowerCase() : '';
  return CHANNEL_ALIASES[id] ?? id;
}

function isChannelWide(binding: Binding, channelId: string): boolean {
  const match = binding.match as unknown;
  if (!isRecord(match) || channelIdOf(match.channel) !== channelId) return false;
  const blank = (value: unknown) => typeof value !== 'string' || value.trim() === '';
  return (typeof match.accountId === 'string' && match.accountId.trim() === '*') && match.peer === undefined &&
    blank(match.guildId) && blank(match.teamId) && (!Array.isArray(match.roles) || match.roles.length === 0);
}

export interface SectionBinding {
  binding: Binding;
  /** The `channels` key it was added for (what `route explain` shows). */
  section: string;
}

/**
 * With the legacy `default: true` marker, OpenClaw keeps every enabled `channels.<id>` section
 * with its old owner by appending a channel-wide binding when the config has none for it.
 */
export function channelSectionBindings(config: SwitchboardConfig, roster: Roster): SectionBinding[] {
  if (roster.ownerSource !== 'legacy-marker' || !isRecord(config.channels)) return [];
  const routeBindings = (Array.isArray(config.bindings) ? config.bindings : []).filter((b) => isRecord(b) && b.type !== 'acp');
  const sections = new Map<string, string>();
  for (const [key, value] of Object.entries(config.channels)) {
    const id = channelIdOf(key);
    if (id === '' || CHANNEL_METADATA_KEYS.has(key.trim()) || (isRecord(value) && value.enabled === false)) continue;
    if (!sections.has(id)) sections.set(id, key);
  }
  return [...sections.keys()]
    .sort()
    .filter((id) => !routeBindings.some((binding) => isChannelWide(binding, id)))
    .map((id) => ({ binding: { agentId: roster.owner!, match: { channel: id, accountId: '*' } }, section: sections.get(id)! }));
}
