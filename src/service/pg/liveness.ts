// Workers and their leases in PostgreSQL. A worker's runs are its own while their lease (renewed by its
// heartbeat, by the database's clock: no skew between machines) runs, and, when the worker registered
// its heartbeat session, while that session is alive: a worker killed with -9 drops its connection, and
// its backend leaves pg_stat_activity at once, long before its lease ends. Behind a pooler that gives a
// client a different backend per transaction (PgBouncer in transaction mode) the session says nothing:
// `liveness: 'lease'` then records none, and only leases count.
import { errorResult } from '../../index.js'
import type { StopOrder, WorkerInfo, WorkerRecord } from '../store.js'
import { endResult } from '../types.js'
import { type Db, iso, type PgModule, poolConfig, type Queryable, q, storeError } from './db.js'

export type Liveness = 'session' | 'lease'

/** Why a run is ended without its worker, and what its result and `interrupted` event say. */
const WHY = {
  lease: 'the worker running this run stopped: its lease ran out without a heartbeat',
  session: 'the worker running this run stopped: its database session ended',
  gone: 'the worker running this run stopped (it deregistered)',
  interrupted: 'the server stopped while the run was running',
} as const
type Why = keyof typeof WHY

/** Per reason: the result, its summary, and the reason's sentence, as json the statement indexes. */
function endings(): { results: string; summaries: string; reasons: string } {
  const results: Record<string, unknown> = {}
  const summaries: Record<string, unknown> = {}
  for (const why of Object.keys(WHY) as Why[]) {
    const result = errorResult(why === 'interrupted' ? 'interrupted' : 'worker-lost', WHY[why])
    results[why] = result
    summaries[why] = endResult(result)
  }
  return {
    results: JSON.stringify(results),
    summaries: JSON.stringify(summaries),
    reasons: JSON.stringify(WHY),
  }
}

/**
 * Ends one run picked by `pick` (a SELECT of `id, worker_id, why`, locking its row): finished, `error`,
 * its `interrupted` and `end` events, its webhook owed, its stdin dropped: one statement, so one
 * transaction. lost_at tells its worker, should it still be there, at its next heartbeat.
 */
const endOne = (pick: string) => `
  WITH pick AS (${pick}),
  r AS (
    UPDATE runs SET state = 'finished', finished_at = now(), status = 'error',
                    result = $1::json -> pick.why, summary = $2::json -> pick.why,
                    text_from_events = false, view_bytes = octet_length(($1::json -> pick.why)::text),
                    last_seq = last_seq + 2, lease_until = NULL, lost_at = now(), lost_told = false
      FROM pick
     WHERE runs.id = pick.id AND runs.state = 'running'
     RETURNING runs.id, runs.last_seq, runs.has_webhook, pick.worker_id, pick.why),
  dropped AS (DELETE FROM stdin WHERE run_id IN (SELECT id FROM r)),
  owed AS (
    INSERT INTO webhook_pending (run_id, attempt, at) SELECT id, 1, now() FROM r WHERE has_webhook
    ON CONFLICT (run_id) DO NOTHING),
  said AS (
    INSERT INTO events (run_id, seq, type, at, data)
    SELECT id, last_seq - 1, 'interrupted', now(),
           CASE WHEN why = 'interrupted' THEN json_build_object('reason', $3::json ->> why)
                ELSE json_build_object('reason', $3::json ->> why, 'worker', worker_id) END
      FROM r)
  INSERT INTO events (run_id, seq, type, at, data)
  SELECT id, last_seq, 'end', now(), json_build_object('result', $2::json -> why) FROM r
  RETURNING run_id`

// A running run whose lease ran out, or whose worker's recorded session is gone (a backend_start that
// differs is another session on a reused pid; one not visible to this role proves nothing either way).
const REAP_ONE = endOne(`
  SELECT r.id, r.worker_id, CASE WHEN r.lease_until < now() THEN 'lease' ELSE 'session' END AS why
    FROM runs r LEFT JOIN workers w ON w.id = r.worker_id
   WHERE r.state = 'running'
     AND (r.lease_until < now()
          OR (w.backend_pid IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM pg_stat_activity a
                 WHERE a.pid = w.backend_pid
                   AND (a.backend_start IS NULL OR w.backend_start IS NULL
                        OR a.backend_start = w.backend_start))))
   ORDER BY r.lease_until
   LIMIT 1
   FOR UPDATE OF r SKIP LOCKED`)

const INTERRUPT_ONE = endOne(`
  SELECT id, worker_id, 'interrupted' AS why FROM runs WHERE state = 'running'
   LIMIT 1 FOR UPDATE SKIP LOCKED`)

const GONE_ONE = endOne(`
  SELECT id, worker_id, 'gone' AS why FROM runs WHERE state = 'running' AND worker_id = $4
   LIMIT 1 FOR UPDATE SKIP LOCKED`)

/** Runs ended by one call at most: the rest by the next (a reaper ticks every second). */
const MOST_AT_ONCE = 1000

async function endEach(db: Db, sql: string, extra: unknown[]): Promise<string[]> {
  const { results, summaries, reasons } = endings()
  const ids: string[] = []
  while (ids.length < MOST_AT_ONCE) {
    const [row] = await db.rows<{ run_id: string }>(sql, [results, summaries, reasons, ...extra])
    if (!row) break
    ids.push(row.run_id)
  }
  return ids
}

export const reapLostRuns = (db: Db): Promise<string[]> => endEach(db, REAP_ONE, [])
export const interruptRunning = (db: Db): Promise<string[]> => endEach(db, INTERRUPT_ONE, [])

