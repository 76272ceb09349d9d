// SqliteStore against the RunStore contract (store-cases*.ts), then what is SQLite's own: its file, its
// clock (set by the test), what survives a reopening, its migrations.
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import Database from 'better-sqlite3'
import { MIGRATIONS, SqliteStore } from '../../src/service/sqlite.js'
import { ServiceError } from '../../src/service/types.js'
import { tempDir } from '../helpers.js'
import { admit, key, okResult, storeCases } from './store-cases.js'
import { liveStoreCases } from './store-cases-live.js'

const dataDir = () => path.join(tempDir('cordon-store-'), 'data')
const open = async () => new SqliteStore(dataDir())

storeCases('SQLite', open)
liveStoreCases('SQLite', open)

/** A store whose clock the test moves. */
function clocked(start = Date.UTC(2026, 0, 1)) {
  const clock = { now: start }
  const dir = dataDir()
  return { store: new SqliteStore(dir, { now: () => clock.now }), clock, dir }
}

/** A data dir whose cordon.db is at schema `version`, as the cordon of that version made it. */
function oldStore(version: number): { db: Database.Database; dir: string } {
  const dir = dataDir()
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const db = new Database(path.join(dir, 'cordon.db'))
  db.exec('CREATE TABLE schema_version (version INTEGER NOT NULL)')
  for (const migration of MIGRATIONS.slice(0, version)) db.exec(migration)
  db.prepare('INSERT INTO schema_version (version) VALUES (?)').run(version)
  return { db, dir }
}

const code = async (p: Promise<unknown>): Promise<[string, number | undefined] | null> =>
  p.then(
    () => null,
    (e: unknown) => {
      if (e instanceof ServiceError) return [e.code, e.retryAfterS]
      throw e
    },
  )

describe('SqliteStore, by its own clock', () => {
  it('runsPerMinute is a sliding window, and says when to retry', async () => {
    const { store, clock } = clocked()
    const k = key(undefined, { quota: { runsPerMinute: 3 } })
    await admit(store, k, 'a')
    clock.now += 20_000
    await admit(store, k, 'b')
    await admit(store, k, 'c')
    assert.deepEqual(await code(admit(store, k, 'd')), ['quota', 40])
    clock.now += 40_001
    await admit(store, k, 'd')
    assert.equal((await code(admit(store, k, 'e')))?.[0], 'quota')
    await store.close()
  })

  it('stamps a claim, a finish and a cancel with its clock; a lease runs out by it', async () => {
    const { store, clock } = clocked()
    await admit(store, key(), 'r', { createdAt: new Date(clock.now).toISOString() })
    clock.now += 1000
    const fence = await store.claimRun('r', 'w', 5000)
    assert.equal((await store.getRun('r'))?.startedAt, '2026-01-01T00:00:01.000Z')
    clock.now += 4999
    assert.deepEqual(await store.reapLostRuns(), [])
    await store.heartbeat('w', 5000)
    clock.now += 5001
    assert.deepEqual(await store.reapLostRuns(), ['r'])
    assert.equal((await store.getRun('r'))?.finishedAt, '2026-01-01T00:00:11.000Z')
    assert.equal(await store.finishRun('r', okResult(), fence ?? undefined), null, 'fenced out')
    await store.close()
  })
})

describe('SqliteStore, its file', () => {
  it('keeps stdin, admissions and owed webhooks across a reopening', async () => {
    const { store, clock, dir } = clocked()
    const k = key(undefined, { quota: { runsPerMinute: 2 } })
    await store.createKey(k)
    const bounds = { perRun: 100, perKey: 100 }
    await admit(store, k, 'a', { request: { cmd: ['cat'], stdin: 'open' } })
    await admit(store, k, 'b', { request: { cmd: ['true'], webhook: { url: 'https://h.example/' } } })
    await store.appendStdin('a', k.id, Buffer.from('one '), bounds)
    await store.appendStdin('a', k.id, Buffer.from('two'), bounds)
    await store.appendStdin('a', k.id, null, bounds)
    await store.finishRun('b', okResult())
    await store.close()
    const again = new SqliteStore(dir, { now: () => clock.now })
    assert.deepEqual(await again.stdinState('a'), { bytes: 7, closed: true })
    assert.deepEqual(
      (await again.readStdin('a', 0, 10)).map((c) => c.data?.toString() ?? null),
      ['one ', 'two', null],
    )
    assert.deepEqual(
      (await again.pendingWebhooks()).map((p) => p.runId),
      ['b'],
    )
    assert.equal((await code(admit(again, k, 'c')))?.[0], 'quota', 'the minute is kept')
    await again.close()
  })

  it('moves a version 7 data dir on: its queued runs keep their stdin, numbered on from where it was', async () => {
    const { db, dir } = oldStore(7)
    const insert = db.prepare(
      `INSERT INTO runs (id, key_id, state, created_at, metadata, request) VALUES (?, 'k', 'queued', ?, '{}', ?)`,
    )
    insert.run('open', '2026-01-01T00:00:00.000Z', JSON.stringify({ cmd: ['cat'], stdin: 'open' }))
    insert.run('shut', '2026-01-01T00:00:01.000Z', JSON.stringify({ cmd: ['cat'], stdin: 'open' }))
    insert.run('none', '2026-01-01T00:00:02.000Z', JSON.stringify({ cmd: ['cat'] }))
    const stdin = db.prepare('INSERT INTO stdin (run_id, seq, data) VALUES (?, ?, ?)')
    stdin.run('open', 1, Buffer.from('a'))
    stdin.run('open', 2, Buffer.from('b'))
    stdin.run('shut', 1, null)
    db.close()
    const store = new SqliteStore(dir)
    assert.equal(await store.version(), MIGRATIONS.length)
    const bounds = { perRun: 100, perKey: 100 }
    await store.appendStdin('open', 'k', Buffer.from('c'), bounds)
    assert.deepEqual(
      (await store.readStdin('open', 0, 10)).map((c) => [c.seq, c.data?.toString()]),
      [
        [1, 'a'],
        [2, 'b'],
        [3, 'c'],
      ],
    )
    for (const id of ['shut', 'none'])
      assert.ok((await code(store.appendStdin(id, 'k', Buffer.from('x'), bounds))) !== null, id)
    assert.deepEqual(await store.queuedRuns(0, 10), [
      { id: 'open', keyId: 'k' },
      { id: 'shut', keyId: 'k' },
      { id: 'none', keyId: 'k' },
    ])
    await store.close()
  })

  it('prepares a bounded set of statements, whatever is asked: none is ever released', async () => {
    const store = await open()
    const k = key(undefined, { quota: { concurrentRuns: 1000, runsPerMinute: 1000 } })
    await admit(store, k, 'run_m', { metadata: { a: '1', b: '2' } })
    const statements = () =>
      (store.database as unknown as { statements: Map<string, unknown> }).statements.size
    await store.listRuns({ limit: 10, keyId: k.id, metadata: { a: '1' } })
    await admit(store, k, 'run_n')
    await store.claimRun('run_n', 'w', 1000)
    await store.finishRun('run_n', okResult())
    const before = statements()
    for (let n = 1; n <= 40; n++) {
      const metadata: Record<string, string> = {}
      for (let i = 0; i < n; i++) metadata[`k${i}`] = 'v'
      assert.deepEqual((await store.listRuns({ limit: 10, keyId: k.id, metadata })).runs, [])
      await admit(store, k, `run_${n}`)
      await store.claimRun(`run_${n}`, `w${n}`, n)
      await store.finishRun(`run_${n}`, okResult())
    }
    assert.equal(statements(), before)
    await store.close()
  })
})
