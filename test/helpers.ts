// Shared test helpers: temp dirs and running the real bin/switchboard as a child process.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SwitchboardError } from '../src/core/index.js';
import jsonlModule from 'jsonl-parse-stringify';

// A CommonJS module whose class is its `default` export.
const JSONL = jsonlModule.default;

/** The repository root (tests run from dist/test/...). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BIN = path.join(REPO_ROOT, 'bin', 'switchboard');

const tempDirs: string[] = [];

/** A fresh folder under the OS temp dir, removed when the test process exits. */
export function tempDir(prefix = 'sb-test-'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  if (tempDirs.push(dir) === 1) {
    process.on('exit', () => {
      for (const made of tempDirs) fs.rmSync(made, { recursive: true, force: true });
    });
  }
  return dir;
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  input?: string | Buffer;
  env?: Record<string, string | undefined>;
  cwd?: string;
  timeoutMs?: number;
}

/** Runs `switchboard <args>` with a clean environment (no inherited SWITCHBOARD_* variables). */
export function runCli(args: string[], options: RunOptions = {}): Promise<CliResult> {
  const env: Record<string, string | undefined> = { ...process.env, NO_COLOR: '1' };
  for (const key of Object.keys(env)) if (key.startsWith('SWITCHBOARD_')) delete env[key];
  Object.assign(env, options.env);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env, cwd: options.cwd ?? REPO_ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
  });
}

/**
 * `ingest <file> --json` of `messages` written to a file in `dir` first, so that they form one
 * batch; `run` runs the command (with the caller's state dir, config and timers).
 */
export async function ingestAsOneBatch(
  run: (...args: string[]) => Promise<CliResult>,
  dir: string,
  messages: Record<string, unknown>[],
): Promise<{ code: number | null; events: any[]; stderr: string }> {
  const input = path.join(dir, `input-${Math.random().toString(36).slice(2)}.ndjson`);
  fs.writeFileSync(input, `${messages.map((m) => JSON.stringify(m)).join('\n')}\n`);
  const r = await run('ingest', input, '--json');
  fs.unlinkSync(input);
  return { code: r.code, events: jsonLines(r.stdout), stderr: r.stderr };
}

/**
 * One session per peer written through `ingest` (one batch), then a second write to the first
 * peer, so that sessions.json.bak exists too.
 */
export async function seedPeers(
  ingest: (messages: Record<string, unknown>[]) => Promise<{ code: number | null; stderr: string }>,
  peers: string[],
  message: (peer: string, text: string) => Record<string, unknown>,
): Promise<void> {
  for (const batch of [peers.map((p) => message(p, `hello from ${p}`)), [message(peers[0]!, 'again')]]) {
    const r = await ingest(batch);
    assert.equal(r.code, 0, r.stderr);
  }
}

/**
 * Every JSON line of a command's whole output (the JSONL library the design card names; our own
 * NDJSON reader is for streams, where each bad line must be named by its number).
 */
export function jsonLines(text: string): any[] {
  return JSONL.parse(text);
}

export function writeJson(file: string, value: unknown): string {
  fs.writeFileSync(file, JSON.stringify(value, null, 2));
  return file;
}

/** Asserts that `action` throws CONFIG_INVALID (exit 78) naming the JSON path `path`. */
export function assertConfigInvalid(action: () => unknown, path: string): void {
  assert.throws(action, (error: unknown) => {
    assert.ok(error instanceof SwitchboardError);
    assert.equal(error.code, 'CONFIG_INVALID');
    assert.equal(error.exitCode, 78);
    assert.equal(error.details?.path, path);
    return true;
  });
}

/**
 * A private copy of a state dir that OpenClaw wrote at `writtenAt` (a fixture): the absolute
 * sessionFile paths in its sessions.json files are moved to the copy, as if written there.
 */
export function copyOpenClawState(fixture: string, writtenAt: string, prefix = 'sb-openclaw-'): string {
  const state = tempDir(prefix);
  fs.cpSync(fixture, state, { recursive: true });
  for (const agent of fs.readdirSync(path.join(state, 'agents'))) {
    const file = path.join(state, 'agents', agent, 'sessions', 'sessions.json');
    fs.writeFileSync(file, fs.readFileSync(file, 'utf8').split(writtenAt).join(state));
  }
  return state;
}

/** A process's resident memory now (Linux: /proc/<pid>/status). */
export function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (match === null) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(match[1]) * 1024;
}
