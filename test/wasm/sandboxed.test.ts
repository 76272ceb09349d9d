// Isolation 'sandbox': the guest's whole runtime is a cordon sandbox of its own (a node process made as
// callFunction makes one), its host calls on a socket; it behaves as a worker guest does, its limits hold,
// and every exec is a sibling sandbox made by the host, never a child of the guest's.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { loadWasm, runWasm, type WasmOptions, type WasmResult } from '../../src/wasm/index.js'
import { noNamespace } from '../helpers.js'
import { guest, request, responses } from './guests.js'

const trace = (r: WasmResult) => ({
  status: r.status,
  value: r.value,
  hostCalls: r.hostCalls,
  logs: r.logs,
  execs: r.execs.map(({ wallMs: _, ...e }) => e),
  memoryBytes: r.memoryBytes,
})

describe("isolation 'sandbox'", { skip: noNamespace }, () => {
  it('runs the seed guest as a worker would: the same answers, calls and logs (virtual clock)', async () => {
    const mod = await loadWasm(guest('platform', request('echo', ['hi'])))
    const options: WasmOptions = {
      invoke: 'loop',
      args: [2],
      clock: 'fixed:1000,step:10',
      exec: { maxExecs: 5 },
    }
    const inWorker = await runWasm(mod, options)
    const inSandbox = await runWasm(mod, { ...options, isolation: 'sandbox' })
    assert.equal(inSandbox.status, 'ok', inSandbox.violation?.message)
    assert.equal(inSandbox.isolation, 'sandbox')
    assert.deepEqual(trace(inSandbox), trace(inWorker))
  })

  it("its execs are siblings: each exec's cgroup sits beside the guest's, not below it", async (t) => {
    // The exec's sandbox shows bwrap's command line as its pid 1, with the cgroup it bound.
    const r = await runWasm(guest('platform', request('cat', ['/proc/1/cmdline'])), {
      invoke: 'exec_show',
      args: [65536],
      isolation: 'sandbox',
      exec: { maxExecs: 1, options: { isolation: 'namespace' } },
    })
    const [response] = responses(r.logs)
    assert.ok(response && 'ok' in response)
    const cmdline = Buffer.from(response.ok.stdout).toString().split('\0')
    const bound = cmdline.filter((a) => /^\/sys\/fs\/cgroup\/.+\/cordon-\d+-[0-9a-f]+$/.test(a))
    if (bound.length === 0) return t.skip('no cgroup on this machine: no exec has one to place')
    for (const dir of bound)
      assert.equal(dir.match(/cordon-\d+-/g)?.length, 1, `${dir} is nested in a cordon cgroup`)
  })

  it('its limits hold: wall time, CPU time, memory, a trap; a WASI command exits with its code', async () => {
    const spin = await runWasm(guest('spin'), {
      invoke: 'run',
      isolation: 'sandbox',
      limits: { wallTimeMs: '2s' },
    })
    assert.equal(spin.status, 'timeout')
    const cpu = await runWasm(guest('spin'), {
      invoke: 'run',
      isolation: 'sandbox',
      limits: { wallTimeMs: '60s', cpuTimeMs: '500ms' },
    })
    assert.equal(cpu.status, 'cpu-time', cpu.violation?.message)
    const grow = await runWasm(guest('grow'), {
      invoke: 'run',
      isolation: 'sandbox',
      limits: { memoryBytes: '8M' },
    })
    assert.equal(grow.status, 'memory', grow.violation?.message)
    const deep = await runWasm(guest('deep'), { invoke: 'run', args: [0], isolation: 'sandbox' })
    assert.equal(deep.violation?.limit, 'trap')
    const hello = await runWasm(guest('wasi-hello'), { isolation: 'sandbox', argv: ['hello'] })
    assert.equal(hello.status, 'nonzero-exit')
    assert.equal(hello.exitCode, 3)
    assert.equal(hello.stdout, 'hello\n')
  })
})
