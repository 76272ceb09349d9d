// The store on one SQLite file (<dataDir>/cordon.db): runs, their events and the keys. WAL mode lets
// readers go on while a worker writes; every method is synchronous, so one call is one transaction and the
// service's single thread never sees a half-done one. The schema grows by appending to MIGRATIONS.
import { randomBytes } from 'node:crypto'
import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs'
import path from 'node:path'
import Database, { type Statement } from 'better-sqlite3'
import { errorResult, type RunResult } from '../index.js'
import { jsonTextBytes } from './text.js'
import {
  type EndResult,
  endResult,
  type KeyRecord,
  type NewRun,
  type OutputChunk,
  type OutputSlice,
  type OutputStream,
  type PendingWebhook,
  type RunEvent,
  type RunEventType,
  type RunFilter,
  type RunRecord,
  type RunState,
  type Scope,
  type Store,
  type StoredResult,
  TEXT_FIELDS,
  type WebhookAttempt,
} from './types.js'

/** Each entry takes the schema from version i to i+1; never edit one that shipped, append. */
export const MIGRATIONS: readonly string[] = [
  `CREATE TABLE runs (
     id TEXT PRIMARY KEY,
     key_id TEXT NOT NULL,
     state TEXT NOT NULL,
     status TEXT,
     created_at TEXT NOT NULL,
     started_at TEXT,
     finished_at TEXT,
     metadata TEXT NOT NULL,
     request TEXT NOT NULL,
     result TEXT
   );
   CREATE INDEX runs_by_created ON runs (created_at, id);
   CREATE INDEX runs_by_key ON runs (key_id, created_at, id);
   CREATE INDEX runs_by_state ON runs (state, created_at);
   CREATE TABLE events (
     run_id TEXT NOT NULL,
     seq INTEGER NOT NULL,
     type TEXT NOT NULL,
     at TEXT NOT NULL,
     data TEXT NOT NULL,
     PRIMARY KEY (run_id, seq)
   ) WITHOUT ROWID;
   CREATE TABLE keys (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL,
     hash TEXT NOT NULL UNIQUE,
     scopes TEXT NOT NULL,
     ceilings TEXT NOT NULL,
     quota TEXT NOT NULL,
     secrets TEXT NOT NULL,
     retention_ms INTEGER,
     webhook_secret TEXT NOT NULL,
     created_at TEXT NOT NULL,
     revoked_at TEXT
   );`,
  `CREATE TABLE webhook_attempts (
     run_id TEXT NOT NULL,
     attempt INTEGER NOT NULL,
     at TEXT NOT NULL,
     status INTEGER,
     error TEXT,
     duration_ms INTEGER NOT NULL,
     PRIMARY KEY (run_id, attempt)
   ) WITHOUT ROWID;`,
  // Where each output event's bytes end, in its stream and in both interleaved: /output finds the few
  // events a range needs by index instead of reading the run's whole history. Old events are filled in.
  `ALTER TABLE events ADD COLUMN out_stream TEXT;
   ALTER TABLE events ADD COLUMN out_end INTEGER;
   ALTER TABLE events ADD COLUMN merged_end INTEGER;
   UPDATE events SET out_stream = json_extract(data, '$.stream'),
                     out_end = json_extract(data, '$.offset') + json_extract(data, '$.bytes')
     WHERE type = 'output';
   UPDATE events SET merged_end = m.e FROM (
       SELECT run_id AS r, seq AS s,
              SUM(json_extract(data, '$.bytes')) OVER (PARTITION BY run_id ORDER BY seq) AS e
         FROM events WHERE type = 'output'
     ) AS m
     WHERE events.run_id = m.r AND events.seq = m.s;
   CREATE INDEX events_by_stream_end ON events (run_id, out_stream, out_end) WHERE out_stream IS NOT NULL;
   CREATE INDEX events_by_merged_end ON events (run_id, merged_end) WHERE merged_end IS NOT NULL;`,
  // A finished run's webhook delivery not over yet: the attempt to make next and when. It survives a
  // restart, which resumes it; a row is written in the transaction that finishes the run.
  `CREATE TABLE webhook_pending (
     run_id TEXT PRIMARY KEY,
     attempt INTEGER NOT NULL,
     at TEXT NOT NULL
   ) WITHOUT ROWID;`,
  // An `end` event carries the result without what the run's events carried (types.ts endResult): the
  // stored ones lose their copies of the output, logs and connections.
  `UPDATE events SET data = json_object('result', json_remove(json_extract(data, '$.result'),
       '$.stdout', '$.stderr', '$.output', '$.logs', '$.network'))
     WHERE type = 'end' AND json_type(data, '$.result') = 'object';`,
  // A run's output is kept once, as bytes: an output event's in `bytes` (its data no longer holds them as
  // base64), and a finished run's result without its text when `text_from_events` (text.ts rebuilds it
  // from the events). `summary` is the result without what its events carry (an EndResult), and `cmd`
  // the request's command: what reads that need neither the output nor the request (up to 8 MiB of files)
  // load. `view_bytes`: how long its result is as JSON, text included, so that a view is budgeted before
  // it is read. Older rows keep their whole result.
  `ALTER TABLE events ADD COLUMN bytes BLOB;
   ALTER TABLE runs ADD COLUMN summary TEXT;
   ALTER TABLE runs ADD COLUMN text_from_events INTEGER NOT NULL DEFAULT 0;
   ALTER TABLE runs ADD COLUMN view_bytes INTEGER;
   ALTER TABLE runs ADD COLUMN cmd TEXT NOT NULL DEFAULT '[]';
   UPDATE runs SET cmd = coalesce(json_extract(request, '$.cmd'), '[]')
     WHERE json_type(request, '$.cmd') = 'array';
   UPDATE runs SET summary = json_remove(result, '$.stdout', '$.stderr', '$.output', '$.logs', '$.network'),
                   view_bytes = octet_length(result)
     WHERE result IS NOT NULL;`,
  // What a client wrote to a queued run's stdin (null data: it closed it), kept until the run starts:
  // stored before the write is acknowledged, so a crash loses none of it (it lived in memory), and held
  // on disk rather than in the server's memory while the run waits.
  `CREATE TABLE stdin (
     run_id TEXT NOT NULL,
     seq INTEGER NOT NULL,
     data BLOB,
     PRIMARY KEY (run_id, seq)
   ) WITHOUT ROWID;`,
]

