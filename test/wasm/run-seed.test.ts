// The seed's behaviours (platform-v2 PR #33), each pinned through runWasm with a real guest and real
// sandboxes: a request/response round trip, the short buffer's -(needed), bad pointers, log levels, the
// deterministic clock. Where the seed's answer is kept exactly, the test says so.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { encodeResult } from '../../src/wasm/bincode.js'
import { loadWasm, runWasm } from '../../src/wasm/index.js'
import { noNamespace } from '../helpers.js'
import { guest, hexLogs, request, responses } from './guests.js'

const EXEC = { maxExecs: 10 }

describe('platform_sandbox as the seed defines it', { skip: noNamespace }, () => {
  it('round trip: echo hi decodes to Ok { exit_code 0, stdout "hi\\n" }', async () => {
    const r = await runWasm(guest('platform', request('echo', ['hi'])), {
      invoke: 'exec_show',
      args: [4096],
      exec: EXEC,
    })
    assert.equal(r.status, 'ok', r.violation?.message)
    const [response] = responses(r.logs)
    assert.ok(response && 'ok' in response, JSON.stringify(r.logs))
    assert.equal(response.ok.exitCode, 0)
    assert.equal(Buffer.from(response.ok.stdout).toString(), 'hi\n')
    assert.equal(Buffer.from(response.ok.stderr).length, 0)
    // The return value is the bytes written: the encoded response's length.
    assert.equal(r.value, hexLogs(r.logs)[0]!.length)
    assert.equal(r.execCount, 1)
    assert.equal(r.execs[0]?.status, 'ok')
    assert.equal(r.hostCalls['platform_sandbox.sandbox_exec'], 1)
  })

  it('a short buffer gets -(needed) and nothing written; a buffer of that size gets the response', async () => {
    const mod = await loadWasm(guest('platform', request('echo', ['hi'])))
    const needed = encodeResult({
      ok: { exitCode: 0, stdout: Buffer.from('hi\n'), stderr: Buffer.alloc(0), durationMs: 0n },
    }).length
    const short = await runWasm(mod, { invoke: 'exec_show', args: [8], exec: EXEC })
    assert.equal(short.value, -needed)
    assert.equal(hexLogs(short.logs).length, 0)
    const exact = await runWasm(mod, { invoke: 'exec_show', args: [needed], exec: EXEC })
    assert.equal(exact.value, needed)
  })

  it('bad pointers: -1 for a negative response pointer or length, or a response outside memory', async () => {
    const mod = await loadWasm(guest('platform', request('echo', ['hi'])))
    const len = request('echo', ['hi']).length
    const call = async (...args: number[]) => {
      const r = await runWasm(mod, { invoke: 'exec', args, exec: EXEC })
      assert.equal(r.status, 'ok', r.violation?.message)
      return r
    }
    assert.equal((await call(1024, len, -1, 4096)).value, -1)
    assert.equal((await call(1024, len, 0x10000, -1)).value, -1)
    // Nothing ran for an answer that could not be given.
    assert.equal((await call(1024, len, -1, 4096)).execCount, 0)
    // A response that runs past the end of memory (40 pages).
    const past = await call(1024, len, 40 * 65536 - 4, 4096)
    assert.equal(past.value, -1)
  })

  it('an unreadable request is answered in the buffer as ExecutionFailed, in the seed words', async () => {
    const mod = await loadWasm(guest('platform'))
    for (const [ptr, len, words] of [
      [-5, 10, 'negative pointer/length'],
      [1024, -1, 'negative pointer/length'],
      [40 * 65536 - 2, 10, 'memory read out of bounds'],
      [0x7fffffff, 10, 'memory read out of bounds'],
    ] as const) {
      const raw = await runWasm(mod, { invoke: 'exec', args: [ptr, len, 0x10000, 4096], exec: EXEC })
      assert.ok(typeof raw.value === 'number' && raw.value > 0, `${ptr},${len}: ${raw.value}`)
      assert.equal(raw.execCount, 0)
      const expected = encodeResult({ err: { kind: 'ExecutionFailed', message: words } })
      assert.equal(raw.value, expected.length, words)
    }
  })

  it('an undecodable request is ExecutionFailed("invalid sandbox exec payload: …")', async () => {
    const r = await runWasm(guest('platform', new Uint8Array([1, 2, 3])), {
      invoke: 'exec_show',
      args: [4096],
      exec: EXEC,
    })
    const [response] = responses(r.logs)
    assert.ok(response && 'err' in response && response.err.kind === 'ExecutionFailed')
    assert.match((response.err as { message: string }).message, /^invalid sandbox exec payload: /)
    assert.equal(r.execCount, 0)
  })

  it('log levels: 0 trace … 4 error, anything else info; invalid UTF-8 as U+FFFD; out of bounds dropped', async () => {
    const mod = await loadWasm(guest('platform'))
    const levels: string[] = []
    for (const level of [0, 1, 2, 3, 4, 99, -1]) {
      const r = await runWasm(mod, { invoke: 'log', args: [level, 0x200, 4] })
      assert.equal(r.logs.length, 1)
      assert.equal(r.logs[0]!.msg, '0123')
      assert.equal(r.logs[0]!.source, 'wasm')
      levels.push(r.logs[0]!.level)
    }
    assert.deepEqual(levels, ['trace', 'debug', 'info', 'warn', 'error', 'info', 'info'])
    const dropped = await runWasm(mod, { invoke: 'log', args: [2, 40 * 65536 - 2, 4] })
    assert.equal(dropped.logs.length, 0)
    assert.equal(dropped.hostCalls['platform_sandbox.log_message'], 1)
  })

  it("the deterministic clock: fixed:T answers T on every read, as the seed's Deterministic(T)", async () => {
    const r = await runWasm(guest('platform'), { invoke: 'clock', args: [3], clock: 'fixed:1700000000000' })
    const times = hexLogs(r.logs).map((b) => b.readBigInt64LE())
    assert.deepEqual(times, [1700000000000n, 1700000000000n, 1700000000000n])
    assert.deepEqual(r.clock, { mode: 'virtual', nowMs: 1700000000000 })
  })

  it("sandbox_status: 0 while execs remain, 1 when exec is off (the seed's later Disabled)", async () => {
    const mod = await loadWasm(guest('platform'))
    assert.equal((await runWasm(mod, { invoke: 'status', exec: EXEC })).value, 0)
    assert.equal((await runWasm(mod, { invoke: 'status' })).value, 1)
  })

  it('exec off (the default): SandboxDisabled, and nothing runs', async () => {
    const r = await runWasm(guest('platform', request('echo', ['hi'])), { invoke: 'exec_show', args: [4096] })
    assert.deepEqual(responses(r.logs), [{ err: { kind: 'SandboxDisabled' } }])
    assert.equal(r.execCount, 0)
  })
})
