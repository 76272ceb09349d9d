// Runs in PostgreSQL: admission (one transaction per submit, serialized per key), reads and listing, the
// claim (queued -> running: the one compare-and-set that decides who runs a run) and the finish.
import type { RunResult } from '../../index.js'
import type { AdmissionBounds, Fence } from '../store.js'
import {
  type KeyRecord,
  type NewRun,
  type RunFilter,
  type RunRecord,
  type RunState,
  ServiceError,
  type StoredResult,
} from '../types.js'
import { type Db, iso, q } from './db.js'
import {
  decodeCursor,
  encodeCursor,
  finishedRow,
  metadataIndex,
  RUN_COLUMNS,
  type RunRow,
  toRun,
} from './rows.js'

/** Bytes of runs (command, summary, metadata as stored) a listing page holds at most, past its first run. */
export const LIST_PAGE_BYTES = 8 * 1024 * 1024

// The key's state at admission, under its lock: runs queued or running (the partial index
// runs_unfinished), admissions of the last minute (key_admissions: kept apart from the runs, so deleting
// a run refunds nothing) and when the oldest of them leaves the minute, and runs queued in all (counted
// up to the bound only).
const ADMISSION_STATE = `
  SELECT (SELECT count(*) FROM runs WHERE key_id = $1 AND state <> 'finished') AS active,
         count(*) AS admitted,
         extract(epoch FROM min(at) + interval '1 minute' - now())::float8 AS retry_s,
         (SELECT count(*) FROM (SELECT 1 FROM runs WHERE state = 'queued' LIMIT $2) AS q) AS queued
    FROM key_admissions
   WHERE key_id = $1 AND at > now() - interval '1 minute'`

// The run, its `queued` event (seq 1) and its admission counted (for a key with runsPerMinute, whose
// admissions older than the minute are forgotten), in one statement.
const INSERT_RUN = `
  WITH r AS (
    INSERT INTO runs (id, key_id, state, created_at, metadata, metadata_index, request, cmd, has_webhook,
                      stdin_open, last_seq)
    VALUES ($1, $2, 'queued', $3, $4, $5, $6, $7, $8, $9, 1)
    RETURNING id),
  counted AS (INSERT INTO key_admissions (key_id, at) SELECT $2, now() WHERE $10),
  pruned AS (DELETE FROM key_admissions WHERE key_id = $2 AND at <= now() - interval '1 minute')
  INSERT INTO events (run_id, seq, type, at, data) SELECT id, 1, 'queued', now(), '{}' FROM r`

export async function admitRun(
  db: Db,
  key: KeyRecord,
  run: NewRun,
  bounds: AdmissionBounds,
): Promise<RunRecord> {
  if (run.keyId !== key.id) throw new Error(`run ${run.id} is not of key ${key.id}`)
  const request = run.request as { cmd?: unknown; webhook?: { url?: unknown }; stdin?: unknown } | null
  const cmd = Array.isArray(request?.cmd) ? request.cmd.map(String) : []
  // Serialized first: a request that cannot be written fails alone, before any lock is taken.
  const params = [
    run.id,
    key.id,
    run.createdAt,
    JSON.stringify(run.metadata),
    metadataIndex(run.metadata),
    JSON.stringify(run.request),
    JSON.stringify(cmd),
    request?.webhook?.url != null,
    request?.stdin === 'open',
    key.quota.runsPerMinute !== null,
  ]
  const { concurrentRuns, runsPerMinute } = key.quota
  await db.tx(async (c) => {
    // Every admission of a key takes its turn: the checks and the insert cannot interleave with another's.
    // Two-int advisory keys (1: admissions, 2: stdin) never meet the migration's one-bigint lock.
    await q(c, `SELECT pg_advisory_xact_lock(1, hashtext($1))`, [key.id])
    const [state] = await q<{ active: number; admitted: number; retry_s: number | null; queued: number }>(
      c,
      ADMISSION_STATE,
      [key.id, Math.max(0, Math.floor(bounds.maxQueued))],
    )
    if (!state) throw new Error('the admission query returned no row')
    if (concurrentRuns !== null && state.active >= concurrentRuns)
      throw new ServiceError(
        'quota',
        `this key may have at most ${concurrentRuns} runs queued or running at once`,
        undefined,
        1,
      )
    if (runsPerMinute !== null && state.admitted >= runsPerMinute)
      throw new ServiceError(
        'quota',
        `this key may start at most ${runsPerMinute} runs a minute`,
        undefined,
        Math.max(1, Math.ceil(state.retry_s ?? 1)),
      )
    if (state.queued >= bounds.maxQueued)
      throw new ServiceError('queue-full', `the queue is full (${bounds.maxQueued} waiting)`, undefined, 5)
    await q(c, INSERT_RUN, params)
  })
  return {
    id: run.id,
    keyId: run.keyId,
    state: 'queued',
    createdAt: iso(new Date(run.createdAt)),
    startedAt: null,
    finishedAt: null,
    metadata: run.metadata,
    cmd,
    result: null,
  }
}

