// The RunStore contract (src/service/store.ts), backend-neutral: admission, who runs a run (the claim's
// compare-and-set, the fence every later write carries, cancel), stdin held until its worker takes it,
// workers, leases and the reaper, webhook deliveries claimed by one node at a time.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { errorResult } from '../../src/index.js'
import { FencedError } from '../../src/service/store.js'
import { ServiceError } from '../../src/service/types.js'
import { admit, key, type OpenStore, okResult, output, sleep } from './store-cases.js'

/** The ServiceError a promise rejects with: its code and retryAfterS. */
async function refusal(p: Promise<unknown>): Promise<[string, number | undefined] | null> {
  try {
    await p
  } catch (error) {
    assert.ok(error instanceof ServiceError, String(error))
    return [error.code, error.retryAfterS]
  }
  return null
}

const bounds = { perRun: 1000, perKey: 2500 }
const worker = (id: string) => ({ id, host: 'h', pid: 1, version: 't', concurrency: 2 })

export function liveStoreCases(name: string, open: OpenStore): void {
  describe(`RunStore contract: admission, claims, stdin, workers (${name})`, () => {
    it("admits within a key's concurrent runs (queued or running), not other keys'", async () => {
      const store = await open()
      const a = key(undefined, { quota: { concurrentRuns: 2 } })
      const first = await admit(store, a, 'a1')
      await admit(store, a, 'a2')
      assert.deepEqual(await refusal(admit(store, a, 'a3')), ['quota', 1])
      await admit(store, key(), 'b1')
      await store.claimRun(first.id, 'w', 60_000)
      assert.equal((await refusal(admit(store, a, 'a3')))?.[0], 'quota', 'running counts too')
      await store.finishRun(first.id, okResult())
      await admit(store, a, 'a3')
      assert.equal(await store.getRun('a3').then((r) => r?.state), 'queued')
      await store.close()
    })

    it('admits runsPerMinute in a sliding minute, says when to retry, and refunds nothing on delete', async () => {
      const store = await open()
      const k = key(undefined, { quota: { runsPerMinute: 2 } })
      for (const id of ['m1', 'm2']) await admit(store, k, id)
      const [code, retry] = (await refusal(admit(store, k, 'm3'))) ?? []
      assert.equal(code, 'quota')
      assert.ok((retry ?? 0) >= 50 && (retry ?? 0) <= 60, `retry in ${retry} s`)
      for (const id of ['m1', 'm2']) {
        await store.finishRun(id, okResult())
        assert.equal(await store.deleteRun(id), true)
      }
      assert.equal((await refusal(admit(store, k, 'm3')))?.[0], 'quota', 'a deleted run still counted')
      assert.equal(await store.getRun('m3'), null, 'refused whole')
      await store.close()
    })

    it('refuses past the queue bound with queue-full, and a refused admission stores nothing', async () => {
      const store = await open()
      const k = key()
      await admit(store, k, 'q1', {}, 2)
      await admit(store, k, 'q2', {}, 2)
      assert.deepEqual(await refusal(admit(store, k, 'q3', {}, 2)), ['queue-full', 5])
      assert.equal(await store.getRun('q3'), null)
      await store.claimRun('q1', 'w', 60_000)
      await admit(store, k, 'q3', {}, 2)
      assert.deepEqual(await refusal(admit(store, k, 'q4', {}, 0)), ['queue-full', 5])
      await store.close()
    })

    it('exactly one of many concurrent claims of a run wins', async () => {
      const store = await open()
      await admit(store, key(), 'c')
      const claims = await Promise.all(
        Array.from({ length: 16 }, (_, i) => store.claimRun('c', `w${i}`, 60_000)),
      )
      assert.equal(claims.filter((c) => c !== null).length, 1)
      assert.equal(await store.claimRun('gone', 'w', 60_000), null)
      await store.close()
    })

    it('a cancel asked before the claim refuses it; it says where the run stands', async () => {
      const store = await open()
      const k = key()
      await admit(store, k, 'x')
      assert.deepEqual(await store.requestCancel('x'), { state: 'queued', workerId: null })
      assert.equal(await store.claimRun('x', 'w', 60_000), null, 'never run')
      assert.equal((await store.finishRun('x', errorResult('signal', 'canceled')))?.type, 'end')
      await admit(store, k, 'y')
      await store.claimRun('y', 'w1', 60_000)
      assert.deepEqual(await store.requestCancel('y'), { state: 'running', workerId: 'w1' })
      assert.equal((await store.requestCancel('x'))?.state, 'finished')
      assert.equal(await store.requestCancel('none'), null)
      await store.close()
    })

    it('refuses a fenced write once the run is no longer under that fence', async () => {
      const store = await open()
      await admit(store, key(), 'f')
      const fence = await store.claimRun('f', 'w1', 60_000)
      assert.ok(fence)
      const stale = { workerId: 'w1', attempt: fence.attempt + 1 }
      await assert.rejects(store.appendEvents('f', [{ type: 'log', data: {} }], stale), FencedError)
      assert.equal(await store.finishRun('f', okResult(), stale), null)
      assert.equal((await store.events('f', 0, 10)).length, 1, 'nothing appended')
      await store.appendEvents('f', [{ type: 'log', data: {} }], fence)
      await store.finishRun('f', okResult())
      await assert.rejects(store.appendEvents('f', [output('stdout', 0, 'late')], fence), FencedError)
      assert.equal(await store.finishRun('f', okResult(), fence), null, 'a run ends once')
      assert.equal((await store.events('f', 0, 10)).at(-1)?.type, 'end', 'nothing after its end')
      await store.close()
    })

    it('holds stdin until its worker acks it, within the bounds per run and per key', async () => {
      const store = await open()
      const k = key()
      for (const id of ['s1', 's2']) await admit(store, k, id, { request: { cmd: ['cat'], stdin: 'open' } })
      await admit(store, k, 'plain')
      assert.deepEqual(await refusal(store.appendStdin('plain', k.id, Buffer.from('x'), bounds)), [
        'conflict',
        undefined,
      ])
      assert.equal(
        (await refusal(store.appendStdin('s1', k.id, Buffer.alloc(1001), bounds)))?.[0],
        'too-large',
      )
      await store.appendStdin('s1', k.id, Buffer.alloc(600), bounds)
      assert.deepEqual(await refusal(store.appendStdin('s1', k.id, Buffer.alloc(500), bounds)), ['quota', 1])
      await store.appendStdin('s1', k.id, Buffer.alloc(400), bounds)
      await store.appendStdin('s2', k.id, Buffer.alloc(1000), bounds)
      assert.equal(
        (await refusal(store.appendStdin('s2', k.id, Buffer.alloc(0), { perRun: 1000, perKey: 1999 })))?.[0],
        'quota',
        "the key's runs hold 2000",
      )
      assert.deepEqual(await store.stdinState('s1'), { bytes: 1000, closed: false })
      // Its worker takes it: what it wrote into the sandbox no longer counts.
      const fence = await store.claimRun('s1', 'w', 60_000)
      assert.ok(fence)
      const chunks = await store.readStdin('s1', 0, 10)
      assert.deepEqual(
        chunks.map((c) => [c.seq, c.data?.length]),
        [
          [1, 600],
          [2, 400],
        ],
      )
      await store.ackStdin('s1', 1, fence)
      assert.deepEqual(await store.stdinState('s1'), { bytes: 400, closed: false })
      await store.appendStdin('s1', k.id, Buffer.alloc(500), bounds)
      await store.appendStdin('s1', k.id, null, bounds)
      assert.deepEqual(
        (await store.readStdin('s1', 2, 10)).map((c) => [c.seq, c.data?.length ?? null]),
        [
          [3, 500],
          [4, null],
        ],
      )
      await store.ackStdin('s1', 4, fence)
      assert.deepEqual(await store.stdinState('s1'), { bytes: 0, closed: true })
      assert.equal(
        (await refusal(store.appendStdin('s1', k.id, null, bounds)))?.[0],
        'conflict',
        'closed once',
      )
      await assert.rejects(store.ackStdin('s1', 4, { workerId: 'w', attempt: 9 }), FencedError)
      // A run that ends takes its stdin with it.
      await store.finishRun('s2', okResult())
      assert.deepEqual(await store.stdinState('s2'), { bytes: 0, closed: false })
      assert.equal((await refusal(store.appendStdin('s2', k.id, Buffer.from('x'), bounds)))?.[0], 'conflict')
      await store.close()
    })

    it('a heartbeat renews its leases and says which runs to stop; lost runs are reaped once', async () => {
      const store = await open()
      const k = key()
      await store.createKey(k)
      await store.registerWorker(worker('w1'))
      for (const id of ['l1', 'l2', 'l3'])
        await admit(store, k, id, { request: { cmd: ['true'], webhook: { url: 'https://h.example/' } } })
      const f1 = await store.claimRun('l1', 'w1', 50)
      const f2 = await store.claimRun('l2', 'w1', 50)
      await store.claimRun('l3', 'w2', 50)
      assert.ok(f1 && f2)
      assert.deepEqual(await store.heartbeat('w1', 60_000), [])
      await store.requestCancel('l2')
      assert.deepEqual(await store.heartbeat('w1', 60_000), [{ runId: 'l2', reason: 'canceled' }])
      const workers = await store.listWorkers()
      assert.deepEqual(
        workers.map((w) => [w.id, w.running, w.draining]),
        [['w1', 2, false]],
      )
      await sleep(100)
      // w2's lease ran out; w1's were renewed.
      assert.deepEqual(await store.reapLostRuns(), ['l3'])
      assert.deepEqual(await store.reapLostRuns(), [], 'once')
      const lost = await store.getRun('l3')
      assert.equal(lost?.state, 'finished')
      assert.equal(lost?.result?.status, 'error')
      assert.equal(lost?.result?.violation?.limit, 'worker-lost')
      assert.deepEqual(
        (await store.events('l3', 0, 10)).map((e) => e.type),
        ['queued', 'interrupted', 'end'],
      )
      assert.ok(
        (await store.pendingWebhooks()).some((p) => p.runId === 'l3'),
        'its webhook is owed',
      )
      await store.revokeKey(k.id, new Date().toISOString())
      assert.deepEqual(
        (await store.heartbeat('w1', 60_000)).map((s) => [s.runId, s.reason]),
        [
          ['l1', 'revoked'],
          ['l2', 'canceled'],
        ],
      )
      await store.deregisterWorker('w1')
      assert.deepEqual(await store.listWorkers(), [])
      await store.close()
    })

    it('interruptRunning ends the running runs error/interrupted, and leaves the others', async () => {
      const store = await open()
      const k = key()
      for (const id of ['q', 'r', 'f']) await admit(store, k, id)
      await store.claimRun('r', 'w', 60_000)
      await store.claimRun('f', 'w', 60_000)
      await store.finishRun('f', okResult())
      assert.deepEqual(await store.interruptRunning(), ['r'])
      const r = await store.getRun('r')
      assert.equal(r?.result?.status, 'error')
      assert.equal(r?.result?.violation?.limit, 'interrupted')
      assert.deepEqual(
        (await store.events('r', 0, 10)).map((e) => [e.seq, e.type]),
        [
          [1, 'queued'],
          [2, 'interrupted'],
          [3, 'end'],
        ],
      )
      assert.equal((await store.getRun('f'))?.result?.status, 'ok')
      assert.deepEqual(await store.queuedRuns(0, 10), [{ id: 'q', keyId: k.id }])
      assert.deepEqual(await store.queuedRuns(60_000, 10), [], 'none queued a minute')
      await store.close()
    })

    it('keeps a webhook pending from the finish, with each attempt, until it is over', async () => {
      const store = await open()
      const k = key()
      await store.createKey(k)
      const hook = { cmd: ['true'], webhook: { url: 'https://hooks.example/x' } }
      await admit(store, k, 'hooked', { request: hook })
      await admit(store, k, 'plain')
      assert.deepEqual(await store.pendingWebhooks(), [], 'owed only once the run finished')
      await store.finishRun('hooked', okResult())
      await store.finishRun('plain', okResult())
      const [pending] = await store.pendingWebhooks()
      assert.equal(pending?.runId, 'hooked')
      assert.equal(pending?.attempt, 1)
      const attempt = { attempt: 1, at: pending?.at ?? '', status: 500, error: null, durationMs: 3 }
      await store.recordWebhookAttempt('hooked', attempt, { attempt: 2, at: '2026-01-01T00:00:05.000Z' })
      assert.deepEqual(await store.pendingWebhooks(), [
        { runId: 'hooked', attempt: 2, at: '2026-01-01T00:00:05.000Z' },
      ])
      assert.deepEqual(await store.webhookAttempts('hooked'), [attempt])
      await store.recordWebhookAttempt('hooked', { ...attempt, attempt: 2, status: 200 }, null)
      assert.deepEqual(await store.pendingWebhooks(), [], 'delivered: over')
      await store.close()
    })

    it('claims a due delivery for one node at a time, and again once its lease ends', async () => {
      const store = await open()
      const k = key()
      await store.createKey(k)
      for (let i = 0; i < 6; i++) {
        await admit(store, k, `h${i}`, { request: { cmd: ['true'], webhook: { url: 'https://h.example/' } } })
        await store.finishRun(`h${i}`, okResult())
      }
      const [a, b] = await Promise.all([
        store.claimDueWebhooks('n1', 4, 100),
        store.claimDueWebhooks('n2', 4, 100),
      ])
      const ids = [...(a ?? []), ...(b ?? [])].map((p) => p.runId)
      assert.equal(ids.length, 6)
      assert.equal(new Set(ids).size, 6, 'each delivery claimed once')
      assert.deepEqual(await store.claimDueWebhooks('n3', 10, 100), [], 'all leased')
      await store.recordWebhookAttempt(
        'h0',
        { attempt: 1, at: '', status: 200, error: null, durationMs: 1 },
        null,
      )
      await sleep(200)
      const again = (await store.claimDueWebhooks('n3', 10, 60_000)).map((p) => p.runId)
      assert.equal(again.length, 5, 'the leases ran out without an attempt: taken again, h0 delivered')
      await store.dropPendingWebhook('h1')
      assert.equal((await store.pendingWebhooks()).length, 4)
      await store.close()
    })
  })
}