/** An output event's place in its stream, from its data (`{ stream, offset, bytes }`); null for any other. */
function outputPlace(
  type: RunEventType,
  data: Record<string, unknown>,
): { stream: string; end: number; bytes: number } | null {
  if (type !== 'output') return null
  const { stream, offset, bytes } = data
  if (typeof stream !== 'string' || typeof offset !== 'number' || typeof bytes !== 'number') return null
  return { stream, end: offset + bytes, bytes }
}

/** Bytes of runs (request, result, metadata as stored) a listing page holds at most, past its first run. */
export const LIST_PAGE_BYTES = 8 * 1024 * 1024

/** Rows read at once where a read stops early (a page of events, a range of output). */
const ROWS_AT_ONCE = 16

/** A run id: random and URL-safe (128 bits: unguessable, so a leaked list cannot be walked). */
export function newRunId(): string {
  return `run_${randomBytes(16).toString('base64url')}`
}

/** A run's row as read: its result's summary and command, never its result or request (megabytes each). */
interface RunRow {
  id: string
  key_id: string
  state: RunState
  created_at: string
  started_at: string | null
  finished_at: string | null
  metadata: string
  cmd: string
  summary: string | null
}

/** The columns of a RunRow. */
const RUN_COLUMNS = 'id, key_id, state, created_at, started_at, finished_at, metadata, cmd, summary'

interface EventRow {
  run_id: string
  seq: number
  type: RunEventType
  at: string
  data: string
  /** An output event's bytes (null: an older event's are in its data, as base64). */
  bytes: Buffer | null
}

interface KeyRow {
  id: string
  name: string
  hash: string
  scopes: string
  ceilings: string
  quota: string
  secrets: string
  retention_ms: number | null
  webhook_secret: string
  created_at: string
  revoked_at: string | null
}

const toRun = (r: RunRow): RunRecord => ({
  id: r.id,
  keyId: r.key_id,
  state: r.state,
  createdAt: r.created_at,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  metadata: JSON.parse(r.metadata) as Record<string, string>,
  cmd: JSON.parse(r.cmd) as string[],
  result: r.summary === null ? null : (JSON.parse(r.summary) as EndResult),
})