export async function getRun(db: Db, id: string): Promise<RunRecord | null> {
  const row = await db.row<RunRow>(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = $1`, [id])
  return row ? toRun(row) : null
}

export async function runRequest(db: Db, id: string): Promise<unknown> {
  const row = await db.row<{ request: unknown }>('SELECT request FROM runs WHERE id = $1', [id])
  return row ? row.request : null
}

export async function runKeyId(db: Db, id: string): Promise<string | null> {
  const row = await db.row<{ key_id: string }>('SELECT key_id FROM runs WHERE id = $1', [id])
  return row?.key_id ?? null
}

export async function runViewBytes(db: Db, id: string): Promise<number> {
  const row = await db.row<{ bytes: number }>(
    `SELECT coalesce(view_bytes, 0) + octet_length(metadata::text) + 200 AS bytes FROM runs WHERE id = $1`,
    [id],
  )
  return row?.bytes ?? 0
}

export async function storedResult(db: Db, id: string): Promise<StoredResult | null> {
  const row = await db.row<{ result: StoredResult['result']; text_from_events: boolean }>(
    `SELECT result, text_from_events FROM runs WHERE id = $1 AND state = 'finished' AND result IS NOT NULL`,
    [id],
  )
  return row ? { result: row.result, textFromEvents: row.text_from_events } : null
}

// One shape for every filter (a filter not asked is a NULL parameter): unnamed statements are planned
// with their parameters' values, so an unused condition folds away and the right index is used.
const LIST_SIZES = `
  SELECT id, octet_length(cmd::text) + coalesce(octet_length(summary::text), 0)
             + octet_length(metadata::text) AS bytes
    FROM runs
   WHERE ($1::text IS NULL OR key_id = $1)
     AND ($2::text IS NULL OR state = $2)
     AND ($3::text IS NULL OR status = $3)
     AND ($4::timestamptz IS NULL OR created_at > $4)
     AND ($5::jsonb IS NULL OR metadata_index @> $5)
     AND ($6::timestamptz IS NULL OR (created_at, id) < ($6, $7::text))
   ORDER BY created_at DESC, id DESC
   LIMIT $8`

/** Newest first; the cursor is the last run's (createdAt, id), so pages neither skip nor repeat. */
export async function listRuns(
  db: Db,
  filter: RunFilter,
): Promise<{ runs: RunRecord[]; nextCursor: string | null }> {
  const cursor = filter.cursor === undefined ? null : decodeCursor(filter.cursor)
  if (filter.cursor !== undefined && cursor === null) return { runs: [], nextCursor: null }
  const metadata = Object.keys(filter.metadata ?? {}).length > 0 ? metadataIndex(filter.metadata ?? {}) : null
  const limit = Math.max(1, Math.floor(filter.limit))
  // First the page's ids and sizes, then only the runs that fit LIST_PAGE_BYTES (at least one, so paging
  // goes on): a page of `limit` runs read whole could be gigabytes.
  const sizes = await db.rows<{ id: string; bytes: number }>(LIST_SIZES, [
    filter.keyId ?? null,
    filter.state ?? null,
    filter.status ?? null,
    filter.createdAfter ?? null,
    metadata,
    cursor?.[0] ?? null,
    cursor?.[1] ?? null,
    limit + 1,
  ])
  const ids: string[] = []
  let bytes = 0
  for (const row of sizes.slice(0, limit)) {
    if (ids.length > 0 && bytes + row.bytes > LIST_PAGE_BYTES) break
    ids.push(row.id)
    bytes += row.bytes
  }
  const more = sizes.length > ids.length
  const page =
    ids.length === 0
      ? []
      : (
          await db.rows<RunRow>(
            `SELECT ${RUN_COLUMNS} FROM runs WHERE id = ANY($1::text[]) ORDER BY created_at DESC, id DESC`,
            [ids],
          )
        ).map(toRun)
  const last = page.at(-1)
  return { runs: page, nextCursor: more && last ? encodeCursor(last.createdAt, last.id) : null }
}

export async function claimRun(db: Db, id: string, workerId: string, leaseMs: number): Promise<Fence | null> {
  const row = await db.row<{ attempt: number }>(
    `UPDATE runs SET state = 'running', worker_id = $2, attempt = attempt + 1, started_at = now(),
                     lease_until = now() + $3 * interval '1 millisecond'
      WHERE id = $1 AND state = 'queued' AND cancel_requested_at IS NULL
      RETURNING attempt`,
    [id, workerId, Math.max(0, leaseMs)],
  )
  return row ? { workerId, attempt: row.attempt } : null
}

// The finish, its `end` event, its webhook owed and its stdin dropped: one statement, so one transaction.
// Fenced: only while the run is running under that fence. A running run finished without a fence (its
// key revoked, say) is no longer its worker's: lost_at tells that worker's next heartbeat.
const FINISH = `
  WITH r AS (
    UPDATE runs SET state = 'finished', finished_at = now(), status = $2, result = $3, summary = $4,
                    text_from_events = $5, view_bytes = $6, last_seq = last_seq + 1, lease_until = NULL,
                    lost_at = CASE WHEN state = 'running' AND $7::text IS NULL THEN now() ELSE lost_at END
     WHERE id = $1 AND state <> 'finished'
       AND ($7::text IS NULL OR (state = 'running' AND worker_id = $7 AND attempt = $8::integer))
     RETURNING id, last_seq, has_webhook),
  dropped AS (DELETE FROM stdin WHERE run_id IN (SELECT id FROM r)),
  owed AS (
    INSERT INTO webhook_pending (run_id, attempt, at) SELECT id, 1, now() FROM r WHERE has_webhook
    ON CONFLICT (run_id) DO NOTHING)
  INSERT INTO events (run_id, seq, type, at, data) SELECT id, last_seq, 'end', now(), $9 FROM r
  RETURNING seq, at`

export async function finishRun(db: Db, id: string, result: RunResult, fence?: Fence) {
  const row = finishedRow(result)
  const [end] = await db.rows<{ seq: number; at: Date }>(FINISH, [
    id,
    row.status,
    row.result,
    row.summary,
    row.textFromEvents,
    row.viewBytes,
    fence?.workerId ?? null,
    fence?.attempt ?? null,
    row.end,
  ])
  if (!end) return null
  return {
    runId: id,
    seq: end.seq,
    type: 'end' as const,
    at: iso(end.at),
    data: JSON.parse(row.end) as Record<string, unknown>,
  }
}

/** Only a finished run; its events, stdin, files and webhook state go with it (ON DELETE CASCADE). */
export async function deleteRun(db: Db, id: string): Promise<boolean> {
  const gone = await db.rows(`DELETE FROM runs WHERE id = $1 AND state = 'finished' RETURNING id`, [id])
  return gone.length === 1
}

export async function requestCancel(
  db: Db,
  id: string,
): Promise<{ state: RunState; workerId: string | null } | null> {
  const row = await db.row<{ state: RunState; worker_id: string | null }>(
    `UPDATE runs SET cancel_requested_at = coalesce(cancel_requested_at, now())
      WHERE id = $1
      RETURNING state, CASE WHEN state = 'running' THEN worker_id END AS worker_id`,
    [id],
  )
  return row ? { state: row.state, workerId: row.worker_id } : null
}

export async function queuedRuns(
  db: Db,
  olderThanMs: number,
  limit: number,
): Promise<{ id: string; keyId: string }[]> {
  const rows = await db.rows<{ id: string; key_id: string }>(
    `SELECT id, key_id FROM runs
      WHERE state = 'queued' AND queued_at <= now() - $1 * interval '1 millisecond'
      ORDER BY queued_at, id LIMIT $2`,
    [Math.max(0, olderThanMs), Math.max(0, Math.floor(limit))],
  )
  return rows.map((r) => ({ id: r.id, keyId: r.key_id }))
}

// Finished runs past their key's retention, within the server's (least() ignores a NULL: none is no
// bound), a batch at a time; SKIP LOCKED lets nodes sweep at once without taking the same run twice.
const SWEEP = `
  WITH gone AS (
    SELECT r.id FROM runs r LEFT JOIN keys k ON k.id = r.key_id
     WHERE r.state = 'finished'
       AND r.finished_at < now() - least(k.retention_ms, $1::bigint) * interval '1 millisecond'
     ORDER BY r.finished_at LIMIT 32
     FOR UPDATE OF r SKIP LOCKED)
  DELETE FROM runs WHERE id IN (SELECT id FROM gone) RETURNING id`

export async function sweep(db: Db, maxRetentionMs: number | null): Promise<number> {
  let n = 0
  for (;;) {
    const gone = await db.rows(SWEEP, [maxRetentionMs])
    n += gone.length
    if (gone.length < 32) return n
  }
}
