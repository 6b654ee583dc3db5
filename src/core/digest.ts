// The one content digest of the store (entry hashes in the journal, digests of long messageIds), and
// node:crypto loaded on first use for it and for the ids core mints.

import { createRequire } from 'node:module';

type Crypto = typeof import('node:crypto');

let crypto: Crypto | undefined;

/**
 * node:crypto, loaded on first use: core is loaded by every command, and importing node:crypto
 * (~3 ms of start-up) is a cost that most of them (`route resolve`, the listing) never use.
 */
export function nodeCrypto(): Crypto {
  crypto ??= createRequire(import.meta.url)('node:crypto') as Crypto;
  return crypto;
}

/** SHA-256 → base64url, made on the first digest. */
let digest: ((text: string) => string) | undefined;

function makeDigest(): (text: string) => string {
  const crypto = nodeCrypto();
  /** crypto.hash (Node ≥ 20.12): one call, about twice as fast as createHash().update().digest() on a few KB. */
  const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'base64url') => string }).hash;
  return oneShot !== undefined ? (text) => oneShot('sha256', text, 'base64url') : (text) => crypto.createHash('sha256').update(text).digest('base64url');
}

/** SHA-256 of a string's UTF-8 bytes, base64url. */
export function sha256Base64url(text: string): string {
  digest ??= makeDigest();
  return digest(text);
}
