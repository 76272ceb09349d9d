// A namespace-tier run whose bwrap could not set up because a path it was to cover with /dev/null (a host
// socket, a hidden file) went away between cordon's listing and bwrap's mount. bwrap (0.8) mounts over a
// path only where it exists: a file gone makes it fail ("Can't create file at …"), its directory gone too
// ("Can't mkdir parents for …"), both on the read-only root, before the program runs. No cover made by
// mounting (over the socket, over its directory) survives its target going away, and a socket gone needs
// no cover: such a run is launched again, prepared afresh (the gone path is no longer covered, a new one
// is). The judgement is by facts, not bwrap's words: the program never ran (bwrap's status fd), bwrap said
// one line, and that line names a path to cover or one is gone now. That line is held back so the caller never sees the attempt.
import { lstatSync } from 'node:fs'
import type { LaunchPlan } from '../plan/plan.js'

/** How bwrap's own error lines start. */
const BWRAP = 'bwrap: '
/** Longer than any path bwrap would name (PATH_MAX) plus its words: past it the text is the program's. */
const MAX_HELD = 4096 + 256
/** Launches of one run in all: a socket flapping every few ms rarely fails twice in a row. */
export const SETUP_ATTEMPTS = 4
/** What the caller may write to stdin before the sandbox shows it started, kept to be written again. */
const MAX_REPLAY = 64 * 1024

/** The paths a namespace-tier plan covers with /dev/null: bwrap fails when one of them is gone. */
export function coveredPaths(plan: LaunchPlan): Set<string> {
  const out = new Set<string>()
  if (plan.tier !== 'namespace' || plan.warm) return out
  const a = plan.args
  for (let i = 0; i + 2 < a.length; i++) {
    if ((a[i] === '--ro-bind' || a[i] === '--dev-bind') && a[i + 1] === '/dev/null') out.add(a[i + 2]!)
  }
  return out
}

/**
 * Holds the start of the stream bwrap's stderr goes to while it may still be bwrap's refusal to cover a
 * gone path: released (in order) as soon as it cannot be (other bytes, any bytes on the other stream),
 * dropped when the run is launched again. A program that prints exactly those words first has them delayed
 * until it prints anything else or exits; nothing is lost.
 */
export class SetupHold {
  private held: Buffer[] = []
  private heldBytes = 0
  private holding: boolean
  private stdinLog: (string | Buffer)[] | null = []
  private stdinBytes = 0
  private stdinClosed = false

  constructor(
    private readonly covered: ReadonlySet<string>,
    /** The stream bwrap's stderr reaches (stdout when the output is merged). */
    readonly stream: 'stdout' | 'stderr',
    private readonly release: (data: Buffer) => void,
  ) {
    this.holding = covered.size > 0
  }

  /** Whether `data` on `stream` is taken (held); false: pass it on as usual. */
  take(stream: 'stdout' | 'stderr', data: Buffer): boolean {
    if (!this.holding) return false
    if (stream !== this.stream) {
      this.let()
      return false
    }
    this.held.push(data)
    this.heldBytes += data.length
    if (this.heldBytes > MAX_HELD || !this.oneBwrapLine(true)) {
      this.let()
      return true // released in order, this chunk included
    }
    return true
  }

  /** Pass on what is held, and hold nothing more. */
  let(): void {
    if (!this.holding) return
    this.holding = false
    this.stdinLog = null
    const held = Buffer.concat(this.held)
    this.held = []
    if (held.length > 0) this.release(held)
  }

  /** A write to the sandbox's stdin, kept while the run may be launched again. */
  wrote(data: string | Buffer): void {
    if (!this.stdinLog) return
    this.stdinBytes += data.length
    if (this.stdinBytes > MAX_REPLAY) {
      this.stdinLog = null // too much to replay: this run is not launched again
      return
    }
    this.stdinLog.push(Buffer.isBuffer(data) ? Buffer.from(data) : data)
  }

  closedStdin(): void {
    this.stdinClosed = true
  }

  /**
   * A covered path gone now, when all that is held is one line of bwrap's and the run may be launched
   * again (stdin replayable); else null, and what is held should be released.
   */
  retryable(): string | null {
    if (!this.holding || !this.stdinLog || !this.oneBwrapLine(false)) return null
    // Named by bwrap (whatever its words), or gone now: a socket bound again since is a new one.
    const line = Buffer.concat(this.held).toString('latin1')
    for (const p of this.covered) {
      if (line.includes(` ${Buffer.from(p).toString('latin1')}:`) || gone(p)) return p
    }
    return null
  }

  /** Hand what was written to stdin (and its end) to the next attempt. */
  replayInto(write: (data: string | Buffer) => boolean, close: () => void): void {
    for (const d of this.stdinLog ?? []) write(d)
    if (this.stdinClosed) close()
  }

  /** Whether what is held is one line of bwrap's (`partial`: or could still become one). */
  private oneBwrapLine(partial: boolean): boolean {
    const text = Buffer.concat(this.held).toString('latin1')
    if (text.length < BWRAP.length) return partial && BWRAP.startsWith(text)
    if (!text.startsWith(BWRAP)) return false
    const nl = text.indexOf('\n')
    return nl === -1 ? partial : nl === text.length - 1
  }
}

/** Whether nothing is at `p` now: not there, or a directory above it gone or no longer a directory. */
function gone(p: string): boolean {
  try {
    return lstatSync(p, { throwIfNoEntry: false }) === undefined
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOTDIR'
  }
}
