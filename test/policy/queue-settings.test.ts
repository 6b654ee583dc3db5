// Tests of queue settings: every mode and drop alias, each rule of the `/queue` directive
// (including invalid ones), and each layer of the precedence with fall-through of bad values.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { QueueConfig } from '../../src/config/types.js';
import {
  applyQueueDirective,
  describeQueueSettings,
  normalizeDropPolicy,
  normalizeQueueMode,
  parseQueueDirective,
  queueConfigWarnings,
  resolveQueueSettings,
  type QueueSettingsInput,
} from '../../src/policy/index.js';

describe('normalizeQueueMode', () => {
  it('maps every alias', () => {
    const expected: Record<string, string> = {
      interrupt: 'interrupt', interrupts: 'interrupt', abort: 'interrupt',
      steer: 'steer', steering: 'steer',
      followup: 'followup', 'follow-ups': 'followup', followups: 'followup', 'follow-up': 'followup',
      collect: 'collect', coalesce: 'collect',
    };
    for (const [alias, mode] of Object.entries(expected)) {
      assert.equal(normalizeQueueMode(alias), mode, alias);
      assert.equal(normalizeQueueMode(` ${alias.toUpperCase()} `), mode, `${alias} upper-case`);
    }
  });

  it("reads OpenClaw's retired modes the way OpenClaw's migration does", () => {
    assert.equal(normalizeQueueMode('queue'), 'steer');
    for (const value of ['steer-backlog', 'steer+backlog', 'steer_backlog']) assert.equal(normalizeQueueMode(value), 'followup', value);
  });

  it('returns undefined for anything else', () => {
    for (const value of ['', 'queues', 'stop', 'collecting', 'constructor', '__proto__', 'toString', 3, null, undefined, {}]) {
      assert.equal(normalizeQueueMode(value), undefined, String(value));
    }
  });
});

describe('normalizeDropPolicy', () => {
  it('maps every alias', () => {
    const expected: Record<string, string> = {
      old: 'old', oldest: 'old', new: 'new', newest: 'new', summarize: 'summarize', summary: 'summarize', summarise: 'summarize',
    };
    for (const [alias, policy] of Object.entries(expected)) {
      assert.equal(normalizeDropPolicy(alias), policy, alias);
      assert.equal(normalizeDropPolicy(`${alias.toUpperCase()} `), policy, `${alias} upper-case`);
    }
  });

  it('returns undefined for anything else', () => {
    for (const value of ['', 'drop', 'latest', 'hasOwnProperty', 1, null]) assert.equal(normalizeDropPolicy(value), undefined);
  });
});

