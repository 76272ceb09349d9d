// The stdin of runs made with `stdin: 'open'`, in PostgreSQL: each write stored before it is acknowledged,
// read by the run's worker (on whichever machine), and forgotten once that worker wrote it into the
// sandbox (ackStdin, under its fence). What a run, or a key's runs together, hold stored and not yet taken
// is bounded; a write past a bound is refused whole, the write itself counted (stdin.ts).
import { type Fence, FencedError, type StdinBounds, type StdinChunk } from '../store.js'
import { ServiceError } from '../types.js'
import { type Db, q } from './db.js'

export async function appendStdin(
  db: Db,
  runId: string,
  keyId: string,
  data: Buffer | null,
  bounds: StdinBounds,
): Promise<void> {
  const { perRun, perKey } = bounds
  const most = Math.min(perRun, perKey)
  await db.tx(async (c) => {
    // A key's writes take turns (its bound is a sum over its runs); a run's row lock orders its own.
    await q(c, `SELECT pg_advisory_xact_lock(2, hashtext($1))`, [keyId])
    const [run] = await q<{ key_id: string; state: string; stdin_open: boolean; stdin_closed: boolean }>(
      c,
      'SELECT key_id, state, stdin_open, stdin_closed FROM runs WHERE id = $1 FOR UPDATE',
      [runId],
    )
    if (!run || run.key_id !== keyId || !run.stdin_open || run.stdin_closed || run.state === 'finished')
      throw new ServiceError('conflict', `run ${runId} has no open stdin`)
    if (data && data.length > most)
      throw new ServiceError(
        'too-large',
        `a write to a run's stdin is at most ${most} bytes (what the server holds of it unread): write it in parts`,
      )
    if (data) {
      const [held] = await q<{ run: number; key: number }>(
        c,
        `SELECT coalesce(sum(octet_length(data)) FILTER (WHERE run_id = $1), 0)::bigint AS run,
                coalesce(sum(octet_length(data)), 0)::bigint AS key
           FROM stdin WHERE key_id = $2`,
        [runId, keyId],
      )
      const ofRun = held?.run ?? 0
      const ofKey = held?.key ?? 0
      if (ofRun + data.length > perRun)
        throw new ServiceError(
          'quota',
          `run ${runId} has ${ofRun} bytes of stdin it has not read yet, and may have ${perRun}: retry later`,
          undefined,
          1,
        )
      if (ofKey + data.length > perKey)
        throw new ServiceError(
          'quota',
          `this key's runs have ${ofKey} bytes of stdin they have not read yet, and may have ${perKey}: retry later`,
          undefined,
          1,
        )
      if (data.length === 0) return
    }
    await q(
      c,
      `WITH r AS (
         UPDATE runs SET stdin_seq = stdin_seq + 1, stdin_closed = stdin_closed OR $3::bytea IS NULL
          WHERE id = $1 RETURNING stdin_seq)
       INSERT INTO stdin (run_id, seq, key_id, data) SELECT $1, stdin_seq, $2, $3 FROM r`,
      [runId, keyId, data],
    )
  })
}

export async function readStdin(
  db: Db,
  runId: string,
  afterSeq: number,
  limit: number,
): Promise<StdinChunk[]> {
  const rows = await db.rows<{ seq: number; data: Buffer | null }>(
    'SELECT seq, data FROM stdin WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3',
    [runId, Math.floor(afterSeq), Math.max(0, Math.floor(limit))],
  )
  return rows.map((r) => ({ seq: r.seq, data: r.data }))
}

/** Forgets the chunks up to `seq`: written into the sandbox, they no longer count against the bounds. */
export async function ackStdin(db: Db, runId: string, seq: number, fence?: Fence): Promise<void> {
  const [row] = await db.rows<{ ours: boolean }>(
    `WITH r AS (
       SELECT id FROM runs
        WHERE id = $1 AND ($3::text IS NULL OR (state = 'running' AND worker_id = $3 AND attempt = $4::integer))
        FOR SHARE),
     gone AS (DELETE FROM stdin WHERE run_id = $1 AND seq <= $2 AND EXISTS (SELECT 1 FROM r))
     SELECT EXISTS (SELECT 1 FROM r) AS ours`,
    [runId, Math.floor(seq), fence?.workerId ?? null, fence?.attempt ?? null],
  )
  if (fence && !row?.ours) throw new FencedError(runId)
}

export async function stdinState(db: Db, runId: string): Promise<{ bytes: number; closed: boolean }> {
  const row = await db.row<{ bytes: number; closed: boolean }>(
    `SELECT (SELECT coalesce(sum(octet_length(data)), 0)::bigint FROM stdin WHERE run_id = $1) AS bytes,
            stdin_closed AS closed
       FROM runs WHERE id = $1`,
    [runId],
  )
  return row ? { bytes: row.bytes, closed: row.closed } : { bytes: 0, closed: false }
}
