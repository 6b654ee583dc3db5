// P1 and P2 of quality.md: route resolution throughput in-process and through
// `route resolve --batch`, flatness of cost from 10 to 100 000 bindings, and cold start.

import fs from 'node:fs';
import path from 'node:path';
import { BIN, DIST, fmt, median, record, tempDir, timeCommand, timePipe } from './lib.mjs';

const { compileRoutingTable, normalizeRouteInput, resolveRoute } = await import(path.join(DIST, 'routing', 'index.js'));

const CHANNELS = ['discord', 'slack', 'telegram', 'msteams'];

/** Deterministic pseudo-random numbers so every run measures the same workload. */
function rng(seed) {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

/**
 * The P1 config: 16 agents and `bindingCount` bindings over 4 channels. `generation` picks the
 * roster's shape: `list` (agents.list, agent-0 marked default: true) or `entries` (OpenClaw
 * 2026.9.6's agents.entries under explicit ownership, agent-0 as system agent); same routes either way.
 */
export function makeConfig(bindingCount, seed = 1, generation = 'list') {
  const rand = rng(seed);
  const agentIds = Array.from({ length: 16 }, (_, i) => `agent-${i}`);
  const agents =
    generation === 'entries'
      ? { ownership: 'explicit', defaults: { systemAgent: { agentId: agentIds[0] } }, entries: Object.fromEntries(agentIds.map((id) => [id, {}])) }
      : { list: agentIds.map((id, i) => ({ id, ...(i === 0 ? { default: true } : {}) })) };
  const bindings = [];
  for (let i = 0; i < bindingCount; i++) {
    const channel = CHANNELS[i % 4];
    const agentId = `agent-${rand(16)}`;
    const kind = i % 10;
    const accountId = rand(3) === 0 ? '*' : `acct-${rand(20)}`;
    let match;
    if (kind < 5) match = { channel, accountId, peer: { kind: rand(2) ? 'direct' : 'group', id: `peer-${i}` } };
    else if (kind < 7) match = { channel, accountId, guildId: `guild-${i}`, ...(rand(2) ? { roles: [`role-${rand(5)}`] } : {}) };
    else if (kind < 9) match = { channel, accountId, teamId: `team-${i}` };
    else match = { channel, accountId };
    bindings.push({ agentId, match });
  }
  return { agents, bindings, session: { dmScope: 'per-channel-peer', identityLinks: { alice: ['telegram:peer-3', 'slack:U9'] } } };
}

/** Inputs that hit every tier: known peers, guilds, teams, unknown peers, default fallbacks. */
export function makeInputs(count, bindingCount, seed = 2) {
  const rand = rng(seed);
  const inputs = [];
  for (let i = 0; i < count; i++) {
    const target = rand(Math.max(bindingCount, 1));
    const channel = CHANNELS[target % 4];
    const input = { channel, accountId: `acct-${rand(20)}` };
    switch (rand(5)) {
      case 0:
        input.peer = { kind: rand(2) ? 'direct' : 'group', id: `peer-${target}` };
        break;
      case 1:
        input.peer = { kind: 'channel', id: `thread-${i}` };
        input.parentPeer = { kind: 'group', id: `peer-${target}` };
        break;
      case 2:
        input.guildId = `guild-${target}`;
        input.memberRoleIds = [`role-${rand(5)}`];
        input.peer = { kind: 'channel', id: `c-${rand(1000)}` };
        break;
      case 3:
        input.teamId = `team-${target}`;
        break;
      default:
        input.peer = { kind: 'direct', id: `stranger-${rand(100000)}` };
    }
    inputs.push(input);
  }
  return inputs;
}

/** Routes per second in-process for one config, normalisation included (median of 5 passes). */
function inProcessRate(config, rawInputs) {
  const table = compileRoutingTable(config);
  let sink = 0;
  const rates = [];
  for (let pass = 0; pass < 5; pass++) {
    const start = process.hrtime.bigint();
    for (const raw of rawInputs) sink += resolveRoute(table, normalizeRouteInput(raw)).route.sessionKey.length;
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    rates.push(rawInputs.length / seconds);
  }
  if (sink === 0) throw new Error('no work done');
  return median(rates);
}

/** Baseline for in-process cost: one Map lookup + one key string per input (the floor of any resolver). */
function baselineRate(rawInputs) {
  const map = new Map(rawInputs.map((r, i) => [`${r.channel}:${i}`, i]));
  const rates = [];
  let sink = 0;
  for (let pass = 0; pass < 5; pass++) {
    const start = process.hrtime.bigint();
    rawInputs.forEach((r, i) => {
      sink += map.get(`${r.channel}:${i}`) ?? 0;
      sink += `agent:x:${r.channel}:direct:${r.peer?.id ?? 'main'}`.toLowerCase().length;
    });
    rates.push(rawInputs.length / (Number(process.hrtime.bigint() - start) / 1e9));
  }
  if (sink === 0) throw new Error('no work done');
  return median(rates);
}

export async function benchRoute() {
  const INPUTS = 100_000;
  const config = makeConfig(10_000);
  const inputs = makeInputs(INPUTS, 10_000);

  const rate = inProcessRate(config, inputs);
  const base = baselineRate(inputs);

  const flat = {};
  for (const n of [10, 1_000, 100_000]) flat[n] = inProcessRate(makeConfig(n), makeInputs(50_000, n));
  const flatness = flat[10] / flat[100_000];

  // End to end through the CLI: 100 000 NDJSON lines in, 100 000 route objects out.
  const dir = tempDir();
  const configFile = path.join(dir, 'config.json');
  fs.writeFileSync(configFile, JSON.stringify(config));
  const ndjson = inputs.map((i) => JSON.stringify(i)).join('\n') + '\n';
  const batchRuns = [];
  for (let i = 0; i < 3; i++) {
    const run = await timePipe([process.execPath, BIN, 'route', 'resolve', '--batch', '--config', configFile, '--state-dir', dir], ndjson);
    if (run.lines !== INPUTS) throw new Error(`batch printed ${run.lines} lines, expected ${INPUTS}`);
    batchRuns.push(run.ms);
  }
  const batchRate = INPUTS / (median(batchRuns) / 1000);
  // Baseline for the pipeline: a node process that parses and re-serialises every line (no routing).
  const echo = `let b='';process.stdin.on('data',d=>b+=d).on('end',()=>{const o=[];for(const l of b.split('\\n'))if(l)o.push(JSON.stringify(JSON.parse(l)));process.stdout.write(o.join('\\n')+'\\n')})`;
  const echoRuns = [];
  for (let i = 0; i < 3; i++) echoRuns.push((await timePipe([process.execPath, '-e', echo], ndjson)).ms);
  const echoRate = INPUTS / (median(echoRuns) / 1000);

  record('P1 route resolution (10 000 bindings, 100 000 inputs)', [
    `in-process: ${fmt(rate)} routes/s (target ≥ 400 000) — ${fmt(rate / base, 2)}× of a Map-lookup baseline at ${fmt(base)} ops/s`,
    `route resolve --batch end to end: ${fmt(batchRate)} lines/s (target ≥ 150 000) — ${fmt(batchRate / echoRate, 2)}× of a parse+stringify node pipe at ${fmt(echoRate)} lines/s`,
    `flatness: ${fmt(flat[10])} routes/s at 10 bindings, ${fmt(flat[1000])} at 1 000, ${fmt(flat[100_000])} at 100 000 → cost ratio ${fmt(flatness, 2)} (target ≤ 1.5)`,
  ]);

  // P2: cold start against `node -e 0`, median of 10 each, interleaved so noise hits both alike.
  const emptyState = tempDir();
  const nodeTimes = [];
  const resolveTimes = [];
  const sessionsTimes = [];
  const hasSessions = fs.existsSync(path.join(DIST, 'cli', 'sessions.js'));
  for (let i = 0; i < 10; i++) {
    nodeTimes.push(timeCommand([process.execPath, '-e', '0']));
    resolveTimes.push(timeCommand([process.execPath, BIN, 'route', 'resolve', '--channel', 'telegram', '--peer', 'direct:123', '--json', '--state-dir', emptyState]));
    if (hasSessions) sessionsTimes.push(timeCommand([process.execPath, BIN, 'sessions', '--json', '--state-dir', emptyState]));
  }
  const nodeMs = median(nodeTimes);
  const rows = [
    `node -e 0: ${fmt(nodeMs, 1)} ms (median of 10)`,
    `route resolve --json: ${fmt(median(resolveTimes), 1)} ms → ${fmt(median(resolveTimes) / nodeMs, 2)}× (target ≤ 1.6×)`,
  ];
  if (hasSessions) rows.push(`sessions --json: ${fmt(median(sessionsTimes), 1)} ms → ${fmt(median(sessionsTimes) / nodeMs, 2)}× (target ≤ 1.6×)`);
  record('P2 cold start', rows);
}

if (import.meta.url === `file://${process.argv[1]}`) await benchRoute();
