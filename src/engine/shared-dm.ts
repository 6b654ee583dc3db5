// Where the shared-DM privacy rule (policy/shared-dm.ts) meets the store: `config validate` and
// `doctor` (its step in doctor/shared-dm.ts) check every session of the stores, `route explain`
// the route it explains.

import { sharedDmWarning } from '../policy/index.js';
import type { ResolvedRoute, RouteInput } from '../routing/index.js';
import { readSessionStore, type SessionStore, type StoreLocation } from '../store/index.js';
import { knownAgentIds, storeFor, type EngineContext } from './context.js';

async function readOrEmpty(storePath: string): Promise<SessionStore> {
  try {
    return await readSessionStore(storePath);
  } catch {
    return {}; // a damaged store is doctor's finding, not this check's
  }
}

/** One warning per session of `store` that several DM senders share under the config's `dmScope: "main"`. */
export function storeSharedDmWarnings(ctx: EngineContext, store: SessionStore): string[] {
  const dmScope = ctx.config.session?.dmScope;
  const warnings: string[] = [];
  for (const [key, entry] of Object.entries(store)) {
    const warning = sharedDmWarning({ dmScope, sessionKey: key, senders: (entry as { dmSenders?: unknown }).dmSenders });
    if (warning !== null) warnings.push(warning.message);
  }
  return warnings;
}

/** The same for every session of the given stores (the configured agents' by default): `config validate`. */
export async function sharedDmWarnings(ctx: EngineContext, locations: StoreLocation[] = knownAgentIds(ctx).map((id) => storeFor(ctx, id))): Promise<string[]> {
  const warnings: string[] = [];
  for (const location of locations) warnings.push(...storeSharedDmWarnings(ctx, await readOrEmpty(location.storePath)));
  return warnings;
}

/**
 * The warning for one explained route: the senders its session has heard from, plus the direct
 * peer being explained (so the warning comes before a second person's first message, not after).
 */
export async function routeSharedDmWarning(ctx: EngineContext, route: ResolvedRoute, input: RouteInput): Promise<string | null> {
  if (route.dmScope !== 'main') return null;
  const store = await readOrEmpty(storeFor(ctx, route.agentId).storePath);
  const recorded = (Object.hasOwn(store, route.sessionKey) ? (store[route.sessionKey] as { dmSenders?: unknown }).dmSenders : undefined) ?? [];
  const senders = Array.isArray(recorded) ? [...recorded] : [];
  if (input.peer?.kind === 'direct' && route.sessionKey === route.mainSessionKey) senders.push({ channel: route.channel, id: input.peer.id });
  return sharedDmWarning({ dmScope: route.dmScope, sessionKey: route.sessionKey, senders })?.message ?? null;
}
