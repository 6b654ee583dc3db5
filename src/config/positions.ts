// Where each JSON path sits in a JSON5 config text, so a problem can be named `file:line:column`.
// Runs only when something is wrong: a small scanner over text that JSON5 has already accepted.

import { formatJsonPath } from './validators.js';

export interface TextPosition {
  line: number;
  column: number;
}

const IDENTIFIER = /[A-Za-z0-9_$\u0080-\uffff\\]/;

/**
 * JSON path (as `formatJsonPath` writes it) → position of its key, or of the value for array items.
 * `prefix`: where the text's value sits in the config (an included file's), put before every path.
 */
export function locateJsonPaths(text: string, prefix: readonly string[] = []): Map<string, TextPosition> {
  const lineStarts = [0];
  for (let k = 0; k < text.length; k++) if (text[k] === '\n') lineStarts.push(k + 1);
  const positionOf = (index: number): TextPosition => {
    let lo = 0;
    let hi = lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (lineStarts[mid] <= index) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, column: index - lineStarts[lo] + 1 };
  };
  const out = new Map<string, TextPosition>();
  let i = 0;
  // The last occurrence of a key wins, as in JSON.parse and JSON5: its value is the one checked.
  const record = (segments: string[], at: number) => {
    out.set(formatJsonPath(prefix.length === 0 ? segments : [...prefix, ...segments]), positionOf(at));
  };
  const skipSpace = (): void => {
    while (i < text.length) {
      const c = text[i];
      if (/\s|\ufeff/.test(c)) i++;
      else if (c === '/' && text[i + 1] === '/') while (i < text.length && text[i] !== '\n') i++;
      else if (c === '/' && text[i + 1] === '*') {
        const end = text.indexOf('*/', i + 2);
        i = end < 0 ? text.length : end + 2;
      } else return;
    }
  };
  const readString = (): string => {
    const quote = text[i++];
    let value = '';
    while (i < text.length && text[i] !== quote) {
      if (text[i] === '\\') {
        const next = text[i + 1];
        if (next === 'u' || next === 'x') {
          const digits = next === 'u' ? 4 : 2;
          value += String.fromCharCode(parseInt(text.slice(i + 2, i + 2 + digits), 16));
          i += 2 + digits;
          continue;
        }
        const simple: Record<string, string> = { n: '\n', t: '\t', r: '\r', b: '\b', f: '\f', v: '\v', '0': '\0' };
        value += next === '\n' ? '' : (simple[next] ?? next);
        i += 2;
        continue;
      }
      value += text[i++];
    }
    i++;
    return value;
  };
  const readKey = (): string => {
    if (text[i] === '"' || text[i] === "'") return readString();
    const start = i;
    while (i < text.length && IDENTIFIER.test(text[i])) i++;
    // An unquoted key may spell characters as \uXXXX (JSON5 follows ES5 identifiers).
    return text.slice(start, i).replace(/\\u([0-9a-fA-F]{4})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  };
  const readValue = (segments: string[], depth: number): void => {
    skipSpace();
    if (depth > 200) throw new Error('too deep');
    const c = text[i];
    if (c === '{') {
      i++;
      for (;;) {
        skipSpace();
        if (i >= text.length || text[i] === '}') break;
        const at = i;
        const key = readKey();
        record([...segments, key], at);
        skipSpace();
        if (text[i] === ':') i++;
        readValue([...segments, key], depth + 1);
        skipSpace();
        if (text[i] === ',') i++;
        else if (text[i] !== '}') break;
      }
      i++;
    } else if (c === '[') {
      i++;
      for (let index = 0; ; index++) {
        skipSpace();
        if (i >= text.length || text[i] === ']') break;
        record([...segments, String(index)], i);
        readValue([...segments, String(index)], depth + 1);
        skipSpace();
        if (text[i] === ',') i++;
        else if (text[i] !== ']') break;
      }
      i++;
    } else if (c === '"' || c === "'") {
      readString();
    } else {
      while (i < text.length && !/[\s,\]}/]/.test(text[i])) i++;
    }
  };
  try {
    readValue([], 0);
  } catch {
    // A partial map still names most problems; the caller falls back to the file name.
  }
  return out;
}

/** The position of a path, or of its nearest ancestor that is in the file (a missing key's parent). */
export function positionOfPath(positions: Map<string, TextPosition>, path: string): TextPosition | undefined {
  let current = path;
  for (;;) {
    const found = positions.get(current);
    if (found) return found;
    const cut = Math.max(current.lastIndexOf('.'), current.lastIndexOf('['));
    if (cut <= 0) return undefined;
    current = current.slice(0, cut);
  }
}
