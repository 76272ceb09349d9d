// PgStore across processes: claimants racing from pools of their own (never twice), a frozen worker's
// late writes fenced out once the reaper ended its run, and a worker killed with -9 whose run is reaped
// as soon as its heartbeat session is gone (never lost), long before its lease would end.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { openPgStore } from '../../src/service/pg/open.js'
import { FencedError } from '../../src/service/store.js'
import { noPostgres, type RunningPostgres, startPostgres } from '../helpers/servers.js'
import { admit, key, okResult, output, sleep } from './store-cases.js'

let server: RunningPostgres | null = null
const database = async () => {
  if (!server) throw new Error('no PostgreSQL server')
  return server.createDatabase()
}
const here = path.dirname(fileURLToPath(import.meta.url))

describe('PgStore across processes', { skip: noPostgres }, () => {
  before(async () => {
    server = await startPostgres()
  })
  after(async () => {
    await server?.stop()
  })

  it('two claimants racing on their own pools: every run claimed exactly once, the loser fenced out', async () => {
    const url = await database()
    const [a, b] = await Promise.all([
      openPgStore(url, { migrate: true }),
      openPgStore(url, { migrate: true }),
    ])
    const k = key()
    const ids = Array.from({ length: 60 }, (_, i) => `race_${i}`)
    for (const id of ids) await admit(a, k, id)
    const t0 = performance.now()
    const claims = await Promise.all(
      ids.flatMap((id) => [
        a.claimRun(id, 'wa', 60_000).then((f) => ({ id, f })),
        b.claimRun(id, 'wb', 60_000).then((f) => ({ id, f })),
      ]),
    )
    const ms = performance.now() - t0
    for (const id of ids) {
      const won = claims.filter((c) => c.id === id && c.f !== null)
      assert.equal(won.length, 1, id)
      const fence = won[0]?.f
      assert.ok(fence)
      assert.equal(fence.attempt, 1)
      const loser = { workerId: fence.workerId === 'wa' ? 'wb' : 'wa', attempt: 1 }
      await assert.rejects(a.appendEvents(id, [output('stdout', 0, 'x')], loser), FencedError)
      assert.equal(await b.finishRun(id, okResult(), loser), null)
      assert.equal((await a.finishRun(id, okResult(), fence))?.type, 'end')
      assert.deepEqual(
        (await b.events(id, 0, 10)).map((e) => e.type),
        ['queued', 'end'],
      )
    }
    console.log(`# ${claims.length} racing claims of ${ids.length} runs: ${ms.toFixed(0)} ms`)
    // One claim at a time, for its latency.
    for (let i = 0; i < 50; i++) await admit(a, k, `lat_${i}`)
    const times: number[] = []
    for (let i = 0; i < 50; i++) {
      const t = performance.now()
      assert.ok(await b.claimRun(`lat_${i}`, 'wb', 60_000))
      times.push(performance.now() - t)
    }
    times.sort((x, y) => x - y)
    console.log(`# claim latency p50 ${times[25]?.toFixed(2)} ms, p90 ${times[45]?.toFixed(2)} ms`)
    await Promise.all([a.close(), b.close()])
  })

  it("a frozen worker's lease runs out: reaped once by another node, its late writes rejected", async () => {
    const url = await database()
    const [worker, api] = await Promise.all([
      openPgStore(url, { migrate: true }),
      openPgStore(url, { migrate: true }),
    ])
    const k = key()
    await api.createKey(k)
    await admit(api, k, 'frozen', { request: { cmd: ['cat'], stdin: 'open' } })
    await worker.registerWorker({ id: 'wf', host: 'h', pid: 1, version: 't', concurrency: 1 })
    const fence = await worker.claimRun('frozen', 'wf', 300)
    assert.ok(fence)
    await worker.appendEvents('frozen', [output('stdout', 0, 'early')], fence)
    await sleep(600) // frozen: no heartbeat; its session is alive, so only the lease can tell
    const [r1, r2] = await Promise.all([api.reapLostRuns(), worker.reapLostRuns()])
    assert.deepEqual([...r1, ...r2], ['frozen'], 'reaped once by two nodes at once')
    const run = await api.getRun('frozen')
    assert.equal(run?.result?.violation?.limit, 'worker-lost')
    // The worker wakes up: nothing of its is taken any more.
    await assert.rejects(worker.appendEvents('frozen', [output('stdout', 5, 'late')], fence), FencedError)
    assert.equal(await worker.finishRun('frozen', okResult(), fence), null)
    await assert.rejects(worker.ackStdin('frozen', 1, fence), FencedError)
    await assert.rejects(worker.files.put('frozen', 'f', Buffer.from('x'), fence), FencedError)
    assert.deepEqual(
      (await api.events('frozen', 0, 10)).map((e) => e.type),
      ['queued', 'output', 'interrupted', 'end'],
      'exactly one end',
    )
    assert.deepEqual(await worker.heartbeat('wf', 5000), [{ runId: 'frozen', reason: 'lost' }])
    await Promise.all([worker.close(), api.close()])
  })

  it('a worker killed with -9 has its run reaped as soon as its session is gone, not at its lease', async () => {
    const url = await database()
    const api = await openPgStore(url, { migrate: true })
    await admit(api, key(), 'killed')
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(here, 'pg-worker-child.ts'), url, 'killed'],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    )
    const [line] = (await once(child.stdout, 'data')) as [Buffer]
    assert.deepEqual(JSON.parse(line.toString()), { workerId: 'child', attempt: 1 })
    assert.deepEqual(await api.reapLostRuns(), [], 'alive: not reaped')
    const t0 = performance.now()
    child.kill('SIGKILL')
    let reaped: string[] = []
    while (reaped.length === 0 && performance.now() - t0 < 30_000) {
      await sleep(20)
      reaped = await api.reapLostRuns()
    }
    const ms = performance.now() - t0
    assert.deepEqual(reaped, ['killed'])
    assert.ok(ms < 10_000, `reaped in ${ms} ms; its lease was 600 s`)
    console.log(`# kill -9 -> run reaped: ${ms.toFixed(0)} ms`)
    const run = await api.getRun('killed')
    assert.equal(run?.result?.violation?.limit, 'worker-lost')
    await api.close()
  })

  it('a heartbeat session the server ends: its runs are reaped, the next heartbeat reconnects and says lost', async () => {
    const url = await database()
    const store = await openPgStore(url, { migrate: true })
    await admit(store, key(), 'cut')
    await store.registerWorker({ id: 'wc', host: 'h', pid: 1, version: 't', concurrency: 1 })
    assert.ok(await store.claimRun('cut', 'wc', 600_000))
    const admin = new pg.Client({ connectionString: url })
    await admin.connect()
    await admin.query('SELECT pg_terminate_backend(backend_pid) FROM workers WHERE id = $1', ['wc'])
    await admin.end()
    let reaped: string[] = []
    for (let i = 0; i < 200 && reaped.length === 0; i++) {
      await sleep(25)
      reaped = await store.reapLostRuns()
    }
    assert.deepEqual(reaped, ['cut'])
    await sleep(50)
    assert.deepEqual(await store.heartbeat('wc', 5000), [{ runId: 'cut', reason: 'lost' }])
    assert.deepEqual(await store.reapLostRuns(), [], 'its new session is alive')
    await store.close()
  })
})
