// A run's life in SQLite: claimed by one worker (queued -> running, one compare-and-set), finished once
// (its `end` event and its webhook owed in the same transaction), canceled, ended by a start-up after a
// crash or by the reaper after its worker was lost, and swept once past its retention.
import { errorResult, type RunResult } from '../../index.js'
import type { Fence } from '../store.js'
import { endResult, type RunEvent, type RunState } from '../types.js'
import type { SqliteDatabase } from './database.js'
import { holdsFence, insertEvent } from './events.js'
import { finishedRow } from './rows.js'

/** queued -> running for `workerId`, attempt + 1 (the fence), leased `leaseMs`; null when not queued. */
export function claimRun(d: SqliteDatabase, id: string, workerId: string, leaseMs: number): Fence | null {
  const row = d
    .stmt(
      `UPDATE runs SET state = 'running', started_at = ?, worker_id = ?, attempt = attempt + 1, lease_until = ?
         WHERE id = ? AND state = 'queued' AND cancel_requested_at IS NULL
         RETURNING attempt`,
    )
    .get(d.iso(), workerId, d.now() + leaseMs, id) as { attempt: number } | undefined
  return row ? { workerId, attempt: row.attempt } : null
}

/** Inside a transaction: the run's webhook, when its request has one, is owed from attempt 1, now. */
function pendWebhook(d: SqliteDatabase, id: string, at: string): void {
  d.stmt(
    `INSERT OR IGNORE INTO webhook_pending (run_id, attempt, at)
       SELECT id, 1, ? FROM runs WHERE id = ? AND json_extract(request, '$.webhook.url') IS NOT NULL`,
  ).run(at, id)
}

/**
 * Inside a transaction: the run (found not finished) ends with `result` at `at`: its row, what it held of
 * stdin gone, its webhook owed, and its `end` event, which is returned.
 */
function endRun(d: SqliteDatabase, id: string, result: RunResult, at: string): RunEvent {
  const row = finishedRow(result)
  d.stmt(
    `UPDATE runs SET state = 'finished', finished_at = ?, status = ?, result = ?, summary = ?,
                     text_from_events = ?, view_bytes = ?, lease_until = NULL
       WHERE id = ?`,
  ).run(at, row.status, row.result, row.summary, row.textFromEvents, row.viewBytes, id)
  d.stmt('DELETE FROM stdin WHERE run_id = ?').run(id)
  pendWebhook(d, id, at)
  return insertEvent(d, id, 'end', { result: endResult(result) }, at)
}

/**
 * queued or running -> finished, with its `end` event, in one transaction; that event, or null when the
 * run was finished already or is gone (a run ends once), or, with a fence, is no longer running under it.
 */
export function finishRun(
  d: SqliteDatabase,
  id: string,
  result: RunResult,
  fence?: Fence,
  at?: string,
): RunEvent | null {
  return d.tx(() => {
    if (fence) {
      if (!holdsFence(d, id, fence)) return null
    } else if (!d.stmt(`SELECT 1 FROM runs WHERE id = ? AND state <> 'finished'`).get(id)) return null
    return endRun(d, id, result, at ?? d.iso())
  })
}

/** Only a finished run, with everything of its own; false when it is not. */
export function deleteRun(d: SqliteDatabase, id: string): boolean {
  return d.tx(() => {
    const gone = d.stmt(`DELETE FROM runs WHERE id = ? AND state = 'finished'`).run(id).changes
    if (gone !== 1) return false
    forget(d, id)
    return true
  })
}

/** Inside a transaction: what a run removed leaves (its events, stdin and webhook state). */
function forget(d: SqliteDatabase, id: string): void {
  d.stmt('DELETE FROM events WHERE run_id = ?').run(id)
  d.stmt('DELETE FROM webhook_attempts WHERE run_id = ?').run(id)
  d.stmt('DELETE FROM webhook_pending WHERE run_id = ?').run(id)
  d.stmt('DELETE FROM stdin WHERE run_id = ?').run(id)
}

