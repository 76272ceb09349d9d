// The one way a run is stopped, and every timer it has: the wall time, the CPU time poll, the caller's
// AbortSignal (and kill()), a graceful stop's SIGTERM (asked again until a program is there) and its
// SIGKILL when the grace ends, and the give-up on pipes held open after the end. close() clears them all.
import type { Limits } from '../policy/schema.js'
import type { StopReason } from './classify.js'
import type { SandboxProcesses } from './kill.js'
import { RunTimers } from './timers.js'

/** How often a graceful stop asks again when no program ran yet to receive SIGTERM. */
const TERM_RETRY_MS = 10
/** How often the whole tree's CPU time is read to enforce cpuTimeMs. */
const CPU_POLL_MS = 50
/**
 * How long the pipes may stay open once the launched process is gone and the sandbox killed: only
 * something outside the sandbox (handed an fd over a unix socket) can hold them then, so cordon stops
 * reading instead of waiting for it.
 */
const PIPES_AFTER_EXIT_MS = 1000
/** How often the end of the run looks again whether what a grace covers has finished. */
const GRACE_POLL_MS = 20

export class Stopper {
  /** Why the sandbox was stopped, once it was (the first reason wins). */
  reason: StopReason | null = null
  private readonly timers = new RunTimers()
  private procs: SandboxProcesses | null = null
  /**
   * Set when the run's pipes have closed: the run is over from then on, and nothing may stop (signal) it
   * any more: its pids, uid and session may be someone else's by the time a late kill() comes.
   */
  private closed = false
  private wall: NodeJS.Timeout | undefined
  private cpu: NodeJS.Timeout | undefined
  private termRetry: NodeJS.Timeout | undefined
  private abandon: NodeJS.Timeout | undefined
  /** Set while a graceful stop's grace runs, unset again when it ends. */
  private grace: NodeJS.Timeout | undefined
  /** What the end of the launched process left for the end of a grace under way. */
  private afterGrace: (() => void) | undefined
  private readonly onAbort = () => this.stop('canceled', true)

  constructor(
    private readonly limits: Limits,
    private readonly signal: AbortSignal | undefined,
  ) {}

  /**
   * The sandbox is started (`procs`: null when nothing could be): the clock runs from now. `cpuMs` reads
   * the whole tree's CPU time (the cgroup's), when there is one to read.
   */
  arm(procs: SandboxProcesses | null, cpuMs: (() => number | null) | null): void {
    const { limits } = this
    this.procs = procs
    this.wall = this.timers.after(limits.wallTimeMs, () => this.stop('timeout', true))
    if (cpuMs) {
      this.cpu = this.timers.every(CPU_POLL_MS, () => {
        if ((cpuMs() ?? 0) >= limits.cpuTimeMs) this.stop('cpu-time', false)
      })
    }
    this.signal?.addEventListener('abort', this.onAbort, { once: true })
  }

  /** Stop the sandbox: at once, or (`graceful`) SIGTERM first and SIGKILL when killGraceMs has passed. */
  stop(reason: StopReason, graceful: boolean): void {
    const procs = this.procs
    if (this.closed || this.reason || !procs) return
    this.reason = reason
    if (!graceful) {
      procs.kill()
      return
    }
    // Nothing runs yet (bwrap still setting up): ask again until the program is there; the grace ends it.
    const retry = () => procs.term() && this.timers.clear(this.termRetry)
    if (!procs.term()) this.termRetry = this.timers.every(TERM_RETRY_MS, retry)
    this.grace = this.timers.after(this.limits.killGraceMs, () => {
      this.grace = undefined
      procs.kill()
      this.afterGrace?.()
    })
  }

  /**
   * The launched process is gone. Background children may still hold the pipes open; they are part of
   * the sandbox and go now (`killRest`), unless a graceful stop is under way: they got SIGTERM too, and
   * the rest of the grace is theirs. Past that, `abandonPipes` a moment later.
   */
  launcherGone(killRest: boolean, abandonPipes: () => void): void {
    const endRest = () => {
      if (killRest) this.procs?.kill()
      this.abandon = this.timers.after(PIPES_AFTER_EXIT_MS, abandonPipes)
    }
    if (this.grace !== undefined) this.afterGrace = endRest
    else endRest()
  }

  /**
   * The run's pipes have closed: nothing stops it from now on. What a grace under way covers may still be
   * finishing and has until the grace ends; then every timer is cleared, and none is set again.
   */
  async close(): Promise<void> {
    this.closed = true
    this.signal?.removeEventListener('abort', this.onAbort)
    for (const timer of [this.wall, this.cpu, this.termRetry, this.abandon]) this.timers.clear(timer)
    const procs = this.procs
    while (this.grace !== undefined && procs && procs.survivors().length > 0) {
      await new Promise((r) => setTimeout(r, GRACE_POLL_MS))
    }
    this.timers.close()
  }
}