const toEvent = (r: EventRow): RunEvent => {
  const data = JSON.parse(r.data) as Record<string, unknown>
  // The API's shape: an output event's bytes as base64 in its data, last (as the worker made it).
  if (r.bytes !== null) data.data = r.bytes.toString('base64')
  return { runId: r.run_id, seq: r.seq, type: r.type, at: r.at, data }
}

/** A stored output event's bytes: its own column's, or an older event's base64 in its data. */
function bytesOf(row: { data: string; bytes: Buffer | null }): Buffer {
  if (row.bytes !== null) return row.bytes
  const data = JSON.parse(row.data) as { data?: unknown }
  return Buffer.from(typeof data.data === 'string' ? data.data : '', 'base64')
}

/** What finishing a run stores: its result (without its text when it has any), summary and view size. */
function finishedRow(result: RunResult) {
  const textFromEvents = TEXT_FIELDS.some((f) => result[f] !== '')
  const { stdout, stderr, output, ...rest } = result
  const json = JSON.stringify(textFromEvents ? rest : result)
  let viewBytes = Buffer.byteLength(json)
  if (textFromEvents)
    for (const [field, text] of Object.entries({ stdout, stderr, output }))
      viewBytes += field.length + 4 + jsonTextBytes(text)
  return {
    status: result.status,
    result: json,
    summary: JSON.stringify(endResult(result)),
    textFromEvents: textFromEvents ? 1 : 0,
    viewBytes,
  }
}

const toKey = (r: KeyRow): KeyRecord => ({
  id: r.id,
  name: r.name,
  hash: r.hash,
  scopes: JSON.parse(r.scopes) as Scope[],
  ceilings: JSON.parse(r.ceilings) as Record<string, unknown>,
  quota: JSON.parse(r.quota) as KeyRecord['quota'],
  secrets: JSON.parse(r.secrets) as Record<string, string>,
  retentionMs: r.retention_ms,
  webhookSecret: r.webhook_secret,
  createdAt: r.created_at,
  revokedAt: r.revoked_at,
})

/** The opaque cursor of a page: where the last run of the previous page sorted. */
export function encodeCursor(createdAt: string, id: string): string {
  return Buffer.from(JSON.stringify([createdAt, id])).toString('base64url')
}

function decodeCursor(cursor: string): [string, string] | null {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string') {
      return [v[0], v[1]]
    }
  } catch {
    // not one of ours
  }
  return null
}

/**
 * Every store's database and statements, never released (see SqliteStore.stmt): the database too, since
 * better-sqlite3 keeps the statements of its transactions (BEGIN, COMMIT…) for as long as it lives.
 */
const KEPT: unknown[] = []

export class SqliteStore implements Store {
  readonly db: Database.Database
  private readonly statements = new Map<string, Statement>()

