// Webhook deliveries in SQLite: each attempt kept with its run, and what is left to do (the next attempt,
// and when) in the same transaction, so that a restarted server resumes a delivery where it was; a due
// delivery is claimed by one node at a time, for a lease.
import type { PendingWebhook, WebhookAttempt } from '../types.js'
import type { SqliteDatabase } from './database.js'

type Pending = { runId: string } & PendingWebhook

const toPending = (rows: unknown[]): Pending[] =>
  (rows as { run_id: string; attempt: number; at: string }[]).map((r) => ({
    runId: r.run_id,
    attempt: r.attempt,
    at: r.at,
  }))

export function recordWebhookAttempt(
  d: SqliteDatabase,
  runId: string,
  attempt: WebhookAttempt,
  next: PendingWebhook | null | undefined,
): void {
  d.tx(() => {
    // Only while the run is there: an attempt that ends after its run was deleted is kept by nothing, and
    // nothing would ever remove it.
    d.stmt(
      `INSERT OR REPLACE INTO webhook_attempts (run_id, attempt, at, status, error, duration_ms)
         SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM runs WHERE id = ?)`,
    ).run(runId, attempt.attempt, attempt.at, attempt.status, attempt.error, attempt.durationMs, runId)
    if (next === null) dropPendingWebhook(d, runId)
    else if (next !== undefined)
      d.stmt(
        'UPDATE webhook_pending SET attempt = ?, at = ?, claimed_by = NULL, claimed_until = NULL WHERE run_id = ?',
      ).run(next.attempt, next.at, runId)
  })
}

export function webhookAttempts(d: SqliteDatabase, runId: string): WebhookAttempt[] {
  const rows = d
    .stmt(
      'SELECT attempt, at, status, error, duration_ms FROM webhook_attempts WHERE run_id = ? ORDER BY attempt',
    )
    .all(runId) as {
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

export function claimDueWebhooks(
  d: SqliteDatabase,
  nodeId: string,
  limit: number,
  leaseMs: number,
): Pending[] {
  return d.tx(() => {
    const now = d.now()
    const due = toPending(
      d
        .stmt(
          `SELECT run_id, attempt, at FROM webhook_pending
             WHERE at <= ? AND (claimed_until IS NULL OR claimed_until <= ?)
             ORDER BY at, run_id LIMIT ?`,
        )
        .all(d.iso(), now, Math.max(0, Math.floor(limit))),
    )
    const claim = d.stmt('UPDATE webhook_pending SET claimed_by = ?, claimed_until = ? WHERE run_id = ?')
    for (const p of due) claim.run(nodeId, now + leaseMs, p.runId)
    return due
  })
}

export function pendingWebhooks(d: SqliteDatabase): Pending[] {
  return toPending(d.stmt('SELECT run_id, attempt, at FROM webhook_pending ORDER BY at, run_id').all())
}

export function dropPendingWebhook(d: SqliteDatabase, runId: string): void {
  d.stmt('DELETE FROM webhook_pending WHERE run_id = ?').run(runId)
}
