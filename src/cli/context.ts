// What every command action gets: the parsed global options, the streams, the clock, and the
// config / routing table loaded once on first use.

import type { Command } from 'commander';
import { clockFrom, isSwitchboardError, resolveStateDir, type Clock } from '../core/index.js';
import { configProblems, loadConfig, type LoadedConfig } from '../config/index.js';
import { compileRoutingTable, type RoutingTable } from '../routing/index.js';
import type { EngineContext } from '../engine/index.js';
import { painterFor, printable, type Painter, type Streams } from './output.js';

export interface GlobalOptions {
  stateDir?: string;
  config?: string;
  now?: string;
  json?: boolean;
  color: boolean;
  quiet?: boolean;
  verbose?: boolean;
}

export class CliContext {
  readonly stateDir: string;
  readonly clock: Clock;
  readonly json: boolean;
  readonly quiet: boolean;
  readonly verbose: boolean;
  private loadedConfig?: Promise<LoadedConfig>;
  private table?: Promise<RoutingTable>;

  constructor(
    readonly options: GlobalOptions,
    readonly streams: Streams,
  ) {
    this.stateDir = resolveStateDir({ stateDir: options.stateDir, env: streams.env });
    this.clock = clockFrom(options.now, streams.env);
    this.json = options.json === true;
    this.quiet = options.quiet === true;
    this.verbose = options.verbose === true;
  }

  static fromCommand(command: Command, streams: Streams): CliContext {
    return new CliContext(command.optsWithGlobals() as GlobalOptions, streams);
  }

  config(): Promise<LoadedConfig> {
    this.loadedConfig ??= loadConfig({ configFlag: this.options.config, stateDir: this.stateDir, env: this.streams.env });
    return this.loadedConfig;
  }

  /**
   * A CONFIG_INVALID raised where a setting is used (a duration read by cleanup, a runner spec by a
   * drain) names only its JSON path; given the file it came from, it is reported as `config
   * validate` reports it: `file:line:column: path: problem`. Any other error is returned as is.
   */
  async locateConfigError(err: unknown): Promise<unknown> {
    if (!isSwitchboardError(err, 'CONFIG_INVALID') || err.details?.file !== undefined || this.loadedConfig === undefined) return err;
    const loaded = await this.loadedConfig.catch(() => undefined);
    if (loaded?.path == null) return err;
    const { problemOf } = await import('./session-settings.js');
    return configProblems(loaded.path, [problemOf(err)], loaded.layers);
  }

  routingTable(): Promise<RoutingTable> {
    this.table ??= this.config().then((loaded) => compileRoutingTable(loaded.config, loaded.warnings));
    return this.table;
  }

  /** Config, routing table, state dir and clock for engine operations; checks policy settings once. */
  async engine(): Promise<EngineContext> {
    const engine = await this.readingEngine();
    const { keepCapsOnWrite } = await import('../engine/index.js');
    keepCapsOnWrite(engine); // enforce mode: every store write keeps maxEntries/pruneAfter/the disk budget
    return engine;
  }

  /**
   * engine() for a command that never writes a store (the listing): the same checks, without
   * the write-path upkeep, whose code (the whole engine) would be most of its start-up time.
   */
  async readingEngine(): Promise<EngineContext> {
    // Policy and engine are loaded with the commands that use them (route resolve needs neither);
    // the checks' module loads while the config is read.
    const settings = import('./session-settings.js');
    const loaded = await this.config();
    const table = await this.routingTable();
    const { checkSessionSettings } = await settings;
    checkSessionSettings(loaded);
    return { stateDir: this.stateDir, config: loaded.config, table, clock: this.clock, log: this.quiet ? undefined : (line) => this.note(printable(line)) };
  }

  painter(): Promise<Painter> {
    return painterFor(this.streams, this.options.color);
  }

  /** A diagnostic line on stderr (suppressed by --quiet). */
  note(message: string): void {
    if (!this.quiet) this.streams.stderr.write(`${message}\n`);
  }
}
