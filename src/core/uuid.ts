// Random (version 4) UUIDs as flat strings, for the ids a batch mints per message (run ids,
// transcript entry ids, session ids).
//
// node:crypto's randomUUID() builds its result by concatenating 16 two-digit pieces, so each
// UUID it returns is a chain of about a dozen rope (cons) string objects until something flattens
// it: ~480 bytes of heap where the 36 characters need 56. An ingest batch keeps two such ids per
// message alive until it is written, and the garbage collector copied every piece of every one of
// them. This writes the characters into a buffer and takes them as one string. The randomness is
// the same (the CSPRNG, drawn in blocks as node's own cache does).

import { nodeCrypto } from './digest.js';

const UUIDS_PER_DRAW = 256;
const random = Buffer.alloc(16 * UUIDS_PER_DRAW);
let next = UUIDS_PER_DRAW;
const text = Buffer.alloc(36);
const HEX = Buffer.from('0123456789abcdef', 'latin1');
/** Where the two hex digits of each of the 16 bytes go in `xxxxxxxx-xxxx-4xxx-Nxxx-xxxxxxxxxxxx`. */
const POSITIONS = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
const DASH = 0x2d;

/** A random UUID (RFC 4122 version 4, lower case), like crypto.randomUUID(). */
export function newUuid(): string {
  if (next === UUIDS_PER_DRAW) {
    nodeCrypto().randomFillSync(random);
    next = 0;
  }
  const offset = 16 * next++;
  random[offset + 6] = (random[offset + 6]! & 0x0f) | 0x40; // version 4
  random[offset + 8] = (random[offset + 8]! & 0x3f) | 0x80; // variant 10xx
  for (let i = 0; i < 16; i++) {
    const byte = random[offset + i]!;
    const at = POSITIONS[i]!;
    text[at] = HEX[byte >> 4]!;
    text[at + 1] = HEX[byte & 0x0f]!;
  }
  text[8] = text[13] = text[18] = text[23] = DASH;
  return text.toString('latin1', 0, 36);
}
