// The socket file: where it lives, the private folder around it, and claiming it for one server
// (a live owner refuses the start, a dead owner's leftover file is replaced) with mode 0600.

import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { promises as fsp } from 'node:fs';
import path from 'node:path';
import { SwitchboardError, ioError as coreIoError } from '../core/index.js';
import { DIR_MODE, FILE_MODE, makeDirectories, withLock } from '../store/index.js';

export const SOCKET_FILE_NAME = 'switchboard.sock';

/** sockaddr_un holds 108 bytes on Linux (104 on macOS) including the final NUL. */
const MAX_SOCKET_PATH_BYTES = 103;

/** How long a probe waits for an existing socket to answer before calling its owner alive. */
const PROBE_TIMEOUT_MS = 1_000;

/** `<state>/switchboard.sock` */
export function defaultSocketPath(stateDir: string): string {
  return path.join(path.resolve(stateDir), SOCKET_FILE_NAME);
}

/** The absolute socket path, refused early (USAGE) when the OS could not bind or connect to it. */
export function checkSocketPath(socketPath: string): string {
  if (typeof socketPath !== 'string' || socketPath === '' || socketPath.includes('\0')) {
    throw new SwitchboardError('USAGE', 'the socket path must be a non-empty file path');
  }
  const absolute = path.resolve(socketPath);
  if (Buffer.byteLength(absolute) > MAX_SOCKET_PATH_BYTES) {
    throw new SwitchboardError('USAGE', `socket path ${absolute} is ${Buffer.byteLength(absolute)} bytes; Unix sockets allow at most ${MAX_SOCKET_PATH_BYTES}`, {
      hint: 'pick a shorter path with --socket (for example under $XDG_RUNTIME_DIR)',
    });
  }
  return absolute;
}

export interface FolderOutcome {
  created: boolean;
  /** The folder's mode was looser than 0700 and was tightened. */
  repaired: boolean;
}

function ioError(action: string, target: string, err: unknown): SwitchboardError {
  return coreIoError(`cannot ${action} ${target}`, err, { path: target });
}

/**
 * Makes sure the socket's folder keeps other users out. A folder we create, and the state dir
 * (which switchboard owns), must be 0700: created so, or tightened when looser. A folder the user
 * chose that already exists is used as it is unless others could replace the socket in it
 * (group/world-writable without the sticky bit); the socket itself is 0600 either way.
 */
export async function prepareSocketFolder(dir: string, options: { ownedByUs: boolean }): Promise<FolderOutcome> {
  let stat;
  try {
    stat = await fsp.stat(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError('inspect', dir, err);
    try {
      makeDirectories(dir, DIR_MODE);
      await fsp.chmod(dir, DIR_MODE);
    } catch (mkdirErr) {
      throw ioError('create the socket folder', dir, mkdirErr);
    }
    return { created: true, repaired: false };
  }
  if (!stat.isDirectory()) throw new SwitchboardError('USAGE', `${dir} is not a folder, so it cannot hold the socket`);
  const loose = (stat.mode & 0o077) !== 0;
  const mine = typeof process.getuid !== 'function' || stat.uid === process.getuid();
  if (options.ownedByUs) {
    if (!mine) {
      throw new SwitchboardError('IO', `${dir} belongs to another user; refusing to put the socket there`, { hint: 'use your own state dir, or --socket PATH' });
    }
    if (!loose) return { created: false, repaired: false };
    try {
      await fsp.chmod(dir, DIR_MODE);
    } catch (err) {
      throw ioError('make private (0700)', dir, err);
    }
    return { created: false, repaired: true };
  }
  const othersMayWrite = (stat.mode & 0o022) !== 0 && (stat.mode & 0o1000) === 0;
  if (othersMayWrite) {
    throw new SwitchboardError('IO', `${dir} is writable by other users (mode ${(stat.mode & 0o7777).toString(8)}) and has no sticky bit: they could replace the socket`, {
      hint: 'choose a private folder for --socket (mode 0700), such as the state dir',
    });
  }
  return { created: false, repaired: false };
}

export type ProbeResult =
  | { state: 'absent' }
  | { state: 'not-socket' }
  | { state: 'stale' }
  /** `answered`: a line came back in time (a server that accepts and stays silent is live but not answering). */
  | { state: 'live'; pid?: number; stopping?: boolean; answered?: boolean };

/** What is at the socket path: nothing, a leftover file of a dead server, or a live server. */
export async function probeSocket(socketPath: string, timeoutMs = PROBE_TIMEOUT_MS): Promise<ProbeResult> {
  try {
    const stat = await fsp.lstat(socketPath);
    if (!stat.isSocket()) return { state: 'not-socket' };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { state: 'absent' };
    throw ioError('inspect', socketPath, err);
  }
  return new Promise<ProbeResult>((resolve, reject) => {
    const socket = net.createConnection(socketPath);
    let connected = false;
    let buffered = '';
    const finish = (result: ProbeResult | Error): void => {
      clearTimeout(timer);
      socket.destroy();
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
    // A server that accepts but does not answer in time is still somebody's server: never steal it.
    const timer = setTimeout(() => finish({ state: 'live' }), timeoutMs);
    socket.setEncoding('utf8');
    socket.on('connect', () => {
      connected = true;
      socket.write(`${JSON.stringify({ id: 'probe', op: 'status' })}\n`);
    });
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      const nl = buffered.indexOf('\n');
      if (nl < 0) return;
      try {
        const answer = JSON.parse(buffered.slice(0, nl)) as { result?: { pid?: unknown }; error?: { code?: unknown } };
        const pid = typeof answer.result?.pid === 'number' ? answer.result.pid : undefined;
        finish({ state: 'live', pid, stopping: answer.error?.code === 'UNAVAILABLE', answered: true });
      } catch {
        finish({ state: 'live', answered: true });
      }
    });
    socket.on('end', () => finish({ state: 'live' }));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (connected) return finish({ state: 'live' });
      if (err.code === 'ECONNREFUSED') return finish({ state: 'stale' });
      if (err.code === 'ENOENT') return finish({ state: 'absent' });
      if (err.code === 'EAGAIN') return finish({ state: 'live' }); // backlog full: very much alive
      finish(ioError('connect to', socketPath, err));
    });
  });
}

