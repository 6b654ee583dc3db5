// The binding index a route is resolved with: per channel, one lookup per tier finds a chain of
// candidate bindings in config order. Built once per config by compileRoutingTable.

import type { CompiledBinding } from './routing-table.js';

/** The account code of a `*` binding: it fits every input account. */
export const ANY_ACCOUNT = -1;
/** The account code of an input account no binding names: only `*` bindings fit it. */
export const UNKNOWN_ACCOUNT = -2;

/**
 * A chain longer than this (one id bound on many accounts) is also split by account, so a route
 * scans its own account's bindings and the `*` ones rather than every account's.
 */
export const CROWDED = 16;

/**
 * One binding in a chain, holding what a route checks before it needs the binding itself. Chains
 * are linked nodes rather than arrays, and the nodes of a channel are allocated together: with a
 * large config, every object a lookup touches is a likely cache miss, and that was what made the
 * cost of a route grow with the number of bindings.
 */
export interface IndexNode {
  binding: CompiledBinding;
  /** The tier the binding competes in (a guild chain holds tiers 4 and 5). */
  tier: number;
  /** The code of its account pattern (BindingIndex.accountCodes), or ANY_ACCOUNT. */
  account: number;
  /** Whether it has guild, team or role constraints left to check. */
  constrained: boolean;
  /** The next binding of the chain in config order. */
  next: IndexNode | undefined;
  /** On the first node of a crowded chain only: the chain's bindings split by account code. */
  split: Map<number, IndexNode> | undefined;
}

/**
 * One channel's bindings by the key each tier looks up, with a bit filter over those keys: most
 * ids a route looks up (strangers, threads, unbound guilds) are in no binding, and in a large
 * table a Map lookup that finds nothing still costs several cache misses; the filter answers
 * most of those from one small array.
 */
export interface ChannelIndex {
  /** Tiers 1 and 2: exact peers by class, then id (the input's id string is looked up as is). */
  peerExact: { direct: Map<string, IndexNode>; group: Map<string, IndexNode> };
  /** Tier 3. */
  peerWildcard: { direct: IndexNode | undefined; group: IndexNode | undefined };
  /** Tiers 4 and 5 in one chain per guild id, so one lookup serves both. */
  guild: Map<string, IndexNode>;
  /** Tier 6. */
  team: Map<string, IndexNode>;
  /** Tier 7: channel-wide bindings of one named account, by account code. */
  plainByAccount: Map<number, IndexNode>;
  /** Tier 8: channel-wide bindings of every account (`*`). */
  plainWildcard: IndexNode | undefined;
  /** One bit per keyHash of every key above (set when some key hashes there). */
  filter: Uint32Array;
}

/** Which map a key is looked up in: part of its hash, so equal ids of different kinds differ. */
export const KEY_KIND = { direct: 0x9e3779b9, group: 0x85ebca6b, guild: 0xc2b2ae35, team: 0x27d4eb2f } as const;

/** A 32-bit hash of a key of one kind (FNV-1a over UTF-16 code units, then mixed). */
export function keyHash(kind: number, key: string): number {
  let h = kind;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  return (h ^ (h >>> 12)) >>> 0;
}

/** False when no key of `kind` equal to `key` is in the channel (true may still be a miss). */
export function mayHold(channel: ChannelIndex, kind: number, key: string): boolean {
  const filter = channel.filter;
  const hash = keyHash(kind, key);
  return (filter[(hash >>> 5) & (filter.length - 1)]! & (1 << (hash & 31))) !== 0;
}

/** About 16 bits per key: with one probe, a key that is absent passes ~6% of the time. */
function filterOf(maps: [number, Map<string, unknown>][]): Uint32Array {
  let count = 0;
  for (const [, map] of maps) count += map.size;
  let words = 2;
  while (words * 32 < count * 16) words *= 2;
  const filter = new Uint32Array(words);
  for (const [kind, map] of maps) {
    for (const key of map.keys()) {
      const hash = keyHash(kind, key);
      filter[(hash >>> 5) & (words - 1)]! |= 1 << (hash & 31);
    }
  }
  return filter;
}

export interface BindingIndex {
  channels: Map<string, ChannelIndex>;
  /** Every named account pattern of the config → a small integer (compared instead of strings). */
  accountCodes: Map<string, number>;
}

