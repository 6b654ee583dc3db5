// Starting `switchboard serve`: load the config, claim the socket (never from a live server), hand
// connections to the Server; and the process signals that stop or reload it.

import net from 'node:net';
import path from 'node:path';
import { Server, type StartServerOptions, type StopSummary, type SwitchboardServer } from './server.js';
import { checkSocketPath, claimSocket, defaultSocketPath, prepareSocketFolder } from './socket-file.js';

/**
 * Loads the config, claims the socket (refusing if a live server owns it, replacing a dead one's
 * file) and starts answering. Errors: CONFIG_INVALID for a bad config, STORE_BUSY (exit 75) when
 * another server is listening, USAGE for a bad socket path, IO for folder or socket trouble.
 */
export async function startServer(options: StartServerOptions): Promise<SwitchboardServer> {
  const loaded = await options.loadEngine();
  const stateDir = path.resolve(loaded.engine.stateDir);
  const socketPath = checkSocketPath(options.socketPath ?? defaultSocketPath(stateDir));
  const folder = path.dirname(socketPath);
  const notes: string[] = [];
  // The state dir is switchboard's own; a folder we create for the socket is too.
  const prepared = await prepareSocketFolder(folder, { ownedByUs: folder === stateDir });
  if (prepared.repaired) notes.push(`made ${folder} private (0700)`);
  const netServer = net.createServer({ allowHalfOpen: true });
  // Clients may connect as soon as the socket is bound, before the server below exists.
  const early: net.Socket[] = [];
  const holdEarly = (socket: net.Socket): void => void early.push(socket);
  netServer.on('connection', holdEarly);
  const identity = await claimSocket(netServer, socketPath, () => notes.push('replaced the stale socket of a server that is gone'));
  netServer.off('connection', holdEarly);
  const server = new Server(loaded, socketPath, netServer, identity, options, early);
  const resumed = await server.resumeQueues();
  if (resumed > 0) notes.push(`resumed ${resumed} waiting queue(s)`);
  options.log?.(
    `switchboard serve: listening on ${socketPath} (pid ${process.pid}, config ${loaded.configPath ?? '(built-in defaults)'}, state ${stateDir})${notes.length > 0 ? `; ${notes.join('; ')}` : ''}`,
  );
  return server;
}

/**
 * Ties a server to the process's signals until it stops: SIGTERM/SIGINT stop it (a second one
 * ends the grace period at once), SIGHUP reloads the config.
 */
export function stopOnSignals(server: SwitchboardServer, options: { graceMs?: number } = {}): Promise<StopSummary> {
  const onStop = (signal: NodeJS.Signals): void => {
    if (stopRequested) {
      server.abortNow();
      return;
    }
    stopRequested = true;
    void server.stop({ graceMs: options.graceMs, reason: signal });
  };
  const onReload = (): void => void server.reload();
  let stopRequested = false;
  process.on('SIGTERM', onStop);
  process.on('SIGINT', onStop);
  process.on('SIGHUP', onReload);
  return server.stopped.finally(() => {
    process.off('SIGTERM', onStop);
    process.off('SIGINT', onStop);
    process.off('SIGHUP', onReload);
  });
}
