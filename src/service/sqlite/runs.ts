// Runs in SQLite: admitted (the key's quota and the queue's bound checked in the transaction that stores
// the run), read without what may be large (its request, up to 8 MiB of files; its result's text), listed
// newest first by a keyset cursor within a byte budget.
import type { NewEvent } from '../store.js'
import {
  type KeyRecord,
  type NewRun,
  type RunFilter,
  type RunRecord,
  ServiceError,
  type StoredResult,
} from '../types.js'
import type { SqliteDatabase } from './database.js'
import { insertEvent } from './events.js'
import { decodeCursor, encodeCursor, LIST_PAGE_BYTES, RUN_COLUMNS, type RunRow, toRun } from './rows.js'

const MINUTE = 60_000

/** Inside a transaction: stores the run `queued` (no admission: a run made by the store's own hand). */
export function insertRun(d: SqliteDatabase, run: NewRun): RunRecord {
  const request = run.request as { cmd?: unknown; stdin?: unknown } | null
  // The command as shown (redacted, cut: shown.ts) when the service gives it, else the request's.
  const asked = run.cmd ?? request?.cmd
  const cmd = Array.isArray(asked) ? asked.map(String) : []
  d.stmt(
    `INSERT INTO runs (id, key_id, state, created_at, metadata, request, cmd, stdin)
       VALUES (?, ?, 'queued', ?, ?, ?, ?, ?)`,
  ).run(
    run.id,
    run.keyId,
    run.createdAt,
    JSON.stringify(run.metadata),
    JSON.stringify(run.request),
    JSON.stringify(cmd),
    request?.stdin === 'open' ? 'open' : null,
  )
  const { request: _, cmd: _shown, ...rest } = run
  return { ...rest, cmd, state: 'queued', startedAt: null, finishedAt: null, result: null }
}

/**
 * Admits the run against its key's quota (runs queued or running at once; runs admitted in the last
 * minute, a sliding window kept apart from the runs, so that deleting one refunds nothing) and the queue's
 * bound, then stores it with its `queued` event: one transaction, so two submits never both take the last
 * place, and a run is either stored whole or refused.
 */
export function admitRun(
  d: SqliteDatabase,
  key: KeyRecord,
  run: NewRun,
  bounds: { maxQueued: number },
  queued: NewEvent = { type: 'queued', data: {} },
): RunRecord {
  return d.tx(() => {
    const now = d.now()
    const { concurrentRuns, runsPerMinute } = key.quota
    if (concurrentRuns !== null) {
      const { n } = d
        .stmt(`SELECT COUNT(*) AS n FROM runs WHERE key_id = ? AND state <> 'finished'`)
        .get(key.id) as { n: number }
      if (n >= concurrentRuns)
        throw new ServiceError(
          'quota',
          `this key may have at most ${concurrentRuns} runs queued or running at once`,
          undefined,
          1,
        )
    }
    if (runsPerMinute !== null) {
      d.stmt('DELETE FROM key_admissions WHERE key_id = ? AND at <= ?').run(key.id, now - MINUTE)
      const { n, oldest } = d
        .stmt('SELECT COUNT(*) AS n, MIN(at) AS oldest FROM key_admissions WHERE key_id = ?')
        .get(key.id) as { n: number; oldest: number | null }
      if (n >= runsPerMinute) {
        const retry = Math.max(1, Math.ceil(((oldest ?? now) + MINUTE - now) / 1000))
        throw new ServiceError(
          'quota',
          `this key may start at most ${runsPerMinute} runs a minute`,
          undefined,
          retry,
        )
      }
    }
    const { waiting } = d.stmt(`SELECT COUNT(*) AS waiting FROM runs WHERE state = 'queued'`).get() as {
      waiting: number
    }
    if (waiting >= bounds.maxQueued)
      throw new ServiceError('queue-full', `the queue is full (${waiting} waiting)`, undefined, 5)
    const made = insertRun(d, { ...run, keyId: key.id })
    if (runsPerMinute !== null)
      d.stmt('INSERT INTO key_admissions (key_id, at) VALUES (?, ?)').run(key.id, now)
    insertEvent(d, made.id, queued.type, queued.data, made.createdAt)
    return made
  })
}

export function getRun(d: SqliteDatabase, id: string): RunRecord | null {
  const row = d.stmt(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = ?`).get(id) as RunRow | undefined
  return row ? toRun(row) : null
}

export function runRequest(d: SqliteDatabase, id: string): unknown {
  const row = d.stmt('SELECT request FROM runs WHERE id = ?').get(id) as { request: string } | undefined
  return row ? (JSON.parse(row.request) as unknown) : null
}

export function runKeyId(d: SqliteDatabase, id: string): string | null {
  const row = d.stmt('SELECT key_id FROM runs WHERE id = ?').get(id) as { key_id: string } | undefined
  return row?.key_id ?? null
}

export function runViewBytes(d: SqliteDatabase, id: string): number {
  const row = d
    .stmt(
      `SELECT coalesce(view_bytes, octet_length(result), 0) + octet_length(metadata) + octet_length(cmd) + 300
              AS bytes
         FROM runs WHERE id = ?`,
    )
    .get(id) as { bytes: number } | undefined
  return row?.bytes ?? 0
}

export function storedResult(d: SqliteDatabase, id: string): StoredResult | null {
  const row = d
    .stmt(
      `SELECT result, text_from_events FROM runs WHERE id = ? AND state = 'finished' AND result IS NOT NULL`,
    )
    .get(id) as { result: string; text_from_events: number } | undefined
  if (!row) return null
  return {
    result: JSON.parse(row.result) as StoredResult['result'],
    textFromEvents: row.text_from_events === 1,
  }
}

/** Newest first; the cursor is the last run's (createdAt, id), so pages neither skip nor repeat. */
export function listRuns(
  d: SqliteDatabase,
  filter: RunFilter,
): { runs: RunRecord[]; nextCursor: string | null } {
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
  const sizes = d.stmt(sql).all(...args, limit + 1) as { id: string; bytes: number }[]
  const ids: string[] = []
  let bytes = 0
  for (const row of sizes.slice(0, limit)) {
    if (ids.length > 0 && bytes + row.bytes > LIST_PAGE_BYTES) break
    ids.push(row.id)
    bytes += row.bytes
  }
  const more = sizes.length > ids.length
  const page = (
    d
      .stmt(
        `SELECT ${RUN_COLUMNS} FROM runs WHERE id IN (SELECT value FROM json_each(?))
         ORDER BY created_at DESC, id DESC`,
      )
      .all(JSON.stringify(ids)) as RunRow[]
  ).map(toRun)
  const last = page.at(-1)
  return { runs: page, nextCursor: more && last ? encodeCursor(last.createdAt, last.id) : null }
}
