// The writes and fsyncs both ingest baselines make for one batch: per file, its lines in one
// append and one fsync, POOL files at a time. Shared by bench/ingest.mjs (in-process baseline)
// and bench/harness/ingest-floor.mjs (the floor, a process of its own), so they do the same I/O.

import fs from 'node:fs';
import path from 'node:path';

export const POOL = 32;

/** Appends `lines` to `dir/name` for every [name, lines] of `work`; `handles` keeps files open across batches. */
export async function appendBatch(dir, handles, work) {
  let next = 0;
  await Promise.all(
    Array.from({ length: POOL }, async () => {
      while (next < work.length) {
        const [name, lines] = work[next++];
        let handle = handles.get(name);
        if (!handle) handles.set(name, (handle = await fs.promises.open(path.join(dir, name), 'a', 0o600)));
        await handle.write(`${lines.join('\n')}\n`);
        await handle.sync();
      }
    }),
  );
}
