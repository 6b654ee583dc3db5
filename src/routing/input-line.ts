// A quick reader for the common shape of one NDJSON route input line (`route resolve --batch`):
// it gives what JSON.parse would, or undefined for anything else, which then goes to JSON.parse.

/**
 * What the line holds, for normalizeRouteInput: the same values JSON.parse would give, with the
 * fields the line lacks undefined (which normalizeRouteInput treats as absent).
 */
export interface RawRouteInput {
  channel: unknown;
  accountId: unknown;
  peer: unknown;
  parentPeer: unknown;
  guildId: unknown;
  teamId: unknown;
  memberRoleIds: unknown;
  threadId: unknown;
}

// The reader's position in the line; module state, as the reader never calls out while reading.
let text = '';
let at = 0;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const MINUS = 0x2d;
const ZERO = 0x30;
const NINE = 0x39;

/** Field codes: which key a name is (NONE for any other). */
const NONE = 0;
const CHANNEL = 1;
const ACCOUNT = 2;
const PEER = 3;
const PARENT_PEER = 4;
const GUILD = 5;
const TEAM = 6;
const ROLES = 7;
const THREAD = 8;
const KIND = 9;
const ID = 10;

/** A marker for "not this reader's to decide": the caller uses JSON.parse. */
const GIVE_UP = Symbol('give up');

function skipSpace(): void {
  for (;;) {
    const c = text.charCodeAt(at);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) at++;
    else return;
  }
}

/**
 * At an opening quote: moves past the string and returns where its characters end, or -1 for a
 * string this reader leaves to JSON.parse (one with an escape) or that is not JSON (a raw control
 * character, or no closing quote).
 */
function skipString(): number {
  for (let i = at + 1; ; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      at = i + 1;
      return i;
    }
    // NaN (past the end) fails `c >= 0x20` as well.
    if (c === BACKSLASH || !(c >= 0x20)) return -1;
  }
}

function fieldOf(start: number, end: number): number {
  switch (end - start) {
    case 2:
      return text.startsWith('id', start) ? ID : NONE;
    case 4:
      return text.startsWith('peer', start) ? PEER : text.startsWith('kind', start) ? KIND : NONE;
    case 6:
      return text.startsWith('teamId', start) ? TEAM : NONE;
    case 7:
      return text.startsWith('channel', start) ? CHANNEL : text.startsWith('guildId', start) ? GUILD : NONE;
    case 8:
      return text.startsWith('threadId', start) ? THREAD : NONE;
    case 9:
      return text.startsWith('accountId', start) ? ACCOUNT : NONE;
    case 10:
      return text.startsWith('parentPeer', start) ? PARENT_PEER : NONE;
    case 13:
      return text.startsWith('memberRoleIds', start) ? ROLES : NONE;
    default:
      return NONE;
  }
}

/** A key and its colon: the field code, or GIVE_UP. */
function readKey(): number | typeof GIVE_UP {
  if (text.charCodeAt(at) !== QUOTE) return GIVE_UP;
  const start = at + 1;
  const end = skipString();
  if (end < 0) return GIVE_UP;
  skipSpace();
  if (text.charCodeAt(at) !== COLON) return GIVE_UP;
  at++;
  skipSpace();
  return fieldOf(start, end);
}

/** A string, or an integer JSON.parse gives exactly (at most 15 digits), or GIVE_UP. */
function readScalar(): string | number | typeof GIVE_UP {
  const c = text.charCodeAt(at);
  if (c === QUOTE) {
    const start = at + 1;
    const end = skipString();
    return end < 0 ? GIVE_UP : text.slice(start, end);
  }
  const start = at;
  if (c === MINUS) at++;
  let value = 0;
  const first = text.charCodeAt(at);
  if (first === ZERO) {
    at++;
  } else if (first > ZERO && first <= NINE) {
    for (let d = text.charCodeAt(at); d >= ZERO && d <= NINE; d = text.charCodeAt(++at)) value = value * 10 + (d - ZERO);
  } else {
    return GIVE_UP;
  }
  const next = text.charCodeAt(at);
  // Fractions and exponents are left to JSON.parse, and so are long numbers (no exact sum here).
  if (next === 0x2e || next === 0x65 || next === 0x45 || at - start > 15) return GIVE_UP;
  return c === MINUS ? -value : value;
}

