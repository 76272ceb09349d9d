// Runs side by side and again: with a virtual clock a guest's run is reproducible (the guest sees the same
// times, durations and answers), and guests in parallel never see each other's execs.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { loadWasm, runWasm, type WasmResult } from '../../src/wasm/index.js'
import { noNamespace } from '../helpers.js'
import { guest, hexLogs, request, responses } from './guests.js'

/** What the guest saw and did, without the host's real timings. */
const trace = (r: WasmResult) => ({
  status: r.status,
  hostCalls: r.hostCalls,
  logs: r.logs,
  execs: r.execs.map(({ wallMs: _, ...e }) => e),
  clock: r.clock,
})

describe('many runs', { skip: noNamespace }, () => {
  it('a virtual clock makes runs reproducible: times, exec durations and answers alike, run after run', async () => {
    const mod = await loadWasm(guest('platform', request('echo', ['same'])))
    const options = {
      invoke: 'loop',
      args: [2],
      clock: { start: 5000, stepMs: 3, execAdvanceMs: 250 },
      exec: { maxExecs: 5 },
    }
    const first = await runWasm(mod, options)
    assert.equal(first.status, 'ok', first.violation?.message)
    const [a, b] = responses(first.logs)
    assert.ok(a && 'ok' in a && b && 'ok' in b)
    assert.deepEqual([a.ok.durationMs, b.ok.durationMs], [250n, 250n])
    assert.deepEqual(
      first.execs.map((e) => e.atMs),
      [5250, 5500],
    )
    for (let i = 0; i < 4; i++) assert.deepEqual(trace(await runWasm(mod, options)), trace(first))
    const clock = await runWasm(mod, { invoke: 'clock', args: [4], clock: 'fixed:100,step:7' })
    assert.deepEqual(
      hexLogs(clock.logs).map((x) => x.readBigInt64LE()),
      [100n, 107n, 114n, 121n],
    )
  })

  it('8 guests in parallel, 3 execs each: every answer is its own', async () => {
    const runs = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        runWasm(guest('platform', request('echo', [`guest-${i}`])), {
          invoke: 'loop',
          args: [3],
          exec: { maxExecs: 3 },
        }),
      ),
    )
    runs.forEach((r, i) => {
      assert.equal(r.status, 'ok', r.violation?.message)
      const out = responses(r.logs).map((x) => ('ok' in x ? Buffer.from(x.ok.stdout).toString() : x.err.kind))
      assert.deepEqual(out, [`guest-${i}\n`, `guest-${i}\n`, `guest-${i}\n`])
    })
  })
})
