// Id normalisation shared by routing and the store: agent and account ids become safe,
// lower-case tokens so they can be used in keys and paths without surprises.

const VALID_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/i;
const INVALID_RUN = /[^a-z0-9_-]+/g;
/** Words an account id may not be (`__proto__`, `constructor`, `prototype`): read as `default`, as OpenClaw reads them. */
const RESERVED_ACCOUNTS = new Set(['__proto__', 'constructor', 'prototype']);
/** Agent ids have no reserved words: OpenClaw (2026.7.1 and 2026.9.6) keeps agent "constructor" as it is. */
const NO_RESERVED: ReadonlySet<string> = new Set();

/**
 * Whether `raw` is already a valid lower-case id, the common case, which then comes back as is:
 * checked by hand because every routed message normalises its account id, and the regex and
 * lower-casing below cost more than the rest of normalising the message.
 */
function isCanonicalId(raw: string): boolean {
  const length = raw.length;
  if (length === 0 || length > 64) return false;
  for (let i = 0; i < length; i++) {
    const c = raw.charCodeAt(i);
    if ((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || (i > 0 && (c === 0x2d || c === 0x5f))) continue;
    return false;
  }
  return true;
}

function sanitiseId(raw: string, fallback: string, reserved: ReadonlySet<string>): string {
  if (isCanonicalId(raw)) return reserved.has(raw) ? fallback : raw;
  const trimmed = raw.trim();
  if (trimmed === '') return fallback;
  if (VALID_ID.test(trimmed)) {
    const lower = trimmed.toLowerCase();
    return reserved.has(lower) ? fallback : lower;
  }
  const cleaned = trimmed
    .toLowerCase()
    .replace(INVALID_RUN, '-')
    .replace(/^-+/, '')
    .replace(/-+$/, '')
    .slice(0, 64);
  if (cleaned === '' || reserved.has(cleaned)) return fallback;
  return cleaned;
}

export const DEFAULT_AGENT_ID = 'main';
export const DEFAULT_ACCOUNT_ID = 'default';

/** `"Family Helper"` → `family-helper`, `"../../etc"` → `etc`, blank → `main`. */
export function normalizeAgentId(raw: unknown): string {
  return sanitiseId(raw == null ? '' : String(raw), DEFAULT_AGENT_ID, NO_RESERVED);
}

/** Blank → `default`; otherwise the same token rules as agent ids. */
export function normalizeAccountId(raw: unknown): string {
  return sanitiseId(raw == null ? '' : String(raw), DEFAULT_ACCOUNT_ID, RESERVED_ACCOUNTS);
}