export function requestCancel(
  d: SqliteDatabase,
  id: string,
): { state: RunState; workerId: string | null } | null {
  return d.tx(() => {
    d.stmt(
      `UPDATE runs SET cancel_requested_at = ? WHERE id = ? AND state <> 'finished' AND cancel_requested_at IS NULL`,
    ).run(d.iso(), id)
    const row = d.stmt('SELECT state, worker_id FROM runs WHERE id = ?').get(id) as
      | { state: RunState; worker_id: string | null }
      | undefined
    return row ? { state: row.state, workerId: row.state === 'running' ? row.worker_id : null } : null
  })
}

/** Ends each run `ids` names that is still running: `interrupted` (with `data`), then `end`. */
function interrupt(
  d: SqliteDatabase,
  ids: string[],
  limit: string,
  message: string,
  data: object,
  at = d.iso(),
): string[] {
  const ended: string[] = []
  for (const id of ids) {
    if (!d.stmt(`SELECT 1 FROM runs WHERE id = ? AND state = 'running'`).get(id)) continue
    insertEvent(d, id, 'interrupted', { ...data }, at)
    endRun(d, id, errorResult(limit, message), at)
    ended.push(id)
  }
  return ended
}

const idsOf = (rows: unknown[]) => (rows as { id: string }[]).map((r) => r.id)

/** One machine, at start-up: what a dead server left running ends error/interrupted. */
export function interruptRunning(d: SqliteDatabase, at = d.iso()): string[] {
  return d.tx(() => {
    const ids = idsOf(d.stmt(`SELECT id FROM runs WHERE state = 'running'`).all())
    const reason = 'the server stopped while the run was running'
    return interrupt(d, ids, 'interrupted', reason, { reason }, at)
  })
}

/** Running runs whose lease ran out: error/worker-lost, each with `interrupted` and `end`. */
export function reapLostRuns(d: SqliteDatabase): string[] {
  return d.tx(() => {
    const rows = d
      .stmt(`SELECT id, worker_id FROM runs WHERE state = 'running' AND lease_until < ?`)
      .all(d.now()) as { id: string; worker_id: string | null }[]
    const ended: string[] = []
    for (const row of rows) {
      const message = 'the worker running this run stopped (its lease ran out)'
      const data = { reason: 'worker-lost', worker: row.worker_id }
      ended.push(...interrupt(d, [row.id], 'worker-lost', message, data))
    }
    return ended
  })
}

export function queuedRuns(
  d: SqliteDatabase,
  olderThanMs: number,
  limit: number,
): { id: string; keyId: string }[] {
  return (
    d
      .stmt(
        `SELECT id, key_id FROM runs WHERE state = 'queued' AND created_at <= ? ORDER BY created_at, id LIMIT ?`,
      )
      .all(d.iso(-olderThanMs), Math.max(0, Math.min(limit, Number.MAX_SAFE_INTEGER))) as {
      id: string
      key_id: string
    }[]
  ).map((r) => ({ id: r.id, keyId: r.key_id }))
}

/**
 * Finished runs past their key's retention, or past `maxRetentionMs` whatever the key's (null: the key's
 * alone, none when it has none), removed with everything of theirs; and the admissions older than a
 * minute, which no quota counts any more.
 */
export function sweep(d: SqliteDatabase, maxRetentionMs: number | null, now = d.iso()): number {
  const most = maxRetentionMs ?? Number.MAX_SAFE_INTEGER
  return d.tx(() => {
    const ids = idsOf(
      d
        .stmt(
          `SELECT r.id FROM runs r JOIN keys k ON k.id = r.key_id
             WHERE r.state = 'finished'
               AND (julianday(?) - julianday(r.finished_at)) * 86400000.0 > MIN(COALESCE(k.retention_ms, ?), ?)`,
        )
        .all(now, most, most),
    )
    for (const id of ids) {
      forget(d, id)
      d.stmt('DELETE FROM runs WHERE id = ?').run(id)
    }
    d.stmt('DELETE FROM key_admissions WHERE at <= ?').run(d.now() - 60_000)
    return ids.length
  })
}
