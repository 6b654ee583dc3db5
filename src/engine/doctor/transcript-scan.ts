// Reading a transcript the way doctor needs it: line by line with line numbers and exact bytes
// (readTranscript decodes lines and does not number them; a repair must copy records byte for
// byte and name the lines it drops), plus the chunked writer a repair copies records with.

import { constants as fsConstants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { errnoOf } from '../../core/index.js';
import { describeSchemaErrors, schemaValidator } from '../../config/index.js';
import { THREAD_INFIX, TRANSCRIPT_SUFFIX, openRegularFile, parseRecord, type TranscriptHeader } from '../../store/index.js';

/** Line numbers listed per problem; `count` has the total. */
const MAX_LINES_LISTED = 20;
/** Longer lines are kept by a repair without being parsed (and reported as unverifiable). */
const MAX_PARSE_BYTES = 256 * 1024 * 1024;
const READ_CHUNK_BYTES = 1024 * 1024;
const WRITE_CHUNK_BYTES = 1024 * 1024;
const NEWLINE = 0x0a;

export interface TranscriptScan {
  file: string;
  name: string;
  size: number;
  mtimeMs: number;
  /** The first record, when it is a header (valid or not). */
  header: TranscriptHeader | null;
  headerLine: number | null;
  /** Why the header is not right; null when it is. */
  headerProblem: string | null;
  /** Lines that parse as records (the header included). */
  records: number;
  malformed: { count: number; lines: number[] };
  torn: { line: number; bytes: number } | null;
  invalid: { count: number; lines: number[]; first: string | null };
  /** Set when a repair moved the file aside. */
  removed?: boolean;
}

/**
 * Where a repair copies the records a scan keeps: whole lines, and the lines too long to parse
 * piece by piece as they are read (then ended), so that such a line is never held in memory.
 */
export interface LineKeeper {
  line(bytes: Buffer): Promise<void>;
  part(bytes: Buffer): Promise<void>;
  endLine(): Promise<void>;
}

/**
 * Streams a transcript line by line, keeping every line's exact bytes (readTranscript decodes
 * lines and does not number them; a repair must copy records byte for byte and name the lines it
 * drops). `keep` receives every line that parses as a record. Null when the file is gone.
 */
export async function scanTranscript(file: string, keep?: LineKeeper): Promise<TranscriptScan | null> {
  let fh: FileHandle;
  try {
    fh = await openRegularFile(file, fsConstants.O_RDONLY); // a name swapped for a link or FIFO since the listing: refused
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
  const entryValidator = schemaValidator('transcript-entry');
  try {
    const stats = await fh.stat();
    const name = path.basename(file);
    const scan: TranscriptScan = {
      file,
      name,
      size: stats.size,
      mtimeMs: stats.mtimeMs,
      header: null,
      headerLine: null,
      headerProblem: null,
      records: 0,
      malformed: { count: 0, lines: [] },
      torn: null,
      invalid: { count: 0, lines: [], first: null },
    };
    let sawRecord = false;
    for await (const item of splitLines(fh)) {
      if ('part' in item) {
        if (keep) await keep.part(item.part);
        continue;
      }
      const { number, terminated } = item;
      if (item.bytes === undefined) {
        // Too long to judge: kept (never drop what might be a record), reported as unverifiable.
        scan.records += 1;
        if (!sawRecord) scan.headerProblem = `line ${number}: the first record is too long to check`;
        sawRecord = true;
        addLine(scan.invalid, number);
        scan.invalid.first ??= `line ${number}: too long to check (${item.length} bytes)`;
        if (keep) await keep.endLine();
        continue;
      }
      const bytes = item.bytes;
      const text = bytes.toString('utf8');
      if (text.trim() === '') continue;
      // What transcript readers count as a record (a line they skip is malformed here).
      const record = parseRecord(text) as Record<string, unknown> | null;
      if (record === null) {
        if (terminated) addLine(scan.malformed, number);
        else scan.torn = { line: number, bytes: bytes.length };
        continue;
      }
      scan.records += 1;
      if (keep) await keep.line(bytes);
      if (!sawRecord) {
        sawRecord = true;
        if (record.type === 'session') {
          scan.header = record as unknown as TranscriptHeader;
          scan.headerLine = number;
          scan.headerProblem = transcriptHeaderProblem(record, name);
          continue;
        }
        scan.headerLine = number;
        scan.headerProblem = `line ${number}: the first record is a "${String(record.type)}" entry, not the session header`;
      }
      if (!entryValidator(record)) {
        addLine(scan.invalid, number);
        scan.invalid.first ??= `line ${number}: ${describeSchemaErrors(entryValidator.errors)[0] ?? 'invalid'}`;
      }
    }
    return scan;
  } finally {
    await fh.close();
  }
}

/** Why a `session` record is not the right header of the file named `fileName`, or null when it is (doctor and maintain judge alike). */
export function transcriptHeaderProblem(record: Record<string, unknown>, fileName: string): string | null {
  const validate = schemaValidator('transcript-header');
  if (!validate(record)) return `the header does not match transcript-header.schema.json: ${describeSchemaErrors(validate.errors).slice(0, 3).join('; ')}`;
  const id = String(record.id);
  const matches = fileName === `${id}${TRANSCRIPT_SUFFIX}` || (fileName.startsWith(`${id}${THREAD_INFIX}`) && fileName.endsWith(TRANSCRIPT_SUFFIX));
  return matches ? null : `the header is for session ${id}, which does not match the file name`;
}

function addLine(list: { count: number; lines: number[] }, line: number): void {
  list.count += 1;
  if (list.lines.length < MAX_LINES_LISTED) list.lines.push(line);
}

type ScannedLine =
  | { number: number; bytes: Buffer; terminated: boolean }
  /** A piece of a line over MAX_PARSE_BYTES, in order; the line's end follows. */
  | { part: Buffer }
  /** The end of a line over MAX_PARSE_BYTES (its pieces came before it). */
  | { number: number; bytes?: undefined; terminated: boolean; length: number };

/**
 * Lines as exact bytes without their `\n`; the last one may be unterminated (a torn tail). A line
 * over MAX_PARSE_BYTES comes as its pieces, as they are read, then its end: holding it whole (and
 * a copy of it, to join the chunks) took twice its size in memory, 6 GB for a 3 GB sparse file.
 */
async function* splitLines(fh: FileHandle): AsyncGenerator<ScannedLine> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  /** Bytes of the current line given out as pieces (0: it is still held in `pending`). */
  let streamed = 0;
  let number = 0;
  const take = function* (part: Buffer): Generator<ScannedLine> {
    if (streamed > 0) {
      streamed += part.length;
      yield { part };
      return;
    }
    pending.push(part);
    pendingBytes += part.length;
    if (pendingBytes <= MAX_PARSE_BYTES) return;
    for (const held of pending) yield { part: held };
    streamed = pendingBytes;
    pending = [];
    pendingBytes = 0;
  };
  const end = (terminated: boolean): ScannedLine => {
    const line: ScannedLine = streamed > 0 ? { number, terminated, length: streamed } : { number, bytes: Buffer.concat(pending, pendingBytes), terminated };
    pending = [];
    pendingBytes = 0;
    streamed = 0;
    return line;
  };
  for await (const chunk of fh.createReadStream({ highWaterMark: READ_CHUNK_BYTES, autoClose: false }) as AsyncIterable<Buffer>) {
    let start = 0;
    for (let newline = chunk.indexOf(NEWLINE, start); newline !== -1; newline = chunk.indexOf(NEWLINE, start)) {
      yield* take(chunk.subarray(start, newline));
      number += 1;
      yield end(true);
      start = newline + 1;
    }
    // Copied: the stream may reuse its chunk's memory for the next read.
    if (start < chunk.length) yield* take(Buffer.from(chunk.subarray(start)));
  }
  if (pendingBytes > 0 || streamed > 0) {
    number += 1;
    yield end(false);
  }
}

/** Gathers record lines and writes them in large chunks. */
export class ChunkedWriter implements LineKeeper {
  private parts: Buffer[] = [];
  private size = 0;
  private static readonly NEWLINE_BYTES = Buffer.from('\n');

  constructor(private readonly fh: FileHandle) {}

  async line(bytes: Buffer): Promise<void> {
    await this.part(bytes);
    await this.endLine();
  }

  async part(bytes: Buffer): Promise<void> {
    this.parts.push(bytes);
    this.size += bytes.length;
    if (this.size >= WRITE_CHUNK_BYTES) await this.flush();
  }

  async endLine(): Promise<void> {
    await this.part(ChunkedWriter.NEWLINE_BYTES);
  }

  async flush(): Promise<void> {
    if (this.parts.length === 0) return;
    const data = Buffer.concat(this.parts);
    this.parts = [];
    this.size = 0;
    let offset = 0;
    while (offset < data.length) {
      const { bytesWritten } = await this.fh.write(data, offset, data.length - offset);
      if (bytesWritten <= 0) throw Object.assign(new Error('write made no progress'), { code: 'EIO' });
      offset += bytesWritten;
    }
  }
}
