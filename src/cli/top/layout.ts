// The lines of the `switchboard top` screen, computed from a snapshot, the selection and the
// terminal size: a pure function, so the layout is the same in tests and in a terminal.

import { rowId, type SelectableRow, type TopSnapshot } from './snapshot.js';

export type Tone = 'title' | 'header' | 'selected' | 'error' | 'warn' | 'ok' | 'dim' | 'plain';

export interface ScreenLine {
  text: string;
  tone: Tone;
}

export interface StatusLine {
  /** ask: a question waiting for y/n. */
  tone: 'info' | 'ok' | 'error' | 'ask';
  text: string;
}

export interface LayoutInput {
  snapshot: TopSnapshot | null;
  selected: SelectableRow | null;
  status: StatusLine | null;
  width: number;
  height: number;
}

export const KEYS_HELP = 'up/down or j/k select   c cancel queued item   a abort session   q quit';

interface Column {
  header: string;
  max: number;
  /** Set on columns that give up room (down to this) so that a row fits the terminal's width. */
  min?: number;
}

function clip(text: string, width: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  if (line.length <= width) return line;
  return width <= 1 ? line.slice(0, width) : `${line.slice(0, width - 1)}…`;
}

/**
 * Header and rows as aligned text; column widths fit the content up to each column's max, then
 * the widest shrinkable column gives up room until a row fits in `room` (80 columns keep every
 * column on screen instead of cutting the last ones off).
 */
