// cordon's public API, grouped by who needs it, one name per concept. The CLI imports the engine only from
// here, as an HTTP service or an MCP server would. test/package/exports.test.ts pins the list; biome.json
// leaves the order alone, as the groups are the point.

// Running commands: one command under limits, to the end (run) or live (start).
export type { Isolation, RunResult, Status, Violation, ViolationKind } from './policy/result.js'
export type { Limits, LogEntry, OutputChunk, OutputData, Policy, RunOptions } from './policy/schema.js'
export type { RunHandle } from './run/launch.js'
export { run, start } from './run/launch.js'

// Tool functions: one export of a JavaScript module, called in a sandbox.
export type { ErrorInfo } from './functions/protocol.js'
export type { FunctionResult } from './functions/lazy-call.js'
export { callFunction } from './functions/lazy-call.js'

// Reusable sandboxes and spawners: the classes are types only, made by their factory functions.
export type { Sandbox, SandboxOptions, SandboxRunOptions, SandboxStats } from './sandbox/sandbox.js'
export { createSandbox } from './sandbox/sandbox.js'
export { defaultSpawner } from './spawner/default.js'
export type { Spawner } from './spawner/spawner.js'
export { openSpawner } from './spawner/spawner.js'

// Machine diagnosis: what `cordon doctor` prints (with fixes), and the bare facts it starts from.
export type { Check, Diagnosis } from './doctor/doctor.js'
export { doctor } from './doctor/doctor.js'
export type { Capabilities } from './host/capabilities.js'
export { probeCapabilities } from './host/capabilities.js'

// Root filesystems: build, list and delete the named trees the `rootfs` option runs in.
export type { CreateRootfsOptions, RootfsInfo } from './rootfs/rootfs.js'
export { createRootfs, deleteRootfs, listRootfs, rootfsCacheDir } from './rootfs/rootfs.js'

// Schema and shared spellings, for faces (CLI, HTTP, MCP, WASM): the options' schema and its CLI names,
// sizes and durations as cordon reads and writes them, a signal's number, what an IP address reaches, the
// one result of a run never made, removing a directory a sandbox wrote in, and redacting what a run wrote
// there.
export type { CliMeta } from './policy/schema.js'
export { cli as cliRegistry, durationSchema, policySchema, sizeSchema } from './policy/schema.js'
export { allowEntryWithin } from './net/within.js'
export { formatBytes, formatDuration, formatLimit } from './policy/units.js'
export { signalNumber } from './host/signals.js'
export type { NetworkCode, NetworkEvent } from './net/events.js'
export type { AddressKind } from './net/host.js'
export { classifyAddress } from './net/host.js'
export { errorResult } from './run/result.js'
export { removeWrittenTree } from './host/scratch.js'
export type { ByteRedactor, SecretRedactor } from './run/redact.js'
export { redactorFor } from './run/redact.js'

// Errors. Invalid input throws PolicyError, naming the field; what the machine does to a run is its
// result. Besides: a sandbox past its quota, a closed or dead spawner, a root filesystem that could not
// be built (a management call has no result to say it in).
export { CordonError, PolicyError } from './errors.js'
export { QuotaError } from './sandbox/sandbox.js'
export { SpawnerError } from './spawner/spawner.js'
export { RootfsError } from './rootfs/rootfs.js'
