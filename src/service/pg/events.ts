// A run's events in PostgreSQL: appended in batches under the run's row lock (its seq and output counters
// live on its row), under the writer's fence; read in pages bounded by bytes; an output event's bytes kept
// as bytea and found by where they end, in their stream and in both interleaved.
import { type Fence, FencedError, type NewEvent } from '../store.js'
import type { OutputChunk, OutputSlice, OutputStream, RunEvent } from '../types.js'
import { type Db, iso } from './db.js'
import { EVENT_COLUMNS, type EventRow, storedEvent, toEvent } from './rows.js'

/** Rows read at once where a read stops early (a range of output). */
const ROWS_AT_ONCE = 16

// The batch's seqs and output places come from the run's row, updated (so locked) by this very
// statement: two writers of one run take turns, and a fenced writer that lost the run updates no row,
// so inserts nothing.
const APPEND = `
  WITH r AS (
    UPDATE runs SET last_seq = last_seq + $4, out_stdout = greatest(out_stdout, $5),
                    out_stderr = greatest(out_stderr, $6), out_merged = out_merged + $7
     WHERE id = $1
       AND ($2::text IS NULL OR (state = 'running' AND worker_id = $2 AND attempt = $3::integer))
     RETURNING last_seq - $4 AS base, out_merged - $7 AS merged_base)
  INSERT INTO events (run_id, seq, type, at, data, bytes, out_stream, out_end, merged_end)
  SELECT $1, r.base + e.i, e.type, now(), e.data, e.bytes, e.stream, e.out_end, r.merged_base + e.merged
    FROM r, unnest($8::text[], $9::json[], $10::bytea[], $11::text[], $12::bigint[], $13::bigint[])
            WITH ORDINALITY AS e (type, data, bytes, stream, out_end, merged, i)
  RETURNING seq, at`

export async function appendEvents(
  db: Db,
  runId: string,
  batch: NewEvent[],
  fence?: Fence,
): Promise<RunEvent[]> {
  if (batch.length === 0) return []
  const types: string[] = []
  const datas: string[] = []
  const bytes: (Buffer | null)[] = []
  const streams: (string | null)[] = []
  const ends: (number | null)[] = []
  const merged: (number | null)[] = []
  let mergedBytes = 0
  let stdoutEnd = 0
  let stderrEnd = 0
  for (const event of batch) {
    const stored = storedEvent(event.type, event.data)
    types.push(event.type)
    datas.push(stored.data)
    bytes.push(stored.bytes)
    streams.push(stored.out?.stream ?? null)
    ends.push(stored.out?.end ?? null)
    if (stored.out) {
      mergedBytes += stored.out.bytes
      if (stored.out.stream === 'stdout') stdoutEnd = Math.max(stdoutEnd, stored.out.end)
      else stderrEnd = Math.max(stderrEnd, stored.out.end)
    }
    merged.push(stored.out ? mergedBytes : null)
  }
  const rows = await db.rows<{ seq: number; at: Date }>(APPEND, [
    runId,
    fence?.workerId ?? null,
    fence?.attempt ?? null,
    batch.length,
    stdoutEnd,
    stderrEnd,
    mergedBytes,
    types,
    datas,
    bytes,
    streams,
    ends,
    merged,
  ])
  if (rows.length === 0) {
    if (fence) throw new FencedError(runId)
    return [] // no such run
  }
  const base = Math.min(...rows.map((r) => r.seq)) - 1
  const at = iso((rows[0] as { at: Date }).at)
  return batch.map((event, i) => ({ runId, seq: base + i + 1, type: event.type, at, data: event.data }))
}

// A page: the sizes of up to `limit` events first (their data read as the page holds it: output bytes as
// base64), then only those before the byte budget, read whole.
const PAGE = `
  WITH sized AS (
    SELECT seq, octet_length(data::text) + coalesce((octet_length(bytes) + 2) / 3 * 4, 0) AS size
      FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3),
  kept AS (
    SELECT seq FROM (SELECT seq, sum(size) OVER (ORDER BY seq) - size AS before FROM sized) AS s
     WHERE before < $4)
  SELECT ${EVENT_COLUMNS} FROM events JOIN kept USING (seq) WHERE run_id = $1 ORDER BY seq`

export async function events(
  db: Db,
  runId: string,
  afterSeq: number,
  limit: number,
  maxBytes = Number.POSITIVE_INFINITY,
): Promise<RunEvent[]> {
  const wanted = Math.max(0, Math.floor(limit))
  if (wanted === 0 || !(maxBytes > 0)) return []
  const rows = await db.rows<EventRow>(PAGE, [
    runId,
    Math.floor(afterSeq),
    wanted,
    Number.isFinite(maxBytes) ? maxBytes : Number.MAX_SAFE_INTEGER,
  ])
  return rows.map(toEvent)
}

/** Bytes of `stream` kept so far, from the run's row. */
export async function outputEnd(db: Db, runId: string, stream: OutputStream): Promise<number> {
  const row = await db.row<{ out_stdout: number; out_stderr: number; out_merged: number }>(
    'SELECT out_stdout, out_stderr, out_merged FROM runs WHERE id = $1',
    [runId],
  )
  if (!row) return 0
  return stream === 'output' ? row.out_merged : stream === 'stdout' ? row.out_stdout : row.out_stderr
}

export async function outputTailSeq(db: Db, runId: string, bytes: number): Promise<number> {
  const end = await outputEnd(db, runId, 'output')
  if (end <= bytes) return 0
  const first = await db.row<{ seq: number }>(
    `SELECT seq FROM events WHERE run_id = $1 AND merged_end IS NOT NULL AND merged_end > $2
      ORDER BY merged_end LIMIT 1`,
    [runId, end - bytes],
  )
  return first ? first.seq - 1 : 0
}

export async function outputChunks(
  db: Db,
  runId: string,
  stream: OutputStream,
  after: number,
  limit: number,
): Promise<OutputChunk[]> {
  const rows = await db.rows<{ stream: string; end: number; bytes: Buffer | null }>(
    stream === 'output'
      ? `SELECT out_stream AS stream, merged_end AS end, bytes FROM events
          WHERE run_id = $1 AND merged_end IS NOT NULL AND merged_end > $2 ORDER BY merged_end LIMIT $3`
      : `SELECT out_stream AS stream, out_end AS end, bytes FROM events
          WHERE run_id = $1 AND out_stream = $4 AND out_end IS NOT NULL AND out_end > $2
          ORDER BY out_end LIMIT $3`,
    stream === 'output'
      ? [runId, after, Math.max(0, Math.floor(limit))]
      : [runId, after, Math.max(0, Math.floor(limit)), stream],
  )
  return rows.map((row) => ({
    stream: row.stream === 'stderr' ? 'stderr' : 'stdout',
    end: row.end,
    bytes: row.bytes ?? Buffer.alloc(0),
  }))
}

export async function outputSlices(
  db: Db,
  runId: string,
  stream: OutputStream,
  from: number,
  to: number,
): Promise<OutputSlice[]> {
  if (to <= from) return []
  // Offsets only grow, so the events ending after `from`, by their end, start with the one holding it.
  const slices: OutputSlice[] = []
  for (let after = from; ; ) {
    const rows = await outputChunks(db, runId, stream, after, ROWS_AT_ONCE)
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
