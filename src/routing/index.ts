// Public face of routing/: normalise input, compile a config into a RoutingTable once,
// resolve and explain routes, and build/parse session keys (the one key builder).

export type * from './types.js';
export { normalizeRouteInput, normalizePeer, normalizePeerKind, describeType } from './normalize.js';
export { compileRoutingTable, type RoutingTable, type CompiledBinding, type AgentInfo, type OwnerSource } from './routing-table.js';
export { routeJson, RouteJsonWriter } from './route-json.js';
export { resolveRoute, explainRoute, selectAgent, routeFor, noOwnerError, type RouteResolution, type RouteExplanation } from './resolve.js';
export {
  buildSessionKey,
  parseSessionKey,
  appendThreadSuffix,
  normalizeExplicitSessionKey,
  explicitSessionKeyAsTyped,
  cronSessionKey,
  normalizeMainKey,
  lookupIdentityLink,
  THREAD_MARKER,
  type ParsedSessionKey,
  type SessionKeyKind,
} from './session-key.js';
