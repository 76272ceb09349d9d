// The in-process queue: FIFO, `concurrency` runs at a time, at most `maxQueued` waiting, and each key's
// quota (runs queued or running at once, runs admitted per minute). Everything here is synchronous, so an
// admission check and the push that follows it cannot interleave with another submit. A run is started
// only when the store moves it queued → running (startRun), so a run canceled or deleted while waiting is
// skipped, and none runs twice.
import type { KeyRecord, Store } from './types.js'
import { ServiceError } from './types.js'

export interface QueueOptions {
  store: Store
  /** Runs running at once. */
  concurrency: number
  /** Runs waiting for a slot at most; past it a submit is refused (503 queue-full). */
  maxQueued: number
  /** Runs one started run to its end (never rejects: its result is the run's). */
  execute: (runId: string) => Promise<void>
  now?: () => number
  /**
   * Told when the store could not mark a run running (its disk full…): the run stays first in line, and
   * the queue tries again after `retryMs` (default 1 s).
   */
  onStoreError?: (runId: string, error: unknown) => void
  retryMs?: number
}

const MINUTE = 60_000

export class RunQueue {
  private readonly waiting: { runId: string; keyId: string }[] = []
  private readonly running = new Map<string, { keyId: string; done: Promise<void> }>()
  /** Per key: runs queued or running now. */
  private readonly active = new Map<string, number>()
  /** Per key: when its runs of the last minute were admitted (oldest first). */
  private readonly admitted = new Map<string, number[]>()
  private paused = false
  private retry: NodeJS.Timeout | undefined
  private readonly now: () => number

  constructor(private readonly options: QueueOptions) {
    this.now = options.now ?? Date.now
  }

  get runningCount(): number {
    return this.running.size
  }

  get queuedCount(): number {
    return this.waiting.length
  }

  /** Throws ServiceError (quota, queue-full) when `key` may not queue one more run now. */
  admit(key: KeyRecord): void {
    const { concurrentRuns, runsPerMinute } = key.quota
    const active = this.active.get(key.id) ?? 0
    if (concurrentRuns !== null && active >= concurrentRuns) {
      throw new ServiceError(
        'quota',
        `this key may have at most ${concurrentRuns} runs queued or running at once`,
        undefined,
        1,
      )
    }
    if (runsPerMinute !== null) {
      const times = this.window(key.id)
      if (times.length >= runsPerMinute) {
        const oldest = times[0] ?? this.now()
        const retry = Math.max(1, Math.ceil((oldest + MINUTE - this.now()) / 1000))
        throw new ServiceError(
          'quota',
          `this key may start at most ${runsPerMinute} runs a minute`,
          undefined,
          retry,
        )
      }
    }
    if (this.running.size >= this.options.concurrency && this.waiting.length >= this.options.maxQueued) {
      throw new ServiceError(
        'queue-full',
        `the queue is full (${this.options.maxQueued} waiting)`,
        undefined,
        5,
      )
    }
  }

  /** Admits (throwing when it may not) and enqueues a run just stored as queued. */
  submit(key: KeyRecord, runId: string): void {
    this.admit(key)
    if (key.quota.runsPerMinute !== null) this.window(key.id).push(this.now())
    this.push(runId, key.id)
  }

  /** Enqueues without admission: the runs found queued at start-up. */
  push(runId: string, keyId: string): void {
    this.waiting.push({ runId, keyId })
    this.active.set(keyId, (this.active.get(keyId) ?? 0) + 1)
    this.pump()
  }

  /** Takes a waiting run out of the queue (it was canceled); false when it is not waiting. */
  remove(runId: string): boolean {
    const i = this.waiting.findIndex((w) => w.runId === runId)
    if (i < 0) return false
    const [w] = this.waiting.splice(i, 1)
    if (w) this.release(w.keyId)
    return true
  }

  /** Takes every waiting run of a key out of the queue (it was revoked): their ids. */
  removeKey(keyId: string): string[] {
    const gone = this.waiting.filter((w) => w.keyId === keyId).map((w) => w.runId)
    for (const runId of gone) this.remove(runId)
    return gone
  }

  /** The keys with runs waiting now. */
  waitingKeys(): Set<string> {
    return new Set(this.waiting.map((w) => w.keyId))
  }

  /** Starts no more runs (drain); those waiting stay queued in the store, for the next start. */
  pause(): void {
    this.paused = true
    clearTimeout(this.retry)
  }

  /** Resolves once no run is running. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()].map((r) => r.done))
  }

  private window(keyId: string): number[] {
    let times = this.admitted.get(keyId)
    if (!times) {
      times = []
      this.admitted.set(keyId, times)
    }
    const since = this.now() - MINUTE
    while (times.length > 0 && (times[0] as number) <= since) times.shift()
    return times
  }

  private release(keyId: string): void {
    const n = (this.active.get(keyId) ?? 1) - 1
    if (n > 0) this.active.set(keyId, n)
    else this.active.delete(keyId)
  }

  private pump(): void {
    while (!this.paused && this.running.size < this.options.concurrency && this.waiting.length > 0) {
      const next = this.waiting.shift() as { runId: string; keyId: string }
      let started: boolean
      try {
        started = this.options.store.startRun(next.runId, new Date(this.now()).toISOString())
      } catch (error) {
        // Not started, and still queued in the store: it keeps its place, and the queue tries again
        // later. pump() is called from a submit and from a run's end, neither of which may throw.
        this.waiting.unshift(next)
        this.options.onStoreError?.(next.runId, error)
        if (this.retry === undefined) {
          this.retry = setTimeout(() => {
            this.retry = undefined
            this.pump()
          }, this.options.retryMs ?? 1000)
          this.retry.unref()
        }
        return
      }
      if (!started) {
        this.release(next.keyId)
        continue
      }
      const done = this.options
        .execute(next.runId)
        .catch(() => {
          // execute() turns every failure into the run's result; nothing is left to do here.
        })
        .finally(() => {
          this.running.delete(next.runId)
          this.release(next.keyId)
          this.pump()
        })
      this.running.set(next.runId, { keyId: next.keyId, done })
    }
  }
}
