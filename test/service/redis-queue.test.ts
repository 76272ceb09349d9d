import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { BullConsumer, BullDispatcher } from '../../src/service/redis/queue.js'
import { noRedis, type RunningServer, startRedis } from '../helpers/servers.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
async function waitUntil(check: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out')
    await sleep(5)
  }
}

describe('the BullMQ queue', { skip: noRedis }, () => {
  let redis: RunningServer
  before(async () => {
    redis = await startRedis()
  })
  after(async () => {
    await redis?.stop()
  })

  it('queues a run once however often it is enqueued, and a withdrawn one never reaches a worker', async () => {
    const name = 'q1'
    const dispatcher = await BullDispatcher.open(redis.url, { name })
    try {
      await dispatcher.enqueue('run_a')
      await dispatcher.enqueue('run_a') // the orphan sweep adding it again
      await dispatcher.enqueue('run_b')
      assert.deepEqual(await dispatcher.depth(), { waiting: 2, active: 0 })
      assert.equal(await dispatcher.withdraw('run_b'), true)
      assert.equal(await dispatcher.withdraw('run_b'), false)
      const seen: string[] = []
      const consumer = await BullConsumer.open(redis.url, { name, concurrency: 2 })
      consumer.start(async (runId) => {
        seen.push(runId)
      })
      await waitUntil(() => seen.length === 1)
      await sleep(200)
      assert.deepEqual(seen, ['run_a'])
      await consumer.close()
    } finally {
      await dispatcher.close()
    }
  })

  it('runs at most `concurrency` at once on a consumer, and spreads runs over consumers', async () => {
    const name = 'q2'
    const dispatcher = await BullDispatcher.open(redis.url, { name })
    const consumers = await Promise.all(
      [1, 2].map(() => BullConsumer.open(redis.url, { name, concurrency: 3 })),
    )
    try {
      let now = 0
      let most = 0
      const byConsumer = [0, 0]
      for (const [i, c] of consumers.entries())
        c.start(async () => {
          now++
          most = Math.max(most, c.running)
          byConsumer[i] = (byConsumer[i] ?? 0) + 1
          await sleep(30)
          now--
        })
      for (let i = 0; i < 40; i++) await dispatcher.enqueue(`run_${i}`)
      await waitUntil(() => (byConsumer[0] ?? 0) + (byConsumer[1] ?? 0) === 40)
      assert.ok(most <= 3, `at most 3 at once on one consumer (${most})`)
      assert.ok((byConsumer[0] ?? 0) > 0 && (byConsumer[1] ?? 0) > 0, `both took runs: ${byConsumer}`)
      await Promise.all(consumers.map((c) => c.idle()))
      assert.equal(now, 0)
    } finally {
      await Promise.all(consumers.map((c) => c.close()))
      await dispatcher.close()
    }
  })

  it('takes no more runs once paused, and says when the running ones are done', async () => {
    const name = 'q3'
    const dispatcher = await BullDispatcher.open(redis.url, { name })
    const consumer = await BullConsumer.open(redis.url, { name, concurrency: 1 })
    try {
      const seen: string[] = []
      let release = () => {}
      consumer.start(async (runId) => {
        seen.push(runId)
        await new Promise<void>((r) => {
          release = r
        })
      })
      await dispatcher.enqueue('run_1')
      await waitUntil(() => seen.length === 1)
      const paused = consumer.pause()
      await dispatcher.enqueue('run_2')
      release()
      await paused
      await consumer.idle()
      await sleep(200)
      assert.deepEqual(seen, ['run_1'])
      assert.equal((await dispatcher.depth()).waiting, 1)
    } finally {
      await consumer.close()
      await dispatcher.close()
    }
  })
})