const REGISTER = `
  INSERT INTO workers (id, host, pid, version, concurrency, backend_pid, backend_start)
  SELECT $1, $2, $3, $4, $5, s.pid, s.backend_start
    FROM (SELECT CASE WHEN $6 THEN pg_backend_pid() END AS pid) AS me
    LEFT JOIN pg_stat_activity s ON s.pid = me.pid
  ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, version = excluded.version,
    concurrency = excluded.concurrency, backend_pid = excluded.backend_pid,
    backend_start = excluded.backend_start, heartbeat_at = now(), draining = false`

// The heartbeat, one statement: the worker's beat, its runs' leases renewed, and what it must stop: runs
// whose cancel was asked or whose key was revoked, and runs ended without it (reaped, or finished by an
// API node) that it was not told of yet (told once: a reply lost on the way is caught by the fence of
// the worker's next write).
const HEARTBEAT = `
  WITH beat AS (UPDATE workers SET heartbeat_at = now() WHERE id = $1),
  renewed AS (
    UPDATE runs SET lease_until = now() + $2 * interval '1 millisecond'
     WHERE worker_id = $1 AND state = 'running'
     RETURNING id, key_id, cancel_requested_at),
  told AS (
    UPDATE runs SET lost_told = true
     WHERE worker_id = $1 AND lost_at IS NOT NULL AND NOT lost_told
     RETURNING id)
  SELECT r.id AS run_id,
         CASE WHEN r.cancel_requested_at IS NOT NULL THEN 'canceled' ELSE 'revoked' END AS reason
    FROM renewed r LEFT JOIN keys k ON k.id = r.key_id
   WHERE r.cancel_requested_at IS NOT NULL OR k.revoked_at IS NOT NULL
  UNION ALL
  SELECT id, 'lost' FROM told`

interface Session {
  info: WorkerInfo
  client: import('pg').Client | null
  broken: boolean
}

/** The workers this store registered, each with its heartbeat session when its liveness is 'session'. */
export class Workers {
  private readonly sessions = new Map<string, Session>()

  constructor(
    private readonly db: Db,
    private readonly pgm: PgModule,
    private readonly liveness: Liveness,
  ) {}

  async register(info: WorkerInfo, liveness: Liveness = this.liveness): Promise<void> {
    await this.close(info.id)
    const session: Session = { info, client: null, broken: false }
    if (liveness === 'session') session.client = await this.connect(session)
    await q(session.client ?? this.db.pool, REGISTER, [
      info.id,
      info.host,
      info.pid,
      info.version,
      info.concurrency,
      session.client !== null,
    ])
    this.sessions.set(info.id, session)
  }

  /** A session of its own for a worker's heartbeat: its backend's pid is what the reaper watches. */
  private async connect(session: Session): Promise<import('pg').Client> {
    const client = new this.pgm.Client(poolConfig(this.pgm, this.db.url, 1))
    // Either says the session is over (an error while idle, or the server ending it): the next heartbeat
    // opens another. A statement's own error does not: a new session would let the reaper end its runs.
    const over = () => {
      session.broken = true
    }
    client.on('error', over)
    client.on('end', over)
    try {
      await client.connect()
    } catch (error) {
      throw storeError(this.db.url, 'cannot open the heartbeat session', error)
    }
    return client
  }

  async heartbeat(workerId: string, leaseMs: number): Promise<StopOrder[]> {
    const session = this.sessions.get(workerId)
    let on: Queryable = this.db.pool
    if (session?.client) {
      if (session.broken) {
        // A new session, recorded before it beats: the reaper may have ended runs meanwhile, which the
        // beat then reports as lost.
        await session.client.end().catch(() => undefined)
        session.broken = false
        session.client = await this.connect(session)
        const { id, host, pid, version, concurrency } = session.info
        await q(session.client, REGISTER, [id, host, pid, version, concurrency, true])
      }
      on = session.client
    }
    const rows = await q<{ run_id: string; reason: StopOrder['reason'] }>(on, HEARTBEAT, [
      workerId,
      Math.max(0, leaseMs),
    ])
    return rows.map((r) => ({ runId: r.run_id, reason: r.reason }))
  }

  /** The worker stops: what it still runs is ended (worker-lost), and it is forgotten. */
  async deregister(workerId: string): Promise<void> {
    await endEach(this.db, GONE_ONE, [workerId])
    await this.db.rows('DELETE FROM workers WHERE id = $1', [workerId])
    await this.close(workerId)
  }

  async list(): Promise<WorkerRecord[]> {
    const rows = await this.db.rows<{
      id: string
      host: string
      pid: number
      version: string
      concurrency: number
      started_at: Date
      heartbeat_at: Date
      draining: boolean
      running: number
    }>(
      `SELECT w.id, w.host, w.pid, w.version, w.concurrency, w.started_at, w.heartbeat_at, w.draining,
              (SELECT count(*) FROM runs r WHERE r.worker_id = w.id AND r.state = 'running') AS running
         FROM workers w ORDER BY w.started_at, w.id`,
    )
    return rows.map((r) => ({
      id: r.id,
      host: r.host,
      pid: r.pid,
      version: r.version,
      concurrency: r.concurrency,
      startedAt: iso(r.started_at),
      heartbeatAt: iso(r.heartbeat_at),
      draining: r.draining,
      running: r.running,
    }))
  }

  private async close(workerId: string): Promise<void> {
    const session = this.sessions.get(workerId)
    this.sessions.delete(workerId)
    await session?.client?.end().catch(() => undefined)
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.sessions.keys()].map((id) => this.close(id)))
  }
}