function refuseLive(socketPath: string, probe: { pid?: number; stopping?: boolean }): SwitchboardError {
  const who = probe.pid !== undefined ? `another switchboard serve (pid ${probe.pid})` : 'another server';
  return new SwitchboardError('STORE_BUSY', `${who} ${probe.stopping ? 'is still stopping on' : 'is already listening on'} ${socketPath}`, {
    hint: probe.stopping
      ? 'try again in a moment'
      : `one server per socket: stop it first${probe.pid !== undefined ? ` (kill -TERM ${probe.pid})` : ''}, or use --socket OTHER_PATH`,
    details: { socketPath, pid: probe.pid },
  });
}

export interface SocketIdentity {
  dev: number;
  ino: number;
}

async function listenOnce(server: net.Server, socketPath: string): Promise<NodeJS.ErrnoException | null> {
  return new Promise((resolve) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      server.off('listening', onListening);
      resolve(err);
    };
    const onListening = (): void => {
      server.off('error', onError);
      resolve(null);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    // The bind happens inside listen(): with this umask the socket is born 0600, so there is no
    // moment at which another user could connect; the chmod below only makes sure of it.
    const previous = process.umask(0o177);
    try {
      server.listen(socketPath);
    } finally {
      process.umask(previous);
    }
  });
}

/**
 * Binds `server` to the socket path: under a temporary name beside it, then hard-linked into place.
 * libuv unlinks the path a listener was bound to when it is closed (at exit too), whatever that
 * path holds by then: when a server's socket file had been removed and another server started on
 * the path, stopping the first deleted the second one's socket and left it running unreachable.
 * Bound to a name of its own, a listener can only ever unlink that name. link() fails rather than
 * replace a file put at the path meanwhile, reported as EADDRINUSE as a bind would be. Where the
 * temporary name would be too long, or the file system refuses hard links, the path is bound directly.
 */
async function bindSocket(server: net.Server, socketPath: string): Promise<NodeJS.ErrnoException | null> {
  const bindPath = path.join(path.dirname(socketPath), `.sb-${randomBytes(4).toString('hex')}`);
  if (Buffer.byteLength(bindPath) > MAX_SOCKET_PATH_BYTES) return listenOnce(server, socketPath);
  const failure = await listenOnce(server, bindPath);
  if (failure !== null) return failure;
  try {
    await fsp.link(bindPath, socketPath);
  } catch (err) {
    await new Promise<void>((resolve) => server.close(() => resolve())); // unlinks bindPath
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return Object.assign(new Error(`${socketPath} exists`), { code: 'EADDRINUSE' });
    if (code === 'EPERM' || code === 'ENOTSUP' || code === 'EOPNOTSUPP' || code === 'EMLINK') return listenOnce(server, socketPath);
    return err as NodeJS.ErrnoException;
  }
  await fsp.unlink(bindPath).catch(() => undefined);
  return null;
}

/**
 * Binds `server` to the socket path for this process alone. Start-ups are serialised by a lock
 * next to the socket, so two servers starting at once cannot both decide a file is stale.
 */
export async function claimSocket(server: net.Server, socketPath: string, onStale: (socketPath: string) => void): Promise<SocketIdentity> {
  return withLock(socketPath, { busyCode: 'STORE_BUSY', acquireTimeoutMs: 10_000 }, async () => {
    for (let attempt = 0; ; attempt++) {
      const probe = await probeSocket(socketPath);
      if (probe.state === 'live') throw refuseLive(socketPath, probe);
      if (probe.state === 'not-socket') {
        throw new SwitchboardError('USAGE', `${socketPath} exists and is not a socket; refusing to replace it`, { hint: 'remove it yourself, or use --socket OTHER_PATH' });
      }
      if (probe.state === 'stale') {
        try {
          await fsp.unlink(socketPath);
          onStale(socketPath);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError('remove the stale socket', socketPath, err);
        }
      }
      const failure = await bindSocket(server, socketPath);
      if (failure === null) break;
      // Someone outside our lock (an older switchboard, another program) bound it in between.
      if (failure.code === 'EADDRINUSE' && attempt === 0) continue;
      throw failure.code === 'EADDRINUSE' ? refuseLive(socketPath, {}) : ioError('listen on', socketPath, failure);
    }
    try {
      await fsp.chmod(socketPath, FILE_MODE);
      const stat = await fsp.lstat(socketPath);
      return { dev: stat.dev, ino: stat.ino };
    } catch (err) {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      throw ioError('make the socket private (0600)', socketPath, err);
    }
  });
}

/** Removes the socket file if it is still the one this server bound (never another server's). */
export async function removeOwnSocket(socketPath: string, identity: SocketIdentity): Promise<boolean> {
  try {
    const stat = await fsp.lstat(socketPath);
    if (!stat.isSocket() || stat.dev !== identity.dev || stat.ino !== identity.ino) return false;
    await fsp.unlink(socketPath);
    return true;
  } catch {
    return false;
  }
}
