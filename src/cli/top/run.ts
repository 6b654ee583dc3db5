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

export async function runTop(setup: TopSetup): Promise<number> {
  const feed = createTopFeed(setup);
  await feed.start();
  const app = render(React.createElement(LiveTop, { feed, color: setup.color }), {
    stdout: setup.streams.stdout as NodeJS.WriteStream,
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
  return 0;
}