  /** Opens (creating, 0700/0600) `<dataDir>/cordon.db` and brings its schema up to date. */
  constructor(dataDir: string) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 })
    chmodSync(dataDir, 0o700)
    const file = path.join(dataDir, 'cordon.db')
    // Create it 0600 before SQLite does (SQLite would honour the umask).
    closeSync(openSync(file, 'a', 0o600))
    chmodSync(file, 0o600)
    this.db = new Database(file)
    KEPT.push(this.db, this.statements)
    this.db.exec('PRAGMA journal_mode = WAL')
    this.db.exec('PRAGMA busy_timeout = 5000')
    this.db.exec('PRAGMA synchronous = NORMAL')
    this.db.exec('PRAGMA foreign_keys = ON')
    this.migrate()
  }

  /** The schema's version: how many MIGRATIONS have run. */
  version(): number {
    const row = this.stmt('SELECT version FROM schema_version').get() as { version: number } | undefined
    return row?.version ?? 0
  }

  private migrate(): void {
    this.db.exec('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)')
    this.db
      .transaction(() => {
        const { n } = this.stmt('SELECT COUNT(*) AS n FROM schema_version').get() as { n: number }
        if (n === 0) this.stmt('INSERT INTO schema_version (version) VALUES (0)').run()
        const from = this.version()
        if (from > MIGRATIONS.length) {
          throw new Error(
            `cordon.db has schema version ${from}, newer than this cordon (${MIGRATIONS.length})`,
          )
        }
        for (let v = from; v < MIGRATIONS.length; v++) this.db.exec(MIGRATIONS[v] as string)
        this.stmt('UPDATE schema_version SET version = ?').run(MIGRATIONS.length)
      })
      .immediate()
  }

  createRun(run: NewRun): RunRecord {
    const asked = run.cmd ?? (run.request as { cmd?: unknown } | null)?.cmd
    const cmd = Array.isArray(asked) ? asked.map(String) : []
    this.stmt(
      `INSERT INTO runs (id, key_id, state, created_at, metadata, request, cmd)
         VALUES (?, ?, 'queued', ?, ?, ?, ?)`,
    ).run(
      run.id,
      run.keyId,
      run.createdAt,
      JSON.stringify(run.metadata),
      JSON.stringify(run.request),
      JSON.stringify(cmd),
    )
    const { request: _, cmd: _shown, ...rest } = run
    return { ...rest, cmd, state: 'queued', startedAt: null, finishedAt: null, result: null }
  }

  runRequest(id: string): unknown {
    const row = this.stmt('SELECT request FROM runs WHERE id = ?').get(id) as { request: string } | undefined
    return row ? (JSON.parse(row.request) as unknown) : null
  }

  runKeyId(id: string): string | null {
    const row = this.stmt('SELECT key_id FROM runs WHERE id = ?').get(id) as { key_id: string } | undefined
    return row?.key_id ?? null
  }

  runViewBytes(id: string): number {
    const row = this.stmt(
      `SELECT coalesce(view_bytes, octet_length(result), 0) + octet_length(metadata) + octet_length(cmd) + 300
              AS bytes
         FROM runs WHERE id = ?`,
    ).get(id) as { bytes: number } | undefined
    return row?.bytes ?? 0
  }

  getRun(id: string): RunRecord | null {
    const row = this.stmt(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = ?`).get(id) as RunRow | undefined
    return row ? toRun(row) : null
  }

  storedResult(id: string): StoredResult | null {
    const row = this.stmt(
      `SELECT result, text_from_events FROM runs WHERE id = ? AND state = 'finished' AND result IS NOT NULL`,
    ).get(id) as { result: string; text_from_events: number } | undefined
    if (!row) return null
    return {
      result: JSON.parse(row.result) as StoredResult['result'],
      textFromEvents: row.text_from_events === 1,
    }
  }

  /** Newest first; the cursor is the last run's (createdAt, id), so pages neither skip nor repeat. */
  listRuns(filter: RunFilter): { runs: RunRecord[]; nextCursor: string | null } {
    const where: string[] = []
    const args: unknown[] = []
    if (filter.keyId !== undefined) {
      where.push('key_id = ?')
      args.push(filter.keyId)
    }
    if (filter.state !== undefined) {
      where.push('state = ?')
      args.push(filter.state)
    }
    if (filter.status !== undefined) {
      where.push('status = ?')
      args.push(filter.status)
    }
    if (filter.createdAfter !== undefined) {
      where.push('created_at > ?')
      args.push(filter.createdAfter)
    }
    // All the metadata pairs as one parameter: the SQL has one shape however many there are, since every
    // statement prepared is kept for good (see stmt). Every pair asked must be among the run's.
    const metadata = Object.entries(filter.metadata ?? {})
    if (metadata.length > 0) {
      where.push(
        `NOT EXISTS (SELECT 1 FROM json_each(?) AS f WHERE NOT EXISTS (
           SELECT 1 FROM json_each(runs.metadata) AS m WHERE m.key = f.key AND m.value = f.value))`,
      )
      args.push(JSON.stringify(Object.fromEntries(metadata)))
    }
    if (filter.cursor !== undefined) {
      const c = decodeCursor(filter.cursor)
      if (c === null) return { runs: [], nextCursor: null }
      where.push('(created_at < ? OR (created_at = ? AND id < ?))')
      args.push(c[0], c[0], c[1])
    }
    const limit = Math.max(1, Math.floor(filter.limit))
    // First the page's ids and sizes (octet_length reads no content), then only the runs that fit
    // LIST_PAGE_BYTES: a run holds up to megabytes (its request's files, its result's output), and a
    // page of `limit` of them read whole would be gigabytes. At least one run, so paging goes on.
    const sql = `SELECT id, octet_length(cmd) + coalesce(octet_length(summary), 0) + octet_length(metadata) AS bytes
                   FROM runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
                 ORDER BY created_at DESC, id DESC LIMIT ?`
    const sizes = this.stmt(sql).all(...args, limit + 1) as { id: string; bytes: number }[]
    const ids: string[] = []
    let bytes = 0
    for (const row of sizes.slice(0, limit)) {
      if (ids.length > 0 && bytes + row.bytes > LIST_PAGE_BYTES) break
      ids.push(row.id)
      bytes += row.bytes
    }
    const more = sizes.length > ids.length
    const page = (
      this.stmt(
        `SELECT ${RUN_COLUMNS} FROM runs WHERE id IN (SELECT value FROM json_each(?))
           ORDER BY created_at DESC, id DESC`,
      ).all(JSON.stringify(ids)) as RunRow[]
    ).map(toRun)
    const last = page.at(-1)
    return { runs: page, nextCursor: more && last ? encodeCursor(last.createdAt, last.id) : null }
  }

  startRun(id: string, at: string): boolean {
    return (
      this.stmt(`UPDATE runs SET state = 'running', started_at = ? WHERE id = ? AND state = 'queued'`).run(
        at,
        id,
      ).changes === 1
    )
  }

  /**
   * queued or running → finished, with its `end` event, in one transaction; returns that event (null when
   * the run was already finished or is gone, so that a run ends once).
   */
  finishRun(id: string, result: RunResult, at: string): RunEvent | null {
    const row = finishedRow(result)
    return this.db
      .transaction((): RunEvent | null => {
        const changed = this.stmt(
          `UPDATE runs SET state = 'finished', finished_at = ?, status = ?, result = ?, summary = ?,
                           text_from_events = ?, view_bytes = ?
             WHERE id = ? AND state != 'finished'`,
        ).run(at, row.status, row.result, row.summary, row.textFromEvents, row.viewBytes, id).changes
        if (changed !== 1) return null
        this.stmt('DELETE FROM stdin WHERE run_id = ?').run(id)
        this.pendWebhook(id, at)
        return this.insertEvent(id, 'end', { result: endResult(result) }, at)
      })
      .immediate()
  }

  deleteRun(id: string): boolean {
    return this.db
      .transaction((): boolean => {
        const gone = this.stmt(`DELETE FROM runs WHERE id = ? AND state = 'finished'`).run(id).changes
        if (gone !== 1) return false
        this.stmt('DELETE FROM events WHERE run_id = ?').run(id)
        this.stmt('DELETE FROM webhook_attempts WHERE run_id = ?').run(id)
        this.stmt('DELETE FROM webhook_pending WHERE run_id = ?').run(id)
        this.stmt('DELETE FROM stdin WHERE run_id = ?').run(id)
        return true
      })
      .immediate()
  }

  /** Inside a transaction: the run's webhook, when its request has one, is owed from attempt 1, now. */
  private pendWebhook(id: string, at: string): void {
    this.stmt(
      `INSERT OR IGNORE INTO webhook_pending (run_id, attempt, at)
         SELECT id, 1, ? FROM runs WHERE id = ? AND json_extract(request, '$.webhook.url') IS NOT NULL`,
    ).run(at, id)
  }

  recordWebhookAttempt(runId: string, attempt: WebhookAttempt, next?: PendingWebhook | null): void {
    this.db
      .transaction(() => {
        // Only while the run is there: an attempt that ends after its run was deleted is kept by nothing,
        // and nothing would ever remove it.
        this.stmt(
          `INSERT OR REPLACE INTO webhook_attempts (run_id, attempt, at, status, error, duration_ms)
             SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM runs WHERE id = ?)`,
        ).run(runId, attempt.attempt, attempt.at, attempt.status, attempt.error, attempt.durationMs, runId)
        if (next === null) this.dropPendingWebhook(runId)
        else if (next !== undefined)
          this.stmt('UPDATE webhook_pending SET attempt = ?, at = ? WHERE run_id = ?').run(
            next.attempt,
            next.at,
            runId,
          )
      })
      .immediate()
  }

  pendingWebhooks(): ({ runId: string } & PendingWebhook)[] {
    return (
      this.stmt('SELECT run_id, attempt, at FROM webhook_pending ORDER BY at, run_id').all() as {
        run_id: string
        attempt: number
        at: string
      }[]
    ).map((r) => ({ runId: r.run_id, attempt: r.attempt, at: r.at }))
  }

  dropPendingWebhook(runId: string): void {
    this.stmt('DELETE FROM webhook_pending WHERE run_id = ?').run(runId)
  }

  webhookAttempts(runId: string): WebhookAttempt[] {
    const rows = this.stmt(
      'SELECT attempt, at, status, error, duration_ms FROM webhook_attempts WHERE run_id = ? ORDER BY attempt',
    ).all(runId) as {
      attempt: number
      at: string
      status: number | null
      error: string | null
      duration_ms: number
    }[]
    return rows.map((r) => ({
      attempt: r.attempt,
      at: r.at,
      status: r.status,
      error: r.error,
      durationMs: r.duration_ms,
    }))
  }

  appendEvent(runId: string, type: RunEventType, data: Record<string, unknown>): RunEvent {
    const at = new Date().toISOString()
    return this.db.transaction(() => this.insertEvent(runId, type, data, at)).immediate()
  }

  /** Inside a transaction: the run's next seq is its last + 1 (1 for the first). */
  private insertEvent(
    runId: string,
    type: RunEventType,
    data: Record<string, unknown>,
    at: string,
  ): RunEvent {
    const { last } = this.stmt('SELECT COALESCE(MAX(seq), 0) AS last FROM events WHERE run_id = ?').get(
      runId,
    ) as { last: number }
    const seq = last + 1
    const out = outputPlace(type, data)
    let mergedEnd: number | null = null
    if (out) {
      const { end } = this.stmt(
        'SELECT COALESCE(MAX(merged_end), 0) AS end FROM events WHERE run_id = ? AND merged_end IS NOT NULL',
      ).get(runId) as { end: number }
      mergedEnd = end + out.bytes
    }
    // An output event's bytes are kept as bytes, not as the base64 its data carries them in.
    let kept = data
    let bytes: Buffer | null = null
    if (out && typeof data.data === 'string') {
      const { data: base64, ...rest } = data
      kept = rest
      bytes = Buffer.from(base64 as string, 'base64')
    }
    this.stmt(
      `INSERT INTO events (run_id, seq, type, at, data, bytes, out_stream, out_end, merged_end)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(runId, seq, type, at, JSON.stringify(kept), bytes, out?.stream ?? null, out?.end ?? null, mergedEnd)
    return { runId, seq, type, at, data }
  }

  events(runId: string, afterSeq: number, limit: number, maxBytes = Number.POSITIVE_INFINITY): RunEvent[] {
    const out: RunEvent[] = []
    let bytes = 0
    let after = afterSeq
    const wanted = Math.max(0, Math.floor(limit))
    // A few rows at a time: a page stops at `maxBytes` of stored data without reading many rows past it.
    // (Not .iterate(): see stmt().)
    while (out.length < wanted && bytes < maxBytes) {
      const rows = this.stmt(
        'SELECT run_id, seq, type, at, data, bytes FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?',
      ).all(runId, after, Math.min(ROWS_AT_ONCE, wanted - out.length)) as EventRow[]
      for (const row of rows) {
        if (bytes >= maxBytes) break
        out.push(toEvent(row))
        // As the page is held: output bytes as base64.
        bytes += row.data.length + Math.ceil((row.bytes?.length ?? 0) / 3) * 4
        after = row.seq
      }
      if (rows.length < ROWS_AT_ONCE) break
    }
    return out
  }

  outputEnd(runId: string, stream: OutputStream): number {
    const { end } = (
      stream === 'output'
        ? this.stmt(
            'SELECT COALESCE(MAX(merged_end), 0) AS end FROM events WHERE run_id = ? AND merged_end IS NOT NULL',
          ).get(runId)
        : this.stmt(
            `SELECT COALESCE(MAX(out_end), 0) AS end FROM events
               WHERE run_id = ? AND out_stream = ? AND out_end IS NOT NULL`,
          ).get(runId, stream)
    ) as { end: number }
    return end
  }

  outputTailSeq(runId: string, bytes: number): number {
    const { end } = this.stmt(
      'SELECT COALESCE(MAX(merged_end), 0) AS end FROM events WHERE run_id = ? AND merged_end IS NOT NULL',
    ).get(runId) as { end: number }
    if (end <= bytes) return 0
    const first = this.stmt(
      `SELECT seq FROM events WHERE run_id = ? AND merged_end IS NOT NULL AND merged_end > ?
         ORDER BY merged_end LIMIT 1`,
    ).get(runId, end - bytes) as { seq: number } | undefined
    return first ? first.seq - 1 : 0
  }

  outputSlices(runId: string, stream: OutputStream, from: number, to: number): OutputSlice[] {
    if (to <= from) return []
    // Offsets only grow, so the events ending after `from`, by their end, start with the one holding it.
    const slices: OutputSlice[] = []
    for (let after = from; ; ) {
      const rows = this.outputChunks(runId, stream, after, ROWS_AT_ONCE)
      for (const row of rows) {
        const start = row.end - row.bytes.length
        if (start >= to) return slices
        slices.push({ start, bytes: row.bytes })
        if (row.end >= to) return slices
        after = row.end
      }
      if (rows.length < ROWS_AT_ONCE) return slices
    }
  }

  outputChunks(runId: string, stream: OutputStream, after: number, limit: number): OutputChunk[] {
    const rows = (
      stream === 'output'
        ? this.stmt(
            `SELECT out_stream AS stream, merged_end AS end, data, bytes FROM events
               WHERE run_id = ? AND merged_end IS NOT NULL AND merged_end > ? ORDER BY merged_end LIMIT ?`,
          ).all(runId, after, limit)
        : this.stmt(
            `SELECT out_stream AS stream, out_end AS end, data, bytes FROM events
               WHERE run_id = ? AND out_stream = ? AND out_end IS NOT NULL AND out_end > ?
               ORDER BY out_end LIMIT ?`,
          ).all(runId, stream, after, limit)
    ) as { stream: string; end: number; data: string; bytes: Buffer | null }[]
    return rows.map((row) => ({
      stream: row.stream === 'stderr' ? 'stderr' : 'stdout',
      end: row.end,
      bytes: bytesOf(row),
    }))
  }

  appendStdin(runId: string, data: Buffer | null): void {
    this.db
      .transaction(() => {
        const { last } = this.stmt('SELECT COALESCE(MAX(seq), 0) AS last FROM stdin WHERE run_id = ?').get(
          runId,
        ) as { last: number }
        this.stmt('INSERT INTO stdin (run_id, seq, data) VALUES (?, ?, ?)').run(runId, last + 1, data)
      })
      .immediate()
  }

  stdinState(runId: string): { bytes: number; closed: boolean } {
    const row = this.stmt(
      `SELECT COALESCE(SUM(length(data)), 0) AS bytes, COUNT(*) - COUNT(data) AS ends FROM stdin WHERE run_id = ?`,
    ).get(runId) as { bytes: number; ends: number }
    return { bytes: row.bytes, closed: row.ends > 0 }
  }

  takeStdin(runId: string): { chunks: Buffer[]; closed: boolean } {
    return this.db
      .transaction(() => {
        const rows = this.stmt('SELECT data FROM stdin WHERE run_id = ? ORDER BY seq').all(runId) as {
          data: Buffer | null
        }[]
        this.stmt('DELETE FROM stdin WHERE run_id = ?').run(runId)
        const chunks = rows.flatMap((r) => (r.data === null ? [] : [r.data]))
        return { chunks, closed: rows.some((r) => r.data === null) }
      })
      .immediate()
  }

  interruptRunning(at: string): string[] {
    return this.db
      .transaction((): string[] => {
        const ids = (this.stmt(`SELECT id FROM runs WHERE state = 'running'`).all() as { id: string }[]).map(
          (r) => r.id,
        )
        const reason = 'the server stopped while the run was running'
        for (const id of ids) {
          const result = errorResult('interrupted', reason)
          const row = finishedRow(result)
          this.insertEvent(id, 'interrupted', { reason }, at)
          this.stmt(
            `UPDATE runs SET state = 'finished', finished_at = ?, status = ?, result = ?, summary = ?,
                             text_from_events = ?, view_bytes = ?
               WHERE id = ?`,
          ).run(at, row.status, row.result, row.summary, row.textFromEvents, row.viewBytes, id)
          this.insertEvent(id, 'end', { result: endResult(result) }, at)
          this.stmt('DELETE FROM stdin WHERE run_id = ?').run(id)
          // Its webhook is owed too: the client waiting on it learns the run ended.
          this.pendWebhook(id, at)
        }
        return ids
      })
      .immediate()
  }

  queuedRuns(): RunRecord[] {
    const rows = this.stmt(
      `SELECT ${RUN_COLUMNS} FROM runs WHERE state = 'queued' ORDER BY created_at, id`,
    ).all() as RunRow[]
    return rows.map(toRun)
  }

  sweep(now: string, maxRetentionMs: number | null = null): number {
    // The key's retention, within the server's (null: the key's alone, none when it has none).
    const most = maxRetentionMs ?? Number.MAX_SAFE_INTEGER
    return this.db
      .transaction((): number => {
        const ids = (
          this.stmt(
            `SELECT r.id FROM runs r JOIN keys k ON k.id = r.key_id
               WHERE r.state = 'finished'
                 AND (julianday(?) - julianday(r.finished_at)) * 86400000.0 > MIN(COALESCE(k.retention_ms, ?), ?)`,
          ).all(now, most, most) as { id: string }[]
        ).map((r) => r.id)
        const delEvents = this.stmt('DELETE FROM events WHERE run_id = ?')
        const delRun = this.stmt('DELETE FROM runs WHERE id = ?')
        const delAttempts = this.stmt('DELETE FROM webhook_attempts WHERE run_id = ?')
        const delPending = this.stmt('DELETE FROM webhook_pending WHERE run_id = ?')
        const delStdin = this.stmt('DELETE FROM stdin WHERE run_id = ?')
        for (const id of ids) {
          delStdin.run(id)
          delEvents.run(id)
          delAttempts.run(id)
          delPending.run(id)
          delRun.run(id)
        }
        return ids.length
      })
      .immediate()
  }

  createKey(key: KeyRecord): void {
    this.stmt(
      `INSERT INTO keys (id, name, hash, scopes, ceilings, quota, secrets, retention_ms, webhook_secret,
                           created_at, revoked_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      key.id,
      key.name,
      key.hash,
      JSON.stringify(key.scopes),
      JSON.stringify(key.ceilings),
      JSON.stringify(key.quota),
      JSON.stringify(key.secrets),
      key.retentionMs,
      key.webhookSecret,
      key.createdAt,
      key.revokedAt,
    )
  }

  keyByHash(hash: string): KeyRecord | null {
    const row = this.stmt('SELECT * FROM keys WHERE hash = ?').get(hash) as KeyRow | undefined
    return row ? toKey(row) : null
  }

  getKey(id: string): KeyRecord | null {
    const row = this.stmt('SELECT * FROM keys WHERE id = ?').get(id) as KeyRow | undefined
    return row ? toKey(row) : null
  }

  listKeys(): KeyRecord[] {
    return (this.stmt('SELECT * FROM keys ORDER BY created_at, id').all() as KeyRow[]).map(toKey)
  }

  revokeKey(id: string, at: string): boolean {
    return (
      this.stmt('UPDATE keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(at, id).changes ===
      1
    )
  }

  /**
   * The statement for `sql`, prepared once and kept for the process's life. better-sqlite3 (12.x) on Node
   * 24 aborts the process (`RemoveEnvironmentCleanupHook: Assertion failed: (env) != nullptr`) when V8
   * collects a Statement at the wrong moment, at exit or mid-run; a statement that is never garbage is
   * never collected. The set is bounded by the SQL this file writes, so no SQL here may vary with a
   * request's input (a count of filters, say) but through its parameters. Its iterators (`.iterate()`) abort the
   * same way when collected, and cannot be kept: rows are read a few at a time with LIMIT instead.
   */
  private stmt(sql: string): Statement {
    let made = this.statements.get(sql)
    if (!made) {
      made = this.db.prepare(sql)
      this.statements.set(sql, made)
    }
    return made
  }

  close(): void {
    if (this.db.open) this.db.close()
  }
}
