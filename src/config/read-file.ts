// Reading a config file (the config itself, a file it extends or includes): opened without waiting
// on a FIFO and checked to be a regular file of bounded size first. A FIFO would wait for a writer
// forever (deaf to SIGTERM, since the read blocks the event loop), and `/dev/zero` would be read
// until memory ran out.

import fs from 'node:fs';
import { describeFileKind, fileKindOf } from '../core/index.js';

/** Why a config file could not be read; `message` says it in words. */
export class ConfigFileProblem extends Error {
  constructor(
    readonly kind: 'missing' | 'not-regular' | 'too-large' | 'hard-linked' | 'unreadable',
    message: string,
    readonly size?: number,
  ) {
    super(message);
  }
}

/** The text of `file`, or a ConfigFileProblem. `refuseHardLinks`: a file with another hard link is refused (as OpenClaw refuses such an include). */
export function readConfigText(file: string, maxBytes: number, options: { refuseHardLinks?: boolean } = {}): string {
  let fd: number | undefined;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    const stat = fs.fstatSync(fd);
    if (!stat.isFile()) throw new ConfigFileProblem('not-regular', `it is ${describeFileKind(fileKindOf(stat))}, not a regular file`);
    if (options.refuseHardLinks && stat.nlink > 1) throw new ConfigFileProblem('hard-linked', 'it has other hard links');
    if (stat.size > maxBytes) throw new ConfigFileProblem('too-large', `it is ${stat.size} bytes, more than the ${maxBytes} allowed`, stat.size);
    return fs.readFileSync(fd, 'utf8');
  } catch (err) {
    if (err instanceof ConfigFileProblem) throw err;
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new ConfigFileProblem('missing', 'it does not exist');
    throw new ConfigFileProblem('unreadable', (err as Error).message);
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}
