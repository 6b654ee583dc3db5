// The JSON text of a resolved route, built directly: `route resolve --batch` prints one per input,
// and the generic serialiser (walking the object's keys) was a large share of its time.

import type { ResolvedRoute } from './types.js';

/**
 * Whether JSON.stringify would write `text` as is between quotes: no quote, backslash, control
 * character or UTF-16 surrogate (a lone one is escaped; a pair is left to JSON.stringify too, as
 * telling them apart is not worth it here). Ids and keys almost always pass.
 */
function plain(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return false;
  }
  return true;
}

/** JSON.stringify of a string, without its cost when nothing needs escaping. */
export function jsonString(text: string): string {
  return plain(text) ? `"${text}"` : JSON.stringify(text);
}

/**
 * Byte for byte what `JSON.stringify(route)` gives (same keys, same order; every field is always a
 * string). dmScope, lastRoutePolicy and matchedBy come from fixed sets of plain words and need no
 * escaping.
 */
export function routeJson(route: ResolvedRoute): string {
  return (
    `{"agentId":${jsonString(route.agentId)},"channel":${jsonString(route.channel)},"accountId":${jsonString(route.accountId)},` +
    `"dmScope":"${route.dmScope}","sessionKey":${jsonString(route.sessionKey)},"mainSessionKey":${jsonString(route.mainSessionKey)},` +
    `"lastRoutePolicy":"${route.lastRoutePolicy}","matchedBy":"${route.matchedBy}"}`
  );
}
