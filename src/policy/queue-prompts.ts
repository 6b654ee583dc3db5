// The text of the turns the queue makes up itself: the one-line summary of a dropped message, the
// overflow turn, the collect batch, and who a batch is from (queue.md "Cap and drop", "collect").

import type { QueueItem } from './queue-records.js';

export const SUMMARY_MAX_CHARS = 160;

/** One line of at most 160 characters: `<sender>: <text>` with whitespace collapsed. */
export function summaryLine(item: Pick<QueueItem, 'text' | 'sender' | 'requester'>): string {
  const who = senderLabel(item.sender) ?? item.requester;
  const line = `${who}: ${item.text}`.replace(/\s+/g, ' ').trim();
  if (line.length <= SUMMARY_MAX_CHARS) return line;
  return `${line.slice(0, SUMMARY_MAX_CHARS - 1).trimEnd()}…`;
}

/** The overflow turn (queue.md "Cap and drop"). */
export function overflowPrompt(count: number, summaries: readonly string[]): string {
  return [`[Queue overflow] Dropped ${count} message${count === 1 ? '' : 's'} due to cap.`, 'Summary:', ...summaries.map((line) => `- ${line}`)].join('\n');
}

export const COLLECT_HEADER = '[Queued messages while agent was busy]';

export function senderLabel(sender: QueueItem['sender']): string | undefined {
  const name = sender?.name?.trim();
  if (name) return name;
  const id = sender?.id?.trim();
  return id || undefined;
}

/** The collect turn (queue.md): header, then per item `---`, `Queued #<n> (from <sender>)`, the text. */
export function collectPrompt(items: readonly Pick<QueueItem, 'text' | 'sender' | 'requester'>[]): string {
  const lines = [COLLECT_HEADER];
  items.forEach((item, index) => {
    lines.push('---', `Queued #${index + 1} (from ${senderLabel(item.sender) ?? item.requester})`, item.text);
  });
  return lines.join('\n');
}

/** The one sender of a batch, or undefined when the items came from different senders. */
export function singleSender(items: readonly Pick<QueueItem, 'sender' | 'requester'>[]): QueueItem['sender'] | undefined {
  if (items.length === 0) return undefined;
  const identity = (item: Pick<QueueItem, 'sender' | 'requester'>) => item.sender?.id ?? item.sender?.name ?? `requester:${item.requester}`;
  const first = identity(items[0]);
  if (!items.every((item) => identity(item) === first)) return undefined;
  return items[0].sender;
}
