// The one place RunResults are made: each kind comes out whole, and redacted.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { REDACTED, Redaction } from '../../src/run/redact.js'
import { emptyResult, finishedResult, unstartedResult, withError } from '../../src/run/result.js'

const secret = new Redaction(['hunter2'])
const none = new Redaction([])

describe('run results', () => {
  it('a run that never started: nothing ran, nothing measured, the violation is the status', () => {
    const result = unstartedResult(
      'process',
      { kind: 'denied', limit: 'hunter2', message: 'no hunter2' },
      'utf8',
      secret,
    )
    assert.equal(result.status, 'denied')
    assert.deepEqual(result.violation, { kind: 'denied', limit: REDACTED, message: `no ${REDACTED}` })
    assert.equal(result.stdout, '')
    assert.equal(result.exitCode, null)
    assert.equal(result.cpuMs, null)
    assert.deepEqual(unstartedResult('namespace', result.violation!, 'buffer', none).output, Buffer.alloc(0))
  })

  it('a run that ended: what it left, in the result, redacted', () => {
    const result = finishedResult(
      {
        ending: { status: 'nonzero-exit', violation: null, exitCode: 2, signal: null },
        output: { stdout: 'a', stderr: 'b', output: 'ab' },
        kept: { truncated: false, bytes: 2 },
        logs: { entries: [{ level: 'info', msg: 'hi' }], truncated: false },
        network: {
          events: [{ host: 'hunter2.example', port: 443, allowed: false, reason: 'not allowed' }],
          dropped: 3,
        },
        usage: { cpuMs: 12, maxRssBytes: 4096, oomKills: 0, pidsMaxHits: 0 },
        wallMs: 10.6,
        isolation: 'namespace',
        perProcessLimits: [],
      },
      secret,
    )
    assert.deepEqual(result, {
      status: 'nonzero-exit',
      exitCode: 2,
      signal: null,
      stdout: 'a',
      stderr: 'b',
      output: 'ab',
      truncated: false,
      outputBytes: 2,
      wallMs: 11,
      cpuMs: 12,
      maxRssBytes: 4096,
      isolation: 'namespace',
      violation: null,
      perProcessLimits: [],
      logs: [{ level: 'info', msg: 'hi' }],
      logsTruncated: false,
      network: [{ host: `${REDACTED}.example`, port: 443, allowed: false, reason: 'not allowed' }],
      networkDropped: 3,
    })
  })

  it('withError keeps everything else, and redacts only when asked', () => {
    const base = {
      ...emptyResult('process', { kind: 'error', limit: 'x', message: 'x' }),
      status: 'ok' as const,
    }
    const failed = withError({ ...base, value: 1 }, 'reply', 'hunter2 said no')
    assert.equal(failed.status, 'error')
    assert.equal(failed.value, 1)
    assert.deepEqual(failed.violation, { kind: 'error', limit: 'reply', message: 'hunter2 said no' })
    const hidden = withError(base, 'reply', 'hunter2 said no', secret)
    assert.equal(hidden.violation?.message, `${REDACTED} said no`)
  })
})
