// The stdin of runs made with `stdin: 'open'`: what clients write, held until the program reads it, within
// a bound per run and one per key. While a run waits in the queue its stdin is the store's: each write is
// acknowledged once stored, so a crash of the server loses none of it (it lived in memory, and a run
// restarted after a SIGKILL hung without its input to its wall time), and waiting runs hold nothing in
// the server's memory. When the run starts, what was stored moves into its pipe, and later writes go there.
// A write that would take its run, or its key's runs together, past the bound is refused whole: the bound
// counts the write itself (one write of 8 MiB was taken while less than 1 MiB was held, 30 queued runs
// held 267 MiB).
import { PassThrough } from 'node:stream'
import { ServiceError, type Store } from './types.js'

/** Bytes of stdin not read yet held at most: for one run, and for all the runs of one key together. */
export interface StdinBounds {
  perRun: number
  perKey: number
}

interface OpenStdin {
  keyId: string
  /** The run's pipe once it started; null while it waits, its bytes in the store. */
  pipe: PassThrough | null
  /** Bytes stored while it waits. */
  stored: number
  closed: boolean
}

export class RunStdins {
  private readonly runs = new Map<string, OpenStdin>()

  constructor(
    private readonly store: Store,
    private readonly bounds: StdinBounds,
  ) {}

  /** A queued run with an open stdin: submitted now, or found queued at start-up with what was stored. */
  open(runId: string, keyId: string): void {
    const { bytes, closed } = this.store.stdinState(runId)
    this.runs.set(runId, { keyId, pipe: null, stored: bytes, closed })
  }

  /** Writes to a run's stdin, or throws ServiceError: no open stdin (409), too large (413), full (429). */
  write(runId: string, data: Buffer): void {
    const run = this.openOf(runId)
    const { perRun, perKey } = this.bounds
    const most = Math.min(perRun, perKey)
    if (data.length > most)
      throw new ServiceError(
        'too-large',
        `a write to a run's stdin is at most ${most} bytes (what the server holds of it unread): write it in parts`,
      )
    const held = this.held(run)
    if (held + data.length > perRun)
      throw new ServiceError(
        'quota',
        `run ${runId} has ${held} bytes of stdin it has not read yet, and may have ${perRun}: retry later`,
        undefined,
        1,
      )
    let ofKey = 0
    for (const other of this.runs.values()) if (other.keyId === run.keyId) ofKey += this.held(other)
    if (ofKey + data.length > perKey)
      throw new ServiceError(
        'quota',
        `this key's runs have ${ofKey} bytes of stdin they have not read yet, and may have ${perKey}: retry later`,
        undefined,
        1,
      )
    if (data.length === 0) return
    if (run.pipe) {
      run.pipe.write(data)
      return
    }
    this.store.appendStdin(runId, data)
    run.stored += data.length
  }

  /** Ends a run's stdin (once: then 409). */
  close(runId: string): void {
    const run = this.openOf(runId)
    if (run.pipe) run.pipe.end()
    else this.store.appendStdin(runId, null)
    run.closed = true
  }

  /**
   * The run starts: its pipe, holding what was stored for it (ended, if it was closed); undefined for a
   * run without an open stdin.
   */
  start(runId: string): PassThrough | undefined {
    const run = this.runs.get(runId)
    if (!run) return undefined
    const pipe = new PassThrough()
    const { chunks, closed } = this.store.takeStdin(runId)
    for (const chunk of chunks) pipe.write(chunk)
    if (closed || run.closed) pipe.end()
    run.pipe = pipe
    run.stored = 0
    return pipe
  }

  /** The run finished: its pipe goes (what is stored of it goes with the run's end, in the store). */
  end(runId: string): void {
    const run = this.runs.get(runId)
    this.runs.delete(runId)
    run?.pipe?.destroy()
  }

  private openOf(runId: string): OpenStdin {
    const run = this.runs.get(runId)
    if (!run || run.closed) throw new ServiceError('conflict', `run ${runId} has no open stdin`)
    return run
  }

  /** What a run holds of its stdin that its program has not read yet. */
  private held(run: OpenStdin): number {
    return run.pipe ? run.pipe.writableLength + run.pipe.readableLength : run.stored
  }
}
