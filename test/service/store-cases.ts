// The RunStore contract (src/service/store.ts), backend-neutral: runs, their events and output, listing,
// retention, keys. Every store runs these (`storeCases('SQLite', open)`); what needs a clock the test sets
// or a reopening is the backend's own file's (sqlite-store.test.ts). The clock here is the store's own:
// waits are real and generous, never tight.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { errorResult, type RunResult } from '../../src/index.js'
import type { RunStore } from '../../src/service/store.js'
import { endResult, type KeyRecord, type NewRun, type StoredResult } from '../../src/service/types.js'

export type OpenStore = () => Promise<RunStore>

let n = 0
/** A key (its id and hash unique in the store). */
export function key(
  id = `k${++n}`,
  extra: { retentionMs?: number | null; quota?: Partial<KeyRecord['quota']> } = {},
): KeyRecord {
  return {
    id,
    name: id,
    hash: `hash-${id}-${++n}`,
    scopes: ['runs:write', 'runs:read'],
    ceilings: { limits: { wallTimeMs: 1000 } },
    quota: { concurrentRuns: null, runsPerMinute: null, ...extra.quota },
    secrets: { TOKEN: 's3cret' },
    retentionMs: extra.retentionMs ?? null,
    webhookSecret: 'whs',
    createdAt: '2026-01-01T00:00:00.000Z',
    revokedAt: null,
  }
}

export const okResult = (extra: Partial<RunResult> = {}): RunResult => ({
  ...errorResult('x', 'y'),
  status: 'ok',
  violation: null,
  stdout: 'hi\n',
  ...extra,
})

/** Admits a run of `k` (no quota in the way unless the key has one). */
export function admit(
  store: RunStore,
  k: KeyRecord,
  id: string,
  extra: Partial<NewRun> = {},
  maxQueued = 1_000_000,
) {
  const run: NewRun = {
    id,
    keyId: k.id,
    createdAt: new Date().toISOString(),
    metadata: {},
    request: { cmd: ['true'] },
    ...extra,
  }
  return store.admitRun(k, run, { maxQueued })
}

export const output = (stream: 'stdout' | 'stderr', offset: number, text: string) => ({
  type: 'output' as const,
  data: { stream, offset, bytes: Buffer.byteLength(text), data: Buffer.from(text).toString('base64') },
})

/** A run with output abc/XY/defg/Z/h interleaved, a log between each. */
export async function outputRun(store: RunStore, k: KeyRecord, id: string): Promise<void> {
  await admit(store, k, id)
  const offsets = { stdout: 0, stderr: 0 }
  for (const [stream, text] of [
    ['stdout', 'abc'],
    ['stderr', 'XY'],
    ['stdout', 'defg'],
    ['stderr', 'Z'],
    ['stdout', 'h'],
  ] as const) {
    await store.appendEvents(id, [output(stream, offsets[stream], text), { type: 'log', data: { msg: 'b' } }])
    offsets[stream] += text.length
  }
}

export const slices = async (
  store: RunStore,
  id: string,
  stream: 'stdout' | 'stderr' | 'output',
  from: number,
  to: number,
) => (await store.outputSlices(id, stream, from, to)).map((s) => [s.start, s.bytes.toString()])

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

