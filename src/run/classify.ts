import { signalName } from '../host/signals.js'
import type { Status, Violation } from '../policy/result.js'
import type { Limits } from '../policy/schema.js'
import { formatBytes, formatDuration } from '../policy/units.js'

export type StopReason = 'timeout' | 'output-limit' | 'canceled' | 'cpu-time'

export interface Outcome {
  exitCode: number | null
  signal: string | null
  /** Why the supervisor stopped the sandbox, if it did. */
  stoppedFor: StopReason | null
  /** The cgroup's own counters, when the sandbox had one. */
  kernel: { oomKills: number; pidsMaxHits: number } | null
  /** Text the sandbox wrote to stderr last (kept even past the output cap). */
  stderrTail: string
  limits: Limits
  /** Launch failed before the program ran. */
  launchError: string | null
}

// What a program reports when an rlimit made a call fail. Read only where no kernel counter tells:
// with a cgroup there are no data or process rlimits, and its counters are the whole truth.
const MEMORY_SIGNS = [
  /MemoryError/,
  /out of memory/i,
  /Cannot allocate memory/,
  /std::bad_alloc/,
  /memory allocation of \d+ bytes failed/,
  /OutOfMemoryError/,
  /failed to (?:map|allocate|reserve) .*memory/i,
  /memory exhausted/,
]
const FORK_SIGNS = [
  /Cannot fork/i,
  /can't fork/i,
  /fork: (?:retry: )?Resource temporarily unavailable/,
  /BlockingIOError/,
]
/** EFBIG's text (Python's `File too large`, Node's `EFBIG: file too large`): both ignore SIGXFSZ, so the write fails instead. No counter exists for it. */
const FILE_SIZE_SIGNS = [/File too large/i, /\bEFBIG\b/]

/** What tells a launcher's refusal from a program's words (see launcherRefusal). */
export interface LaunchEvidence {
  /**
   * What cordon's launcher wrote on its refusal pipe (REFUSAL_FD), which neither bwrap nor the program ever
   * holds: it writes there only when it does not exec what it was to run.
   */
  refusal: string
  /** Whether bwrap reported the program's exit, which it does only after running it; null without bwrap. */
  programRan: boolean | null
}

/** The launcher's exit codes when the exec of the program itself failed (not found, or any other reason). */
const EXEC_FAILED = [127, 126]

/**
 * A launcher's own refusal to start (bad bind, no privilege), or null when the program ran. cordon's
 * launcher says so on its refusal pipe, whatever the program printed; an exec of the program that failed
 * (exit 127/126, like a shell's) is the program's own nonzero exit, not a refusal. bwrap has no such
 * pipe: its refusal (exit 1, `bwrap: ...` on stderr, which a program can print too) counts only when it
 * did not report running the program.
 */
export function launcherRefusal(
  exitCode: number | null,
  stderrTail: string,
  evidence: LaunchEvidence,
): string | null {
  const own = evidence.refusal.split('\n')[0]!.trim()
  if (own !== '') return exitCode !== null && EXEC_FAILED.includes(exitCode) ? null : own
  if (exitCode !== 1 || evidence.programRan !== false) return null
  return /^bwrap: .*/.exec(stderrTail)?.[0].trim() ?? null
}

/** The signal a process died of, including a shell's or bwrap's 128+N report of a child's death. */
export function effectiveSignal(exitCode: number | null, signal: string | null): string | null {
  if (signal) return signal
  if (exitCode !== null && exitCode > 128 && exitCode <= 128 + 64) return signalName(exitCode - 128)
  return null
}

export function classify(o: Outcome): { status: Status; violation: Violation | null } {
  const l = o.limits
  const v = (kind: Violation['kind'], limit: number | string, message: string) => ({
    status: kind,
    violation: { kind, limit, message },
  })
  if (o.launchError) return v('error', 'launch', o.launchError)
  if (o.stoppedFor === 'canceled') return v('canceled', 'signal', 'canceled by the caller')
  // One rule for every limit: it is the status when it ended the run. A program that exits 0 without
  // being stopped coped with whatever a child of its hit (a counter says OOM kill, a child died of SIGXFSZ:
  // the same), so its run is ok.
  if (o.exitCode === 0 && o.stoppedFor === null) return { status: 'ok', violation: null }
  // The kernel's counters are causes: a fork bomb that then runs out the clock is a process-limit hit,
  // and they win over the failure or the stop they led to.
  if (o.kernel && o.kernel.oomKills > 0) {
    return v('memory', l.memoryBytes, `memory exceeded ${formatBytes(l.memoryBytes)} (OOM kill)`)
  }
  if (o.kernel && o.kernel.pidsMaxHits > 0) {
    return v('process-limit', l.maxProcesses, `more than ${l.maxProcesses} processes (fork refused)`)
  }
  if (o.stoppedFor === 'output-limit') {
    return v('output-limit', l.maxOutputBytes, `output exceeded ${formatBytes(l.maxOutputBytes)}`)
  }
  if (o.stoppedFor === 'timeout') {
    return v('timeout', l.wallTimeMs, `wall time exceeded ${formatDuration(l.wallTimeMs)}`)
  }
  const cpu = () => v('cpu-time', l.cpuTimeMs, `CPU time exceeded ${formatDuration(l.cpuTimeMs)}`)
  const fileSize = () =>
    v('file-size', l.maxFileSizeBytes, `a file grew past ${formatBytes(l.maxFileSizeBytes)}`)
  if (o.stoppedFor === 'cpu-time') return cpu()
  const sig = effectiveSignal(o.exitCode, o.signal)
  if (sig === 'SIGXCPU') return cpu()
  if (sig === 'SIGXFSZ') return fileSize()
  if (o.exitCode === 0) return { status: 'ok', violation: null }
  const said = (signs: RegExp[]) => signs.some((re) => re.test(o.stderrTail))
  if (!o.kernel && said(MEMORY_SIGNS)) {
    return v('memory', l.memoryBytes, `memory exceeded ${formatBytes(l.memoryBytes)} (allocation failed)`)
  }
  if (!o.kernel && said(FORK_SIGNS)) {
    return v('process-limit', l.maxProcesses, `more than ${l.maxProcesses} processes (fork failed)`)
  }
  if (said(FILE_SIZE_SIGNS)) return fileSize()
  if (o.signal) return { status: 'signaled', violation: null }
  return { status: 'nonzero-exit', violation: null }
}
