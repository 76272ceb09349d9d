import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { GuestClock } from '../../src/wasm/clock.js'

const virtual = (stepMs: number, execAdvanceMs = stepMs, seed = 0) =>
  new GuestClock({ mode: 'virtual', startMs: 1000, stepMs, execAdvanceMs, seed })

describe('GuestClock', () => {
  it('virtual: the n-th read is start + n·step, one counter for ms and WASI ns; an exec moves it on', () => {
    const c = virtual(5, 100)
    assert.deepEqual([c.readMs(), c.readMs()], [1000, 1005])
    assert.equal(c.readNs(0), 1010_000_000n)
    assert.equal(c.readNs(1), 1015_000_000n)
    assert.equal(c.execDuration(), 100)
    assert.equal(c.readMs(), 1120)
    assert.equal(c.peekMs(), 1125)
  })

  it("step 0 is the seed's Deterministic(T): one constant for ever", () => {
    const c = virtual(0)
    assert.deepEqual([c.readMs(), c.readMs(), c.readMs()], [1000, 1000, 1000])
    assert.equal(c.execDuration(), 0)
  })

  it('virtual randomness is a stream from the seed: the same for the same seed, another for another', () => {
    const a = virtual(1, 1, 7)
    const b = virtual(1, 1, 7)
    assert.deepEqual([a.random(5), a.random(40)], [b.random(5), b.random(40)])
    assert.notDeepEqual(virtual(1, 1, 8).random(16), virtual(1, 1, 7).random(16))
    assert.equal(a.random(0).length, 0)
  })

  it("real: the host's time, a monotonic clock that moves, and no exec duration of its own", () => {
    const c = new GuestClock({ mode: 'real' })
    const now = c.readMs()
    assert.ok(Math.abs(now - Date.now()) < 1000)
    const a = c.readNs(1)!
    const b = c.readNs(1)!
    assert.ok(b >= a)
    assert.equal(c.execDuration(), null)
    assert.equal(c.readNs(4), null)
    assert.equal(c.resolutionNs(-1), null)
  })
})
