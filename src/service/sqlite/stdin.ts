// The stdin of runs made with `stdin: 'open'`, in SQLite: what clients write is stored before it is
// acknowledged (a crash loses none of it) and held here, not in memory, until the run's worker has written
// it into the sandbox (ackStdin), queued or running alike. A write that would take what its run, or its
// key's runs together, hold unwritten past the bounds is refused whole: the bound counts the write itself
// (one write of 8 MiB was taken while less than 1 MiB was held, 30 queued runs held 267 MiB).
import { type Fence, FencedError, type StdinBounds, type StdinChunk } from '../store.js'
import { ServiceError } from '../types.js'
import type { SqliteDatabase } from './database.js'
import { holdsFence } from './events.js'

/** What the run's stdin holds not yet written into its sandbox (an end counts nothing). */
const heldBy = (d: SqliteDatabase, runId: string) =>
  (
    d.stmt('SELECT COALESCE(SUM(length(data)), 0) AS n FROM stdin WHERE run_id = ?').get(runId) as {
      n: number
    }
  ).n

/** The same, for every run of a key not finished. */
const heldByKey = (d: SqliteDatabase, keyId: string) =>
  (
    d
      .stmt(
        `SELECT COALESCE(SUM(length(s.data)), 0) AS n FROM runs r JOIN stdin s ON s.run_id = r.id
           WHERE r.key_id = ? AND r.state <> 'finished'`,
      )
      .get(keyId) as { n: number }
  ).n

export function appendStdin(
  d: SqliteDatabase,
  runId: string,
  keyId: string,
  data: Buffer | null,
  bounds: StdinBounds,
): void {
  d.tx(() => {
    const run = d.stmt('SELECT state, stdin FROM runs WHERE id = ?').get(runId) as
      | { state: string; stdin: string | null }
      | undefined
    if (!run || run.state === 'finished' || run.stdin !== 'open')
      throw new ServiceError('conflict', `run ${runId} has no open stdin`)
    if (data !== null) {
      const { perRun, perKey } = bounds
      const most = Math.min(perRun, perKey)
      if (data.length > most)
        throw new ServiceError(
          'too-large',
          `a write to a run's stdin is at most ${most} bytes (what the server holds of it unread): write it in parts`,
        )
      const held = heldBy(d, runId)
      if (held + data.length > perRun)
        throw new ServiceError(
          'quota',
          `run ${runId} has ${held} bytes of stdin it has not read yet, and may have ${perRun}: retry later`,
          undefined,
          1,
        )
      const ofKey = heldByKey(d, keyId)
      if (ofKey + data.length > perKey)
        throw new ServiceError(
          'quota',
          `this key's runs have ${ofKey} bytes of stdin they have not read yet, and may have ${perKey}: retry later`,
          undefined,
          1,
        )
      if (data.length === 0) return
    } else d.stmt(`UPDATE runs SET stdin = 'closed' WHERE id = ?`).run(runId)
    const { seq } = d
      .stmt('UPDATE runs SET stdin_seq = stdin_seq + 1 WHERE id = ? RETURNING stdin_seq AS seq')
      .get(runId) as { seq: number }
    d.stmt('INSERT INTO stdin (run_id, seq, data) VALUES (?, ?, ?)').run(runId, seq, data)
  })
}

export function readStdin(d: SqliteDatabase, runId: string, afterSeq: number, limit: number): StdinChunk[] {
  return d
    .stmt('SELECT seq, data FROM stdin WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?')
    .all(runId, afterSeq, Math.max(1, Math.floor(limit))) as StdinChunk[]
}

/** The chunks up to `seq` are in the sandbox: they go (the end stays, to say the stdin was closed). */
export function ackStdin(d: SqliteDatabase, runId: string, seq: number, fence?: Fence): void {
  d.tx(() => {
    if (fence && !holdsFence(d, runId, fence)) throw new FencedError(runId)
    d.stmt('DELETE FROM stdin WHERE run_id = ? AND seq <= ? AND data IS NOT NULL').run(runId, seq)
  })
}

export function stdinState(d: SqliteDatabase, runId: string): { bytes: number; closed: boolean } {
  const row = d
    .stmt(
      `SELECT COALESCE(SUM(length(data)), 0) AS bytes, COUNT(*) - COUNT(data) AS ends FROM stdin WHERE run_id = ?`,
    )
    .get(runId) as { bytes: number; ends: number }
  return { bytes: row.bytes, closed: row.ends > 0 }
}
