// `sessions pin-route` / `unpin-route`: naming whose messages move a session's address (its
// owner), for a shared main session whose first DM peer was not the right one.

import { SwitchboardError } from '../core/index.js';
import { messageAddress, setDeliveryAddress, type DeliveryOwner, type PlannedEntry } from '../policy/index.js';
import type { RouteInput } from '../routing/index.js';
import { checkSessionEntry, updateSessionStore } from '../store/index.js';
import { storeWriteOptions, type EngineContext } from './context.js';
import type { StoreSelection } from './session-list.js';
import { findSession } from './sessions.js';

export interface PinRouteOutcome {
  sessionKey: string;
  deliveryOwner: DeliveryOwner | null;
  deliveryContext: PlannedEntry['deliveryContext'] | null;
}

/**
 * Pins the session's owner to one route (and moves its address there at once), or with `route`
 * null unpins it: the address stays, and on a shared session the next DM sender claims it.
 */
export async function pinDeliveryRoute(ctx: EngineContext, keyOrId: string, route: RouteInput | null, selection: StoreSelection = {}): Promise<PinRouteOutcome> {
  const found = await findSession(ctx, keyOrId, selection);
  if (route && !route.peer) throw new SwitchboardError('USAGE', 'pin-route needs --peer KIND:ID: the owner is a peer of that channel');
  let outcome: PinRouteOutcome | undefined;
  await updateSessionStore(found.location.storePath, (store) => {
    const entry = store[found.key] as PlannedEntry | undefined;
    if (!entry) throw new SwitchboardError('NOT_FOUND', `session "${found.key}" was deleted meanwhile`);
    checkSessionEntry(found.location.storePath, found.key, entry);
    if (route?.peer) {
      const owner: DeliveryOwner = { channel: route.channel, peer: { kind: route.peer.kind, id: route.peer.id }, accountId: route.accountId, pinned: true };
      entry.deliveryOwner = owner;
      const chatType = route.peer.kind === 'direct' ? 'direct' : route.peer.kind === 'channel' ? 'channel' : 'group';
      setDeliveryAddress(entry, messageAddress({ channel: route.channel, accountId: route.accountId, peer: route.peer, threadId: route.threadId })!, chatType);
    } else {
      delete entry.deliveryOwner;
    }
    entry.updatedAt = ctx.clock.now();
    outcome = { sessionKey: found.key, deliveryOwner: entry.deliveryOwner ?? null, deliveryContext: entry.deliveryContext ?? null };
  }, storeWriteOptions(ctx));
  return outcome!;
}
