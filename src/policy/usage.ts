// What a runner's `usage` report does to the session entry, in OpenClaw's field names (model,
// modelProvider, inputTokens, outputTokens, totalTokens, totalTokensFresh, contextTokens). Pure.

/** A runner's usage report (the protocol's `usage` event); every field optional. */
export interface UsageReport {
  model?: string;
  provider?: string;
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  contextTokens?: number;
}

/** Fields of one instance's context: a new instance starts without them. */
const INSTANCE_USAGE_FIELDS = ['inputTokens', 'outputTokens', 'totalTokens', 'totalTokensFresh'] as const;

/**
 * Applies a report to an entry (the latest report wins, as OpenClaw keeps the latest run's
 * figures): `totalTokens` is the context in use, so it is marked fresh (`totalTokensFresh`);
 * `contextTokens` is the model's window. Fields the report leaves out are kept. Returns whether
 * anything changed.
 */
export function applyUsageReport(entry: Record<string, unknown>, report: UsageReport): boolean {
  const before = JSON.stringify(entry);
  if (report.model !== undefined) entry.model = report.model;
  if (report.provider !== undefined) entry.modelProvider = report.provider;
  if (report.inputTokens !== undefined) entry.inputTokens = report.inputTokens;
  if (report.outputTokens !== undefined) entry.outputTokens = report.outputTokens;
  if (report.totalTokens !== undefined) {
    entry.totalTokens = report.totalTokens;
    entry.totalTokensFresh = true;
  }
  if (report.contextTokens !== undefined) entry.contextTokens = report.contextTokens;
  return JSON.stringify(entry) !== before;
}

/** A rotation's new instance has an empty context: the old one's token counts do not carry over. */
export function clearInstanceUsage(entry: Record<string, unknown>): void {
  for (const field of INSTANCE_USAGE_FIELDS) delete entry[field];
}
