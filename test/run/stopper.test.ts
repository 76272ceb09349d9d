// The stopper: the one way a run is stopped, and its timers. Fake processes: no sandbox is started.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { Limits } from '../../src/policy/schema.js'
import type { SandboxProcesses } from '../../src/run/kill.js'
import { Stopper } from '../../src/run/stopper.js'
import { testLimits } from '../helpers.js'

const limits = (over: Partial<Limits> = {}): Limits =>
  testLimits({ wallTimeMs: 60_000, cpuTimeMs: 60_000, killGraceMs: 30, ...over })

/** Processes that record what was done to them; `running` says whether a program is there for SIGTERM. */
function fakeProcs(running = true) {
  const done: string[] = []
  const procs: SandboxProcesses & { running: boolean; alive: number[] } = {
    running,
    alive: [],
    term() {
      done.push('term')
      return procs.running
    },
    kill() {
      done.push('kill')
    },
    survivors: () => procs.alive,
  }
  return { procs, done }
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('Stopper', () => {
  it('does nothing before it is armed, or when nothing was started', async () => {
    const stopper = new Stopper(limits(), undefined)
    stopper.stop('canceled', true)
    assert.equal(stopper.reason, null)
    stopper.arm(null, null)
    stopper.stop('canceled', true)
    assert.equal(stopper.reason, null)
    await stopper.close()
  })

  it('a hard stop kills at once; the first reason wins', async () => {
    const { procs, done } = fakeProcs()
    const stopper = new Stopper(limits(), undefined)
    stopper.arm(procs, null)
    stopper.stop('output-limit', false)
    stopper.stop('timeout', true)
    assert.equal(stopper.reason, 'output-limit')
    assert.deepEqual(done, ['kill'])
    await stopper.close()
  })

  it('a graceful stop sends SIGTERM, then SIGKILL when the grace ends', async () => {
    const { procs, done } = fakeProcs()
    const stopper = new Stopper(limits({ killGraceMs: 30 }), undefined)
    stopper.arm(procs, null)
    stopper.stop('canceled', true)
    assert.deepEqual(done, ['term'])
    await sleep(60)
    assert.deepEqual(done, ['term', 'kill'])
    await stopper.close()
  })

  it('asks again for SIGTERM until a program is there to get it', async () => {
    const { procs, done } = fakeProcs(false)
    const stopper = new Stopper(limits({ killGraceMs: 1000 }), undefined)
    stopper.arm(procs, null)
    stopper.stop('canceled', true)
    await sleep(35)
    procs.running = true
    await sleep(35)
    const terms = done.filter((d) => d === 'term').length
    assert.ok(terms >= 3, `asked ${terms} times`)
    await sleep(30)
    assert.equal(done.filter((d) => d === 'term').length, terms, 'no more asking once one got it')
    await stopper.close()
    assert.ok(!done.includes('kill'), 'closed before the grace ended')
  })

  it('the wall time stops gracefully, the CPU time at once, the AbortSignal gracefully', async () => {
    const wall = fakeProcs()
    const byWall = new Stopper(limits({ wallTimeMs: 10, killGraceMs: 1000 }), undefined)
    byWall.arm(wall.procs, null)
    await sleep(30)
    assert.equal(byWall.reason, 'timeout')
    assert.deepEqual(wall.done, ['term'])
    await byWall.close()

    const cpu = fakeProcs()
    const byCpu = new Stopper(limits({ cpuTimeMs: 100 }), undefined)
    let used = 0
    byCpu.arm(cpu.procs, () => used)
    await sleep(60)
    assert.equal(byCpu.reason, null)
    used = 100
    await sleep(80)
    assert.equal(byCpu.reason, 'cpu-time')
    assert.deepEqual(cpu.done, ['kill'])
    await byCpu.close()

    const aborted = fakeProcs()
    const controller = new AbortController()
    const byAbort = new Stopper(limits(), controller.signal)
    byAbort.arm(aborted.procs, null)
    controller.abort()
    assert.equal(byAbort.reason, 'canceled')
    assert.deepEqual(aborted.done, ['term'])
    await byAbort.close()
  })

  it('once closed nothing stops the run, and no timer is left', async () => {
    const { procs, done } = fakeProcs()
    const controller = new AbortController()
    const stopper = new Stopper(limits({ wallTimeMs: 20 }), controller.signal)
    stopper.arm(procs, () => 1e9)
    await stopper.close()
    controller.abort()
    stopper.stop('canceled', false)
    await sleep(80)
    assert.equal(stopper.reason, null)
    assert.deepEqual(done, [])
  })

  it('the end of the launcher during a grace leaves the rest to the end of the grace', async () => {
    const { procs, done } = fakeProcs()
    const stopper = new Stopper(limits({ killGraceMs: 30 }), undefined)
    stopper.arm(procs, null)
    stopper.stop('timeout', true)
    let abandoned = false
    stopper.launcherGone(true, () => {
      abandoned = true
    })
    assert.deepEqual(done, ['term'])
    await sleep(60)
    // The grace's own SIGKILL, then the rest's.
    assert.deepEqual(done, ['term', 'kill', 'kill'])
    assert.equal(abandoned, false, 'the pipes get their time from then on')
    await stopper.close()
  })

  it('close() waits out a grace while anything of the sandbox survives', async () => {
    const { procs, done } = fakeProcs()
    procs.alive = [1234]
    const stopper = new Stopper(limits({ killGraceMs: 50 }), undefined)
    stopper.arm(procs, null)
    stopper.stop('canceled', true)
    const started = performance.now()
    await stopper.close()
    assert.ok(performance.now() - started >= 40, 'waited for the grace')
    assert.deepEqual(done, ['term', 'kill'])
  })
})
