// `switchboard top` once the command line is checked: builds the feed, renders the ink app on
// the terminal until q or Ctrl-C. Loaded on demand: ink and react never slow down other commands.

import React from 'react';
import { render } from 'ink';
import type { Clock } from '../../core/index.js';
import type { EngineContext } from '../../engine/index.js';
import type { Streams } from '../output.js';
import { TopFeed } from './feed.js';
import { ServerSource, StoreSource, type EngineForServer } from './sources.js';
import { LiveTop } from './view.js';

/** Everything `top` needs from the command line (built by command.ts, which owns the CliContext). */
export interface TopSetup {
  socketPath: string;
  intervalMs: number;
  clock: Clock;
  streams: Streams;
  color: boolean;
  /** The engine context of the state dir and config given on the command line. */
  storeEngine(): Promise<EngineContext>;
  /** The engine context for the store-side reads next to a server (its state dir and config). */
  serverEngine: EngineForServer;
}

/** The feed of `top`: the server on the socket when one answers, else the store of the state dir. */
export function createTopFeed(setup: Omit<TopSetup, 'streams' | 'color'>): TopFeed {
  return new TopFeed(
    {
      server: () => ServerSource.connect(setup.socketPath, setup.serverEngine, setup.clock),
      store: async () => new StoreSource(await setup.storeEngine()),
    },
    setup.clock,
    setup.intervalMs,
  );
}

/** xterm's alternate screen: top draws there, and leaving it shows the shell's screen as it was. */
/** …and the cursor to its top left: the shell left it at the bottom, where ink would start drawing. */
const ENTER_ALTERNATE_SCREEN = '\u001B[?1049h\u001B[H';
const LEAVE_ALTERNATE_SCREEN = '\u001B[?1049l';
/** "Erase saved lines": ink sends it with every full clear; it would wipe the user's scrollback. */
const ERASE_SCROLLBACK = '\u001B[3J';

/**
 * Draws on the alternate screen and keeps the scrollback: until `restore` is called, every write
 * to stdout loses the erase-scrollback sequence. `restore` (idempotent) leaves the alternate
 * screen; it also runs if the process exits some other way (a signal, an uncaught error).
 */
function takeScreen(stdout: NodeJS.WriteStream): () => void {
  const write = stdout.write;
  stdout.write = function (this: NodeJS.WriteStream, chunk: unknown, ...rest: unknown[]): boolean {
    const text = typeof chunk === 'string' && chunk.includes(ERASE_SCROLLBACK) ? chunk.split(ERASE_SCROLLBACK).join('') : chunk;
    return (write as (...args: unknown[]) => boolean).call(this, text, ...rest);
  } as typeof stdout.write;
  write.call(stdout, ENTER_ALTERNATE_SCREEN);
  let restored = false;
  const restore = (): void => {
    if (restored) return;
    restored = true;
    stdout.write = write;
    process.off('exit', restore);
    write.call(stdout, LEAVE_ALTERNATE_SCREEN);
  };
  // Killed (kill, a closed terminal): leave the screen as it was, then exit as the signal would.
  const onSignal = (signal: NodeJS.Signals): void => {
    restore();
    process.exit(signal === 'SIGHUP' ? 129 : 143);
  };
  const signals: NodeJS.Signals[] = ['SIGTERM', 'SIGHUP'];
  for (const signal of signals) process.on(signal, onSignal);
  process.on('exit', restore);
  return () => {
    for (const signal of signals) process.off(signal, onSignal);
    restore();
  };
}

export async function runTop(setup: TopSetup): Promise<number> {
  const feed = createTopFeed(setup);
  await feed.start();
  const stdout = setup.streams.stdout as NodeJS.WriteStream;
  const restore = takeScreen(stdout);
  try {
    const app = render(React.createElement(LiveTop, { feed, color: setup.color }), {
      stdout,
      stderr: setup.streams.stderr as NodeJS.WriteStream,
      stdin: setup.streams.stdin as NodeJS.ReadStream,
      exitOnCtrlC: true,
      patchConsole: false,
    });
    try {
      await app.waitUntilExit();
    } finally {
      await feed.stop();
    }
  } finally {
    restore();
  }
  return 0;
}
