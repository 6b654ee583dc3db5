// The session settings every engine command checks before it acts (reset policy, display time
// zone). A module of its own so that loading it loads those checks, not the whole policy layer.

import type { SwitchboardConfig } from '../config/index.js';
import { displayTimeZone, validateResetConfig } from '../policy/index.js';

/** Throws CONFIG_INVALID for a bad session.reset or display time zone. */
export function checkSessionSettings(config: SwitchboardConfig): void {
  validateResetConfig(config.session);
  displayTimeZone(config);
}
