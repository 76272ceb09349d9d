// A run's finish, stored whatever the store does. A finish the store refuses (its disk full, an I/O
// error) is held here, said in the log, and tried again until the store takes it: a run never stays
// `running` for ever because its end could not be written.
import type { RunResult } from '../index.js'
import { errorFields } from './store-errors.js'
import type { RunEvent, Store } from './types.js'

/** The service's log: pino's methods, as `cordon serve` passes its logger. */
export interface ServiceLog {
  info(obj: Record<string, unknown>, msg: string): void
  warn(obj: Record<string, unknown>, msg: string): void
  error(obj: Record<string, unknown>, msg: string): void
}

export const silentLog: ServiceLog = { info() {}, warn() {}, error() {} }

/** The first wait before a refused finish is tried again, and the longest (it doubles). */
export const FINISH_RETRY_MS = { first: 500, most: 30_000 }

export class Finisher {
  private readonly unstored = new Map<string, { result: RunResult; at: string }>()
  private timer: NodeJS.Timeout | undefined
  private wait = FINISH_RETRY_MS.first
  private closed = false

  /** `announce`: what follows a stored finish (its `end` to followers, waiters, the webhook). */
  constructor(
    private readonly store: Store,
    private readonly log: ServiceLog,
    private readonly announce: (runId: string, end: RunEvent | null) => void,
  ) {}

  /** Stores the finish of `runId` now, or holds it and stores it as soon as the store can. Never throws. */
  finish(runId: string, result: RunResult, at = new Date().toISOString()): void {
    if (!this.tryStore(runId, result, at)) this.schedule()
  }

  /** One last try (the server stops); what the store still refuses stays `running` there, and is logged. */
  close(): void {
    this.closed = true
    clearTimeout(this.timer)
    for (const [runId, { result, at }] of [...this.unstored]) this.tryStore(runId, result, at)
    for (const runId of this.unstored.keys())
      this.log.error({ runId }, 'the finish of a run was never stored: the next start ends it interrupted')
  }

  private tryStore(runId: string, result: RunResult, at: string): boolean {
    let end: RunEvent | null
    try {
      end = this.store.finishRun(runId, result, at)
    } catch (error) {
      if (!this.unstored.has(runId))
        this.log.error(
          { runId, status: result.status, err: errorFields(error) },
          'could not store the finish of a run: it is kept, and stored once the store takes it',
        )
      this.unstored.set(runId, { result, at })
      return false
    }
    if (this.unstored.delete(runId))
      this.log.info({ runId }, 'stored the finish of a run the store had refused')
    this.announce(runId, end)
    return true
  }

  private schedule(): void {
    if (this.timer !== undefined || this.unstored.size === 0 || this.closed) return
    this.timer = setTimeout(() => this.retry(), this.wait)
    this.timer.unref()
  }

  private retry(): void {
    this.timer = undefined
    for (const [runId, { result, at }] of [...this.unstored]) if (!this.tryStore(runId, result, at)) break
    if (this.unstored.size === 0) {
      this.wait = FINISH_RETRY_MS.first
      return
    }
    this.wait = Math.min(this.wait * 2, FINISH_RETRY_MS.most)
    this.schedule()
  }
}
