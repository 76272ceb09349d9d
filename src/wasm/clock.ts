// The guest's time and randomness. Real: the host's clock and crypto randomness. Virtual: time starts at
// `startMs` and every read (get_timestamp, now_ms, WASI clock_time_get, one counter for all) returns the
// current value, then moves it on by `stepMs`; each exec moves it on by `execAdvanceMs` and never by the
// real time the command took. Randomness is then a SHA-256 stream from `seed`. So a guest's run is
// reproducible: the seed's deterministic mode returns one constant forever (step 0 here), which makes
// every interval zero; a step keeps time monotonic and still reproducible.
import { createHash, randomFillSync } from 'node:crypto'

export type ClockSpec =
  | { mode: 'real' }
  | { mode: 'virtual'; startMs: number; stepMs: number; execAdvanceMs: number; seed: number }

/** WASI clock ids: realtime, monotonic, process and thread CPU time. */
const WASI_CLOCKS = 4

export class GuestClock {
  private now: number
  private drawn = 0

  constructor(readonly spec: ClockSpec) {
    this.now = spec.mode === 'virtual' ? spec.startMs : 0
  }

  get mode(): 'real' | 'virtual' {
    return this.spec.mode
  }

  /** Milliseconds since the epoch as the guest reads them (a virtual read moves the clock on). */
  readMs(): number {
    if (this.spec.mode === 'real') return Date.now()
    const t = this.now
    this.now += this.spec.stepMs
    return t
  }

  /** WASI `clock_time_get`: nanoseconds, or null for a clock id WASI does not define. */
  readNs(id: number): bigint | null {
    if (!Number.isInteger(id) || id < 0 || id >= WASI_CLOCKS) return null
    if (this.spec.mode === 'virtual') return BigInt(this.readMs()) * 1_000_000n
    if (id === 0) return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6))
    return process.hrtime.bigint()
  }

  /** WASI `clock_res_get`: nanoseconds. */
  resolutionNs(id: number): bigint | null {
    if (!Number.isInteger(id) || id < 0 || id >= WASI_CLOCKS) return null
    return this.spec.mode === 'virtual' ? BigInt(Math.max(1, this.spec.stepMs)) * 1_000_000n : 1000n
  }

  /** An exec happened: virtually, the time it is said to have taken (the clock moves on by it); else null. */
  execDuration(): number | null {
    if (this.spec.mode === 'real') return null
    this.now += this.spec.execAdvanceMs
    return this.spec.execAdvanceMs
  }

  /** The time now, without reading it (for the result). */
  peekMs(): number {
    return this.spec.mode === 'real' ? Date.now() : this.now
  }

  /** `n` random bytes: the host's, or the next `n` of the seed's stream. */
  random(n: number): Uint8Array {
    const out = new Uint8Array(n)
    if (this.spec.mode === 'real') return randomFillSync(out)
    for (let at = 0; at < n; at += 32) {
      const block = createHash('sha256')
        .update(`cordon-wasm:${this.spec.seed}:${this.drawn++}`)
        .digest()
      out.set(block.subarray(0, Math.min(32, n - at)), at)
    }
    return out
  }
}
