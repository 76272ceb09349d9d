// doctor's verdict and exit code, from a report (a machine where nothing runs cannot be made on demand).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { doctorReport } from '../../src/cli/doctor.js'
import { doctor } from '../../src/index.js'

describe('cordon doctor verdict', () => {
  const real = doctor()

  it('exits 1 and says so when no tier can run, instead of naming a tier', () => {
    const { text, code } = doctorReport({ ...real, autoTier: null, usable: [] }, false)
    assert.equal(code, 1)
    assert.match(text, /no isolation tier can run here/)
    assert.doesNotMatch(text, /runs the .* tier/)
    assert.equal(doctorReport({ ...real, autoTier: null, usable: [] }, true).code, 1)
  })

  it('exits 1 when the tier auto picks fails, and names the tier that runs when asked for', () => {
    const { text, code } = doctorReport({ ...real, autoTier: null, usable: ['process'] }, false)
    assert.equal(code, 1)
    assert.match(text, /auto runs end `error` until it is fixed; --isolation process runs/)
  })

  it('exits 0 and names the tier auto runs when one can', () => {
    const { text, code } = doctorReport({ ...real, autoTier: 'process' }, false)
    assert.equal(code, 0)
    assert.match(text, /isolation "auto" runs the process tier here/)
  })
})
