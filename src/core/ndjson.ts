// NDJSON framing shared by every reader of line input (stdin, files, the socket): splits bytes
// into lines, enforces the per-line cap and rejects invalid UTF-8, reporting each by line number;
// and the bounds of an ingest batch (lines, bytes, nesting) shared by the CLI and the server.

import { SwitchboardError } from './errors.js';

export const MAX_LINE_BYTES = 1024 * 1024;

/**
 * Deepest nesting of objects and arrays accepted in one line. JSON.parse copes with any depth, but
 * JSON.stringify and every recursive walk after it overflow the stack near 5 000 levels, which
 * would turn one hostile line into an INTERNAL error; no real message nests anywhere near this.
 */
export const MAX_JSON_DEPTH = 128;

/**
 * Most message text one ingest batch holds. A batch's records for one session are written as one
 * string, and V8 strings end near 512 Mi characters: without a byte bound, large messages that
 * piled up (behind a lock, or from many clients) made a batch fail as a whole with an IO error.
 * Counted in characters of the lines (what a string's length limit counts; never more than their
 * UTF-8 bytes).
 */
export const DEFAULT_MAX_BATCH_BYTES = 64 * 1024 * 1024;

/** `SWITCHBOARD_MAX_BATCH_BYTES` (a whole number ≥ 1; a single line above it forms a batch of its own), else the default. */
export function maxBatchBytesFrom(env: Record<string, string | undefined>): number {
  const raw = env.SWITCHBOARD_MAX_BATCH_BYTES;
  if (raw === undefined || raw.trim() === '') return DEFAULT_MAX_BATCH_BYTES;
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(value) || value < 1) {
    throw new SwitchboardError('USAGE', `SWITCHBOARD_MAX_BATCH_BYTES must be a whole number of bytes ≥ 1, got "${raw}"`);
  }
  return value;
}

/** Characters a read line holds (0 for a line that was rejected while reading). */
export function lineChars(line: NdjsonLine): number {
  return 'text' in line ? line.text.length : 0;
}

/** How many of `lines` (from the front) form the next batch: at most maxLines and maxBytes, always at least one. */
export function batchLength(lines: readonly NdjsonLine[], maxLines: number, maxBytes: number): number {
  let count = 0;
  let bytes = 0;
  while (count < lines.length && count < maxLines) {
    bytes += lineChars(lines[count]!);
    if (count > 0 && bytes > maxBytes) break;
    count++;
  }
  return count;
}

export type LineError = 'too-long' | 'invalid-utf8' | 'too-deep';

export type NdjsonLine =
  /** receivedAt: wall-clock ms when the line was complete (its last byte read), where known. */
  | { line: number; text: string; receivedAt?: number }
  | { line: number; error: LineError; bytes: number };

const NEWLINE = 0x0a;

/** Parts of one line kept as they came before they are copied together (see LineSplitter.merge). */
const MAX_PENDING_PARTS = 16;

/** Push byte chunks in, get complete lines out (in batches, so callers can group their work). */
export class LineSplitter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Once a line comes in many parts, its bytes so far, copied together (see take). */
  private merged: Buffer | undefined;
  private oversized = false;
  private lineNumber = 0;
  private readonly decoder = new TextDecoder('utf-8', { fatal: true });
  /** For a run of whole lines decoded at once: each line's BOM is dropped by hand, as `decoder` drops it per line. */
  private readonly runDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

  constructor(private readonly maxLineBytes = MAX_LINE_BYTES) {}

  push(chunk: Buffer): NdjsonLine[] {
    const out: NdjsonLine[] = [];
    // Every line this chunk completes arrived now: a queue's quiet window counts from here, not
    // from when a busy writer got round to planning it.
    const receivedAt = Date.now();
    let start = 0;
    if (this.pendingBytes > 0 || this.oversized) {
      const nl = chunk.indexOf(NEWLINE);
      if (nl < 0) {
        this.take(chunk);
        return out;
      }
      this.take(chunk.subarray(0, nl));
      out.push(this.finishLine(receivedAt));
      start = nl + 1;
    }
    const last = chunk.lastIndexOf(NEWLINE);
    if (last >= start) start = this.pushWholeLines(chunk, start, last, receivedAt, out);
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, start);
      if (nl < 0) break;
      this.take(chunk.subarray(start, nl));
      out.push(this.finishLine(receivedAt));
      start = nl + 1;
    }
    if (start < chunk.length) this.take(chunk.subarray(start));
    return out;
  }

  /**
   * The lines of chunk[start, last) (all complete) with one decode instead of one per line, which
   * is most of the cost of reading short lines. Only when no line in the run can pass the cap; a
   * run holding invalid UTF-8 is left to the line-by-line path (returns `start` unchanged), so every
   * line gets the same answer either way (a newline byte never sits inside a UTF-8 sequence).
   */
  private pushWholeLines(chunk: Buffer, start: number, last: number, receivedAt: number, out: NdjsonLine[]): number {
    if (last - start > this.maxLineBytes) return start;
    let text: string;
    try {
      text = this.runDecoder.decode(chunk.subarray(start, last));
    } catch {
      return start;
    }
    for (let from = 0; ; ) {
      const nl = text.indexOf('\n', from);
      let line = nl < 0 ? text.slice(from) : text.slice(from, nl);
      if (line.charCodeAt(0) === 0xfeff) line = line.slice(1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      out.push({ line: ++this.lineNumber, text: line, receivedAt });
      if (nl < 0) break;
      from = nl + 1;
    }
    return last + 1;
  }

  /** The last line when input does not end with a newline. */
  end(): NdjsonLine[] {
    return this.pendingBytes > 0 || this.oversized ? [this.finishLine(Date.now())] : [];
  }

  private take(part: Buffer): void {
    if (part.length === 0) return;
    this.pendingBytes += part.length;
    // Past the cap we only count bytes: a huge line must not grow memory.
    if (this.pendingBytes > this.maxLineBytes) {
      this.oversized = true;
      this.pending = [];
      this.merged = undefined;
    } else if (this.merged === undefined && this.pending.length < MAX_PENDING_PARTS) {
      this.pending.push(part);
    } else {
      this.merge(part);
    }
  }

  /**
   * A line trickled in tiny reads (a byte each) kept one Buffer per read, a few hundred bytes of
   * memory per byte of line: a peer sending a byte per read on many connections grew the server
   * by ~1 GB for 3 MB sent. After MAX_PENDING_PARTS parts the line's bytes are copied into one
   * buffer that doubles as it fills (at most the cap), so a partial line costs about its bytes.
   */
  private merge(part: Buffer): void {
    const used = this.pendingBytes - part.length;
    if (this.merged === undefined || this.merged.length < this.pendingBytes) {
      const grown = Buffer.allocUnsafe(Math.min(this.maxLineBytes, Math.max(this.pendingBytes * 2, 4096)));
      if (this.merged !== undefined) this.merged.copy(grown, 0, 0, used);
      let offset = 0;
      for (const kept of this.pending) offset += kept.copy(grown, offset);
      this.merged = grown;
      this.pending = [];
    }
    part.copy(this.merged, used);
  }

  private finishLine(receivedAt: number): NdjsonLine {
    const line = ++this.lineNumber;
    const bytes = this.pendingBytes;
    const parts = this.merged === undefined ? this.pending : [this.merged.subarray(0, bytes)];
    const oversized = this.oversized;
    this.pending = [];
    this.merged = undefined;
    this.pendingBytes = 0;
    this.oversized = false;
    if (oversized) return { line, error: 'too-long', bytes };
    const buffer = parts.length === 1 ? parts[0] : Buffer.concat(parts, bytes);
    try {
      let text = this.decoder.decode(buffer);
      if (text.endsWith('\r')) text = text.slice(0, -1);
      return { line, text, receivedAt };
    } catch {
      return { line, error: 'invalid-utf8', bytes };
    }
  }
}

