// What happened to a run, turned into what its result says: the one step from the launched process's end
// (and everything else the supervisor saw) to a status. Pure: no processes, no clock, no pipes.
import type { Isolation, Status, Violation } from '../policy/result.js'
import type { Limits } from '../policy/schema.js'
import { classify, effectiveSignal, launcherRefusal, type StopReason } from './classify.js'
import { tailAfter } from './output.js'

/** Everything the supervisor saw of a run's end. */
export interface Happened {
  tier: Isolation
  /** How the launched process (the launcher, bwrap's monitor or the process tier's) ended, as Node saw it. */
  exit: { code: number | null; signal: string | null }
  /** Why the supervisor stopped the sandbox (a limit, a timer, the caller), if it did. */
  stoppedFor: StopReason | null
  /** The cgroup's own counters, when the sandbox had one. */
  kernel: { oomKills: number; pidsMaxHits: number } | null
  /** The last of stderr (of both streams when merged), as the output buffer kept it. */
  stderrTail: string
  limits: Limits
  /** The launcher could not be started at all (spawn's own error). */
  launchError: string | null
  /** What the launcher wrote on its refusal pipe ('' when it exec'd the program). */
  refusal: string
  /** bwrap reported the program's exit (namespace tier; ignored in the process tier). */
  programRan: boolean
}

export interface Ending {
  status: Status
  violation: Violation | null
  exitCode: number | null
  signal: string | null
  /**
   * The launcher's words on a failed exec of the program (not a refusal: the program's own failure), for
   * the program's stderr, where a shell would put them: the launcher never writes stderr itself.
   */
  programError: string | null
}

export function outcome(h: Happened): Ending {
  let exitCode = h.exit.code
  let signal = h.exit.signal
  // A signal death the launcher could not pass on as itself arrives as 128+N: any from bwrap, a real-time
  // one (which Node cannot name) from the process tier's monitor. Undone here, so both tiers look alike.
  if (signal === null && exitCode !== null && exitCode > (h.tier === 'namespace' ? 128 : 128 + 31)) {
    signal = effectiveSignal(exitCode, null)
    if (signal) exitCode = null
  }
  const refusal = launcherRefusal(exitCode, h.stderrTail, {
    refusal: h.refusal,
    programRan: h.tier === 'namespace' ? h.programRan : null,
  })
  const programError = refusal === null && h.refusal !== '' ? h.refusal : null
  // The supervisor adds programError to the output before the end: it counts as stderr written last.
  const stderrTail =
    programError === null
      ? h.stderrTail
      : tailAfter(h.stderrTail, Buffer.from(programError).toString('latin1'))
  const { status, violation } = classify({
    exitCode,
    signal,
    stoppedFor: h.stoppedFor,
    kernel: h.kernel,
    stderrTail,
    limits: h.limits,
    // Spawn's own error came first, and says more.
    launchError: h.launchError ?? refusal,
  })
  return { status, violation, exitCode, signal, programError }
}
