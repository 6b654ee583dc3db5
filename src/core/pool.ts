// A bounded pool for async work: many files or sessions handled with at most `limit` in flight.

/** Runs `task` over `items` with at most `limit` in flight. */
export async function inPool<T>(items: readonly T[], limit: number, task: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      await task(items[index]!, index);
    }
  });
  await Promise.all(workers);
}
