// Which message a transcript record holds, as the duplicate memory names it (core duplicateKey):
// the route it came from and its messageId. The records are the truth the memory is rebuilt from
// (journal recovery, doctor), so a record carries the route's parts: `channel` always, `accountId`
// unless it is the default account, `peer` when the message had one, `threadId` when it had one.
// Records written before routes were part of the key carry no `accountId`/`peer`; their keys name
// the default account and no peer, so they only match each other (they age out of the window).

import { DEFAULT_ACCOUNT_ID, duplicateKey, type DuplicateRoute } from '../core/index.js';

/** Writes the route fields a record (or a queued item, which becomes one) carries besides `channel` and `threadId`. */
export function addRecordRoute(target: { accountId?: string; peer?: { kind: string; id: string } }, route: { accountId?: string; peer?: { kind: string; id: string } }): void {
  if (route.accountId !== undefined && route.accountId !== DEFAULT_ACCOUNT_ID) target.accountId = route.accountId;
  if (route.peer !== undefined) target.peer = { kind: route.peer.kind, id: route.peer.id };
}

/** The duplicate-memory key of a record (a user `message` or a `custom` heartbeat/system one), if it names a messageId. */
export function duplicateKeyOfRecord(record: object): string | undefined {
  const { message, data } = record as { message?: unknown; data?: unknown };
  const fields = (message ?? data) as Record<string, unknown> | null | undefined;
  if (typeof fields !== 'object' || fields === null) return undefined;
  const { messageId, channel, accountId, peer, threadId } = fields;
  if (typeof messageId !== 'string' || messageId === '' || typeof channel !== 'string') return undefined;
  const route: DuplicateRoute = { channel, accountId: typeof accountId === 'string' ? accountId : DEFAULT_ACCOUNT_ID };
  const { kind, id } = (peer ?? {}) as { kind?: unknown; id?: unknown };
  if (typeof kind === 'string' && typeof id === 'string') route.peer = { kind, id };
  if (typeof threadId === 'string' && threadId !== '') route.threadId = threadId;
  return duplicateKey(route, messageId);
}
