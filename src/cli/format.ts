// Small text formatters shared by the human-readable outputs: ages, times in the configured
// zone, sizes, and tables padded by display width (a CJK character or an emoji takes two columns).

import { formatInstant } from '../policy/index.js';

export function formatAge(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '-';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

/** An instant in `timeZone` (see `displayTimeZone`), ISO 8601 with the zone's offset; UTC without one. */
export function formatTime(ms: number | null | undefined, timeZone?: string): string {
  return ms === null || ms === undefined ? '-' : formatInstant(ms, timeZone);
}

/** Most cells are plain ASCII (keys, ages, ids): one column per character, no Unicode tables needed. */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/**
 * Columns a text takes on a terminal: wide East Asian characters and emoji count 2, combining
 * marks 0 (string-width). Its Unicode tables take longer to load than a whole `sessions --json`
 * of ten thousand rows, so they are loaded only when a table has a cell that needs them.
 */
async function displayWidthFor(cells: string[]): Promise<(text: string) => number> {
  if (cells.every((cell) => PRINTABLE_ASCII.test(cell))) return (text) => text.length;
  const { default: stringWidth } = await import('string-width');
  return (text) => (PRINTABLE_ASCII.test(text) ? text.length : stringWidth(text));
}

export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined) return '-';
  if (bytes < 1024) return `${bytes}b`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)}kb`;
  return `${(bytes / 1024 / 1024).toFixed(1)}mb`;
}

/** Control characters and bidirectional overrides, which a terminal would act on rather than show. */
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text from the store or a runner (a model name, a peer id) as it may be shown on a terminal: an
 * escape sequence, BEL or an RTL override in it is written as `\u{…}`, never sent to the terminal.
 */
export function printable(text: string): string {
  // Store fields are shown as they are; one of another type than the display expects (a model
  // that is a number, written by some other tool) is shown as JSON rather than failing the command.
  if (typeof text !== 'string') text = JSON.stringify(text) ?? String(text);
  return text.replace(UNPRINTABLE, (char) => `\\u{${char.codePointAt(0)!.toString(16)}}`);
}

/**
 * Text of several lines from the store (a message, a sender's name) as it may be shown: each line
 * printable, the later ones indented by `indent`. A message holding a newline and a line of its
 * own making ("2026-12-03 08:00:00Z  assistant: …") could otherwise pass for another record.
 */
export function printableLines(text: string, indent: string): string {
  return text
    .split(/\r?\n/)
    .map((line) => printable(line))
    .join(`\n${indent}`);
}

/** A left-aligned text table, columns lined up by display width; the last column is not padded. */
export async function table(headers: string[], rawRows: string[][]): Promise<string> {
  const rows = rawRows.map((row) => row.map(printable));
  const width = await displayWidthFor([...headers, ...rows.flat()]);
  const widths = headers.map((h, i) => rows.reduce((widest, r) => Math.max(widest, width(r[i] ?? '')), width(h)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell + ' '.repeat(Math.max(0, widths[i] - width(cell)))))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}

/** What expired with a rotated instance, for the line that reports the rotation ('' for nothing). */
export function expiredText(expired: readonly { runId: string; requester: string }[] | undefined): string {
  if (expired === undefined || expired.length === 0) return '';
  return `; ${expired.length} waiting message(s) of the old instance expired: ${expired.map((event) => `${event.runId} (${printable(event.requester)})`).join(', ')}`;
}

/** How the turn before the reset went, for the one-line summary ('' when none is configured). */
export function beforeResetText(report: { status: string; reason?: string; message?: string } | null | undefined): string {
  if (report === null || report === undefined) return '';
  if (report.status === 'done') return '; turn before reset: done';
  return `; turn before reset ${report.status}${report.message ? `: ${report.message}` : ''} (reset anyway)`;
}
