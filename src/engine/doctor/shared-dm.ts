// Doctor step: sessions that more than one DM sender shares under `dmScope: "main"` (a privacy
// warning, never a problem: only the owner can decide the config; the exit status is unchanged).

import { storeSharedDmWarnings } from '../shared-dm.js';
import type { StoreCheck } from './store-check.js';

export async function checkSharedDm(doc: StoreCheck): Promise<void> {
  if (doc.store !== null) doc.report.warnings.push(...storeSharedDmWarnings(doc.ctx, doc.store));
}
