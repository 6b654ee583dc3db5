// Which runner each agent has: its own section (agents.list[i].runner, or agents.entries.<key>.runner
// in a switchboard overlay) over agents.defaults.runner, resolved once per loaded config.

import { agentEntryKeys } from '../config/index.js';
import { normalizeAgentId } from '../core/index.js';
import { resolveRunnerSpec, type RunnerSpec } from '../runner/index.js';
import type { EngineContext } from './context.js';

const runnerCache = new WeakMap<EngineContext, Map<string, RunnerSpec | undefined>>();

/** The runner of an agent (its own section over agents.defaults), or undefined = record only. */
export function runnerFor(ctx: EngineContext, agentId: string): RunnerSpec | undefined {
  let cache = runnerCache.get(ctx);
  if (!cache) runnerCache.set(ctx, (cache = new Map()));
  if (cache.has(agentId)) return cache.get(agentId);
  const agents = ctx.config.agents;
  const own = agentRunnerConfig(agents, agentId);
  const spec = resolveRunnerSpec(own?.runner, agents?.defaults?.runner as Record<string, unknown> | undefined, own?.path);
  cache.set(agentId, spec);
  return spec;
}

/**
 * An agent's own runner section and its config path: `agents.list[i].runner`, or in an
 * agents.entries config `agents.entries.<key>.runner` (written in a switchboard overlay).
 */
export function agentRunnerConfig(agents: EngineContext['config']['agents'], agentId: string): { runner: Record<string, unknown>; path: string } | undefined {
  if (agents === undefined || agents === null) return undefined;
  let index = runnerIndexes.get(agents);
  if (index === undefined) runnerIndexes.set(agents, (index = indexRunners(agents)));
  return index.get(agentId) ?? undefined;
}

type AgentRunner = { runner: Record<string, unknown>; path: string };

/**
 * Each roster's agents (normalised id → its runner section, or null for an agent without one), the
 * first of an id winning, `agents.list` before `agents.entries`: built once per loaded config. A
 * search of the roster per agent made every command that looks at all agents' runners (ingest,
 * `config validate`) quadratic in their number: 16 000 agents took 4.6 s.
 */
const runnerIndexes = new WeakMap<object, Map<string, AgentRunner | null>>();

function indexRunners(agents: NonNullable<EngineContext['config']['agents']>): Map<string, AgentRunner | null> {
  const index = new Map<string, AgentRunner | null>();
  const list = Array.isArray(agents.list) ? agents.list : [];
  for (let i = 0; i < list.length; i++) {
    const id = normalizeAgentId(list[i]?.id);
    if (index.has(id)) continue;
    const runner = list[i]?.runner as Record<string, unknown> | undefined;
    index.set(id, runner === undefined ? null : { runner, path: `agents.list[${i}].runner` });
  }
  const entries = agents.entries;
  if (entries !== null && typeof entries === 'object') {
    for (const key of agentEntryKeys(entries)) {
      const id = normalizeAgentId(key);
      if (index.has(id)) continue;
      const runner = (entries[key] as { runner?: Record<string, unknown> } | undefined)?.runner;
      index.set(id, runner === undefined ? null : { runner, path: `agents.entries.${key}.runner` });
    }
  }
  return index;
}

/** True when some agent has a runner: only then can anything be queued or running. */
export function anyRunner(ctx: EngineContext, agentIds: readonly string[]): boolean {
  return agentIds.some((id) => runnerFor(ctx, id) !== undefined);
}
