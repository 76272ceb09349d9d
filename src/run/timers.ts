// A run's timers, in one place so that its end clears every one of them: a timer left running keeps the
// host's event loop alive and goes on acting for a run that is over (signalling pids that may be reused).

export class RunTimers {
  private readonly live = new Set<NodeJS.Timeout>()
  private closed = false

  /** `fn` once after `ms`; nothing (undefined) once the timers are closed. */
  after(ms: number, fn: () => void): NodeJS.Timeout | undefined {
    if (this.closed) return undefined
    const timer = setTimeout(() => {
      this.live.delete(timer)
      fn()
    }, ms)
    this.live.add(timer)
    return timer
  }

  /** `fn` every `ms` until cleared; nothing (undefined) once the timers are closed. */
  every(ms: number, fn: () => void): NodeJS.Timeout | undefined {
    if (this.closed) return undefined
    const timer = setInterval(fn, ms)
    this.live.add(timer)
    return timer
  }

  clear(timer: NodeJS.Timeout | undefined): void {
    if (timer === undefined) return
    clearTimeout(timer) // clears intervals too
    this.live.delete(timer)
  }

  /** Clear every timer, and set none from now on. */
  close(): void {
    this.closed = true
    for (const timer of this.live) clearTimeout(timer)
    this.live.clear()
  }

  /** How many are set (for tests). */
  get size(): number {
    return this.live.size
  }
}