describe('parseQueueDirective', () => {
  it('reports no directive and leaves the text alone', () => {
    for (const text of ['hello', 'x/queue collect', '/queued collect', 'see /queues', 'http://host/queue collect', '']) {
      const parsed = parseQueueDirective(text);
      assert.equal(parsed.found, false, text);
      assert.equal(parsed.cleanedText, text);
      assert.equal(parsed.directiveOnly, false);
      assert.deepEqual(parsed.errors, []);
    }
  });

  it('recognises /queue alone as a directive-only message with no settings', () => {
    assert.deepEqual(parseQueueDirective('/queue'), { found: true, cleanedText: '', directiveOnly: true, errors: [] });
    assert.deepEqual(parseQueueDirective('  /QUEUE:  '), { found: true, cleanedText: '', directiveOnly: true, errors: [] });
  });

  it('reads a mode alias, case-insensitive, with an optional colon', () => {
    for (const text of ['/queue collect', '/Queue COALESCE', '/queue: collect', '/queue:collect']) {
      const parsed = parseQueueDirective(text);
      assert.equal(parsed.mode, 'collect', text);
      assert.equal(parsed.directiveOnly, true, text);
    }
    assert.equal(parseQueueDirective('/queue abort').mode, 'interrupt');
    assert.equal(parseQueueDirective('/queue follow-ups').mode, 'followup');
  });

  it('is recognised after whitespace and removed from the text', () => {
    const parsed = parseQueueDirective('please /queue collect and wait');
    assert.equal(parsed.found, true);
    assert.equal(parsed.mode, 'collect');
    assert.equal(parsed.cleanedText, 'please and wait');
    assert.equal(parsed.directiveOnly, false);
    assert.equal(parseQueueDirective('line one\n/queue steer\nline two').cleanedText, 'line one\nline two');
    assert.equal(parseQueueDirective('/queue steer\tdo it').cleanedText, 'do it');
  });

  it('lets the last mode win', () => {
    assert.equal(parseQueueDirective('/queue collect steer').mode, 'steer');
    assert.equal(parseQueueDirective('/queue steer cap:3 interrupt').mode, 'interrupt');
  });

  it('reads debounce in every form', () => {
    const cases: [string, number][] = [
      ['debounce:2s', 2000], ['debounce=1500', 1500], ['debounce:1.5s', 1500], ['debounce:1m30s', 90_000],
      ['DEBOUNCE:2S', 2000], ['debounce:250ms', 250], ['debounce=1h', 3_600_000], ['debounce:0.5', 1],
    ];
    for (const [token, expected] of cases) {
      const parsed = parseQueueDirective(`/queue ${token}`);
      assert.equal(parsed.debounceMs, expected, token);
      assert.deepEqual(parsed.errors, [], token);
    }
  });

  it('rejects a debounce of 0 and debounces that are not durations', () => {
    for (const token of ['debounce:0', 'debounce:0s', 'debounce:0.1', 'debounce:-5', 'debounce:abc', 'debounce:', 'debounce=5x', 'debounce:1h30']) {
      const parsed = parseQueueDirective(`/queue ${token}`);
      assert.equal(parsed.found, true, token);
      assert.equal(parsed.debounceMs, undefined, token);
      assert.equal(parsed.errors.length, 1, token);
      assert.equal(parsed.cleanedText, '', `${token} is still removed`);
    }
  });

  it('reads cap as an integer of at least 1', () => {
    assert.equal(parseQueueDirective('/queue cap:5').cap, 5);
    assert.equal(parseQueueDirective('/queue CAP=1').cap, 1);
    for (const token of ['cap:0', 'cap:1.5', 'cap:-1', 'cap:x', 'cap:', 'cap:1e3']) {
      const parsed = parseQueueDirective(`/queue ${token}`);
      assert.equal(parsed.cap, undefined, token);
      assert.equal(parsed.errors.length, 1, token);
    }
  });

  it('reads drop through its aliases', () => {
    assert.equal(parseQueueDirective('/queue drop:oldest').drop, 'old');
    assert.equal(parseQueueDirective('/queue drop:NEWEST').drop, 'new');
    assert.equal(parseQueueDirective('/queue drop=summary').drop, 'summarize');
    const bad = parseQueueDirective('/queue drop:latest');
    assert.equal(bad.drop, undefined);
    assert.equal(bad.errors.length, 1);
  });

  it('reads several settings at once and collects every error', () => {
    const parsed = parseQueueDirective('/queue collect debounce:2s cap:10 drop:new');
    assert.deepEqual(parsed, {
      found: true, cleanedText: '', directiveOnly: true, errors: [], mode: 'collect', debounceMs: 2000, cap: 10, drop: 'new',
    });
    const invalid = parseQueueDirective('/queue debounce:0 cap:0 drop:x steer');
    assert.equal(invalid.errors.length, 3);
    assert.equal(invalid.mode, 'steer');
    assert.equal(invalid.directiveOnly, true);
  });

  it('default, reset and clear clear the override and stop the directive', () => {
    for (const word of ['default', 'reset', 'clear', 'RESET']) {
      const parsed = parseQueueDirective(`/queue ${word}`);
      assert.equal(parsed.reset, true, word);
      assert.equal(parsed.directiveOnly, true, word);
    }
    const stopped = parseQueueDirective('/queue reset collect');
    assert.equal(stopped.reset, true);
    assert.equal(stopped.mode, undefined);
    assert.equal(stopped.cleanedText, 'collect');
    const earlier = parseQueueDirective('/queue collect cap:3 clear');
    assert.equal(earlier.reset, true);
    assert.equal(earlier.mode, undefined);
    assert.equal(earlier.cap, undefined);
  });

  it('ends at the first unknown token, which stays in the text with all that follows', () => {
    const parsed = parseQueueDirective('/queue collect please cap:5 later');
    assert.equal(parsed.mode, 'collect');
    assert.equal(parsed.cap, undefined);
    assert.equal(parsed.cleanedText, 'please cap:5 later');
    const unknownFirst = parseQueueDirective('/queue hello');
    assert.equal(unknownFirst.found, true);
    assert.equal(unknownFirst.mode, undefined);
    assert.equal(unknownFirst.cleanedText, 'hello');
    assert.equal(unknownFirst.directiveOnly, false);
    // `debounce` without a value is not a keyed token: unknown, ends the directive.
    assert.equal(parseQueueDirective('/queue debounce 5s').cleanedText, 'debounce 5s');
  });

  it('handles only the first directive', () => {
    const parsed = parseQueueDirective('/queue collect then /queue steer');
    assert.equal(parsed.mode, 'collect');
    assert.equal(parsed.cleanedText, 'then /queue steer');
  });
});

