// The JSON text of a resolved route, built directly: `route resolve --batch` prints one per input,
// and building the route object and serialising it was most of the time a batch took.

import type { RoutingTable } from './routing-table.js';
import { keyParamsFor, selectAgent } from './resolve.js';
import { mainSessionKeyOf, sessionKeyWith } from './session-key.js';
import type { MatchedBy, ResolvedRoute, RouteInput } from './types.js';

const quote = JSON.stringify;

/** Printable ASCII without `"` and `\\`: what JSON writes as it is, between quotes. */
const PLAIN_JSON_TEXT = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/**
 * `JSON.stringify(text)` for the one string of a line that is new each time (its session key):
 * session keys are nearly always plain, and the test and two quotes cost half of the generic
 * serialiser's call.
 */
function quoteKey(text: string): string {
  return PLAIN_JSON_TEXT.test(text) ? `"${text}"` : quote(text);
}

/** Whether JSON writes `text` as it is between quotes: no `"`, `\\`, control character or lone surrogate. */
function needsNoEscape(text: string): boolean {
  return quote(text).length === text.length + 2;
}

/**
 * Byte for byte what `JSON.stringify(route)` gives (same keys, same order; every field is always a
 * string). dmScope, lastRoutePolicy and matchedBy come from fixed sets of plain words and need no
 * escaping.
 */
export function routeJson(route: ResolvedRoute): string {
  return (
    `{"agentId":${quote(route.agentId)},"channel":${quote(route.channel)},"accountId":${quote(route.accountId)},` +
    `"dmScope":"${route.dmScope}","sessionKey":${quote(route.sessionKey)},"mainSessionKey":${quote(route.mainSessionKey)},` +
    `"lastRoutePolicy":"${route.lastRoutePolicy}","matchedBy":"${route.matchedBy}"}`
  );
}

/** What the lines of one agent share: its main session key and the JSON text around the session key. */
interface AgentText {
  mainSessionKey: string;
  /** Whether every string of a key this agent's table adds (agent id, main key, linked identities) needs no escaping. */
  escapeFree: boolean;
  /** `,"mainSessionKey":"…","lastRoutePolicy":"` */
  tail: string;
  /** channel → account → dmScope → `{"agentId":…,"sessionKey":` */
  heads: Map<string, Map<string, Map<string, string>>>;
}

/** Beyond this many cached line heads (distinct channel and account pairs), heads are built each time. */
const MAX_HEADS = 4096;

/** `main","matchedBy":"<tier>"}` and `session",…`: the end of a line. */
const ENDS = {
  main: new Map<MatchedBy, string>(),
  session: new Map<MatchedBy, string>(),
};

function endOf(policy: 'main' | 'session', matchedBy: MatchedBy): string {
  let end = ENDS[policy].get(matchedBy);
  if (end === undefined) ENDS[policy].set(matchedBy, (end = `${policy}","matchedBy":"${matchedBy}"}`));
  return end;
}

/**
 * Routes inputs with one table straight to their JSON text: `routeJson(resolveRoute(table, input).route)`,
 * byte for byte and with the same errors, without the route object. A batch repeats the same few
 * agents, channels and accounts, so the text around each session key is built once and reused
 * (the generic serialiser spent most of its time on those).
 */
export class RouteJsonWriter {
  private readonly agents = new Map<string, AgentText>();
  private headCount = 0;
  /** Whether every canonical name of the table's identity links needs no escaping. */
  private readonly linksEscapeFree: boolean;

  constructor(private readonly table: RoutingTable) {
    let linksEscapeFree = true;
    for (const link of table.identityLinks.byEntry.values()) linksEscapeFree &&= needsNoEscape(link.canonical);
    this.linksEscapeFree = linksEscapeFree;
  }

  /**
   * `escapeFree`: the caller knows that no string of the input needs escaping in JSON (it was
   * parsed from a JSON text without a backslash, which is the only way to write a quote, a
   * control character or a lone surrogate in one). A session key is then made of such strings
   * and the table's own, lower-cased at most (which never makes one of those characters), so
   * it is quoted as it is: testing it made every key a flat copy first, a quarter of a line's cost.
   */
  json(input: RouteInput, escapeFree = false): string {
    const selection = selectAgent(this.table, input);
    const params = keyParamsFor(this.table, input, selection);
    const agent = this.agentText(params.agentId);
    const sessionKey = sessionKeyWith(params, agent.mainSessionKey);
    const policy = sessionKey === agent.mainSessionKey ? 'main' : 'session';
    const quotedKey = escapeFree && agent.escapeFree ? `"${sessionKey}"` : quoteKey(sessionKey);
    return this.head(agent, params.agentId, input.channel, input.accountId, params.dmScope) + quotedKey + agent.tail + endOf(policy, selection.matchedBy);
  }

  private agentText(agentId: string): AgentText {
    let agent = this.agents.get(agentId);
    if (agent === undefined) {
      const mainSessionKey = mainSessionKeyOf(agentId, this.table.mainKey);
      const escapeFree = this.linksEscapeFree && needsNoEscape(mainSessionKey);
      agent = { mainSessionKey, escapeFree, tail: `,"mainSessionKey":${quote(mainSessionKey)},"lastRoutePolicy":"`, heads: new Map() };
      this.agents.set(agentId, agent);
    }
    return agent;
  }

  private head(agent: AgentText, agentId: string, channel: string, accountId: string, dmScope: string): string {
    let byAccount = agent.heads.get(channel);
    let byScope = byAccount?.get(accountId);
    let head = byScope?.get(dmScope);
    if (head !== undefined) return head;
    head = `{"agentId":${quote(agentId)},"channel":${quote(channel)},"accountId":${quote(accountId)},"dmScope":"${dmScope}","sessionKey":`;
    // Every input could name another channel or account: past the cap, new heads are not kept.
    if (this.headCount >= MAX_HEADS) return head;
    if (byAccount === undefined) agent.heads.set(channel, (byAccount = new Map()));
    if (byScope === undefined) byAccount.set(accountId, (byScope = new Map()));
    byScope.set(dmScope, head);
    this.headCount++;
    return head;
  }
}
