// The clock's variables: an offset from the real time, so one clock runs on across the sandbox's processes.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { clockEnv } from '../../src/plan/clock.js'

const LIB = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1'

describe('clockEnv', () => {
  const now = Date.parse('2026-01-01T00:00:00Z')

  it('is the offset from the launch, to the millisecond, with its sign', () => {
    assert.equal(clockEnv('2024-01-01T00:00:00Z', LIB, {}, now).FAKETIME, '-63158400.000')
    assert.equal(clockEnv('2026-01-01T00:00:01.5Z', LIB, {}, now).FAKETIME, '+1.500')
    assert.equal(clockEnv('2026-01-01T00:00:00Z', LIB, {}, now).FAKETIME, '+0.000')
  })

  it('reads the start as an instant whatever its offset', () => {
    const a = clockEnv('2024-06-01T12:00:00+02:00', LIB, {}, now)
    const b = clockEnv('2024-06-01T10:00:00Z', LIB, {}, now)
    assert.equal(a.FAKETIME, b.FAKETIME)
  })

  it('uses the sandbox zone (UTC unless env.TZ) and refuses an unknown one, naming env.TZ', () => {
    assert.equal(clockEnv('2024-01-01T00:00:00Z', LIB, {}, now).TZ, 'UTC')
    assert.equal(clockEnv('2024-01-01T00:00:00Z', LIB, { TZ: 'Europe/Berlin' }, now).TZ, 'Europe/Berlin')
    assert.throws(() => clockEnv('2024-01-01T00:00:00Z', LIB, { TZ: 'Mars/Olympus' }, now), /env\.TZ/)
  })

  it('puts libfaketime first in front of an LD_PRELOAD the policy sets', () => {
    assert.equal(clockEnv('2024-01-01T00:00:00Z', LIB, {}, now).LD_PRELOAD, LIB)
    assert.equal(
      clockEnv('2024-01-01T00:00:00Z', LIB, { LD_PRELOAD: '/x.so' }, now).LD_PRELOAD,
      `${LIB}:/x.so`,
    )
  })
})
