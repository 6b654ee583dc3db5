// Small text formatters shared by the human-readable outputs: ages, times in the configured
// zone, sizes, and tables padded by display width (a CJK character or an emoji takes two columns).

import { formatInstant } from '../policy/index.js';
import { printable } from './output.js';

// Shown-text escaping lives with the output helpers every command loads (error messages use it).
export { printable, printableLines } from './output.js';

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
