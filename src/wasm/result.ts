// What a guest's run comes to: one WasmResult, in cordon's status vocabulary (no status of its own), and
// how the guest's end becomes that status.
import type { LogEntry, Status, Violation } from '../index.js'

/** The statuses a guest's run can end with: a subset of a command's (`Status`). */
export type WasmStatus = Extract<
  Status,
  | 'ok'
  | 'nonzero-exit'
  | 'timeout'
  | 'cpu-time'
  | 'memory'
  | 'output-limit'
  | 'process-limit'
  | 'canceled'
  | 'error'
>

/** One command the guest ran (or tried to): admitted past the exec quota, so at most `maxExecs` of them. */
export interface ExecRecord {
  /** 1, 2, …: its place among the guest's execs. */
  n: number
  /** The program as the guest named it. */
  command: string
  /** run()'s status, or `error` for a request refused before run() (an env value with NUL, a cwd outside). */
  status: Status
  exitCode: number | null
  /** Real time it took. */
  wallMs: number
  /** The time the guest is told it took: `wallMs`, or the virtual clock's advance. */
  durationMs: number
  outputBytes: number
  truncated: boolean
  violation: Violation | null
  /** The guest's clock when it ended (ms since the epoch). */
  atMs: number
}

export interface WasmResult {
  status: WasmStatus
  /** What the invoked export returned (i64 as a bigint), when it returned. */
  value: number | bigint | null
  /** The code the guest gave WASI's proc_exit, when it called it. */
  exitCode: number | null
  violation: Violation | null
  wallMs: number
  /** CPU time of the guest's thread (worker) or sandbox; null when it could not be read. */
  cpuMs: number | null
  /** The guest's linear memory at its end, in bytes (null: unknown, e.g. stopped in its sandbox). */
  memoryBytes: number | null
  /** Where the guest ran: a worker thread of this process, or a cordon sandbox of its own. */
  isolation: 'worker' | 'sandbox'
  /** Calls of each import, by `module.name`. */
  hostCalls: Record<string, number>
  /** Execs admitted (the seed's executions_count, here bounded by `exec.maxExecs`). */
  execCount: number
  execs: ExecRecord[]
  /** log_message / cordon.log lines (source `wasm`) and cordon's own notes (source `cordon`). */
  logs: LogEntry[]
  logsTruncated: boolean
  /** What the guest wrote to WASI's fd 1 and 2, within `limits.maxOutputBytes` together. */
  stdout: string
  stderr: string
  truncated: boolean
  outputBytes: number
  clock: { mode: 'real' | 'virtual'; nowMs: number }
}

/** How the guest's own code ended, as the runtime saw it (before any stop of cordon's). */
export type GuestEnd =
  | { kind: 'returned'; value: number | bigint | null }
  | { kind: 'exit'; code: number }
  | { kind: 'trap'; name: string; message: string; memoryBytes: number | null; atMax: boolean }
  /** The runtime died without saying how the guest ended (out of its heap, a crash). */
  | { kind: 'crashed'; message: string; memory: boolean }

/** The status and violation for a guest that ended on its own (`stopped`: a limit or cancel of cordon's wins). */
export function classify(
  end: GuestEnd | null,
  stopped: Violation | null,
  maxMemoryBytes: number,
): { status: WasmStatus; violation: Violation | null } {
  if (stopped) return { status: stopped.kind as WasmStatus, violation: stopped }
  if (!end)
    return {
      status: 'error',
      violation: { kind: 'error', limit: 'runtime', message: 'the guest ended without a word' },
    }
  switch (end.kind) {
    case 'returned':
      return { status: 'ok', violation: null }
    case 'exit':
      return end.code === 0 ? { status: 'ok', violation: null } : { status: 'nonzero-exit', violation: null }
    case 'trap': {
      const message = `the guest trapped: ${end.name}: ${end.message}`
      if (end.atMax)
        return {
          status: 'memory',
          violation: {
            kind: 'memory',
            limit: maxMemoryBytes,
            message: `${message} (its memory is at its maximum)`,
          },
        }
      return { status: 'error', violation: { kind: 'error', limit: 'trap', message } }
    }
    case 'crashed':
      if (end.memory)
        return {
          status: 'memory',
          violation: {
            kind: 'memory',
            limit: maxMemoryBytes,
            message: `the guest's runtime ran out of memory: ${end.message}`,
          },
        }
      return { status: 'error', violation: { kind: 'error', limit: 'runtime', message: end.message } }
  }
}
