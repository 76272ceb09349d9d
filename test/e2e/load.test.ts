// test: slow, serial (hundreds of runs at concurrency 30, measuring what leaks: other files beside it would be counted)
// Hundreds of runs at concurrency 30 leak no file descriptors, processes, uid locks or memory.
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readlinkSync } from 'node:fs'
import { describe, it } from 'node:test'
import { listProcesses } from '../../src/host/procs.js'
import { uidPoolSchema } from '../../src/host/uid-pool.js'
import { run } from '../../src/index.js'
import { noNamespace } from '../helpers.js'

const openFds = () => readdirSync('/proc/self/fd').length
// A uid range of this test's own: other cordon hosts on the machine (the default pool) are not its leaks.
const pool = uidPoolSchema.parse({ first: 62_000, count: 100 })
const uidPool = { first: pool.first, count: pool.count }
const sandboxProcesses = () =>
  listProcesses().filter((p) => !p.zombie && p.uid >= pool.first && p.uid < pool.first + pool.count)
/** Our uid locks (symlinks naming our pid). */
const ourLocks = () => {
  const names = existsSync(pool.lockDir) ? readdirSync(pool.lockDir) : []
  return names.filter((f) => {
    try {
      return readlinkSync(`${pool.lockDir}/${f}`) === String(process.pid)
    } catch {
      return false // released while we looked
    }
  }).length
}

describe('load', { skip: noNamespace }, () => {
  it('300 runs at concurrency 30 leak nothing', async () => {
    const runs = 300
    const concurrency = 30
    // Warm up so lazily created handles (pipes, timers) are counted in the baseline.
    await Promise.all(Array.from({ length: concurrency }, () => run(['true'], { uidPool })))
    global.gc?.()
    const fdsBefore = openFds()
    const heapBefore = process.memoryUsage().heapUsed
    let next = 0
    let locksSeen = 0
    const statuses = new Map<string, number>()
    const watch = setInterval(() => {
      locksSeen = Math.max(locksSeen, ourLocks())
    }, 20)
    const worker = async () => {
      while (next < runs) {
        next++
        const r = await run(['sh', '-c', 'echo out; echo err >&2'], { uidPool })
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
      }
    }
    await Promise.all(Array.from({ length: concurrency }, worker))
    clearInterval(watch)
    assert.deepEqual([...statuses], [['ok', runs]])
    // As root every run holds a uid lock; seeing them during the load shows the final 0 is not vacuous.
    if (process.getuid?.() === 0) assert.ok(locksSeen > 0, 'uid locks seen while running')
    assert.ok(openFds() <= fdsBefore + 2, `fds ${fdsBefore} → ${openFds()}`)
    assert.deepEqual(sandboxProcesses(), [])
    assert.equal(ourLocks(), 0)
    const grownMiB = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20
    assert.ok(grownMiB < 64, `heap grew ${grownMiB.toFixed(1)} MiB`)
  })
})
