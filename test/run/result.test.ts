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
          events: [
            {
              raw: 'hunter2.example',
              cut: false,
              port: 443,
              allowed: false,
              code: 'not-allowed',
              reason: 'not allowed',
            },
          ],
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
      network: [
        {
          host: `${REDACTED}.example`,
          port: 443,
          allowed: false,
          code: 'not-allowed',
          reason: 'not allowed',
        },
      ],
      networkDropped: 3,
    })
  })

  it('a host is redacted as the bytes the sandbox sent, then escaped; one cut at a secret hides its start', () => {
    // A secret with a character outside ASCII arrives as its UTF-8 bytes (one Latin-1 character each):
    // escaped first, it would be `\u00c3\u00a4`, which no literal matches.
    const redaction = new Redaction(['pässwörd', 'TOPSECRET'])
    const event = (raw: string, cut = false) => ({
      raw,
      cut,
      port: 80,
      allowed: false,
      code: 'malformed-host' as const,
      reason: 'not a host name or IP address',
    })
    const latin1 = (text: string) => Buffer.from(text, 'utf8').toString('latin1')
    const result = finishedResult(
      {
        ending: { status: 'ok', violation: null, exitCode: 0, signal: null },
        output: { stdout: '', stderr: '', output: '' },
        kept: { truncated: false, bytes: 0 },
        logs: { entries: [], truncated: false },
        network: {
          events: [
            event(latin1('a.pässwörd\0.test')),
            event('topsecret.test'),
            event(`${'x'.repeat(1020)}TOPS`, true),
          ],
          dropped: 0,
        },
        usage: null,
        wallMs: 1,
        isolation: 'namespace',
        perProcessLimits: [],
      },
      redaction,
    )
    assert.deepEqual(
      result.network.map((e) => e.host),
      [`a.${REDACTED}\\u0000.test`, `${REDACTED}.test`, `${'x'.repeat(253)}...`],
    )
    const cut = finishedResult(
      {
        ending: { status: 'ok', violation: null, exitCode: 0, signal: null },
        output: { stdout: '', stderr: '', output: '' },
        kept: { truncated: false, bytes: 0 },
        logs: { entries: [], truncated: false },
        network: { events: [event(`x.TOPS`, true)], dropped: 0 },
        usage: null,
        wallMs: 1,
        isolation: 'namespace',
        perProcessLimits: [],
      },
      redaction,
    )
    assert.equal(cut.network[0]?.host, `x.${REDACTED}`)
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
