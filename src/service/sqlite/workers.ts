// The machines that run sandboxes, in SQLite: with one machine, the service's own worker; the heartbeat
// renews the leases of its running runs and answers which of them it must stop.
import type { StopOrder, WorkerInfo, WorkerRecord } from '../store.js'
import type { SqliteDatabase } from './database.js'

export function registerWorker(d: SqliteDatabase, info: WorkerInfo): void {
  const at = d.iso()
  d.stmt(
    `INSERT OR REPLACE INTO workers (id, host, pid, version, concurrency, started_at, heartbeat_at, draining)
       VALUES (?, ?, ?, ?, ?, ?, ?, 0)`,
  ).run(info.id, info.host, info.pid, info.version, info.concurrency, at, at)
}

export function heartbeat(d: SqliteDatabase, workerId: string, leaseMs: number): StopOrder[] {
  return d.tx(() => {
    d.stmt('UPDATE workers SET heartbeat_at = ? WHERE id = ?').run(d.iso(), workerId)
    d.stmt(`UPDATE runs SET lease_until = ? WHERE worker_id = ? AND state = 'running'`).run(
      d.now() + leaseMs,
      workerId,
    )
    const rows = d
      .stmt(
        `SELECT r.id, r.cancel_requested_at IS NOT NULL AS canceled, k.revoked_at IS NOT NULL AS revoked
           FROM runs r LEFT JOIN keys k ON k.id = r.key_id
           WHERE r.worker_id = ? AND r.state = 'running'
             AND (r.cancel_requested_at IS NOT NULL OR k.revoked_at IS NOT NULL OR k.id IS NULL)
           ORDER BY r.created_at, r.id`,
      )
      .all(workerId) as { id: string; canceled: number; revoked: number }[]
    return rows.map((r) => ({ runId: r.id, reason: r.canceled ? 'canceled' : 'revoked' }))
  })
}

export function deregisterWorker(d: SqliteDatabase, workerId: string): void {
  d.stmt('DELETE FROM workers WHERE id = ?').run(workerId)
}

export function listWorkers(d: SqliteDatabase): WorkerRecord[] {
  const rows = d
    .stmt(
      `SELECT w.*, (SELECT COUNT(*) FROM runs r WHERE r.worker_id = w.id AND r.state = 'running') AS running
         FROM workers w ORDER BY w.started_at, w.id`,
    )
    .all() as {
    id: string
    host: string
    pid: number
    version: string
    concurrency: number
    started_at: string
    heartbeat_at: string
    draining: number
    running: number
  }[]
  return rows.map((r) => ({
    id: r.id,
    host: r.host,
    pid: r.pid,
    version: r.version,
    concurrency: r.concurrency,
    startedAt: r.started_at,
    heartbeatAt: r.heartbeat_at,
    draining: r.draining === 1,
    running: r.running,
  }))
}
