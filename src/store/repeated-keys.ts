// Keys written twice in sessions.json. JSON.parse keeps the last of two equal keys, so every reader
// sees one entry and the first is lost at the next write of the store, without a word: a hand
// edit that pasted a session twice (or a foreign writer) loses history silently. `doctor` reports it.

export interface RepeatedKey {
  key: string;
  /** 1-based lines the key is written on, in file order (the last is the one readers use). */
  lines: number[];
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The keys the top-level object of a JSON text names more than once, compared as JSON.parse
 * compares them (decoded: `"a"` and `"\u0061"` are one key). For text JSON.parse accepts.
 */
export function repeatedTopLevelKeys(text: string): RepeatedKey[] {
  const seen = new Map<string, number[]>();
  let depth = 0;
  let line = 1;
  let keyNext = false;
  for (let at = 0; at < text.length; at++) {
    const code = text.charCodeAt(at);
    if (code === 0x0a) line += 1;
    else if (code === QUOTE) {
      const start = at;
      // Valid JSON holds no raw newline inside a string: the line count stays right.
      for (at += 1; at < text.length; at++) {
        const inner = text.charCodeAt(at);
        if (inner === BACKSLASH) at += 1;
        else if (inner === QUOTE) break;
      }
      if (depth === 1 && keyNext) {
        const key = JSON.parse(text.slice(start, at + 1)) as string;
        const lines = seen.get(key);
        if (lines === undefined) seen.set(key, [line]);
        else lines.push(line);
        keyNext = false;
      }
    } else if (code === 0x7b || code === 0x5b) {
      depth += 1;
      if (depth === 1) keyNext = code === 0x7b;
    } else if (code === 0x7d || code === 0x5d) depth -= 1;
    else if (code === 0x2c && depth === 1) keyNext = true;
  }
  const repeated: RepeatedKey[] = [];
  for (const [key, lines] of seen) if (lines.length > 1) repeated.push({ key, lines });
  return repeated;
}
