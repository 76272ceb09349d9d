import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'
import { errorResult } from '../../src/index.js'
import { RunQueue } from '../../src/service/queue.js'
import { SqliteSyncStore as SqliteStore } from '../../src/service/sqlite-sync.js'
import { type KeyRecord, ServiceError } from '../../src/service/types.js'
import { tempDir } from '../helpers.js'

function key(
  id: string,
  quota: KeyRecord['quota'] = { concurrentRuns: null, runsPerMinute: null },
): KeyRecord {
  return {
    id,
    name: id,
    hash: id,
    scopes: ['runs:write', 'runs:read'],
    ceilings: {},
    quota,
    secrets: {},
    retentionMs: null,
    webhookSecret: '',
    createdAt: '2026-01-01T00:00:00.000Z',
    revokedAt: null,
  }
}

/** A queue whose runs end when the test says so; counts every start. */
function setup(concurrency: number, maxQueued: number, now?: () => number) {
  const store = new SqliteStore(path.join(tempDir('cordon-queue-'), 'data'))
  const starts: string[] = []
  const finishers = new Map<string, () => void>()
  const queue = new RunQueue({
    store,
    concurrency,
    maxQueued,
    ...(now ? { now } : {}),
    execute: (id) =>
      new Promise<void>((resolve) => {
        starts.push(id)
        finishers.set(id, () => {
          store.finishRun(id, errorResult('x', 'done'), new Date().toISOString())
          resolve()
        })
      }),
  })
  let n = 0
  const submit = (k: KeyRecord) => {
    const id = `run_${n++}`
    queue.admit(k)
    store.createRun({ id, keyId: k.id, createdAt: new Date().toISOString(), metadata: {}, request: {} })
    queue.submit(k, id)
    return id
  }
  const finish = async (id: string) => {
    finishers.get(id)?.()
    await new Promise((r) => setImmediate(r))
  }
  return { store, queue, starts, submit, finish }
}

const code = (fn: () => unknown) => {
  try {
    fn()
  } catch (error) {
    assert.ok(error instanceof ServiceError)
    return [error.code, error.retryAfterS]
  }
  return null
}

describe('RunQueue', () => {
  it('runs `concurrency` at once, queues `maxQueued`, refuses the rest with queue-full, in FIFO order', async () => {
    const { queue, starts, submit, finish } = setup(2, 3)
    const k = key('k')
    const accepted: string[] = []
    const refused: unknown[] = []
    for (let i = 0; i < 10; i++) {
      try {
        accepted.push(submit(k))
      } catch (error) {
        refused.push((error as ServiceError).code)
      }
    }
    assert.equal(accepted.length, 5)
    assert.deepEqual(refused, Array(5).fill('queue-full'))
    assert.deepEqual(starts, accepted.slice(0, 2))
    assert.equal(queue.queuedCount, 3)
    for (const id of accepted) await finish(id)
    assert.deepEqual(starts, accepted, 'each accepted run started once, in order')
    assert.equal(queue.runningCount, 0)
    await queue.idle()
  })

  it('a queue-full refusal carries retryAfterS, and maxQueued 0 still runs when a slot is free', () => {
    const { submit } = setup(1, 0)
    submit(key('k'))
    assert.deepEqual(
      code(() => submit(key('k'))),
      ['queue-full', 5],
    )
  })

  it("a key's concurrentRuns counts its queued and running runs, not other keys'", async () => {
    const { submit, finish, starts } = setup(1, 100)
    const a = key('a', { concurrentRuns: 2, runsPerMinute: null })
    const first = submit(a)
    submit(a)
    assert.equal(code(() => submit(a))?.[0], 'quota')
    submit(key('b'))
    await finish(first)
    assert.equal(starts.length, 2)
    submit(a)
    assert.equal(code(() => submit(a))?.[0], 'quota')
  })

  it('runsPerMinute is a sliding window, and says when to retry', () => {
    let now = 1_000_000
    const { submit } = setup(10, 100, () => now)
    const k = key('k', { concurrentRuns: null, runsPerMinute: 3 })
    submit(k)
    now += 20_000
    submit(k)
    submit(k)
    assert.deepEqual(
      code(() => submit(k)),
      ['quota', 40],
    )
    now += 40_001
    submit(k)
    assert.equal(code(() => submit(k))?.[0], 'quota')
  })

  it('a run canceled while waiting is skipped, and frees its place', async () => {
    const { queue, starts, submit, finish, store } = setup(1, 1)
    const k = key('k', { concurrentRuns: 2, runsPerMinute: null })
    const first = submit(k)
    const second = submit(k)
    assert.equal(queue.remove(second), true)
    store.finishRun(second, errorResult('x', 'canceled'), new Date().toISOString())
    const third = submit(k)
    await finish(first)
    assert.deepEqual(starts, [first, third])
  })

  it('one the store will not start (finished meanwhile) is never run', async () => {
    const { queue, starts, submit, finish, store } = setup(1, 5)
    const k = key('k')
    const first = submit(k)
    const second = submit(k)
    store.finishRun(second, errorResult('x', 'gone'), new Date().toISOString())
    await finish(first)
    assert.deepEqual(starts, [first])
    assert.equal(queue.queuedCount, 0)
  })

  it('under many interleaved submits and finishes, nothing is lost or run twice', async () => {
    const { queue, starts, submit, finish, store } = setup(3, 7)
    const keys = [
      key('a', { concurrentRuns: 4, runsPerMinute: null }),
      key('b', { concurrentRuns: null, runsPerMinute: null }),
    ]
    const accepted: string[] = []
    let refused = 0
    for (let round = 0; round < 20; round++) {
      await Promise.all(
        Array.from({ length: 5 }, async (_, i) => {
          try {
            accepted.push(submit(keys[(round + i) % 2] as KeyRecord))
          } catch (error) {
            assert.ok(['queue-full', 'quota'].includes((error as ServiceError).code))
            refused++
          }
        }),
      )
      for (const id of [...starts]) if (store.getRun(id)?.state === 'running') await finish(id)
    }
    while (queue.runningCount + queue.queuedCount > 0) {
      for (const id of [...starts]) if (store.getRun(id)?.state === 'running') await finish(id)
    }
    assert.equal(accepted.length + refused, 100)
    assert.ok(refused > 0 && accepted.length > 0)
    assert.deepEqual([...starts].sort(), [...accepted].sort(), 'every accepted run started exactly once')
    assert.equal(new Set(starts).size, starts.length)
    for (const id of accepted) assert.equal(store.getRun(id)?.state, 'finished')
  })
})
