// What a message says about its conversation beyond routing: listing labels (a group's display
// name, subject, space), the sender's raw id in `origin`, and sub-agent lineage. Pure.

/** The message fields this module reads (a subset of the planner's message). */
export interface LabelledMessage {
  sender?: { id?: string; name?: string };
  group?: { displayName?: string; subject?: string; space?: string };
  lineage?: { parentSessionKey?: string; spawnDepth?: number };
}

/**
 * Labels follow the latest message that carries them (a renamed group shows its new name);
 * lineage is written when a message states it. `origin` is the first message's: on creation it
 * keeps the sender's raw id (`senderId`) beside the display label (`sender`). Fields a message
 * does not carry are left as they are. Field names are OpenClaw's (`displayName`, `subject`,
 * `space`, `parentSessionKey`, `spawnDepth`).
 */
export function applyMessageLabels(entry: Record<string, unknown>, message: LabelledMessage, created: boolean): void {
  const origin = entry.origin;
  if (created && message.sender?.id !== undefined && message.sender.id !== '' && origin !== null && typeof origin === 'object') {
    (origin as Record<string, unknown>).senderId = message.sender.id;
  }
  const group = message.group;
  if (group?.displayName !== undefined) entry.displayName = group.displayName;
  if (group?.subject !== undefined) entry.subject = group.subject;
  if (group?.space !== undefined) entry.space = group.space;
  if (message.lineage?.parentSessionKey !== undefined) entry.parentSessionKey = message.lineage.parentSessionKey;
  if (message.lineage?.spawnDepth !== undefined) entry.spawnDepth = message.lineage.spawnDepth;
}
