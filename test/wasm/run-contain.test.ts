// The guest is contained: a loop ends at its wall or CPU time, a memory hog at its memory, a flood of
// logs, output or host calls at their caps, a trap as an error naming it; a WASI command starts, prints
// and exits with its code. Bounds are generous: the machine is shared, timings are noisy.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { loadWasm, runWasm } from '../../src/wasm/index.js'
import { guest } from './guests.js'

describe('a guest that misbehaves ends with the status that says how', () => {
  it('a loop: timeout at its wall time, the worker stopped mid-loop', async () => {
    const started = Date.now()
    const r = await runWasm(guest('spin'), { invoke: 'run', limits: { wallTimeMs: '1s' } })
    assert.equal(r.status, 'timeout')
    assert.deepEqual(r.violation?.limit, 1000)
    assert.ok(Date.now() - started < 8000, `took ${Date.now() - started} ms`)
  })

  it("a loop under a smaller CPU limit: cpu-time, from its own thread's CPU time", async () => {
    const r = await runWasm(guest('spin'), {
      invoke: 'run',
      limits: { wallTimeMs: '60s', cpuTimeMs: '300ms' },
    })
    assert.equal(r.status, 'cpu-time', r.violation?.message)
    assert.ok(r.cpuMs !== null && r.cpuMs >= 300, `cpuMs ${r.cpuMs}`)
  })

  it('memory: growing past the limit fails (memory.grow -1), and the trap that follows is memory', async () => {
    const r = await runWasm(guest('grow'), { invoke: 'run', limits: { memoryBytes: '16M' } })
    assert.equal(r.status, 'memory', r.violation?.message)
    assert.equal(r.violation?.limit, 16 * 1024 * 1024)
    assert.equal(r.memoryBytes, 16 * 1024 * 1024)
  })

  it('a module loaded once runs under the limit it was loaded with, or a smaller one asked for', async () => {
    const mod = await loadWasm(guest('grow'), { memoryBytes: '4M' })
    assert.equal((await runWasm(mod, { invoke: 'run' })).memoryBytes, 4 * 1024 * 1024)
    assert.equal(
      (await runWasm(mod, { invoke: 'run', limits: { memoryBytes: '2M' } })).memoryBytes,
      2 * 1024 * 1024,
    )
  })

  it('unbounded recursion: error, limit trap, naming the stack', async () => {
    const r = await runWasm(guest('deep'), { invoke: 'run', args: [0] })
    assert.equal(r.status, 'error')
    assert.equal(r.violation?.limit, 'trap')
    assert.match(r.violation!.message, /call stack/i)
  })

  it('a flood of logs: the run goes on, logs kept up to maxLogBytes, the rest dropped and said to be', async () => {
    const r = await runWasm(guest('flood'), { invoke: 'logs', args: [5000], limits: { maxLogBytes: '64K' } })
    assert.equal(r.status, 'ok')
    assert.equal(r.logsTruncated, true)
    const kept = r.logs.reduce((n, l) => n + Buffer.byteLength(l.msg), 0)
    assert.ok(kept <= 64 * 1024 && kept > 60 * 1024, `kept ${kept}`)
    assert.equal(r.hostCalls['platform_sandbox.log_message'], 5000)
  })

  it('a flood of output: output-limit at maxOutputBytes, as run() stops a command', async () => {
    const chunks: string[] = []
    const r = await runWasm(guest('flood'), {
      invoke: 'stdout',
      args: [-1],
      limits: { maxOutputBytes: '10K' },
      onOutput: (c) => chunks.push(c.data),
    })
    assert.equal(r.status, 'output-limit')
    assert.equal(r.outputBytes, 10 * 1024)
    assert.equal(r.stdout.length, 10 * 1024)
    assert.equal(r.truncated, true)
    assert.equal(chunks.join(''), r.stdout)
  })

  it('a flood of host calls: stopped past maxHostCalls', async () => {
    const r = await runWasm(guest('flood'), { invoke: 'clock', args: [-1], limits: { maxHostCalls: 500 } })
    assert.equal(r.status, 'error')
    assert.equal(r.violation?.limit, 'maxHostCalls')
    assert.equal(r.hostCalls['platform_sandbox.get_timestamp'], 500)
  })

  it('canceled: its signal aborted stops it; one aborted before gives canceled at once', async () => {
    const ac = new AbortController()
    setTimeout(() => ac.abort(), 300)
    const r = await runWasm(guest('spin'), { invoke: 'run', signal: ac.signal })
    assert.equal(r.status, 'canceled')
    const early = await runWasm(guest('spin'), { invoke: 'run', signal: AbortSignal.abort() })
    assert.equal(early.status, 'canceled')
  })
})

describe('WASI preview1, without a filesystem', () => {
  it('a command starts (no preopens, no path_open), reads its args, prints, and exits with its code', async () => {
    const r = await runWasm(guest('wasi-hello'), { argv: ['hello', 'first arg\n'] })
    assert.equal(r.status, 'nonzero-exit', r.violation?.message)
    assert.equal(r.exitCode, 3)
    assert.equal(r.stdout, 'first arg\nhello\n')
    assert.equal(r.stderr, 'to stderr\n')
    assert.equal(r.hostCalls['wasi_snapshot_preview1.path_open'], 1)
  })
})