export function storeCases(name: string, open: OpenStore): void {
  describe(`RunStore contract: runs and events (${name})`, () => {
    it('round-trips keys, and revokes a key once', async () => {
      const store = await open()
      const k = key()
      await store.createKey(k)
      assert.deepEqual(await store.getKey(k.id), k)
      assert.deepEqual(await store.keyByHash(k.hash), k)
      assert.equal(await store.keyByHash('nope'), null)
      assert.equal(await store.revokeKey(k.id, '2026-01-02T00:00:00.000Z'), true)
      assert.equal(await store.revokeKey(k.id, '2026-01-03T00:00:00.000Z'), false)
      assert.equal((await store.getKey(k.id))?.revokedAt, '2026-01-02T00:00:00.000Z')
      assert.ok((await store.listKeys()).some((x) => x.id === k.id))
      await store.close()
    })

    it("a run's lifecycle: admitted with its queued event, claimed once, finished once, deleted", async () => {
      const store = await open()
      const k = key()
      await store.createKey(k)
      const run = await admit(store, k, 'run_a', { metadata: { team: 'x' } })
      assert.equal(run.state, 'queued')
      assert.deepEqual(run.cmd, ['true'])
      assert.deepEqual(await store.getRun('run_a'), run)
      assert.deepEqual(await store.runRequest('run_a'), { cmd: ['true'] })
      assert.equal(await store.runKeyId('run_a'), k.id)
      assert.deepEqual(
        (await store.events('run_a', 0, 10)).map((e) => [e.seq, e.type]),
        [[1, 'queued']],
      )
      assert.equal(await store.deleteRun('run_a'), false, 'only a finished run is deleted')
      const fence = await store.claimRun('run_a', 'w1', 60_000)
      assert.deepEqual(fence, { workerId: 'w1', attempt: 1 })
      assert.equal(await store.claimRun('run_a', 'w2', 60_000), null, 'claimed once')
      assert.equal((await store.getRun('run_a'))?.state, 'running')
      assert.ok((await store.getRun('run_a'))?.startedAt)
      await store.appendEvents('run_a', [output('stdout', 0, 'hi\n')], fence ?? undefined)
      const end = await store.finishRun('run_a', okResult({ output: 'hi\n' }), fence ?? undefined)
      assert.equal(end?.type, 'end')
      assert.equal(end?.seq, 3)
      assert.deepEqual(end?.data, { result: endResult(okResult()) })
      assert.equal(await store.finishRun('run_a', okResult()), null, 'finished once')
      const got = await store.getRun('run_a')
      assert.equal(got?.state, 'finished')
      assert.ok(got?.finishedAt)
      assert.deepEqual(got?.result, endResult(okResult()))
      const stored = (await store.storedResult('run_a')) as StoredResult
      assert.equal(stored.textFromEvents, true)
      assert.equal('stdout' in stored.result, false, "the text is the events' bytes")
      assert.equal(await store.deleteRun('run_a'), true)
      assert.equal(await store.getRun('run_a'), null)
      assert.deepEqual(await store.events('run_a', 0, 10), [])
      assert.equal(await store.runKeyId('run_a'), null)
      assert.equal(await store.runViewBytes('run_a'), 0)
      await store.close()
    })

    it('numbers events per run from 1 with no gap, and pages them by count and by bytes', async () => {
      const store = await open()
      const k = key()
      await store.createKey(k)
      for (const id of ['r1', 'r2']) await admit(store, k, id)
      for (let i = 0; i < 5; i++) {
        await store.appendEvents('r1', [{ type: 'log', data: { i } }])
        await store.appendEvents('r2', [{ type: 'log', data: { i } }])
      }
      assert.deepEqual(
        (await store.events('r1', 0, 100)).map((e) => e.seq),
        [1, 2, 3, 4, 5, 6],
      )
      assert.deepEqual(
        (await store.events('r2', 3, 2)).map((e) => [e.seq, e.data.i]),
        [
          [4, 2],
          [5, 3],
        ],
      )
      const batch = await store.appendEvents('r1', [
        { type: 'log', data: { msg: 'x'.repeat(1000) } },
        { type: 'log', data: { msg: 'x'.repeat(1000) } },
        { type: 'log', data: { msg: 'x'.repeat(1000) } },
      ])
      assert.deepEqual(
        batch.map((e) => e.seq),
        [7, 8, 9],
        'a batch is numbered in order',
      )
      assert.equal((await store.events('r1', 6, 100, 1500)).length, 2)
      assert.equal((await store.events('r1', 6, 100, 1)).length, 1, 'at least one a page')
      await store.close()
    })

    it('finds the output events holding a range of one stream or of both', async () => {
      const store = await open()
      const k = key()
      await outputRun(store, k, 'r')
      assert.deepEqual(await slices(store, 'r', 'stdout', 0, 100), [
        [0, 'abc'],
        [3, 'defg'],
        [7, 'h'],
      ])
      assert.deepEqual(await slices(store, 'r', 'stdout', 4, 5), [[3, 'defg']])
      assert.deepEqual(await slices(store, 'r', 'stderr', 1, 3), [
        [0, 'XY'],
        [2, 'Z'],
      ])
      assert.deepEqual(await slices(store, 'r', 'output', 4, 6), [
        [3, 'XY'],
        [5, 'defg'],
      ])
      assert.deepEqual(await slices(store, 'r', 'output', 10, 11), [[10, 'h']])
      assert.deepEqual(await slices(store, 'r', 'output', 11, 100), [])
      assert.deepEqual(await slices(store, 'r', 'stdout', 2, 2), [])
      assert.deepEqual(
        await Promise.all((['stdout', 'stderr', 'output'] as const).map((s) => store.outputEnd('r', s))),
        [8, 3, 11],
      )
      assert.equal(await store.outputEnd('none', 'output'), 0)
      // The tail: the seq before the event holding the last bytes.
      assert.equal(await store.outputTailSeq('r', 100), 0)
      const tail = await store.outputTailSeq('r', 1)
      assert.equal((await store.events('r', tail, 1))[0]?.data.stream, 'stdout', 'the event holding h')
      assert.deepEqual(
        (await store.outputChunks('r', 'output', 5, 10)).map((c) => [c.stream, c.end, c.bytes.toString()]),
        [
          ['stdout', 9, 'defg'],
          ['stderr', 10, 'Z'],
          ['stdout', 11, 'h'],
        ],
      )
      await store.close()
    })

    it('a failed finish leaves nothing half-done', async () => {
      const store = await open()
      const k = key()
      await admit(store, k, 'r')
      const bad = okResult() as unknown as Record<string, unknown>
      bad.cyclic = bad
      await assert.rejects(store.finishRun('r', bad as unknown as RunResult))
      assert.equal((await store.getRun('r'))?.state, 'queued')
      assert.deepEqual(
        (await store.events('r', 0, 10)).map((e) => e.type),
        ['queued'],
      )
      await store.close()
    })

    it('lists with filters and keyset pagination: every run once, newest first', async () => {
      const store = await open()
      const [odd, even] = [key(), key()]
      const ids: string[] = []
      for (let i = 0; i < 25; i++) {
        // Pairs share a timestamp: the id breaks the tie.
        const createdAt = new Date(Date.UTC(2026, 0, 1, 0, 0, Math.floor(i / 2))).toISOString()
        const id = `run_${String(i).padStart(2, '0')}`
        ids.push(id)
        await admit(store, i % 2 ? odd : even, id, { createdAt, metadata: { n: String(i % 3) } })
        if (i % 5 === 0) await store.finishRun(id, okResult())
      }
      const seen: string[] = []
      let cursor: string | undefined
      let pages = 0
      do {
        const page = await store.listRuns({ limit: 4, ...(cursor ? { cursor } : {}) })
        seen.push(...page.runs.map((r) => r.id))
        cursor = page.nextCursor ?? undefined
        pages++
      } while (cursor)
      assert.equal(pages, 7)
      assert.deepEqual(seen, [...ids].reverse())
      const count = async (f: object) => (await store.listRuns({ limit: 100, ...f })).runs.length
      assert.equal(await count({ keyId: odd.id }), 12)
      assert.equal(await count({ state: 'finished' }), 5)
      assert.equal(await count({ status: 'ok' }), 5)
      assert.equal(await count({ metadata: { n: '0' } }), 9)
      assert.equal(await count({ metadata: { n: '0' }, keyId: even.id }), 5)
      assert.equal(await count({ createdAfter: '2026-01-01T00:00:10.000Z' }), 3)
      assert.deepEqual(await store.listRuns({ limit: 10, cursor: 'garbage' }), { runs: [], nextCursor: null })
      await store.close()
    })

    it('holds a listing page to a byte budget, and reads no request', async () => {
      const store = await open()
      const k = key()
      const big = 'x'.repeat(3 * 1024 * 1024)
      const ids: string[] = []
      for (let i = 0; i < 12; i++) {
        const id = `run_${String(i).padStart(2, '0')}`
        ids.push(id)
        const createdAt = new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString()
        const request = { cmd: i % 3 === 0 ? ['echo', big] : ['true'], files: [{ path: 'a', content: big }] }
        await admit(store, k, id, { createdAt, request })
      }
      assert.deepEqual((await store.getRun('run_01'))?.cmd, ['true'])
      const seen: string[] = []
      let cursor: string | undefined
      let pages = 0
      do {
        const page = await store.listRuns({ limit: 1000, keyId: k.id, ...(cursor ? { cursor } : {}) })
        assert.ok(page.runs.length >= 1)
        seen.push(...page.runs.map((r) => r.id))
        cursor = page.nextCursor ?? undefined
        pages++
      } while (cursor && pages < 100)
      assert.deepEqual(seen, [...ids].reverse(), 'every run once, newest first')
      assert.equal(pages, 2, 'pages held to 8 MiB of commands, whatever the files')
      await store.close()
    })

    it("sweeps finished runs past their key's retention, or the server's, with their events", async () => {
      const store = await open()
      const short = key(undefined, { retentionMs: 50 })
      const forever = key()
      for (const k of [short, forever]) await store.createKey(k)
      for (const [id, k] of [
        ['old', short],
        ['kept', forever],
        ['queued', short],
      ] as const)
        await admit(store, k, id)
      for (const id of ['old', 'kept']) await store.finishRun(id, okResult())
      await sleep(150)
      await admit(store, short, 'new')
      await store.finishRun('new', okResult())
      assert.equal(await store.sweep(null), 1)
      assert.equal(await store.getRun('old'), null)
      assert.deepEqual(await store.events('old', 0, 10), [])
      for (const id of ['new', 'queued', 'kept']) assert.ok(await store.getRun(id), id)
      assert.equal(await store.sweep(100), 1, "the server's bound, whatever the key's")
      assert.equal(await store.getRun('kept'), null)
      assert.ok(await store.getRun('new'))
      await store.close()
    })
  })
}