describe('resolveQueueSettings', () => {
  const config: QueueConfig = {
    mode: 'followup',
    byChannel: { telegram: 'interrupt' },
    debounceMs: 800,
    debounceMsByChannel: { telegram: 900 },
    debounceMaxWaitMs: 10_000,
    cap: 30,
    drop: 'new',
  };
  const full: QueueSettingsInput = {
    channel: 'telegram',
    messageQueue: { mode: 'collect', debounceMs: 100, cap: 2, drop: 'old' },
    directive: parseQueueDirective('/queue steer debounce:200 cap:3 drop:new'),
    entry: { queueMode: 'followup', queueDebounceMs: 300, queueCap: 4, queueDrop: 'summarize' },
    config,
  };

  it('uses the defaults when nothing is set', () => {
    assert.deepEqual(resolveQueueSettings({ channel: 'telegram' }), {
      mode: 'steer', debounceMs: 500, debounceMaxWaitMs: 30_000, cap: 20, dropPolicy: 'summarize',
      sources: { mode: 'default', debounceMs: 'default', cap: 'default', dropPolicy: 'default' },
    });
  });

  it('walks the mode layers from message down to config', () => {
    const steps: [QueueSettingsInput, string, string][] = [
      [full, 'collect', 'message'],
      [{ ...full, messageQueue: undefined }, 'steer', 'directive'],
      [{ ...full, messageQueue: undefined, directive: undefined }, 'followup', 'session'],
      [{ ...full, messageQueue: undefined, directive: undefined, entry: undefined }, 'interrupt', 'config.byChannel'],
      [{ ...full, messageQueue: undefined, directive: undefined, entry: undefined, channel: 'slack' }, 'followup', 'config'],
    ];
    for (const [input, mode, source] of steps) {
      const settings = resolveQueueSettings(input);
      assert.equal(settings.mode, mode, source);
      assert.equal(settings.sources.mode, source);
    }
  });

  it('walks the debounce layers', () => {
    const steps: [QueueSettingsInput, number, string][] = [
      [full, 100, 'message'],
      [{ ...full, messageQueue: undefined }, 200, 'directive'],
      [{ ...full, messageQueue: undefined, directive: undefined }, 300, 'session'],
      [{ ...full, messageQueue: undefined, directive: undefined, entry: undefined }, 900, 'config.byChannel'],
      [{ ...full, messageQueue: undefined, directive: undefined, entry: undefined, channel: 'slack' }, 800, 'config'],
      [{ channel: 'slack' }, 500, 'default'],
    ];
    for (const [input, debounceMs, source] of steps) {
      const settings = resolveQueueSettings(input);
      assert.equal(settings.debounceMs, debounceMs, source);
      assert.equal(settings.sources.debounceMs, source);
    }
  });

  it('walks the cap and drop layers (no per-channel layer)', () => {
    const steps: [QueueSettingsInput, number, string, string][] = [
      [full, 2, 'old', 'message'],
      [{ ...full, messageQueue: undefined }, 3, 'new', 'directive'],
      [{ ...full, messageQueue: undefined, directive: undefined }, 4, 'summarize', 'session'],
      [{ ...full, messageQueue: undefined, directive: undefined, entry: undefined }, 30, 'new', 'config'],
    ];
    for (const [input, cap, dropPolicy, source] of steps) {
      const settings = resolveQueueSettings(input);
      assert.equal(settings.cap, cap, source);
      assert.equal(settings.dropPolicy, dropPolicy, source);
      assert.equal(settings.sources.cap, source);
      assert.equal(settings.sources.dropPolicy, source);
    }
  });

  it('lets values that do not normalise fall through to the next layer', () => {
    const settings = resolveQueueSettings({
      channel: 'telegram',
      messageQueue: { mode: 'bogus', debounceMs: -1, cap: 0, drop: 'latest' },
      entry: { queueMode: 'nope', queueDebounceMs: 'soon', queueCap: 'many', queueDrop: 'all' },
      config: { ...config, byChannel: { telegram: 'sideways' } },
    });
    assert.equal(settings.mode, 'followup');
    assert.equal(settings.sources.mode, 'config');
    assert.equal(settings.debounceMs, 900);
    assert.equal(settings.sources.debounceMs, 'config.byChannel');
    assert.equal(settings.cap, 30);
    assert.equal(settings.sources.cap, 'config');
    assert.equal(settings.dropPolicy, 'new');
    assert.equal(settings.sources.dropPolicy, 'config');
    const allBad = resolveQueueSettings({ config: { mode: 'x', debounceMs: Number.NaN, cap: -3, drop: 'y' } });
    assert.deepEqual(allBad.sources, { mode: 'default', debounceMs: 'default', cap: 'default', dropPolicy: 'default' });
  });

  it('normalises aliases in every layer', () => {
    const settings = resolveQueueSettings({
      channel: 'telegram',
      messageQueue: { mode: 'Coalesce', drop: 'NEWEST' },
    });
    assert.equal(settings.mode, 'collect');
    assert.equal(settings.dropPolicy, 'new');
    assert.equal(resolveQueueSettings({ entry: { queueMode: 'abort' } }).mode, 'interrupt');
    assert.equal(resolveQueueSettings({ config: { mode: 'follow-ups' } }).mode, 'followup');
  });

  it('ignores a directive with errors entirely', () => {
    const settings = resolveQueueSettings({ ...full, messageQueue: undefined, directive: parseQueueDirective('/queue steer cap:0') });
    assert.equal(settings.mode, 'followup');
    assert.equal(settings.sources.mode, 'session');
    assert.equal(settings.cap, 4);
  });

  it('skips the session override when the directive resets it', () => {
    const settings = resolveQueueSettings({ ...full, messageQueue: undefined, directive: parseQueueDirective('/queue reset') });
    assert.equal(settings.mode, 'interrupt');
    assert.equal(settings.sources.mode, 'config.byChannel');
    assert.equal(settings.cap, 30);
    assert.equal(settings.sources.cap, 'config');
  });

  it('finds per-channel config case-insensitively and never through Object.prototype', () => {
    const byChannel: QueueConfig = { byChannel: { Telegram: 'collect' }, debounceMsByChannel: { TELEGRAM: 50 } };
    const settings = resolveQueueSettings({ channel: 'telegram', config: byChannel });
    assert.equal(settings.mode, 'collect');
    assert.equal(settings.debounceMs, 50);
    for (const channel of ['constructor', '__proto__', 'toString']) {
      assert.equal(resolveQueueSettings({ channel, config: byChannel }).sources.mode, 'default', channel);
    }
  });

  it('accepts duration strings and 0 outside the directive; floors caps', () => {
    assert.equal(resolveQueueSettings({ config: { debounceMs: '2s' as unknown as number } }).debounceMs, 2000);
    const zero = resolveQueueSettings({ config: { debounceMs: 0 } });
    assert.equal(zero.debounceMs, 0);
    assert.equal(zero.sources.debounceMs, 'config');
    assert.equal(resolveQueueSettings({ messageQueue: { cap: 7.9 } }).cap, 7);
    assert.equal(resolveQueueSettings({ messageQueue: { cap: '12' } }).cap, 12);
  });

  it('reads debounceMaxWaitMs from config', () => {
    assert.equal(resolveQueueSettings({ config }).debounceMaxWaitMs, 10_000);
    assert.equal(resolveQueueSettings({ config: { debounceMaxWaitMs: -1 } }).debounceMaxWaitMs, 30_000);
  });
});

