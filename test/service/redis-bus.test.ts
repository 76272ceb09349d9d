import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { RedisBuses } from '../../src/service/redis/bus.js'
import { redactUrl, redisOptions } from '../../src/service/redis/connection.js'
import type { RunEvent } from '../../src/service/types.js'
import { noRedis, type RunningServer, startRedis } from '../helpers/servers.js'

describe('redis URLs', () => {
  it('reads the forms a queue URL takes', () => {
    assert.equal(redisOptions('unix:///tmp/r.sock').path, '/tmp/r.sock')
    assert.equal(redisOptions('redis+unix:///tmp/r.sock?db=3').db, 3)
    const tcp = redisOptions('redis://u:p%40ss@example.net:7000/2')
    assert.deepEqual(
      [tcp.host, tcp.port, tcp.db, tcp.username, tcp.password],
      ['example.net', 7000, 2, 'u', 'p@ss'],
    )
    assert.ok(redisOptions('rediss://h').tls)
  })
  it('refuses what is not one, without repeating its password', () => {
    assert.throws(
      () => redisOptions('postgres://u:secret@h/db'),
      (e: Error) => !e.message.includes('secret'),
    )
    assert.throws(() => redisOptions('redis://h/x'), /database must be a number/)
    assert.equal(redactUrl('redis://u:secret@h:1/0'), 'redis://u:***@h:1/0')
  })
})

describe('Redis buses', { skip: noRedis }, () => {
  let redis: RunningServer
  before(async () => {
    redis = await startRedis()
  })
  after(async () => {
    await redis?.stop()
  })

  const event = (runId: string, seq: number): RunEvent => ({
    runId,
    seq,
    type: 'output',
    at: new Date().toISOString(),
    data: { stream: 'stdout', offset: 0, bytes: 1, data: 'YQ==' },
  })

  it('carries a run’s events to every node subscribed to it, and only that run’s', async () => {
    const a = await RedisBuses.open(redis.url, { prefix: 't1' })
    const b = await RedisBuses.open(redis.url, { prefix: 't1' })
    try {
      const gotA: number[] = []
      const gotB: number[] = []
      const stopA = await a.events.subscribe('run_1', (e) => gotA.push(e.seq))
      await b.events.subscribe('run_1', (e) => gotB.push(e.seq))
      await b.events.subscribe('run_2', () => assert.fail('another run'))
      for (let seq = 1; seq <= 50; seq++) await a.events.publish(event('run_1', seq))
      await waitUntil(() => gotA.length === 50 && gotB.length === 50)
      assert.deepEqual(
        gotB,
        Array.from({ length: 50 }, (_, i) => i + 1),
      )
      stopA()
      await b.events.publish(event('run_1', 51))
      await waitUntil(() => gotB.length === 51)
      await sleep(50)
      assert.equal(gotA.length, 50, 'unsubscribed')
    } finally {
      await a.close()
      await b.close()
    }
  })

  it('drops what is not an event of the channel’s run', async () => {
    const a = await RedisBuses.open(redis.url, { prefix: 't2' })
    const raw = await RedisBuses.open(redis.url, { prefix: 't2' })
    try {
      const got: RunEvent[] = []
      await a.events.subscribe('run_x', (e) => got.push(e))
      // Another run's event on this run's channel, and junk: neither reaches a follower.
      await raw.events.publish({ ...event('run_y', 1) })
      const { connectRedis } = await import('../../src/service/redis/connection.js')
      const pub = await connectRedis(redis.url, 'junk')
      await pub.publish('t2:ev:run_x', JSON.stringify(event('run_y', 1)))
      await pub.publish('t2:ev:run_x', 'not json')
      await pub.publish('t2:ev:run_x', JSON.stringify({ runId: 'run_x', seq: 'one' }))
      await pub.publish('t2:ev:run_x', JSON.stringify(event('run_x', 7)))
      pub.disconnect()
      await waitUntil(() => got.length === 1)
      assert.equal(got[0]?.seq, 7)
    } finally {
      await a.close()
      await raw.close()
    }
  })

  it('brings control messages to every node', async () => {
    const a = await RedisBuses.open(redis.url, { prefix: 't3' })
    const b = await RedisBuses.open(redis.url, { prefix: 't3' })
    const other = await RedisBuses.open(redis.url, { prefix: 'elsewhere' })
    try {
      const got: unknown[] = []
      b.control.subscribe((m) => got.push(m))
      other.control.subscribe(() => assert.fail('another deployment'))
      await a.control.publish({ type: 'cancel', runId: 'run_1' })
      await a.control.publish({ type: 'revoke', keyId: 'key_1' })
      await waitUntil(() => got.length === 2)
      assert.deepEqual(got, [
        { type: 'cancel', runId: 'run_1' },
        { type: 'revoke', keyId: 'key_1' },
      ])
    } finally {
      await a.close()
      await b.close()
      await other.close()
    }
  })

  it('tells followers to read the store after Redis came back', async () => {
    const a = await RedisBuses.open(redis.url, { prefix: 't4' })
    try {
      let reconnects = 0
      a.events.onReconnect(() => reconnects++)
      const { connectRedis } = await import('../../src/service/redis/connection.js')
      const admin = await connectRedis(redis.url, 'admin')
      await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub')
      admin.disconnect()
      await waitUntil(() => reconnects === 1, 10_000)
    } finally {
      await a.close()
    }
  })
})

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
async function waitUntil(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out')
    await sleep(5)
  }
}
