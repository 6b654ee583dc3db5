// Public face of server/: `switchboard serve` on a Unix socket (start, signals, reload, drain) and
// the client that talks to it (requests by id, pushes, ingest/send through a running server).

export { startServer, stopOnSignals } from './start.js';
export {
  DEFAULT_GRACE_MS,
  DEFAULT_LIMITS,
  type StartServerOptions,
  type StopOptions,
  type StopSummary,
  type SwitchboardServer,
  type ServerLimits,
  type LoadedEngine,
} from './server.js';
export { connectClient, errorFromWire, type SwitchboardClient } from './client.js';
export { ingestViaSocket, type SocketIngestOptions, type SocketIngestSummary } from './socket-ingest.js';
export { defaultSocketPath, probeSocket, SOCKET_FILE_NAME, type ProbeResult } from './socket-file.js';
export { MAX_REQUEST_BYTES, OPS, type Op, type Request, type RequestId, type Response, type Push, type ErrorBody } from './protocol.js';