describe('applyQueueDirective', () => {
  it('changes nothing for an invalid directive, clears on reset, merges otherwise', () => {
    const current = { queueMode: 'collect', queueCap: 5 };
    assert.equal(applyQueueDirective(current, parseQueueDirective('/queue cap:0')), null);
    assert.equal(applyQueueDirective(current, parseQueueDirective('no directive')), null);
    assert.deepEqual(applyQueueDirective(current, parseQueueDirective('/queue clear')), {});
    assert.deepEqual(applyQueueDirective(current, parseQueueDirective('/queue steer debounce:2s')), {
      queueMode: 'steer', queueCap: 5, queueDebounceMs: 2000,
    });
    assert.deepEqual(applyQueueDirective(undefined, parseQueueDirective('/queue drop:old')), { queueDrop: 'old' });
  });
});

describe('describeQueueSettings', () => {
  it('names each value', () => {
    const line = describeQueueSettings(resolveQueueSettings({ messageQueue: { mode: 'collect', debounceMs: 2000, cap: 3 } }));
    for (const part of ['collect', '2s', '3', 'summarize']) assert.ok(line.includes(part), part);
  });
});

describe('queueConfigWarnings', () => {
  it('names each messages.queue value that does not normalise, and nothing else', () => {
    assert.deepEqual(queueConfigWarnings(undefined), []);
    assert.deepEqual(queueConfigWarnings({ mode: ' Follow-Ups ', drop: 'OLDEST', byChannel: { telegram: 'coalesce' }, cap: 3 }), []);
    const warnings = queueConfigWarnings({ mode: 'stear', drop: 'sideways', byChannel: { telegram: 'collect', slack: 'later' } } as QueueConfig);
    assert.equal(warnings.length, 3, warnings.join('\n'));
    assert.match(warnings[0]!, /^messages\.queue\.mode: "stear" is not a queue mode .*default "steer"/);
    assert.match(warnings[1]!, /^messages\.queue\.drop: "sideways" is not a drop policy .*default "summarize"/);
    assert.match(warnings[2]!, /^messages\.queue\.byChannel\.slack: "later" is not a queue mode/);
    // What the warnings say is what resolution does: the bad value falls through.
    assert.equal(resolveQueueSettings({ config: { mode: 'stear', byChannel: { slack: 'later' } }, channel: 'slack' }).mode, 'steer');
  });
});
