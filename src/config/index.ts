// Public face of config/: locate, parse and validate the config file (JSON5 + JSON Schema),
// the defaults table, and the effective config with the source of every value.

export type * from './types.js';
export { loadConfig, locateConfig, parseConfigText, findUnknownKeys, configProblems, type LoadedConfig, type ConfigSource } from './load.js';
export { DEFAULTS, DERIVED_DEFAULTS } from './defaults.js';
export { effectiveValues, isSecretPath, REDACTED, type EffectiveValue } from './effective.js';
export { schemaValidator, describeSchemaErrors, jsonPathOf, formatJsonPath, type CompiledValidator, type SchemaError } from './validators.js';
export { agentEntryKeys, configGeneration, checkCurrentFormat, rosterIds, ROSTER_KEY, type ConfigGeneration } from './openclaw-format.js';
export { resolveExtends, type ConfigLayer } from './layers.js';