/** After a member: true at `,` (moved past it), false at `close` (moved past it), else GIVE_UP. */
function readSeparator(close: number): boolean | typeof GIVE_UP {
  skipSpace();
  const c = text.charCodeAt(at);
  at++;
  skipSpace();
  if (c === COMMA) return true;
  return c === close ? false : GIVE_UP;
}

/** A peer object `{kind, id}` (both, scalars), or GIVE_UP; the string form `kind:id` is a scalar. */
function readPeer(): { kind: unknown; id: unknown } | typeof GIVE_UP {
  at++;
  skipSpace();
  let kind: unknown;
  let id: unknown;
  for (;;) {
    const field = readKey();
    if (field === GIVE_UP) return GIVE_UP;
    const value = readScalar();
    if (value === GIVE_UP) return GIVE_UP;
    // Other keys (ignored by routing) and repeated keys (the last wins) go to JSON.parse.
    if (field === KIND && kind === undefined) kind = value;
    else if (field === ID && id === undefined) id = value;
    else return GIVE_UP;
    const more = readSeparator(CLOSE_BRACE);
    if (more === GIVE_UP) return GIVE_UP;
    if (!more) return kind !== undefined && id !== undefined ? { kind, id } : GIVE_UP;
  }
}

/** An array of strings, or GIVE_UP. */
function readRoles(): string[] | typeof GIVE_UP {
  at++;
  skipSpace();
  const roles: string[] = [];
  if (text.charCodeAt(at) === CLOSE_BRACKET) {
    at++;
    return roles;
  }
  for (;;) {
    if (text.charCodeAt(at) !== QUOTE) return GIVE_UP;
    const start = at + 1;
    const end = skipString();
    if (end < 0) return GIVE_UP;
    roles.push(text.slice(start, end));
    const more = readSeparator(CLOSE_BRACKET);
    if (more === GIVE_UP) return GIVE_UP;
    if (!more) return roles;
  }
}

/**
 * The route input on `line` when it is a JSON object of the route fields only, with strings free
 * of escapes, small integers, peer objects and role lists; else undefined (the caller then uses
 * JSON.parse, which decides everything this reader does not, errors included). A value given
 * here is always the one JSON.parse would give: the reader is a strict subset of JSON.
 */
export function readRouteInputLine(line: string): RawRouteInput | undefined {
  text = line;
  at = 0;
  const raw = readObject();
  text = '';
  return raw;
}

function readObject(): RawRouteInput | undefined {
  skipSpace();
  if (text.charCodeAt(at) !== OPEN_BRACE) return undefined;
  at++;
  skipSpace();
  let channel: unknown;
  let accountId: unknown;
  let peer: unknown;
  let parentPeer: unknown;
  let guildId: unknown;
  let teamId: unknown;
  let memberRoleIds: unknown;
  let threadId: unknown;
  if (text.charCodeAt(at) === CLOSE_BRACE) {
    at++;
  } else {
    for (;;) {
      const field = readKey();
      if (field === GIVE_UP) return undefined;
      const c = text.charCodeAt(at);
      const value = c === OPEN_BRACE ? readPeer() : c === OPEN_BRACKET ? readRoles() : readScalar();
      if (value === GIVE_UP) return undefined;
      // Each field once, and objects and arrays only where routing expects them: anything else
      // (other keys, repeats, odd shapes whose errors quote the value) is JSON.parse's.
      const isObject = c === OPEN_BRACE;
      const isArray = c === OPEN_BRACKET;
      if (field === CHANNEL && channel === undefined && !isObject && !isArray) channel = value;
      else if (field === ACCOUNT && accountId === undefined && !isObject && !isArray) accountId = value;
      else if (field === PEER && peer === undefined && !isArray) peer = value;
      else if (field === PARENT_PEER && parentPeer === undefined && !isArray) parentPeer = value;
      else if (field === GUILD && guildId === undefined && !isObject && !isArray) guildId = value;
      else if (field === TEAM && teamId === undefined && !isObject && !isArray) teamId = value;
      else if (field === ROLES && memberRoleIds === undefined && isArray) memberRoleIds = value;
      else if (field === THREAD && threadId === undefined && !isObject && !isArray) threadId = value;
      else return undefined;
      const more = readSeparator(CLOSE_BRACE);
      if (more === GIVE_UP) return undefined;
      if (!more) break;
    }
  }
  skipSpace();
  if (at !== text.length) return undefined;
  return { channel, accountId, peer, parentPeer, guildId, teamId, memberRoleIds, threadId };
}
