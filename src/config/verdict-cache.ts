// Which config texts were already found valid: `<state>/cache/config.verified` holds the digests
// of the last few. Checking a config against the schema and OpenClaw's rules is most of what
// loading a large one costs (10 000 bindings: ~20 ms of a `route resolve`), and every command
// does it again on files that have not changed. A digest names the exact texts of every layer
// with their paths and the build of the code that checked them, so a change to any of them is a
// miss and a full check. The file is a cache: unreadable, missing or damaged means a miss; it is
// written only into a state dir that already exists, and a failed write is ignored.

import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { packageRoot } from '../core/index.js';
import type { ConfigLayer } from './layers.js';

const CACHE_DIR = 'cache';
const CACHE_FILE = 'config.verified';
/** Digests kept: a few configs used in turn (tests, `--config` for a second setup) all stay hits. */
const KEPT = 8;
const DIGEST = /^[0-9a-f]{64}$/;

/** The build of the checking code: this module's file and the compiled schema validator (rebuilt together). */
function buildStamp(): string {
  const stamp = (file: string): string => {
    try {
      const stat = fs.statSync(file);
      return `${stat.size}:${stat.mtimeMs}`;
    } catch {
      return 'none';
    }
  };
  return `${stamp(fileURLToPath(import.meta.url))} ${stamp(path.join(packageRoot(), 'dist', 'validators', 'config.cjs'))}`;
}

/** The digest of a config as checked: its layers (paths and texts) and the checking code's build. */
export function configDigest(layers: readonly ConfigLayer[]): string {
  const hash = crypto.createHash('sha256').update(`switchboard config verdict 1\0${buildStamp()}\0`);
  for (const layer of layers) hash.update(`${layer.file}\0`).update(layer.text).update('\0');
  return hash.digest('hex');
}

function cacheFile(stateDir: string): string {
  return path.join(stateDir, CACHE_DIR, CACHE_FILE);
}

/** The digests in the cache file; none when it is anything but a small regular file (never a wait on a FIFO). */
function readDigests(stateDir: string): string[] {
  let fd: number | undefined;
  try {
    fd = fs.openSync(cacheFile(stateDir), fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOFOLLOW);
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || stat.size > KEPT * 65) return [];
    return fs.readFileSync(fd, 'utf8').split('\n').filter((line) => DIGEST.test(line));
  } catch {
    return [];
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

export function knownValid(stateDir: string, digest: string): boolean {
  return readDigests(stateDir).includes(digest);
}

/** Notes a digest as valid (newest first), by a write to a temp file and a rename. */
export function rememberValid(stateDir: string, digest: string): void {
  // Only into a state dir that exists, and a cache folder that is a folder (a link could lead anywhere).
  const folder = path.join(stateDir, CACHE_DIR);
  const kind = (file: string) => {
    try {
      return fs.lstatSync(file).isDirectory() ? 'folder' : 'other';
    } catch {
      return 'none';
    }
  };
  if (kind(stateDir) !== 'folder' || kind(folder) === 'other') return;
  const digests = [digest, ...readDigests(stateDir).filter((known) => known !== digest)].slice(0, KEPT);
  const file = cacheFile(stateDir);
  const temp = `${file}.${process.pid}.tmp`;
  try {
    if (kind(folder) === 'none') fs.mkdirSync(folder, { mode: 0o700 });
    fs.writeFileSync(temp, `${digests.join('\n')}\n`, { mode: 0o600, flag: 'wx' });
    fs.renameSync(temp, file);
  } catch {
    fs.rmSync(temp, { force: true });
  }
}