/** Bindings of one channel grouped by key, in config order, before they are chained. */
interface ChannelLists {
  peerDirect: Map<string, CompiledBinding[]>;
  peerGroup: Map<string, CompiledBinding[]>;
  wildcardDirect: CompiledBinding[];
  wildcardGroup: CompiledBinding[];
  guild: Map<string, CompiledBinding[]>;
  team: Map<string, CompiledBinding[]>;
  plainByAccount: Map<number, CompiledBinding[]>;
  plainWildcard: CompiledBinding[];
}

function pushTo<K>(map: Map<K, CompiledBinding[]>, key: K, binding: CompiledBinding): void {
  const list = map.get(key);
  if (list) list.push(binding);
  else map.set(key, [binding]);
}

function chainOf(list: CompiledBinding[], accountCodes: Map<string, number>, splitCrowded = true): IndexNode | undefined {
  let head: IndexNode | undefined;
  for (let i = list.length - 1; i >= 0; i--) {
    const binding = list[i]!;
    head = {
      binding,
      tier: binding.tier,
      account: binding.accountPattern === '*' ? ANY_ACCOUNT : accountCodes.get(binding.accountPattern)!,
      constrained: binding.guildId !== undefined || binding.teamId !== undefined || binding.roles.length > 0,
      next: head,
      split: undefined,
    };
  }
  if (splitCrowded && head !== undefined && list.length > CROWDED) {
    const byAccount = new Map<number, CompiledBinding[]>();
    for (let node: IndexNode | undefined = head; node !== undefined; node = node.next) pushTo(byAccount, node.account, node.binding);
    head.split = new Map([...byAccount].map(([account, bindings]) => [account, chainOf(bindings, accountCodes, false)!]));
  }
  return head;
}

function chainAll<K>(lists: Map<K, CompiledBinding[]>, accountCodes: Map<string, number>): Map<K, IndexNode> {
  const chains = new Map<K, IndexNode>();
  for (const [key, list] of lists) chains.set(key, chainOf(list, accountCodes)!);
  return chains;
}

/** Indexes compiled bindings (in config order) by channel, tier and key. */
export function buildBindingIndex(bindings: readonly CompiledBinding[]): BindingIndex {
  const accountCodes = new Map<string, number>();
  const lists = new Map<string, ChannelLists>();
  for (const binding of bindings) {
    if (binding.accountPattern !== '*' && !accountCodes.has(binding.accountPattern)) accountCodes.set(binding.accountPattern, accountCodes.size);
    let channel = lists.get(binding.channel);
    if (!channel) {
      channel = { peerDirect: new Map(), peerGroup: new Map(), wildcardDirect: [], wildcardGroup: [], guild: new Map(), team: new Map(), plainByAccount: new Map(), plainWildcard: [] };
      lists.set(binding.channel, channel);
    }
    switch (binding.tier) {
      case 1:
        pushTo(binding.peer!.peerClass === 'direct' ? channel.peerDirect : channel.peerGroup, binding.peer!.id, binding);
        break;
      case 3:
        (binding.peer!.peerClass === 'direct' ? channel.wildcardDirect : channel.wildcardGroup).push(binding);
        break;
      case 4:
      case 5:
        pushTo(channel.guild, binding.guildId!, binding);
        break;
      case 6:
        pushTo(channel.team, binding.teamId!, binding);
        break;
      case 7:
        pushTo(channel.plainByAccount, accountCodes.get(binding.accountPattern)!, binding);
        break;
      default:
        channel.plainWildcard.push(binding);
    }
  }
  const channels = new Map<string, ChannelIndex>();
  for (const [name, channel] of lists) {
    channels.set(name, {
      peerExact: { direct: chainAll(channel.peerDirect, accountCodes), group: chainAll(channel.peerGroup, accountCodes) },
      peerWildcard: { direct: chainOf(channel.wildcardDirect, accountCodes), group: chainOf(channel.wildcardGroup, accountCodes) },
      guild: chainAll(channel.guild, accountCodes),
      team: chainAll(channel.team, accountCodes),
      plainByAccount: chainAll(channel.plainByAccount, accountCodes),
      plainWildcard: chainOf(channel.plainWildcard, accountCodes),
      filter: filterOf([
        [KEY_KIND.direct, channel.peerDirect],
        [KEY_KIND.group, channel.peerGroup],
        [KEY_KIND.guild, channel.guild],
        [KEY_KIND.team, channel.team],
      ]),
    });
  }
  return { channels, accountCodes };
}
