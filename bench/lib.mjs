// Shared benchmark helpers: timing, medians, child-process timing and the results report.
// Benchmarks print absolute figures AND ratios against a baseline measured in the same run.

import { spawnSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const BIN = path.join(ROOT, 'bin', 'switchboard');
export const DIST = path.join(ROOT, 'dist', 'src');

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function tempDir(prefix = 'sb-bench-') {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Wall time of one synchronous run of a command, in ms. */
export function timeCommand(argv, options = {}) {
  const start = process.hrtime.bigint();
  const result = spawnSync(argv[0], argv.slice(1), { stdio: ['pipe', 'ignore', 'pipe'], ...options });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (result.status !== 0) throw new Error(`${argv.join(' ')} failed: ${result.stderr}`);
  return ms;
}

/** Runs a command with `input` on stdin, returning wall ms and stdout size (and stdout itself with `collect`). */
export function timePipe(argv, input, { collect = false, ...options } = {}) {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const child = spawn(argv[0], argv.slice(1), { stdio: ['pipe', 'pipe', 'inherit'], ...options });
    let bytes = 0;
    let lines = 0;
    const chunks = [];
    child.stdout.on('data', (chunk) => {
      if (collect) chunks.push(chunk);
      bytes += chunk.length;
      for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) lines++;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      if (code !== 0 && code !== 65) reject(new Error(`${argv.join(' ')} exited ${code}`));
      else resolve({ ms, bytes, lines, code, ...(collect ? { output: Buffer.concat(chunks).toString('utf8') } : {}) });
    });
    child.stdin.end(input);
  });
}

const report = [];

export function record(section, rows) {
  report.push({ section, rows });
  console.log(`\n## ${section}`);
  for (const row of rows) console.log(`- ${row}`);
}

export function writeReport(file = path.join(ROOT, 'bench', 'results.md')) {
  const lines = [`# Benchmark results`, '', `${new Date().toISOString()} · node ${process.version} · ${os.cpus().length} cores · ${os.cpus()[0]?.model ?? ''}`, ''];
  for (const { section, rows } of report) {
    lines.push(`## ${section}`, '', ...rows.map((r) => `- ${r}`), '');
  }
  fs.writeFileSync(file, lines.join('\n'));
  console.log(`\nreport written to ${path.relative(process.cwd(), file)}`);
}

export function fmt(n, digits = 0) {
  return n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}
