// A `switchboard serve` child process for e2e tests: started on a temp state dir, its stderr
// watched, stopped with SIGTERM; and a waiter for pushed events on a socket client.

import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { Push, SwitchboardClient } from '../src/server/index.js';
import { BIN, REPO_ROOT } from './helpers.js';

/** The environment of a child switchboard: no colour, no SWITCHBOARD_* leaking in from outside. */
export function cleanEnv(extra: Record<string, string | undefined> = {}): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...process.env, NO_COLOR: '1', UV_THREADPOOL_SIZE: '16' };
  for (const key of Object.keys(env)) if (key.startsWith('SWITCHBOARD_')) delete env[key];
  return Object.assign(env, extra);
}

/** A running server process: its stderr as it comes, and its exit. */
export class ServeProcess {
  stderr = '';
  private readonly waiters: { pattern: RegExp; resolve: () => void }[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    readonly child: ChildProcess,
    readonly socketPath: string,
  ) {
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      this.stderr += chunk;
      for (const waiter of [...this.waiters]) {
        if (waiter.pattern.test(this.stderr)) {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
    });
    child.stdout!.resume();
    this.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  }

  /** Resolves when stderr matches (rejects if the process exits first or after timeoutMs). */
  async waitForStderr(pattern: RegExp, timeoutMs = 20_000): Promise<void> {
    if (pattern.test(this.stderr)) return;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        new Promise<void>((resolve) => this.waiters.push({ pattern, resolve })),
        this.exited.then((exit) => {
          throw new Error(`server exited (${exit.code ?? exit.signal}) before ${pattern}; stderr:\n${this.stderr}`);
        }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern}; stderr:\n${this.stderr}`)), timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGTERM');
      await this.exited;
    }
  }
}

const running = new Set<ServeProcess>();

/** Remembers a server so that stopAllServers() stops it (use it in an `after` hook). */
export function trackServer(server: ServeProcess): ServeProcess {
  running.add(server);
  void server.exited.then(() => running.delete(server));
  return server;
}

export async function stopAllServers(): Promise<void> {
  await Promise.all([...running].map((server) => server.stop()));
}

export async function startServe(state: string, extra: string[] = [], options: { socket?: string; ready?: boolean } = {}): Promise<ServeProcess> {
  const socketPath = options.socket ?? path.join(state, 'switchboard.sock');
  const args = ['serve', '--state-dir', state, ...(options.socket ? ['--socket', options.socket] : []), ...extra];
  const child = spawn(process.execPath, [BIN, ...args], { env: cleanEnv(), cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const server = trackServer(new ServeProcess(child, socketPath));
  if (options.ready !== false) await server.waitForStderr(/listening on/);
  return server;
}

/** Resolves with the first push matching `test` (pushes seen so far included). */
export function pushWaiter(client: SwitchboardClient): (test: (push: Push) => boolean) => Promise<Push> {
  const seen: Push[] = [];
  const waiters: { test: (push: Push) => boolean; resolve: (push: Push) => void }[] = [];
  client.onPush((push) => {
    seen.push(push);
    for (const waiter of [...waiters]) {
      if (waiter.test(push)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(push);
      }
    }
  });
  return (test) => {
    const found = seen.find(test);
    return found ? Promise.resolve(found) : new Promise((resolve) => waiters.push({ test, resolve }));
  };
}
