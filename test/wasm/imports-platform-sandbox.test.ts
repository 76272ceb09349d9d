// The host side of platform_sandbox alone, on a plain context: the kept response a retry claims, the seed's
// return codes in its order, and every row of the result mapping.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { errorResult, type RunResult, type Status } from '../../src/index.js'
import type { ExecOutcome, ExecRequest, HostContext } from '../../src/wasm/abi.js'
import { decodeResult, encodeResult } from '../../src/wasm/bincode.js'
import { GuestClock } from '../../src/wasm/clock.js'
import { hostHandlers, responseFor } from '../../src/wasm/imports/platform-sandbox.js'
import { request } from './guests.js'

function context(outcome: (req: ExecRequest) => ExecOutcome) {
  const asked: ExecRequest[] = []
  const ctx: HostContext = {
    clock: new GuestClock({ mode: 'real' }),
    outputOverflow: 'truncate',
    args: [],
    environ: [],
    execState: () => ({ enabled: true, count: asked.length, remaining: 10 - asked.length }),
    exec: async (req) => {
      asked.push(req)
      return outcome(req)
    },
    log: () => {},
    note: () => {},
    write: () => {},
  }
  return { exec: hostHandlers(ctx)['platform_sandbox.sandbox_exec']!, asked }
}

function ran(status: Status, more: Partial<RunResult<Buffer>> = {}): ExecOutcome {
  const base = errorResult('x', 'message of it')
  const result: RunResult<Buffer> = {
    ...base,
    status,
    exitCode: null,
    stdout: Buffer.from('out'),
    stderr: Buffer.from('err'),
    output: Buffer.from('outerr'),
    violation: status === 'ok' ? null : { kind: status as 'timeout', limit: 1500, message: 'message of it' },
    ...more,
  }
  return { kind: 'ran', result, durationMs: 12 }
}

const MEM = 65536

describe('platform_sandbox.sandbox_exec, host side', () => {
  it('keeps a response that did not fit: the same request bytes get it, and it ran once', async () => {
    const { exec, asked } = context(() => ran('ok', { exitCode: 0 }))
    const req = request('echo', ['hi'])
    const first = await exec([0, req.length, 100, 8, MEM], req)
    const needed = -(first.values[0] as number)
    assert.ok(needed > 8)
    const second = await exec([0, req.length, 100, needed, MEM], req)
    assert.equal(second.values[0], needed)
    assert.equal(asked.length, 1)
    assert.deepEqual(decodeResult(second.bytes!), {
      ok: {
        exitCode: 0,
        stdout: new Uint8Array(Buffer.from('out')),
        stderr: new Uint8Array(Buffer.from('err')),
        durationMs: 12n,
      },
    })
    // Delivered: the next identical request runs anew.
    await exec([0, req.length, 100, needed, MEM], req)
    assert.equal(asked.length, 2)
  })

  it('a response outside memory (-1) is kept too; another request in between drops it', async () => {
    const { exec, asked } = context(() => ran('ok', { exitCode: 0 }))
    const a = request('echo', ['a'])
    const b = request('echo', ['b'])
    assert.deepEqual((await exec([0, a.length, MEM - 4, 4096, MEM], a)).values, [-1])
    assert.ok(((await exec([0, a.length, 100, 4096, MEM], a)).values[0] as number) > 0)
    assert.equal(asked.length, 1)
    await exec([0, a.length, 100, 8, MEM], a)
    await exec([0, b.length, 100, 4096, MEM], b)
    await exec([0, a.length, 100, 4096, MEM], a)
    assert.deepEqual(
      asked.map((r) => r.argv[1]),
      ['a', 'a', 'b', 'a'],
    )
  })

  it("answers in the seed's order: negative response args -1 before anything; -(needed) before bounds", async () => {
    const { exec, asked } = context(() => ran('ok', { exitCode: 0 }))
    const req = request('echo')
    assert.deepEqual((await exec([0, req.length, -1, 4096, MEM], req)).values, [-1])
    assert.deepEqual((await exec([0, req.length, 0, -1, MEM], req)).values, [-1])
    assert.equal(asked.length, 0)
    // No memory: the request is unreadable, answered ExecutionFailed("memory export not found").
    const none = encodeResult({ err: { kind: 'ExecutionFailed', message: 'memory export not found' } })
    assert.deepEqual((await exec([0, 10, 0, 4, -1], undefined)).values, [-none.length])
    assert.deepEqual((await exec([0, 10, 0, 4096, -1], undefined)).values, [-1])
  })
})

describe('responseFor: every row of the mapping', () => {
  const kind = (outcome: ExecOutcome, overflow: 'truncate' | 'error' = 'truncate') => {
    const r = responseFor(outcome, 'prog', overflow)
    return 'ok' in r ? { ok: r.ok.exitCode } : r.err
  }
  it('maps each status as docs/wasm.md says', () => {
    assert.deepEqual(kind(ran('ok', { exitCode: 0 })), { ok: 0 })
    assert.deepEqual(kind(ran('nonzero-exit', { exitCode: 3, violation: null })), { ok: 3 })
    assert.deepEqual(kind(ran('signaled', { exitCode: null, signal: 'SIGKILL', violation: null })), {
      ok: -1,
    })
    assert.deepEqual(kind(ran('output-limit')), { ok: -1 })
    assert.deepEqual(kind(ran('output-limit'), 'error'), { kind: 'OutputTooLarge', value: 1500n })
    assert.deepEqual(kind(ran('timeout')), { kind: 'Timeout', value: 1500n })
    assert.deepEqual(kind(ran('denied')), { kind: 'CommandNotAllowed', message: 'prog' })
    assert.deepEqual(kind(ran('not-found')), { kind: 'CommandNotAllowed', message: 'prog' })
    for (const status of ['memory', 'cpu-time', 'process-limit', 'file-size'] as const)
      assert.deepEqual(kind(ran(status)), { kind: 'PolicyViolation', message: `${status}: message of it` })
    assert.deepEqual(kind(ran('error')), { kind: 'ExecutionFailed', message: 'message of it' })
    assert.deepEqual(kind(ran('canceled')), { kind: 'ExecutionFailed', message: 'message of it' })
    assert.deepEqual(kind({ kind: 'disabled' }), { kind: 'SandboxDisabled' })
    assert.deepEqual(kind({ kind: 'quota', maxExecs: 3 }), {
      kind: 'PolicyViolation',
      message: 'exec quota: 3 execs',
    })
    assert.deepEqual(kind({ kind: 'invalid', message: 'why' }), { kind: 'ExecutionFailed', message: 'why' })
  })
})
