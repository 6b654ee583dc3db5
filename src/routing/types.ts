// Types shared by the routing layer: the normalised route input, the resolved route and
// the explain trace. Field names of ResolvedRoute are a public contract (cli.md).

import type { DmScope, GroupScope, PeerKind } from '../config/types.js';

export interface Peer {
  kind: PeerKind;
  id: string;
}

export interface RouteInput {
  channel: string;
  accountId: string;
  peer?: Peer;
  parentPeer?: Peer;
  guildId?: string;
  teamId?: string;
  memberRoleIds: readonly string[];
  threadId?: string;
}

export type MatchedBy =
  | 'binding.peer'
  | 'binding.peer.parent'
  | 'binding.peer.wildcard'
  | 'binding.guild+roles'
  | 'binding.guild'
  | 'binding.team'
  | 'binding.account'
  | 'binding.channel'
  | 'default';

export interface ResolvedRoute {
  agentId: string;
  channel: string;
  accountId: string;
  dmScope: DmScope;
  sessionKey: string;
  mainSessionKey: string;
  lastRoutePolicy: 'main' | 'session';
  matchedBy: MatchedBy;
}

export interface KeyDerivation {
  dmScope: DmScope;
  /** agents.entries configs only: how group and channel peers were keyed. */
  groupScope?: GroupScope;
  mainKey: string;
  identityLink?: { canonical: string; entry: string };
  threadSuffix?: string;
  explicit?: boolean;
}

export type CandidateResult = 'matched' | 'rejected' | 'not-reached';

export interface TraceCandidate {
  index: number;
  agentId: string;
  match: unknown;
  /** For a binding OpenClaw adds for an enabled `channels.<id>` section (legacy default marker): that section. */
  origin?: string;
  result: CandidateResult;
  reason?: string;
}

export interface TraceTier {
  tier: number;
  matchedBy: MatchedBy;
  skipped?: string;
  candidates: TraceCandidate[];
}
