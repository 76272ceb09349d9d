import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { formatBytes, formatDuration, parseDuration, parseSize } from '../../src/policy/units.js'

describe('parseDuration', () => {
  it('reads each unit as milliseconds', () => {
    assert.equal(parseDuration('500ms'), 500)
    assert.equal(parseDuration('2s'), 2000)
    assert.equal(parseDuration('1m'), 60_000)
    assert.equal(parseDuration('1h'), 3_600_000)
  })

  it('treats a bare number as milliseconds', () => {
    assert.equal(parseDuration('250'), 250)
    assert.equal(parseDuration('0'), 0)
  })

  it('accepts fractions, any unit case and surrounding or inner spaces', () => {
    assert.equal(parseDuration('1.5h'), 5_400_000)
    assert.equal(parseDuration('0.5s'), 500)
    assert.equal(parseDuration('2S'), 2000)
    assert.equal(parseDuration('10MS'), 10)
    assert.equal(parseDuration(' 3 s '), 3000)
  })

  it('accepts fractions that come to whole milliseconds, refuses the rest', () => {
    assert.equal(parseDuration('1.5s'), 1500)
    assert.equal(parseDuration('1.15s'), 1150)
    assert.throws(() => parseDuration('1.0004s'), /whole number of milliseconds/)
    assert.throws(() => parseSize('0.5'), /whole number of bytes/)
  })

  for (const bad of [
    'banana',
    '-1s',
    '',
    '   ',
    's',
    '1x',
    '1 2s',
    '1e3',
    '1,5s',
    '.5s',
    '1d',
    '+1s',
    '1kb',
  ]) {
    it(`rejects ${JSON.stringify(bad)} naming the input and the units`, () => {
      assert.throws(
        () => parseDuration(bad),
        (error: unknown) => {
          assert.ok(error instanceof Error, 'error instanceof Error')
          assert.ok(error.message.includes(`"${bad}"`), error.message)
          assert.match(error.message, /is not a duration/)
          assert.match(error.message, /ms, s, m, h/)
          return true
        },
      )
    })
  }
})

describe('parseSize', () => {
  it('reads binary multiples', () => {
    assert.equal(parseSize('4096'), 4096)
    assert.equal(parseSize('10b'), 10)
    assert.equal(parseSize('64K'), 64 * 1024)
    assert.equal(parseSize('64kb'), 64 * 1024)
    assert.equal(parseSize('64KiB'), 64 * 1024)
    assert.equal(parseSize('256M'), 256 * 1024 ** 2)
    assert.equal(parseSize('256MB'), 256 * 1024 ** 2)
    assert.equal(parseSize('256mib'), 256 * 1024 ** 2)
    assert.equal(parseSize('1G'), 1024 ** 3)
    assert.equal(parseSize('1gb'), 1024 ** 3)
    assert.equal(parseSize('2GiB'), 2 * 1024 ** 3)
  })

  it('accepts fractions and spaces, rounding to whole bytes', () => {
    assert.equal(parseSize('1.5K'), 1536)
    assert.equal(parseSize(' 1 M '), 1024 ** 2)
    assert.equal(parseSize('0.5G'), 512 * 1024 ** 2)
  })

  for (const bad of ['banana', '-1s', '-1K', '', '1T', '1 K B', 'K', '1e6', '5ms']) {
    it(`rejects ${JSON.stringify(bad)} naming the input and the units`, () => {
      assert.throws(
        () => parseSize(bad),
        (error: unknown) => {
          assert.ok(error instanceof Error, 'error instanceof Error')
          assert.ok(error.message.includes(`"${bad}"`), error.message)
          assert.match(error.message, /is not a size/)
          assert.match(error.message, /b, k, kb, kib, m, mb, mib, g, gb, gib/)
          return true
        },
      )
    })
  }
})

describe('formatBytes', () => {
  it('uses the largest unit that divides exactly', () => {
    assert.equal(formatBytes(1024 ** 3), '1G')
    assert.equal(formatBytes(3 * 1024 ** 3), '3G')
    assert.equal(formatBytes(256 * 1024 ** 2), '256M')
    assert.equal(formatBytes(1536 * 1024 ** 2), '1536M')
    assert.equal(formatBytes(64 * 1024), '64K')
  })

  it('falls back to bytes', () => {
    assert.equal(formatBytes(0), '0B')
    assert.equal(formatBytes(1), '1B')
    assert.equal(formatBytes(1023), '1023B')
    assert.equal(formatBytes(1536), '1536B')
  })

  it('round-trips through parseSize', () => {
    for (const n of [1, 1000, 1024, 1536, 64 * 1024, 512 * 1024 ** 2, 5 * 1024 ** 3]) {
      assert.equal(parseSize(formatBytes(n)), n)
    }
  })
})

describe('formatDuration', () => {
  it('uses seconds for whole seconds and milliseconds otherwise', () => {
    assert.equal(formatDuration(1000), '1s')
    assert.equal(formatDuration(30_000), '30s')
    assert.equal(formatDuration(120_000), '120s')
    assert.equal(formatDuration(1500), '1500ms')
    assert.equal(formatDuration(999), '999ms')
    assert.equal(formatDuration(0), '0ms')
  })

  it('round-trips through parseDuration', () => {
    for (const n of [1, 999, 1000, 1500, 60_000]) assert.equal(parseDuration(formatDuration(n)), n)
  })
})
