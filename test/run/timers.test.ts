// A run's timers: its end clears every one, and none can be set after it.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { RunTimers } from '../../src/run/timers.js'

describe('RunTimers', () => {
  it('close() clears every timer, and later ones are never set', async () => {
    const timers = new RunTimers()
    let fired = 0
    timers.after(20, () => fired++)
    timers.every(5, () => fired++)
    assert.equal(timers.size, 2)
    timers.close()
    assert.equal(timers.size, 0)
    assert.equal(
      timers.after(1, () => fired++),
      undefined,
    )
    assert.equal(
      timers.every(1, () => fired++),
      undefined,
    )
    await new Promise((r) => setTimeout(r, 60))
    assert.equal(fired, 0)
  })

  it('a timeout that fired and a cleared one are no longer held', async () => {
    const timers = new RunTimers()
    timers.after(1, () => {})
    const interval = timers.every(1, () => {})
    timers.clear(interval)
    await new Promise((r) => setTimeout(r, 20))
    assert.equal(timers.size, 0)
  })
})
