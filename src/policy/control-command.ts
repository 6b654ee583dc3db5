// Session commands (`/stop`, `/send`): recognising them in a message's text and the wording of the
// `/send` reply. Applying them to the entry is the engine's part.

export type SendSetting = 'allow' | 'deny' | 'inherit';

export type ControlCommand =
  | { kind: 'stop' }
  /** `/send on|off|inherit`; `value` undefined = report the current setting. */
  | { kind: 'send'; value?: SendSetting }
  | { kind: 'send-invalid'; argument: string };

const SEND_VALUES: Readonly<Record<string, SendSetting>> = {
  on: 'allow',
  allow: 'allow',
  yes: 'allow',
  off: 'deny',
  deny: 'deny',
  no: 'deny',
  inherit: 'inherit',
  default: 'inherit',
  reset: 'inherit',
  clear: 'inherit',
};

/**
 * `/stop` (first word; the rest is ignored) and `/send [on|off|inherit]` (first word, one
 * argument), case-insensitive. Anything else is not a session command.
 */
export function parseControlCommand(text: string | undefined): ControlCommand | null {
  if (typeof text !== 'string') return null;
  const words = text.trim().split(/\s+/);
  const first = (words[0] ?? '').toLowerCase();
  if (first === '/stop') return { kind: 'stop' };
  if (first !== '/send') return null;
  if (words.length === 1) return { kind: 'send' };
  const argument = words.slice(1).join(' ');
  const key = words.length === 2 ? words[1].toLowerCase() : '';
  if (key !== '' && Object.hasOwn(SEND_VALUES, key)) return { kind: 'send', value: SEND_VALUES[key] };
  return { kind: 'send-invalid', argument };
}

/** `Sending: on (allow, session override)` and friends, for the `/send` reply. */
export function describeSendSetting(override: unknown, effective: { decision: 'allow' | 'deny'; rule: number | null; source: string }): string {
  const state = effective.decision === 'allow' ? 'on' : 'off';
  const origin =
    override === 'allow' || override === 'deny'
      ? 'session override'
      : effective.source === 'rule'
        ? `rule ${effective.rule} of session.sendPolicy`
        : effective.source === 'default'
          ? 'session.sendPolicy default'
          : 'no policy configured';
  return `Sending: ${state} (${effective.decision}, ${origin})`;
}
