import assert from 'node:assert/strict'
import { mkdirSync, statSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import Database from 'better-sqlite3'
import { errorResult, type RunResult } from '../../src/index.js'
import { LIST_PAGE_BYTES, MIGRATIONS, newRunId } from '../../src/service/sqlite.js'
import { SqliteSyncStore as SqliteStore } from '../../src/service/sqlite-sync.js'
import { viewJson, wholeResult } from '../../src/service/text.js'
import { endResult, type KeyRecord, runView, type StoredResult } from '../../src/service/types.js'
import { tempDir } from '../helpers.js'

function key(id: string, retentionMs: number | null = null): KeyRecord {
  return {
    id,
    name: id,
    hash: `hash-${id}`,
    scopes: ['runs:write', 'runs:read'],
    ceilings: { limits: { wallTimeMs: 1000 } },
    quota: { concurrentRuns: 2, runsPerMinute: null },
    secrets: { TOKEN: 's3cret' },
    retentionMs,
    webhookSecret: 'whs',
    createdAt: '2026-01-01T00:00:00.000Z',
    revokedAt: null,
  }
}

function open(): { store: SqliteStore; dir: string } {
  const dir = path.join(tempDir('cordon-store-'), 'data')
  return { store: new SqliteStore(dir), dir }
}

/** A data dir whose cordon.db is at schema `version`, as the cordon of that version made it. */
function oldStore(version: number): { db: Database.Database; dir: string } {
  const dir = path.join(tempDir('cordon-store-'), 'data')
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const db = new Database(path.join(dir, 'cordon.db'))
  db.exec('CREATE TABLE schema_version (version INTEGER NOT NULL)')
  for (const migration of MIGRATIONS.slice(0, version)) db.exec(migration)
  db.prepare('INSERT INTO schema_version (version) VALUES (?)').run(version)
  return { db, dir }
}

/** A run's whole result, as the service gives it. */
const whole = (store: SqliteStore, id: string) =>
  wholeResult(store, id, store.storedResult(id) as StoredResult)

const okResult = () => ({ ...errorResult('x', 'y'), status: 'ok' as const, violation: null, stdout: 'hi\n' })

describe('SqliteStore', () => {
  it('makes its dir 0700 and its file 0600, in WAL mode, at the latest schema version', () => {
    const { store, dir } = open()
    assert.equal(statSync(dir).mode & 0o777, 0o700)
    assert.equal(statSync(path.join(dir, 'cordon.db')).mode & 0o777, 0o600)
    assert.equal(store.db.pragma('journal_mode', { simple: true }), 'wal')
    assert.equal(store.version(), MIGRATIONS.length)
    store.close()
    // Opening again runs no migration twice.
    const again = new SqliteStore(dir)
    assert.equal(again.version(), MIGRATIONS.length)
    again.close()
  })

  it('keeps a finished run’s webhook pending, with each attempt, across a reopening', () => {
    const { store, dir } = open()
    store.createKey(key('k1'))
    const at = '2026-01-01T00:00:00.000Z'
    const hooked = store.createRun({
      id: 'run_hooked',
      keyId: 'k1',
      createdAt: at,
      metadata: {},
      request: { cmd: ['true'], webhook: { url: 'https://hooks.example/x' } },
    })
    store.createRun({ id: 'run_plain', keyId: 'k1', createdAt: at, metadata: {}, request: { cmd: ['true'] } })
    store.createRun({
      id: 'run_cut',
      keyId: 'k1',
      createdAt: at,
      metadata: {},
      request: { cmd: ['true'], webhook: { url: 'https://hooks.example/y' } },
    })
    store.startRun('run_cut', at)
    assert.deepEqual(store.pendingWebhooks(), [], 'owed only once the run finished')
    store.finishRun(hooked.id, okResult(), '2026-01-01T00:00:01.000Z')
    store.finishRun('run_plain', okResult(), '2026-01-01T00:00:01.000Z')
    store.interruptRunning('2026-01-01T00:00:02.000Z')
    assert.deepEqual(store.pendingWebhooks(), [
      { runId: 'run_hooked', attempt: 1, at: '2026-01-01T00:00:01.000Z' },
      { runId: 'run_cut', attempt: 1, at: '2026-01-01T00:00:02.000Z' },
    ])
    const attempt = { attempt: 1, at, status: 500, error: null, durationMs: 3 }
    store.recordWebhookAttempt('run_hooked', attempt, { attempt: 2, at: '2026-01-01T00:00:05.000Z' })
    store.close()
    const again = new SqliteStore(dir)
    assert.deepEqual(again.pendingWebhooks()[1], {
      runId: 'run_hooked',
      attempt: 2,
      at: '2026-01-01T00:00:05.000Z',
    })
    assert.deepEqual(again.webhookAttempts('run_hooked'), [attempt])
    again.recordWebhookAttempt('run_hooked', { ...attempt, attempt: 2, status: 200 }, null)
    assert.deepEqual(
      again.pendingWebhooks().map((p) => p.runId),
      ['run_cut'],
      'delivered: over',
    )
    assert.equal(again.deleteRun('run_cut'), true)
    assert.deepEqual(again.pendingWebhooks(), [], 'a deleted run owes nothing')
    again.close()
  })

  it('run ids are random and URL-safe', () => {
    const ids = new Set(Array.from({ length: 100 }, newRunId))
    assert.equal(ids.size, 100)
    for (const id of ids) assert.match(id, /^run_[A-Za-z0-9_-]{22}$/)
  })

  it('round-trips keys, runs and their lifecycle', () => {
    const { store } = open()
    store.createKey(key('k1'))
    assert.deepEqual(store.getKey('k1'), key('k1'))
    assert.deepEqual(store.keyByHash('hash-k1'), key('k1'))
    assert.equal(store.keyByHash('nope'), null)
    assert.equal(store.revokeKey('k1', '2026-01-02T00:00:00.000Z'), true)
    assert.equal(store.revokeKey('k1', '2026-01-03T00:00:00.000Z'), false)
    assert.equal(store.getKey('k1')?.revokedAt, '2026-01-02T00:00:00.000Z')
    assert.equal(store.listKeys().length, 1)

    const run = store.createRun({
      id: 'run_a',
      keyId: 'k1',
      createdAt: '2026-01-01T00:00:00.000Z',
      metadata: { team: 'x' },
      request: { cmd: ['true'] },
    })
    assert.equal(run.state, 'queued')
    assert.deepEqual(store.getRun('run_a'), run)
    assert.equal(store.deleteRun('run_a'), false, 'only a finished run is deleted')
    assert.equal(store.startRun('run_a', '2026-01-01T00:00:01.000Z'), true)
    assert.equal(store.startRun('run_a', '2026-01-01T00:00:02.000Z'), false, 'started once')
    store.appendEvent('run_a', 'output', { stream: 'stdout', offset: 0, bytes: 3, data: 'aGkK' })
    const end = store.finishRun('run_a', { ...okResult(), output: 'hi\n' }, '2026-01-01T00:00:03.000Z')
    assert.equal(end?.type, 'end')
    assert.equal(end?.seq, 2)
    assert.equal(store.finishRun('run_a', okResult(), '2026-01-01T00:00:04.000Z'), null, 'finished once')
    const got = store.getRun('run_a')
    assert.equal(got?.state, 'finished')
    assert.equal(got?.startedAt, '2026-01-01T00:00:01.000Z')
    // The run as read holds the result's summary; the whole result is rebuilt from its events.
    assert.deepEqual(got?.result, endResult(okResult()))
    assert.deepEqual(whole(store, 'run_a'), { ...okResult(), output: 'hi\n' })
    // The end event says how it ended, not the output again: the run's own events carried that.
    assert.deepEqual(store.events('run_a', 0, 10)[1]?.data, { result: endResult(okResult()) })
    assert.equal('stdout' in ((end?.data.result ?? {}) as object), false)
    assert.equal(store.deleteRun('run_a'), true)
    assert.equal(store.getRun('run_a'), null)
    assert.deepEqual(store.events('run_a', 0, 10), [])
    store.close()
  })

  it('numbers events per run from 1 with no gap, and pages them', () => {
    const { store } = open()
    for (const id of ['r1', 'r2']) {
      store.createRun({ id, keyId: 'k', createdAt: '2026-01-01T00:00:00.000Z', metadata: {}, request: {} })
    }
    for (let i = 0; i < 5; i++) {
      store.appendEvent('r1', 'log', { i })
      store.appendEvent('r2', 'log', { i })
    }
    assert.deepEqual(
      store.events('r1', 0, 100).map((e) => e.seq),
      [1, 2, 3, 4, 5],
    )
    assert.deepEqual(
      store.events('r2', 2, 2).map((e) => [e.seq, e.data.i]),
      [
        [3, 2],
        [4, 3],
      ],
    )
  })

  it('pages events by bytes too, at least one a page', () => {
    const { store } = open()
    store.createRun({ id: 'r', keyId: 'k', createdAt: '2026-01-01T00:00:00.000Z', metadata: {}, request: {} })
    for (let i = 0; i < 10; i++) store.appendEvent('r', 'log', { msg: 'x'.repeat(1000) })
    assert.equal(store.events('r', 0, 100, 3000).length, 3)
    assert.equal(store.events('r', 0, 100, 1).length, 1)
    assert.deepEqual(
      store.events('r', 8, 100, 1_000_000).map((e) => e.seq),
      [9, 10],
    )
  })

  /** Bytes a run takes in the store: every value of its row and of its events' rows. */
  const storedBytes = (store: SqliteStore, id: string) => {
    let n = 0
    const add = (row: Record<string, unknown>) => {
      for (const v of Object.values(row))
        n += typeof v === 'string' ? Buffer.byteLength(v) : Buffer.isBuffer(v) ? v.length : 8
    }
    add(store.db.prepare('SELECT * FROM runs WHERE id = ?').get(id) as Record<string, unknown>)
    for (const row of store.db.prepare('SELECT * FROM events WHERE run_id = ?').all(id))
      add(row as Record<string, unknown>)
    return n
  }

  it("keeps a run's output once, as bytes: it takes about the output's size in the store", () => {
    // The result kept the output's text twice more (stdout, output) as escaped JSON, beside the events'
    // base64: 16 MiB of \x01 (`\u0001`, 6 bytes each) took 224 MB, parsed whole on every read of the run.
    const { store } = open()
    const size = 16 * 1024 * 1024
    const at = '2026-01-01T00:00:00.000Z'
    for (const [id, byte] of [
      ['ctl', 0x01],
      ['text', 0x61],
      ['invalid', 0xff],
    ] as const) {
      store.createRun({ id, keyId: 'k', createdAt: at, metadata: {}, request: {} })
      store.startRun(id, at)
      const piece = Buffer.alloc(64 * 1024, byte)
      for (let offset = 0; offset < size; offset += piece.length)
        store.appendEvent(id, 'output', {
          stream: 'stdout',
          offset,
          bytes: piece.length,
          data: piece.toString('base64'),
        })
      const text = Buffer.alloc(size, byte).toString('utf8')
      store.finishRun(id, { ...okResult(), stdout: text, output: text, outputBytes: size }, at)
      const stored = storedBytes(store, id)
      assert.ok(stored < size * 1.05, `${id}: ${stored} bytes stored for ${size} bytes of output`)
    }
    store.close()
  })

  // Output events are found by where their bytes end, per stream and interleaved, so that a range of a
  // long output is read from the few events holding it.
  const outputRun = (store: SqliteStore, id: string) => {
    store.createRun({ id, keyId: 'k', createdAt: '2026-01-01T00:00:00.000Z', metadata: {}, request: {} })
    const offsets = { stdout: 0, stderr: 0 }
    store.appendEvent(id, 'started', {})
    for (const [stream, text] of [
      ['stdout', 'abc'],
      ['stderr', 'XY'],
      ['stdout', 'defg'],
      ['stderr', 'Z'],
      ['stdout', 'h'],
    ] as const) {
      const bytes = Buffer.from(text)
      store.appendEvent(id, 'output', {
        stream,
        offset: offsets[stream],
        bytes: bytes.length,
        data: bytes.toString('base64'),
      })
      offsets[stream] += bytes.length
      store.appendEvent(id, 'log', { msg: 'between' })
    }
  }
  const slices = (
    store: SqliteStore,
    id: string,
    stream: 'stdout' | 'stderr' | 'output',
    from: number,
    to: number,
  ) => store.outputSlices(id, stream, from, to).map((s) => [s.start, s.bytes.toString()])

  it('finds the output events holding a range of one stream or of both', () => {
    const { store } = open()
    outputRun(store, 'r')
    assert.deepEqual(slices(store, 'r', 'stdout', 0, 100), [
      [0, 'abc'],
      [3, 'defg'],
      [7, 'h'],
    ])
    assert.deepEqual(slices(store, 'r', 'stdout', 4, 5), [[3, 'defg']])
    assert.deepEqual(slices(store, 'r', 'stdout', 3, 8), [
      [3, 'defg'],
      [7, 'h'],
    ])
    assert.deepEqual(slices(store, 'r', 'stderr', 1, 3), [
      [0, 'XY'],
      [2, 'Z'],
    ])
    assert.deepEqual(slices(store, 'r', 'output', 4, 6), [
      [3, 'XY'],
      [5, 'defg'],
    ])
    assert.deepEqual(slices(store, 'r', 'output', 9, 10), [[9, 'Z']])
    assert.deepEqual(slices(store, 'r', 'output', 10, 11), [[10, 'h']])
    assert.deepEqual(slices(store, 'r', 'output', 11, 100), [])
    assert.deepEqual(slices(store, 'r', 'stdout', 2, 2), [])
    // How much there is, from the index: stdout abc defg h, stderr XY Z.
    assert.deepEqual(
      (['stdout', 'stderr', 'output'] as const).map((s) => store.outputEnd('r', s)),
      [8, 3, 11],
    )
    assert.equal(store.outputEnd('none', 'output'), 0)
  })

  it('fills in where the output events of a database from before end (the migration)', () => {
    // Version 2: output events held their bytes as base64 in their data, and nothing said where they end.
    const { db, dir } = oldStore(2)
    db.prepare(
      `INSERT INTO runs (id, key_id, state, created_at, metadata, request) VALUES ('old', 'k', 'running', ?, '{}', '{}')`,
    ).run('2026-01-01T00:00:00.000Z')
    const event = db.prepare(`INSERT INTO events (run_id, seq, type, at, data) VALUES ('old', ?, ?, ?, ?)`)
    let seq = 0
    event.run(++seq, 'started', '2026-01-01T00:00:00.000Z', '{}')
    const offsets = { stdout: 0, stderr: 0 }
    for (const [stream, text] of [
      ['stdout', 'abc'],
      ['stderr', 'XY'],
      ['stdout', 'defg'],
      ['stderr', 'Z'],
      ['stdout', 'h'],
    ] as const) {
      const data = {
        stream,
        offset: offsets[stream],
        bytes: text.length,
        data: Buffer.from(text).toString('base64'),
      }
      event.run(++seq, 'output', '2026-01-01T00:00:00.000Z', JSON.stringify(data))
      offsets[stream] += text.length
      event.run(++seq, 'log', '2026-01-01T00:00:00.000Z', '{"msg":"between"}')
    }
    db.close()
    const again = new SqliteStore(dir)
    assert.equal(again.version(), MIGRATIONS.length)
    assert.deepEqual(slices(again, 'old', 'output', 0, 100), [
      [0, 'abc'],
      [3, 'XY'],
      [5, 'defg'],
      [9, 'Z'],
      [10, 'h'],
    ])
    assert.deepEqual(slices(again, 'old', 'stderr', 0, 100), [
      [0, 'XY'],
      [2, 'Z'],
    ])
    // New events go on from there.
    again.appendEvent('old', 'output', {
      stream: 'stderr',
      offset: 3,
      bytes: 2,
      data: Buffer.from('!!').toString('base64'),
    })
    assert.deepEqual(slices(again, 'old', 'output', 11, 100), [[11, '!!']])
    again.close()
  })

  it('takes the output out of the end events of a database from before (the migration)', () => {
    // Version 4: an end event held the whole result.
    const { db, dir } = oldStore(4)
    db.prepare(
      `INSERT INTO runs (id, key_id, state, status, created_at, finished_at, metadata, request, result)
         VALUES ('r', 'k', 'finished', 'ok', ?, ?, '{}', '{}', ?)`,
    ).run('2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z', JSON.stringify(okResult()))
    db.prepare(`INSERT INTO events (run_id, seq, type, at, data) VALUES ('r', 1, 'end', ?, ?)`).run(
      '2026-01-01T00:00:01.000Z',
      JSON.stringify({ result: okResult() }),
    )
    db.close()
    const again = new SqliteStore(dir)
    assert.equal(again.version(), MIGRATIONS.length)
    assert.deepEqual(again.events('r', 0, 10)[0]?.data, { result: endResult(okResult()) })
    assert.equal(whole(again, 'r').stdout, 'hi\n', 'the run keeps its whole result')
    again.close()
  })

  it('upgrades a data dir of version 5: its runs keep their whole results, and read as new ones do', () => {
    // Version 5: a finished run's result held its text (escaped JSON), its output events their bytes as
    // base64. They stay so; the run gets its summary and view size, and every read works on it.
    const { db, dir } = oldStore(5)
    const text = 'a\u0001é€😀\n'
    const result: RunResult = {
      ...okResult(),
      stdout: text,
      output: text,
      outputBytes: Buffer.byteLength(text),
      logs: [{ level: 'info', msg: 'logged' }],
    }
    db.prepare(
      `INSERT INTO runs (id, key_id, state, status, created_at, started_at, finished_at, metadata, request, result)
         VALUES ('old', 'k', 'finished', 'ok', ?, ?, ?, '{"team":"x"}', '{"cmd":["true"]}', ?)`,
    ).run(
      '2026-01-01T00:00:00.000Z',
      '2026-01-01T00:00:00.000Z',
      '2026-01-01T00:00:01.000Z',
      JSON.stringify(result),
    )
    const bytes = Buffer.from(text)
    const data = { stream: 'stdout', offset: 0, bytes: bytes.length, data: bytes.toString('base64') }
    db.prepare(
      `INSERT INTO events (run_id, seq, type, at, data, out_stream, out_end, merged_end)
         VALUES ('old', 1, 'output', ?, ?, 'stdout', ?, ?)`,
    ).run('2026-01-01T00:00:00.000Z', JSON.stringify(data), bytes.length, bytes.length)
    db.prepare(`INSERT INTO events (run_id, seq, type, at, data) VALUES ('old', 2, 'end', ?, ?)`).run(
      '2026-01-01T00:00:01.000Z',
      JSON.stringify({ result: endResult(result) }),
    )
    db.prepare(
      `INSERT INTO runs (id, key_id, state, created_at, metadata, request)
         VALUES ('queued', 'k', 'queued', '2026-01-01T00:00:02.000Z', '{}', '{"cmd":["true"]}')`,
    ).run()
    db.close()

    const store = new SqliteStore(dir)
    assert.equal(store.version(), MIGRATIONS.length)
    const run = store.getRun('old')
    assert.deepEqual(run?.result, endResult(result))
    assert.deepEqual(run?.metadata, { team: 'x' })
    assert.deepEqual(run?.cmd, ['true'], 'its command, from its request')
    assert.deepEqual(store.runRequest('old'), { cmd: ['true'] })
    assert.deepEqual(store.storedResult('old'), { result, textFromEvents: false })
    assert.deepEqual(whole(store, 'old'), result)
    const view = JSON.parse([...viewJson(store, run as NonNullable<typeof run>)].join(''))
    assert.deepEqual(view, JSON.parse(JSON.stringify(runView(run as NonNullable<typeof run>, result))))
    const viewBytes = Buffer.byteLength(JSON.stringify(view))
    assert.ok(store.runViewBytes('old') >= viewBytes, `${store.runViewBytes('old')} < ${viewBytes}`)
    assert.deepEqual(
      store.listRuns({ limit: 10 }).runs.map((r) => [r.id, r.state, r.result?.status ?? null]),
      [
        ['queued', 'queued', null],
        ['old', 'finished', 'ok'],
      ],
    )
    assert.deepEqual(store.events('old', 0, 1)[0]?.data, data, 'an old output event reads as it did')
    assert.deepEqual(slices(store, 'old', 'stdout', 0, 100), [[0, text]])
    assert.deepEqual(
      store.queuedRuns().map((r) => r.id),
      ['queued'],
    )
    // A new output event reads as the old ones do, its bytes kept as bytes.
    store.startRun('queued', '2026-01-01T00:00:03.000Z')
    const added = { stream: 'stdout', offset: 0, bytes: bytes.length, data: bytes.toString('base64') }
    store.appendEvent('queued', 'output', added)
    assert.deepEqual(store.events('queued', 0, 1)[0]?.data, added)
    const row = store.db.prepare(`SELECT data, bytes FROM events WHERE run_id = 'queued'`).get() as {
      data: string
      bytes: Buffer
    }
    assert.ok(row.bytes.equals(bytes))
    assert.doesNotMatch(row.data, /base64|"data"/)
    store.close()
  })

  it("keeps a queued run's stdin across a reopening, until the run starts or ends", () => {
    const { store, dir } = open()
    const at = '2026-01-01T00:00:00.000Z'
    for (const id of ['a', 'b'])
      store.createRun({ id, keyId: 'k', createdAt: at, metadata: {}, request: { stdin: 'open' } })
    store.appendStdin('a', Buffer.from('one '))
    store.appendStdin('a', Buffer.from('two'))
    store.appendStdin('a', null)
    store.appendStdin('b', Buffer.from('bee'))
    store.close()
    const again = new SqliteStore(dir)
    assert.deepEqual(again.stdinState('a'), { bytes: 7, closed: true })
    assert.deepEqual(again.stdinState('b'), { bytes: 3, closed: false })
    const taken = again.takeStdin('a')
    assert.equal(Buffer.concat(taken.chunks).toString(), 'one two')
    assert.equal(taken.closed, true)
    assert.deepEqual(again.stdinState('a'), { bytes: 0, closed: false }, 'taken: gone from the store')
    // A run that ends waiting (canceled) takes its stdin with it.
    again.finishRun('b', errorResult('signal', 'canceled'), at)
    assert.deepEqual(again.stdinState('b'), { bytes: 0, closed: false })
    assert.equal((again.db.prepare('SELECT COUNT(*) AS n FROM stdin').get() as { n: number }).n, 0)
    again.close()
  })

  it('a failed transaction leaves nothing half-done', () => {
    const { store } = open()
    store.createRun({ id: 'r', keyId: 'k', createdAt: '2026-01-01T00:00:00.000Z', metadata: {}, request: {} })
    // A result that cannot be serialised fails after the UPDATE: the run stays queued, with no end event.
    const bad = okResult() as unknown as Record<string, unknown>
    bad.cyclic = bad
    assert.throws(() =>
      store.finishRun('r', bad as unknown as ReturnType<typeof okResult>, '2026-01-01T00:00:01.000Z'),
    )
    assert.equal(store.getRun('r')?.state, 'queued')
    assert.deepEqual(store.events('r', 0, 10), [])
  })

  it('interruptRunning ends running runs error/interrupted with an interrupted event, and leaves others', () => {
    const { store } = open()
    for (const id of ['q', 'r', 'f']) {
      store.createRun({
        id,
        keyId: 'k',
        createdAt: `2026-01-01T00:00:0${id === 'q' ? 1 : 0}.000Z`,
        metadata: {},
        request: {},
      })
    }
    store.startRun('r', '2026-01-01T00:00:01.000Z')
    store.appendEvent('r', 'started', {})
    store.startRun('f', '2026-01-01T00:00:01.000Z')
    store.finishRun('f', okResult(), '2026-01-01T00:00:02.000Z')
    assert.deepEqual(store.interruptRunning('2026-01-01T00:01:00.000Z'), ['r'])
    const r = store.getRun('r')
    assert.equal(r?.state, 'finished')
    assert.equal(r?.result?.status, 'error')
    assert.equal(r?.result?.violation?.kind, 'error')
    assert.equal(r?.result?.violation?.limit, 'interrupted')
    assert.deepEqual(
      store.events('r', 0, 10).map((e) => [e.seq, e.type]),
      [
        [1, 'started'],
        [2, 'interrupted'],
        [3, 'end'],
      ],
    )
    assert.equal(store.getRun('f')?.result?.status, 'ok')
    assert.deepEqual(
      store.queuedRuns().map((x) => x.id),
      ['q'],
    )
  })

  it('lists with filters and keyset pagination: every run once, newest first', () => {
    const { store } = open()
    const ids: string[] = []
    for (let i = 0; i < 25; i++) {
      // Pairs share a timestamp: the id breaks the tie.
      const createdAt = new Date(Date.UTC(2026, 0, 1, 0, 0, Math.floor(i / 2))).toISOString()
      const id = `run_${String(i).padStart(2, '0')}`
      ids.push(id)
      store.createRun({
        id,
        keyId: i % 2 ? 'odd' : 'even',
        createdAt,
        metadata: { n: String(i % 3) },
        request: {},
      })
      if (i % 5 === 0) {
        store.startRun(id, createdAt)
        store.finishRun(id, okResult(), createdAt)
      }
    }
    const seen: string[] = []
    let cursor: string | undefined
    let pages = 0
    do {
      const page = store.listRuns({ limit: 4, ...(cursor ? { cursor } : {}) })
      seen.push(...page.runs.map((r) => r.id))
      cursor = page.nextCursor ?? undefined
      pages++
    } while (cursor)
    assert.equal(pages, 7)
    assert.deepEqual(seen, [...ids].reverse())
    assert.equal(store.listRuns({ limit: 100, keyId: 'odd' }).runs.length, 12)
    assert.equal(store.listRuns({ limit: 100, state: 'finished' }).runs.length, 5)
    assert.equal(store.listRuns({ limit: 100, status: 'ok' }).runs.length, 5)
    assert.equal(store.listRuns({ limit: 100, metadata: { n: '0' } }).runs.length, 9)
    assert.equal(store.listRuns({ limit: 100, metadata: { n: '0' }, keyId: 'even' }).runs.length, 5)
    assert.equal(store.listRuns({ limit: 100, createdAfter: '2026-01-01T00:00:10.000Z' }).runs.length, 3)
    assert.deepEqual(store.listRuns({ limit: 10, cursor: 'garbage' }), { runs: [], nextCursor: null })
  })

  it('prepares a bounded set of statements, whatever the filters: none is ever released', () => {
    // Statements are kept for the process's life (a collected one can abort Node 24). A listing's SQL
    // that grew with its metadata filters made a statement per count: 600 requests held 294 MiB.
    const { store } = open()
    store.createRun({
      id: 'run_m',
      keyId: 'k',
      createdAt: '2026-01-01T00:00:00.000Z',
      metadata: { a: '1', b: '2' },
      request: {},
    })
    const statements = () =>
      (store.database as unknown as { statements: Map<string, unknown> }).statements.size
    store.listRuns({ limit: 10, keyId: 'k', metadata: { a: '1' } })
    const before = statements()
    for (let n = 1; n <= 40; n++) {
      const metadata: Record<string, string> = {}
      for (let i = 0; i < n; i++) metadata[`k${i}`] = 'v'
      assert.deepEqual(store.listRuns({ limit: 10, keyId: 'k', metadata }).runs, [])
    }
    assert.equal(statements(), before)
    // The filters still mean what they did: every pair must be there.
    assert.equal(store.listRuns({ limit: 10, keyId: 'k', metadata: { a: '1', b: '2' } }).runs.length, 1)
    assert.equal(store.listRuns({ limit: 10, keyId: 'k', metadata: { a: '1', b: '3' } }).runs.length, 0)
    assert.equal(store.listRuns({ limit: 10, keyId: 'k', metadata: { a: '2' } }).runs.length, 0)
    assert.equal(store.listRuns({ limit: 10, keyId: 'k', metadata: {} }).runs.length, 1)
    store.close()
  })

  it('holds a listing page to a byte budget, and reads no request: a run may carry megabytes of files', () => {
    // A page of `limit` runs was read whole, requests and results parsed: 60 runs with a 7 MiB file
    // each made one listing take 797 MiB, and limit=1000 of them would end the server. A run is now read
    // without its request (its command only), and without its result's text.
    const { store } = open()
    const big = 'x'.repeat(3 * 1024 * 1024)
    const ids: string[] = []
    for (let i = 0; i < 12; i++) {
      const id = `run_${String(i).padStart(2, '0')}`
      ids.push(id)
      const createdAt = new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString()
      const request = { cmd: i % 3 === 0 ? ['echo', big] : ['true'], files: [{ path: 'a', content: big }] }
      store.createRun({ id, keyId: 'k', createdAt, metadata: {}, request })
    }
    assert.deepEqual(store.getRun('run_01')?.cmd, ['true'])
    assert.equal(
      (store.runRequest('run_01') as { files: { content: string }[] }).files[0]?.content,
      big,
      'the request is there for whoever needs it',
    )
    const seen: string[] = []
    let cursor: string | undefined
    let pages = 0
    do {
      const page = store.listRuns({ limit: 1000, keyId: 'k', ...(cursor ? { cursor } : {}) })
      assert.ok(page.runs.length >= 1)
      const bytes = page.runs.reduce((n, r) => n + JSON.stringify(r.cmd).length, 0)
      assert.ok(page.runs.length === 1 || bytes <= LIST_PAGE_BYTES, `a page of ${bytes} bytes`)
      seen.push(...page.runs.map((r) => r.id))
      cursor = page.nextCursor ?? undefined
      pages++
    } while (cursor && pages < 100)
    assert.deepEqual(seen, [...ids].reverse(), 'every run once, newest first')
    assert.equal(pages, 2, 'pages held to 8 MiB of commands, whatever the files')
    store.close()
  })

  it('sweep removes finished runs past their key retention, with their events', () => {
    const { store } = open()
    store.createKey(key('short', 60_000))
    store.createKey({ ...key('forever'), hash: 'h2' })
    const mk = (id: string, keyId: string, finishedAt: string | null) => {
      store.createRun({ id, keyId, createdAt: '2026-01-01T00:00:00.000Z', metadata: {}, request: {} })
      if (finishedAt) store.finishRun(id, okResult(), finishedAt)
    }
    mk('old', 'short', '2026-01-01T00:00:00.000Z')
    mk('new', 'short', '2026-01-01T00:00:30.000Z')
    mk('queued', 'short', null)
    mk('kept', 'forever', '2026-01-01T00:00:00.000Z')
    assert.equal(store.sweep('2026-01-01T00:01:10.000Z'), 1)
    assert.equal(store.getRun('old'), null)
    assert.deepEqual(store.events('old', 0, 10), [])
    for (const id of ['new', 'queued', 'kept']) assert.ok(store.getRun(id), id)
  })

  it("sweep keeps no finished run past the server's retention, whatever its key's", () => {
    // A key without a retention (or a long one) kept its runs, output and all, forever.
    const { store } = open()
    store.createKey(key('long', 3_600_000))
    store.createKey({ ...key('forever'), hash: 'h2' })
    store.createKey({ ...key('short', 10_000), hash: 'h3' })
    const mk = (id: string, keyId: string, finishedAt: string) => {
      store.createRun({ id, keyId, createdAt: '2026-01-01T00:00:00.000Z', metadata: {}, request: {} })
      store.finishRun(id, okResult(), finishedAt)
    }
    mk('forever-old', 'forever', '2026-01-01T00:00:00.000Z')
    mk('long-old', 'long', '2026-01-01T00:00:00.000Z')
    mk('short-mid', 'short', '2026-01-01T00:00:50.000Z')
    mk('forever-new', 'forever', '2026-01-01T00:00:50.000Z')
    assert.equal(store.sweep('2026-01-01T00:01:10.000Z', 60_000), 3)
    for (const id of ['forever-old', 'long-old', 'short-mid']) assert.equal(store.getRun(id), null, id)
    assert.ok(store.getRun('forever-new'))
  })
})
