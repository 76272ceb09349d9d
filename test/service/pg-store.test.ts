// PgStore against the RunStore contract (store-cases*.ts), on a real PostgreSQL (a private server on a
// unix socket, a fresh database per store), then what is PostgreSQL's own: migrations under the advisory
// lock (many nodes opening at once), a newer schema refused, a redacted URL, keys' secrets sealed, and the
// runs' files in the database (RunFiles, for API nodes and workers on different machines).
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import pg from 'pg'
import { MIGRATIONS, migrate } from '../../src/service/pg/migrations.js'
import { openPgStore } from '../../src/service/pg/open.js'
import { FencedError } from '../../src/service/store.js'
import { noPostgres, type RunningPostgres, startPostgres } from '../helpers/servers.js'
import { admit, key, okResult, storeCases } from './store-cases.js'
import { liveStoreCases } from './store-cases-live.js'

let server: RunningPostgres | null = null
const database = async () => {
  if (!server) throw new Error('no PostgreSQL server')
  return server.createDatabase()
}
const open = async () => openPgStore(await database(), { migrate: true })

/** One statement on a connection of its own (what an operator's psql would do). */
async function sql<R extends pg.QueryResultRow>(url: string, text: string, params: unknown[] = []) {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query<R>(text, params)).rows
  } finally {
    await client.end()
  }
}

const bytesOf = async (stream: ReadableStream<Uint8Array>) => {
  const parts: Buffer[] = []
  for await (const part of stream) parts.push(Buffer.from(part))
  return Buffer.concat(parts)
}

describe('PgStore', { skip: noPostgres }, () => {
  before(async () => {
    server = await startPostgres()
  })
  after(async () => {
    await server?.stop()
  })

  storeCases('PostgreSQL', open)
  liveStoreCases('PostgreSQL', open)

  describe('PgStore, its schema', () => {
    it('migrates once when many nodes open an empty database at once; the others find it done', async () => {
      const url = await database()
      const t0 = performance.now()
      const stores = await Promise.all(Array.from({ length: 6 }, () => openPgStore(url, { migrate: true })))
      const ms = performance.now() - t0
      for (const store of stores) assert.equal(await store.version(), MIGRATIONS.length)
      const [row] = await sql<{ n: number }>(url, 'SELECT count(*)::int AS n FROM cordon_schema')
      assert.equal(row?.n, 1, 'one version row')
      await Promise.all(stores.map((s) => s.close()))
      console.log(`# 6 concurrent opens of an empty database: ${ms.toFixed(0)} ms`)
    })

    it('a node that may not migrate refuses an older schema, naming both versions, and opens a current one', async () => {
      const url = await database()
      await assert.rejects(
        openPgStore(url, { migrate: false }),
        new RegExp(`schema version 0; this cordon needs ${MIGRATIONS.length}: migrate it first`),
      )
      await (await openPgStore(url, { migrate: true })).close()
      const worker = await openPgStore(url, { migrate: false })
      assert.equal(await worker.version(), MIGRATIONS.length)
      await worker.close()
    })

    it('refuses a database newer than this cordon, naming both versions, and changes nothing', async () => {
      const url = await database()
      // The next cordon's migration (additive: a column the code of this one does not read).
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      const next = [...MIGRATIONS, 'ALTER TABLE runs ADD COLUMN next_thing text']
      assert.equal(
        await migrate(client as unknown as pg.PoolClient, { allowed: true, migrations: next }),
        next.length,
      )
      await client.end()
      const newer = `the store has schema version ${next.length}, newer than this cordon (${MIGRATIONS.length})`
      for (const allowed of [true, false])
        await assert.rejects(openPgStore(url, { migrate: allowed }), (e: Error) => e.message.includes(newer))
      const [row] = await sql<{ version: number }>(url, 'SELECT version FROM cordon_schema')
      assert.equal(row?.version, next.length)
    })

    it('says why it cannot connect without the password of its URL', async () => {
      const url = 'postgres://cordon:hunter2secret@/nodb?host=/nonexistent-dir'
      await assert.rejects(openPgStore(url, { migrate: true }), (e: Error) => {
        assert.match(e.message, /cannot connect to the PostgreSQL store/)
        assert.ok(!JSON.stringify({ m: e.message, ...e }).includes('hunter2secret'), e.message)
        assert.match(e.message, /cordon:\*\*\*@/)
        return true
      })
    })
  })

  describe('PgStore, keys sealed with a secrets key', () => {
    it("keeps a key's secrets sealed, and opens only with the key that sealed them", async () => {
      const url = await database()
      const secretsKey = Buffer.alloc(32, 7)
      const clear = await openPgStore(url, { migrate: true })
      const before = key()
      await clear.createKey(before)
      await clear.close()
      // An API node given the key seals what was in the clear.
      const store = await openPgStore(url, { migrate: true, secretsKey })
      const k = key()
      await store.createKey(k)
      assert.deepEqual(await store.getKey(k.id), k)
      assert.deepEqual(await store.getKey(before.id), before)
      await store.close()
      const raw = JSON.stringify(await sql(url, 'SELECT * FROM keys'))
      assert.ok(!raw.includes('s3cret') && !raw.includes('whs'), 'no secret in the clear')
      await assert.rejects(openPgStore(url, { migrate: false }), /sealed: give its secrets key/)
      await assert.rejects(
        openPgStore(url, { migrate: false, secretsKey: Buffer.alloc(32, 8) }),
        /not the one this store's key secrets are sealed with/,
      )
      const worker = await openPgStore(url, { migrate: false, secretsKey })
      assert.deepEqual(await worker.keyByHash(k.hash), k)
      await worker.close()
    })
  })

  describe('PgStore, the runs files (RunFiles in the database)', () => {
    it('keeps files of a run for any node, streams them in slices, and refuses a stale fence', async () => {
      const store = await open()
      const k = key()
      await admit(store, k, 'r')
      const fence = await store.claimRun('r', 'w', 60_000)
      assert.ok(fence)
      const big = Buffer.alloc(600 * 1024 + 7)
      for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff
      await store.files.put('r', 'out/big.bin', big, fence)
      await store.files.put('r', 'a.txt', Buffer.from('one'), fence)
      await store.files.put('r', 'a.txt', Buffer.from('two'), fence)
      await store.files.put('r', 'empty', Buffer.alloc(0), fence)
      assert.deepEqual(await store.files.list('r'), ['a.txt', 'empty', 'out/big.bin'])
      const file = await store.files.open('r', 'out/big.bin')
      assert.equal(file?.size, big.length)
      assert.ok(file && (await bytesOf(file.stream)).equals(big))
      const small = await store.files.open('r', 'a.txt')
      assert.equal(small && (await bytesOf(small.stream)).toString(), 'two')
      const empty = await store.files.open('r', 'empty')
      assert.equal(empty && (await bytesOf(empty.stream)).length, 0)
      assert.equal(await store.files.open('r', 'nope'), null)
      await assert.rejects(
        store.files.put('r', 'x', Buffer.from('x'), { workerId: 'w', attempt: 2 }),
        FencedError,
      )
      await store.finishRun('r', okResult(), fence)
      await assert.rejects(store.files.put('r', 'late', Buffer.from('x'), fence), FencedError)
      assert.equal((await store.files.list('r')).includes('late'), false)
      // They go with their run.
      assert.equal(await store.deleteRun('r'), true)
      assert.deepEqual(await store.files.list('r'), [])
      await store.close()
    })
  })
})
