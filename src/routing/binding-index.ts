// The binding index a route is resolved with: per channel, one lookup per tier finds a chain of
// candidate bindings in config order. Built once per config by compileRoutingTable.

import type { CompiledBinding, RouteTarget } from './routing-table.js';

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
  /** The binding's position in the config and its target, read here so a route never loads the binding. */
  index: number;
  target: RouteTarget;
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

function nodeOf(binding: CompiledBinding, account: number, next: IndexNode | undefined): IndexNode {
  return {
    binding,
    index: binding.index,
    target: binding.target,
    tier: binding.tier,
    account,
    constrained: binding.guildId !== undefined || binding.teamId !== undefined || binding.roles.length > 0,
    next,
    split: undefined,
  };
}

function prepend<K>(chains: Map<K, IndexNode>, key: K, binding: CompiledBinding, account: number): void {
  chains.set(key, nodeOf(binding, account, chains.get(key)));
}

/** Gives the first node of a chain longer than CROWDED its split by account (sub-chains in config order). */
function splitIfCrowded(head: IndexNode | undefined): void {
  let length = 0;
  for (let node = head; node !== undefined && length <= CROWDED; node = node.next) length++;
  if (head === undefined || length <= CROWDED) return;
  const heads = new Map<number, IndexNode>();
  const tails = new Map<number, IndexNode>();
  for (let node: IndexNode | undefined = head; node !== undefined; node = node.next) {
    const copy = nodeOf(node.binding, node.account, undefined);
    const tail = tails.get(node.account);
    if (tail === undefined) heads.set(node.account, copy);
    else tail.next = copy;
    tails.set(node.account, copy);
  }
  head.split = heads;
}

const NO_KEYS = new Uint32Array(0);

/** Indexes compiled bindings (in config order) by channel, tier and key. */
export function buildBindingIndex(bindings: readonly CompiledBinding[]): BindingIndex {
  const accountCodes = new Map<string, number>();
  const channels = new Map<string, ChannelIndex>();
  // Backwards, each binding going in front of its chain: chains come out in config order.
  for (let i = bindings.length - 1; i >= 0; i--) {
    const binding = bindings[i]!;
    let channel = channels.get(binding.channel);
    if (!channel) {
      channel = {
        peerExact: { direct: new Map(), group: new Map() },
        peerWildcard: { direct: undefined, group: undefined },
        guild: new Map(),
        team: new Map(),
        plainByAccount: new Map(),
        plainWildcard: undefined,
        filter: NO_KEYS,
      };
      channels.set(binding.channel, channel);
    }
    let account = ANY_ACCOUNT;
    if (binding.accountPattern !== '*') {
      account = accountCodes.get(binding.accountPattern) ?? accountCodes.size;
      if (account === accountCodes.size) accountCodes.set(binding.accountPattern, account);
    }
    switch (binding.tier) {
      case 1:
        prepend(binding.peer!.peerClass === 'direct' ? channel.peerExact.direct : channel.peerExact.group, binding.peer!.id, binding, account);
        break;
      case 3:
        if (binding.peer!.peerClass === 'direct') channel.peerWildcard.direct = nodeOf(binding, account, channel.peerWildcard.direct);
        else channel.peerWildcard.group = nodeOf(binding, account, channel.peerWildcard.group);
        break;
      case 4:
      case 5:
        prepend(channel.guild, binding.guildId!, binding, account);
        break;
      case 6:
        prepend(channel.team, binding.teamId!, binding, account);
        break;
      case 7:
        prepend(channel.plainByAccount, account, binding, account);
        break;
      default:
        channel.plainWildcard = nodeOf(binding, account, channel.plainWildcard);
    }
  }
  for (const channel of channels.values()) {
    for (const chains of [channel.peerExact.direct, channel.peerExact.group, channel.guild, channel.team]) for (const head of chains.values()) splitIfCrowded(head);
    splitIfCrowded(channel.peerWildcard.direct);
    splitIfCrowded(channel.peerWildcard.group);
    channel.filter = filterOf([
      [KEY_KIND.direct, channel.peerExact.direct],
      [KEY_KIND.group, channel.peerExact.group],
      [KEY_KIND.guild, channel.guild],
      [KEY_KIND.team, channel.team],
    ]);
  }
  return { channels, accountCodes };
}