/** Reads a byte stream as NDJSON, handing each batch of lines to `onLines` (awaited, for back-pressure). */
export async function readNdjson(
  stream: AsyncIterable<Buffer | string>,
  onLines: (lines: NdjsonLine[]) => void | Promise<void>,
  maxLineBytes = MAX_LINE_BYTES,
): Promise<void> {
  const splitter = new LineSplitter(maxLineBytes);
  for await (const chunk of stream) {
    const lines = splitter.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    if (lines.length > 0) await onLines(lines);
  }
  const rest = splitter.end();
  if (rest.length > 0) await onLines(rest);
}

export function describeLineError(error: LineError, bytes: number, maxLineBytes = MAX_LINE_BYTES): string {
  if (error === 'too-long') return `line is ${bytes} bytes, over the ${maxLineBytes}-byte cap`;
  if (error === 'too-deep') return `line nests objects/arrays deeper than ${MAX_JSON_DEPTH} levels`;
  return 'line is not valid UTF-8';
}

/**
 * Whether a JSON text is long enough to nest deeper than `maxDepth`: each level takes an opening
 * and a closing bracket, so a shorter text needs no jsonDepthExceeds walk after parsing.
 */
export function mayNestDeeperThan(text: string, maxDepth = MAX_JSON_DEPTH): boolean {
  return text.length > 2 * maxDepth;
}

/**
 * Whether a parsed JSON value nests objects/arrays deeper than `maxDepth` (a top-level object is
 * depth 1). It stops at the first too-deep value, so its recursion is at most `maxDepth + 1`
 * calls deep whatever the value (it cannot overflow the stack itself); its cost is one visit per
 * object/array/value, never per character of a string. Recursive with for…in rather than a stack
 * of [node, depth] pairs over Object.values: those allocations were most of its cost, and it runs
 * on every config load (a 10 000-binding file: 14 ms of a `route resolve` start) and long line.
 */
export function jsonDepthExceeds(value: unknown, maxDepth = MAX_JSON_DEPTH): boolean {
  return value !== null && typeof value === 'object' && nestsDeeper(value, maxDepth);
}

/** `levels`: how many levels, this one included, may still nest. */
function nestsDeeper(node: object, levels: number): boolean {
  if (levels <= 0) return true;
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) {
      const child: unknown = node[i];
      if (child !== null && typeof child === 'object' && nestsDeeper(child, levels - 1)) return true;
    }
    return false;
  }
  for (const key in node) {
    const child: unknown = (node as Record<string, unknown>)[key];
    if (child !== null && typeof child === 'object' && nestsDeeper(child, levels - 1)) return true;
  }
  return false;
}

/**
 * Whether a parsed JSON value holds a number JSON.parse read as ±Infinity (a literal like 1e400):
 * JSON.stringify writes it as null, so a value passed on as JSON text would change meaning. The
 * value must already be known not to nest past MAX_JSON_DEPTH (the walk recurses).
 */
export function holdsNonFiniteNumber(value: unknown): boolean {
  if (typeof value === 'number') return !Number.isFinite(value);
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return value.some(holdsNonFiniteNumber);
  for (const key in value) if (holdsNonFiniteNumber((value as Record<string, unknown>)[key])) return true;
  return false;
}
