// Webhook deliveries in PostgreSQL: each attempt kept with its run, what is left to do beside it, and a
// claim so that one node sends a delivery while several could: claimDueWebhooks leases the due ones to
// a node (FOR UPDATE SKIP LOCKED: two nodes never take the same one); a node that dies holding one lets
// its lease end, and another takes it. While its holder retries it, the claim follows the retry's time.
import type { PendingWebhook, WebhookAttempt } from '../types.js'
import { type Db, iso, pgCode } from './db.js'

type Pending = { runId: string } & PendingWebhook

const RECORD = `
  WITH tried AS (
    INSERT INTO webhook_attempts (run_id, attempt, at, status, error, duration_ms)
    SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1)
    ON CONFLICT (run_id, attempt) DO UPDATE
      SET at = excluded.at, status = excluded.status, error = excluded.error,
          duration_ms = excluded.duration_ms),
  over AS (DELETE FROM webhook_pending WHERE run_id = $1 AND $9)
  UPDATE webhook_pending
     SET attempt = $7, at = $8,
         claimed_until = CASE WHEN claimed_by IS NOT NULL
                              THEN greatest(claimed_until, $8::timestamptz + claim_ms * interval '1 millisecond') END
   WHERE run_id = $1 AND $7::integer IS NOT NULL`

export async function recordWebhookAttempt(
  db: Db,
  runId: string,
  attempt: WebhookAttempt,
  next: PendingWebhook | null | undefined,
): Promise<void> {
  try {
    await db.rows(RECORD, [
      runId,
      attempt.attempt,
      attempt.at,
      attempt.status,
      attempt.error === null ? null : attempt.error.replaceAll('\0', '\uFFFD'),
      Math.round(attempt.durationMs),
      next?.attempt ?? null,
      next?.at ?? null,
      next === null,
    ])
  } catch (error) {
    // The run was deleted between the check and the insert: an attempt of a run that is gone is kept by
    // nothing, as when it was deleted before.
    if (pgCode(error) !== '23503') throw error
  }
}

export async function webhookAttempts(db: Db, runId: string): Promise<WebhookAttempt[]> {
  const rows = await db.rows<{
    attempt: number
    at: Date
    status: number | null
    error: string | null
    duration_ms: number
  }>(
    'SELECT attempt, at, status, error, duration_ms FROM webhook_attempts WHERE run_id = $1 ORDER BY attempt',
    [runId],
  )
  return rows.map((r) => ({
    attempt: r.attempt,
    at: iso(r.at),
    status: r.status,
    error: r.error,
    durationMs: r.duration_ms,
  }))
}

const toPending = (r: { run_id: string; attempt: number; at: Date }): Pending => ({
  runId: r.run_id,
  attempt: r.attempt,
  at: iso(r.at),
})

const CLAIM = `
  WITH due AS (
    SELECT run_id FROM webhook_pending
     WHERE at <= now() AND (claimed_until IS NULL OR claimed_until <= now())
     ORDER BY at, run_id LIMIT $2
     FOR UPDATE SKIP LOCKED)
  UPDATE webhook_pending p
     SET claimed_by = $1, claimed_until = now() + $3 * interval '1 millisecond', claim_ms = $3
    FROM due WHERE p.run_id = due.run_id
  RETURNING p.run_id, p.attempt, p.at`

export async function claimDueWebhooks(
  db: Db,
  nodeId: string,
  limit: number,
  leaseMs: number,
): Promise<Pending[]> {
  const rows = await db.rows<{ run_id: string; attempt: number; at: Date }>(CLAIM, [
    nodeId,
    Math.max(0, Math.floor(limit)),
    Math.max(0, Math.round(leaseMs)),
  ])
  // Soonest first, as pendingWebhooks (UPDATE … RETURNING keeps no order).
  const order = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)
  return rows.map(toPending).sort((a, b) => order(a.at, b.at) || order(a.runId, b.runId))
}

export async function pendingWebhooks(db: Db): Promise<Pending[]> {
  const rows = await db.rows<{ run_id: string; attempt: number; at: Date }>(
    'SELECT run_id, attempt, at FROM webhook_pending ORDER BY at, run_id',
  )
  return rows.map(toPending)
}

export async function dropPendingWebhook(db: Db, runId: string): Promise<void> {
  await db.rows('DELETE FROM webhook_pending WHERE run_id = $1', [runId])
}
