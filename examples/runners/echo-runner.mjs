#!/usr/bin/env node
// echo-runner.mjs — a complete switchboard runner to copy and adapt. Instead of calling a model it
// runs one pretend tool ("count_words") and replies with the texts it received, including any
// steering messages that arrived before its final answer.
//
// Config (steering: true keeps stdin open, so steer and abort lines can reach the runner):
//   agents: { defaults: { runner: { command: ["node", "examples/runners/echo-runner.mjs"], steering: true } } }
//
// It needs nothing but Node.js. ECHO_RUNNER_TOOL_MS sets how long the pretend tool takes (default 100).

import readline from 'node:readline';

const TOOL_MS = Number(process.env.ECHO_RUNNER_TOOL_MS ?? 100);

/** One event per line on stdout. stdout is reserved for the protocol; log to stderr. */
function send(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

function log(text) {
  process.stderr.write(`echo-runner[${process.env.SWITCHBOARD_RUN_ID ?? '?'}]: ${text}\n`);
}

let run; // the {"type":"run"} line: runId, sessionKey, sessionId, agentId, deliveryContext, messages
const steered = []; // messages that came in through {"type":"steer"} lines
let aborted = false;
let cancelTool = () => {};

// switchboard writes one JSON object per line on stdin: first "run", later "steer" and "abort".
const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
input.on('line', (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    log(`ignoring a line that is not JSON: ${line.slice(0, 80)}`);
    return;
  }
  switch (message.type) {
    case 'run':
      run = message;
      main().catch((err) => {
        log(`failed: ${err.stack ?? err}`);
        process.exitCode = 1; // a non-zero exit status marks the run as failed
      });
      break;
    case 'steer':
      // New user messages for this run. Keep them and take them into account at the next safe
      // point (a boundary) — never in the middle of a tool call.
      steered.push(...message.messages);
      break;
    case 'abort':
      // Stop quickly: switchboard sends SIGTERM 2 s after this line and SIGKILL later.
      log(`aborting: ${message.reason}`);
      aborted = true;
      cancelTool();
      input.close();
      break;
    default:
      log(`ignoring unknown line type ${message.type}`);
  }
});
input.on('close', () => {
  // End of input. Without `steering: true` in the config switchboard closes stdin right after
  // the run line; that is fine: this run simply cannot be steered.
  if (run === undefined) {
    log('stdin closed before the run line');
    process.exitCode = 2;
  }
});

async function main() {
  // Optional first line: announce that this runner accepts steer lines.
  send({ type: 'hello', steering: true });

  const texts = run.messages.map((message) => message.text);
  const id = `${run.runId}-count-1`;
  // A tool call and its result are recorded in the transcript in this order.
  send({ type: 'tool_call', id, name: 'count_words', args: { text: texts.join('\n') } });
  const finished = await pretendTool(TOOL_MS);
  if (!finished || aborted) return; // aborted mid-tool: exit without a reply
  const words = texts.join(' ').split(/\s+/).filter(Boolean).length;
  send({ type: 'tool_result', id, output: `${words} words` });

  // Safe point: tool calls are finished and the next model call has not started. switchboard
  // sends parked user messages as steer lines right after it reads this line.
  send({ type: 'boundary' });

  // The "model call". Steer lines that arrive while it runs belong to this run too, so if any
  // came in, call again with them before finishing.
  let answer;
  let seen;
  do {
    seen = steered.length;
    answer = await pretendModel([...texts, ...steered.map((message) => message.text)]);
    if (aborted) return;
  } while (steered.length > seen);

  send({ type: 'assistant', text: answer }); // recorded in the transcript
  send({ type: 'reply', text: answer }); // delivered to the user
  send({ type: 'done' }); // the run is over
  input.close(); // stop reading so the process can exit
}

/** Stands in for a model: answers on the next turn of the event loop. */
async function pretendModel(allTexts) {
  await new Promise((resolve) => setImmediate(resolve));
  return `echo-runner heard: ${allTexts.join(' | ')}`;
}

/** Resolves true after `ms`, or false as soon as the run is aborted. */
function pretendTool(ms) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(true), ms);
    cancelTool = () => {
      clearTimeout(timer);
      resolve(false);
    };
  });
}
