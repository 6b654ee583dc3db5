// The socket's group commit (server/ingest-queue.ts) with an engine stand-in that takes as long as
// a store batch: which requests share a batch, and that closing never leaves anyone waiting.

import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import type { NdjsonLine } from '../../src/core/index.js';
import type { EngineContext, IngestEvent } from '../../src/engine/index.js';
import { IngestQueue } from '../../src/server/ingest-queue.js';

const ENGINE = {} as EngineContext;
const BATCH_MS = 10;

/** An ingest that takes BATCH_MS per batch and records each batch's size. */
function slowIngest(sizes: number[]) {
  return async (_engine: EngineContext, lines: NdjsonLine[]): Promise<IngestEvent[]> => {
    sizes.push(lines.length);
    await sleep(BATCH_MS);
    return lines.map((line) => ({ type: 'result', line: line.line }) as unknown as IngestEvent);
  };
}

const oneLine = (text: string): NdjsonLine[] => [{ line: 1, text }];

test('clients that send again as soon as they are answered end up sharing every batch (no alternating halves)', async () => {
  const sizes: number[] = [];
  const queue = new IngestQueue(slowIngest(sizes));
  const CLIENTS = 10;
  const ROUNDS = 12;
  // Staggered starts: the first client's request is stored alone while the others arrive, which
  // without gathering makes the clients take turns in two groups for as long as they keep sending.
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      if (client > 0) await sleep(2);
      for (let round = 0; round < ROUNDS; round++) {
        const events = await queue.submit(ENGINE, oneLine(`client ${client} round ${round}`));
        assert.equal(events.length, 1);
        // A real client answers after its socket read: not in the same turn as the answer.
        await new Promise((resolve) => setImmediate(resolve));
      }
    }),
  );
  assert.equal(sizes.reduce((a, b) => a + b, 0), CLIENTS * ROUNDS, 'every request stored once');
  // After the start, every batch holds every client's request.
  assert.ok(sizes.length <= ROUNDS + 2, `batches ${JSON.stringify(sizes)}`);
  assert.deepEqual(sizes.slice(2, -1), Array(sizes.length - 3).fill(CLIENTS), `batches ${JSON.stringify(sizes)}`);
});

test('closing while the queue waits for more ends the wait: later requests are refused, nothing hangs', async () => {
  const sizes: number[] = [];
  const queue = new IngestQueue(slowIngest(sizes));
  await queue.submit(ENGINE, oneLine('first'));
  // The queue now waits (briefly) for this client's next request; close instead.
  queue.close(() => new Error('closing'));
  await queue.whenIdle();
  await assert.rejects(queue.submit(ENGINE, oneLine('late')), /closing/);
  assert.deepEqual(sizes, [1]);
});
