// The ink components of `switchboard top`: TopView renders a snapshot (pure), TopApp adds the
// selection, keys and status line, LiveTop feeds TopApp from a TopFeed. Loaded only by `top`.

import React from 'react';
import { Box, Text, useApp, useInput, useStdout } from 'ink';
import type { TopFeed } from './feed.js';
import { screenLines, type ScreenLine, type StatusLine } from './layout.js';
import { rowId, selectableRows, type SelectableRow, type TopSnapshot } from './snapshot.js';

const h = React.createElement;

export interface TopViewProps {
  snapshot: TopSnapshot | null;
  selected: SelectableRow | null;
  status: StatusLine | null;
  width: number;
  height: number;
  /** false: no colours or emphasis (NO_COLOR, --no-color). */
  color: boolean;
}

function styleOf(line: ScreenLine, color: boolean): Record<string, unknown> {
  if (!color) return {};
  switch (line.tone) {
    case 'title':
      return { bold: true };
    case 'header':
    case 'dim':
      return { dimColor: true };
    case 'selected':
      return { inverse: true };
    case 'error':
      return { color: 'red' };
    case 'warn':
      return { color: 'yellow' };
    case 'ok':
      return { color: 'green' };
    default:
      return {};
  }
}

/** One screen of `top` for a snapshot: a pure function of its props. */
export function TopView(props: TopViewProps): React.ReactElement {
  const lines = screenLines(props);
  return h(
    Box,
    { flexDirection: 'column', width: props.width },
    ...lines.map((line, i) => h(Text, { key: i, wrap: 'truncate-end', ...styleOf(line, props.color) }, line.text === '' ? ' ' : line.text)),
  );
}

export interface TopAppProps {
  snapshot: TopSnapshot | null;
  /** Cancels the selected queued item; resolves with a line for the status bar. */
  onCancel(row: SelectableRow): Promise<string>;
  /** Aborts the selected row's session (queued items first, then its run). */
  onAbort(row: SelectableRow): Promise<string>;
  width?: number;
  height?: number;
  color?: boolean;
}

function messageOf(err: unknown): string {
  const error = err as { message?: unknown; hint?: unknown };
  const message = typeof error?.message === 'string' ? error.message : String(err);
  return typeof error?.hint === 'string' ? `${message} (${error.hint})` : message;
}

/** The interactive screen: arrows or j/k move the selection, c cancels, a aborts (each after y), q quits. */
export function TopApp(props: TopAppProps): React.ReactElement {
  const { exit } = useApp();
  const [selectedId, setSelectedId] = React.useState<string | null>(null);
  const [lastIndex, setLastIndex] = React.useState(0);
  const [status, setStatus] = React.useState<StatusLine | null>(null);
  const mounted = React.useRef(true);
  React.useEffect(
    () => () => {
      mounted.current = false;
    },
    [],
  );

  const rows = selectableRows(props.snapshot);
  // The selection follows its row across refreshes; when the row is gone, the one now at its place.
  let index = selectedId === null ? -1 : rows.findIndex((row) => rowId(row) === selectedId);
  if (index < 0 && rows.length > 0) index = Math.min(lastIndex, rows.length - 1);
  const selected = index >= 0 ? rows[index] : null;

  // Keys can come faster than renders (key repeat, a paste): they act on the latest selection,
  // not on the one this render saw.
  const latest = React.useRef({ rows, index });
  latest.current = { rows, index };
  const move = (delta: number): void => {
    const { rows: now, index: at } = latest.current;
    if (now.length === 0) return;
    const next = Math.max(0, Math.min(now.length - 1, at + delta));
    latest.current = { rows: now, index: next };
    setSelectedId(rowId(now[next]));
    setLastIndex(next);
  };
  const report = (work: Promise<string>, failed: string): void => {
    work.then(
      (text) => mounted.current && setStatus({ tone: 'ok', text }),
      (err: unknown) => mounted.current && setStatus({ tone: 'error', text: `${failed}: ${messageOf(err)}` }),
    );
  };

  // c and a ask first (y/n on the status line): a stray key never stops someone's work.
  const asking = React.useRef<{ action: 'cancel' | 'abort'; row: SelectableRow } | null>(null);
  const ask = (action: 'cancel' | 'abort', row: SelectableRow): void => {
    asking.current = { action, row };
    const what = action === 'cancel' ? `cancel queued item ${row.runId} of ${row.sessionKey}` : `abort ${row.sessionKey} (its queued items, then its run)`;
    setStatus({ tone: 'ask', text: `${what}? y/n` });
  };
  const answer = (yes: boolean): void => {
    const question = asking.current;
    asking.current = null;
    if (question === null) return;
    const { action, row } = question;
    if (!yes) setStatus({ tone: 'info', text: `${action} ${action === 'cancel' ? row.runId : row.sessionKey}: not done` });
    else if (action === 'cancel') {
      setStatus({ tone: 'info', text: `cancelling ${row.runId}…` });
      report(props.onCancel(row), `cancel ${row.runId} failed`);
    } else {
      setStatus({ tone: 'info', text: `aborting ${row.sessionKey}…` });
      report(props.onAbort(row), `abort ${row.sessionKey} failed`);
    }
  };

  useInput((input, key) => {
    if (asking.current !== null) {
      answer(input === 'y' || input === 'Y');
      return;
    }
    if (input === 'q') {
      exit();
      return;
    }
    const target = latest.current.rows[latest.current.index] ?? null;
    if (key.downArrow || input === 'j') move(1);
    else if (key.upArrow || input === 'k') move(-1);
    else if (input === 'c') {
      if (target === null) setStatus({ tone: 'error', text: 'nothing selected' });
      else if (target.kind !== 'queued') {
        setStatus({ tone: 'error', text: `${target.runId} is an active run, not a queued item: press a to abort its session` });
      } else ask('cancel', target);
    } else if (input === 'a') {
      if (target === null) setStatus({ tone: 'error', text: 'nothing selected' });
      else ask('abort', target);
    }
  });

  return h(TopView, {
    snapshot: props.snapshot,
    selected,
    status,
    width: props.width ?? 100,
    height: props.height ?? 40,
    color: props.color ?? true,
  });
}

export interface LiveTopProps {
  feed: TopFeed;
  color: boolean;
}

/** TopApp on live data: re-rendered on every snapshot of the feed and on terminal resizes. */
export function LiveTop(props: LiveTopProps): React.ReactElement {
  const { feed } = props;
  const { stdout } = useStdout();
  const [snapshot, setSnapshot] = React.useState<TopSnapshot | null>(feed.current);
  const [size, setSize] = React.useState({ width: stdout.columns || 100, height: stdout.rows || 40 });
  React.useEffect(() => {
    const unsubscribe = feed.subscribe(setSnapshot);
    return () => {
      unsubscribe();
    };
  }, [feed]);
  React.useEffect(() => {
    const onResize = (): void => setSize({ width: stdout.columns || 100, height: stdout.rows || 40 });
    stdout.on('resize', onResize);
    return () => {
      stdout.off('resize', onResize);
    };
  }, [stdout]);
  return h(TopApp, {
    snapshot,
    width: size.width,
    height: size.height,
    color: props.color,
    onCancel: (row: SelectableRow) => feed.cancel(row.runId, row.sessionKey),
    onAbort: (row: SelectableRow) => feed.abort(row.sessionKey),
  });
}

