// NDJSON framing shared by every reader of line input (stdin, files, the socket): splits bytes
// into lines, enforces the per-line cap and rejects invalid UTF-8, reporting each by line number.

export const MAX_LINE_BYTES = 1024 * 1024;

export type NdjsonLine =
  | { line: number; text: string }
  | { line: number; error: 'too-long' | 'invalid-utf8'; bytes: number };

const NEWLINE = 0x0a;

/** Push byte chunks in, get complete lines out (in batches, so callers can group their work). */
export class LineSplitter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private oversized = false;
  private lineNumber = 0;
  private readonly decoder = new TextDecoder('utf-8', { fatal: true });

  constructor(private readonly maxLineBytes = MAX_LINE_BYTES) {}

  push(chunk: Buffer): NdjsonLine[] {
    const out: NdjsonLine[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, start);
      if (nl < 0) break;
      this.take(chunk.subarray(start, nl));
      out.push(this.finishLine());
      start = nl + 1;
    }
    if (start < chunk.length) this.take(chunk.subarray(start));
    return out;
  }

  /** The last line when input does not end with a newline. */
  end(): NdjsonLine[] {
    return this.pendingBytes > 0 || this.oversized ? [this.finishLine()] : [];
  }

  private take(part: Buffer): void {
    if (part.length === 0) return;
    this.pendingBytes += part.length;
    // Past the cap we only count bytes: a huge line must not grow memory.
    if (this.pendingBytes > this.maxLineBytes) {
      this.oversized = true;
      this.pending = [];
    } else {
      this.pending.push(part);
    }
  }

  private finishLine(): NdjsonLine {
    const line = ++this.lineNumber;
    const bytes = this.pendingBytes;
    const parts = this.pending;
    const oversized = this.oversized;
    this.pending = [];
    this.pendingBytes = 0;
    this.oversized = false;
    if (oversized) return { line, error: 'too-long', bytes };
    const buffer = parts.length === 1 ? parts[0] : Buffer.concat(parts, bytes);
    try {
      let text = this.decoder.decode(buffer);
      if (text.endsWith('\r')) text = text.slice(0, -1);
      return { line, text };
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

export function describeLineError(error: 'too-long' | 'invalid-utf8', bytes: number, maxLineBytes = MAX_LINE_BYTES): string {
  return error === 'too-long'
    ? `line is ${bytes} bytes, over the ${maxLineBytes}-byte cap`
    : 'line is not valid UTF-8';
}