function tabulate(columns: Column[], rows: string[][], room: number): { header: string; rows: string[] } {
  const widths = columns.map((column, i) => Math.min(column.max, Math.max(column.header.length, ...rows.map((row) => row[i]?.length ?? 0))));
  let total = widths.reduce((sum, w) => sum + w, 0) + 2 * (columns.length - 1);
  while (total > room) {
    let widest = -1;
    columns.forEach((column, i) => {
      if (column.min !== undefined && widths[i] > column.min && (widest < 0 || widths[i] > widths[widest])) widest = i;
    });
    if (widest < 0) break;
    widths[widest]--;
    total--;
  }
  const line = (cells: string[]): string =>
    cells
      .map((cell, i) => clip(cell, widths[i]).padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return { header: line(columns.map((column) => column.header)), rows: rows.map(line) };
}

/** A duration in its two largest units (42s, 3m07s, 2h05m, 3d04h): seconds still matter in a live view. */
export function age(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '-';
  const s = Math.floor(Math.max(0, ms) / 1000);
  const two = (n: number): string => String(n).padStart(2, '0');
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${two(s % 60)}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h${two(Math.floor(s / 60) % 60)}m`;
  return `${Math.floor(s / 86_400)}d${two(Math.floor(s / 3600) % 24)}h`;
}

/** The marker comes first so that clipping a long key never hides it. */
function sessionLabel(row: { sessionKey: string; incognito?: boolean }): string {
  return row.incognito ? `(incognito) ${row.sessionKey}` : row.sessionKey;
}

function owner(pid: number | null, host: string | null): string {
  return pid === null ? '-' : `${pid}@${host ?? '?'}`;
}

/**
 * How many rows each panel may show: every non-empty panel gets at least one, then the rest is
 * handed out one row at a time in panel order, so no panel starves the others.
 */
export function allocateRows(needs: number[], budget: number): number[] {
  const given: number[] = needs.map((need) => (need > 0 && budget > 0 ? 1 : 0));
  let left = budget - given.reduce((a, b) => a + b, 0);
  let progress = true;
  while (left > 0 && progress) {
    progress = false;
    for (let i = 0; i < needs.length && left > 0; i++) {
      if (given[i] < needs[i]) {
        given[i]++;
        left--;
        progress = true;
      }
    }
  }
  return given;
}

/** The rows of a panel that fit, keeping `keep` (the selected row) visible; "… N more" when cut. */
function visibleRows(rows: string[], limit: number, keep: number): { lines: string[]; start: number; more: boolean } {
  if (rows.length <= limit) return { lines: rows, start: 0, more: false };
  const shown = Math.max(1, limit - 1); // the last line says how many more there are
  const start = keep < 0 ? 0 : Math.min(Math.max(0, keep - shown + 1), rows.length - shown);
  return { lines: rows.slice(start, start + shown), start, more: true };
}

export function screenLines(input: LayoutInput): ScreenLine[] {
  const { snapshot, selected, status, width } = input;
  const out: ScreenLine[] = [];
  const push = (text: string, tone: Tone = 'plain'): void => void out.push({ text: text.length > width ? `${text.slice(0, Math.max(0, width - 1))}…` : text, tone });
  if (snapshot === null) {
    push('switchboard top: reading…', 'title');
    return out;
  }
  const now = snapshot.takenAt;
  // The time first: a long source label is what gets cut on a narrow terminal.
  push(`switchboard top  ${new Date(now).toISOString().slice(11, 19)}Z  source: ${snapshot.sourceLabel}`, 'title');
  if (snapshot.error) push(`refresh failed: ${snapshot.error}`, 'error');

  const selectedId = selected ? rowId(selected) : null;
  // Rows are indented by two ("> " marks the selected one).
  const room = Math.max(20, width - 2);
  const activeTable = tabulate(
    [
      { header: 'Session', max: 44, min: 16 },
      { header: 'Run', max: 38, min: 8 },
      { header: 'Lane', max: 5 },
      { header: 'Age', max: 6 },
      { header: 'Pid', max: 24, min: 8 },
      { header: 'State', max: 12 },
    ],
    snapshot.active.map((run) => [sessionLabel(run), run.runId, run.lane, age(now - run.startedAt), owner(run.pid, run.hostname), run.state]),
    room,
  );
  const queuedTable = tabulate(
    [
      { header: 'Session', max: 44, min: 14 },
      { header: 'Run', max: 38, min: 8 },
      { header: '#', max: 3 },
      { header: 'Mode/kind', max: 20, min: 13 },
      { header: 'State', max: 7 },
      { header: 'Owner', max: 24, min: 8 },
      { header: 'From', max: 16, min: 6 },
      { header: 'Age', max: 6 },
    ],
    snapshot.queued.map((item) => [
      sessionLabel(item),
      item.runId,
      String(item.position),
      `${item.mode}/${item.kind}`,
      item.state,
      item.owner ? `${owner(item.owner.pid, item.owner.hostname)}${item.owner.alive === false ? ' (dead)' : ''}` : '-',
      item.requester,
      age(now - item.enqueuedAt),
    ]),
    room,
  );
  const lockTable = tabulate(
    [
      { header: 'Lock', max: 72, min: 16 },
      { header: 'Holder', max: 24, min: 8 },
      { header: 'Age', max: 6 },
      { header: 'MaxHold', max: 7 },
      { header: 'State', max: 22, min: 9 },
      { header: 'Session', max: 44, min: 10 },
    ],
    snapshot.locks.map((lock) => [lock.path, owner(lock.pid, lock.hostname), age(lock.ageMs), age(lock.maxHoldMs), lock.state, lock.sessionKey ?? '-']),
    room,
  );
  const eventRows = snapshot.events.map((event) =>
    [`${age(now - event.at).padStart(6)} ago`, event.type.padEnd(12), event.sessionKey ?? '-', event.runId ? `run ${event.runId}` : '', event.detail].filter((part) => part !== '').join('  '),
  );

  // Fixed lines: header (+ error), lanes title and rows, each panel's title (and column header
  // when it has rows), the status line and the keys line; one line is left free so the terminal
  // never scrolls.
  const panels = [snapshot.active.length, snapshot.queued.length, snapshot.locks.length, snapshot.events.length];
  const fixed = out.length + 1 + snapshot.lanes.length + panels.reduce((sum, n, i) => sum + 1 + (n > 0 ? (i < 3 ? 1 : 0) : 1), 0) + 2 + 1;
  const [activeRows, queuedRows, lockRows, eventLines] = allocateRows(panels, Math.max(0, input.height - fixed));

  push('Lanes', 'title');
  for (const lane of snapshot.lanes) {
    const cells = Math.min(lane.capacity, 20);
    const filled = lane.capacity > 0 ? Math.min(cells, Math.ceil((lane.used / lane.capacity) * cells)) : 0;
    const bar = `[${'#'.repeat(filled)}${'-'.repeat(cells - filled)}]`;
    push(`  ${lane.lane.padEnd(5)} ${bar} ${lane.used}/${lane.capacity}`, lane.used >= lane.capacity && lane.capacity > 0 ? 'warn' : 'plain');
  }

  const selectablePanel = (title: string, count: number, table: { header: string; rows: string[] }, kind: 'active' | 'queued', ids: string[], limit: number, empty: string): void => {
    push(`${title} (${count})`, 'title');
    if (count === 0) {
      push(`  ${empty}`, 'dim');
      return;
    }
    push(`  ${table.header}`, 'header');
    const keep = ids.findIndex((id) => `${kind}:${id}` === selectedId);
    const { lines, start, more } = visibleRows(table.rows, limit, keep);
    lines.forEach((line, i) => {
      const isSelected = start + i === keep;
      push(`${isSelected ? '>' : ' '} ${line}`, isSelected ? 'selected' : 'plain');
    });
    if (more) push(`  ... ${count - lines.length} more`, 'dim');
  };
  selectablePanel('Active runs', snapshot.active.length, activeTable, 'active', snapshot.active.map((run) => run.runId), activeRows, 'no active runs');
  selectablePanel('Queued', snapshot.queued.length, queuedTable, 'queued', snapshot.queued.map((item) => item.runId), queuedRows, 'nothing queued');

  push(`Locks (${snapshot.locks.length})`, 'title');
  if (snapshot.locks.length === 0) push('  no locks held', 'dim');
  else {
    push(`  ${lockTable.header}`, 'header');
    const { lines, more } = visibleRows(lockTable.rows, lockRows, -1);
    lines.forEach((line, i) => push(`  ${line}`, snapshot.locks[i].state === 'held' ? 'plain' : 'warn'));
    if (more) push(`  ... ${snapshot.locks.length - lines.length} more`, 'dim');
  }

  push(`Events (${snapshot.source === 'server' ? 'pushed by the server' : 'changes seen in the store'}, newest first)`, 'title');
  if (eventRows.length === 0) push('  none yet', 'dim');
  else for (const line of eventRows.slice(0, Math.max(1, eventLines))) push(`  ${line}`, 'plain');

  if (status) push(`status: ${status.text}`, status.tone === 'error' ? 'error' : status.tone === 'ok' ? 'ok' : status.tone === 'ask' ? 'warn' : 'plain');
  else push(selected ? `status: selected ${selected.kind === 'active' ? 'run' : 'queued item'} ${selected.runId} of ${selected.sessionKey}` : 'status: nothing to select', 'dim');
  push(KEYS_HELP, 'dim');
  // Never as tall as the terminal: a full screen makes ink clear it (and with it the scrollback).
  const limit = Math.max(2, input.height - 1);
  if (out.length > limit) out.splice(limit - 2, out.length - limit);
  return out;
}
