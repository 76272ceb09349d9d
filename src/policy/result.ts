import type { NetworkEvent } from '../net/events.js'
import type { LogEntry, OutputData } from './schema.js'

// The one result schema: run(), `cordon run --json` and the HTTP API all return this object.

export type LimitKind = 'timeout' | 'cpu-time' | 'memory' | 'output-limit' | 'process-limit' | 'file-size'
export type ViolationKind = LimitKind | 'denied' | 'not-found' | 'canceled' | 'error'
export type Status = 'ok' | 'nonzero-exit' | 'signaled' | ViolationKind
export type Isolation = 'namespace' | 'process'
/** A limit held only per process (an rlimit) because no cgroup held the whole sandbox. */
export type PerProcessLimit = 'cpuTimeMs' | 'memoryBytes' | 'maxProcesses'

export interface Violation {
  kind: ViolationKind
  /** The limit's value (ms or bytes or a count) for limits; the rule or name involved otherwise. */
  limit: number | string
  message: string
}

/** `D`: what output is made of, a string or (with `encoding: 'buffer'`) a Buffer. */
export interface RunResult<D extends OutputData = string> {
  status: Status
  exitCode: number | null
  signal: string | null
  stdout: D
  stderr: D
  /** stdout and stderr interleaved in arrival order. */
  output: D
  truncated: boolean
  /** Bytes kept, stdout + stderr. */
  outputBytes: number
  wallMs: number
  cpuMs: number | null
  maxRssBytes: number | null
  isolation: Isolation
  violation: Violation | null
  /**
   * Limits enforced only per process (rlimits) because no cgroup held the whole sandbox; empty when a
   * cgroup enforced memory, processes and CPU time on the whole tree.
   */
  perProcessLimits: PerProcessLimit[]
  /** Lines from the log channel (CORDON_LOG_FD), in order, redacted, within limits.maxLogBytes. */
  logs: LogEntry[]
  /** The log channel went past limits.maxLogBytes; later lines were dropped. */
  logsTruncated: boolean
  /** Connections through cordon's proxies (network allowlist): each allowed or refused one, in order, at most 1000. */
  network: NetworkEvent[]
  /** Connections past the first 1000, not kept in `network` (0 normally). */
  networkDropped: number
}
