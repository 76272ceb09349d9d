// A run's events in SQLite: numbered per run from 1 with no gap, an output event's bytes kept as bytes
// (not the base64 its data carries them in) with where they end in its stream and in both interleaved, so
// that a range of output is found by index, never by reading the run's whole history.
import { type Fence, FencedError, type NewEvent } from '../store.js'
import type { OutputChunk, OutputSlice, OutputStream, RunEvent, RunEventType } from '../types.js'
import type { SqliteDatabase } from './database.js'
import { bytesOf, type EventRow, outputPlace, ROWS_AT_ONCE, toEvent } from './rows.js'

/** Inside a transaction: whether the run is running under `fence` (its worker's claim, not reaped). */
export function holdsFence(d: SqliteDatabase, runId: string, fence: Fence): boolean {
  return (
    d
      .stmt(`SELECT 1 FROM runs WHERE id = ? AND state = 'running' AND worker_id = ? AND attempt = ?`)
      .get(runId, fence.workerId, fence.attempt) !== undefined
  )
}

/** Inside a transaction: the run's next event (its seq the last + 1, 1 for the first). */
export function insertEvent(
  d: SqliteDatabase,
  runId: string,
  type: RunEventType,
  data: Record<string, unknown>,
  at: string,
): RunEvent {
  const { last } = d.stmt('SELECT COALESCE(MAX(seq), 0) AS last FROM events WHERE run_id = ?').get(runId) as {
    last: number
  }
  const seq = last + 1
  const out = outputPlace(type, data)
  let mergedEnd: number | null = null
  if (out) {
    const { end } = d
      .stmt(
        'SELECT COALESCE(MAX(merged_end), 0) AS end FROM events WHERE run_id = ? AND merged_end IS NOT NULL',
      )
      .get(runId) as { end: number }
    mergedEnd = end + out.bytes
  }
  // An output event's bytes are kept as bytes, not as the base64 its data carries them in.
  let kept = data
  let bytes: Buffer | null = null
  if (out && typeof data.data === 'string') {
    const { data: base64, ...rest } = data
    kept = rest
    bytes = Buffer.from(base64 as string, 'base64')
  }
  d.stmt(
    `INSERT INTO events (run_id, seq, type, at, data, bytes, out_stream, out_end, merged_end)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(runId, seq, type, at, JSON.stringify(kept), bytes, out?.stream ?? null, out?.end ?? null, mergedEnd)
  return { runId, seq, type, at, data }
}

/** Appends `batch` in order, in one transaction; with a fence, only while the run is its (FencedError). */
export function appendEvents(d: SqliteDatabase, runId: string, batch: NewEvent[], fence?: Fence): RunEvent[] {
  return d.tx(() => {
    if (fence && !holdsFence(d, runId, fence)) throw new FencedError(runId)
    const at = d.iso()
    return batch.map((e) => insertEvent(d, runId, e.type, e.data, at))
  })
}

export function events(
  d: SqliteDatabase,
  runId: string,
  afterSeq: number,
  limit: number,
  maxBytes = Number.POSITIVE_INFINITY,
): RunEvent[] {
  const out: RunEvent[] = []
  let bytes = 0
  let after = afterSeq
  const wanted = Math.max(0, Math.floor(limit))
  // A few rows at a time: a page stops at `maxBytes` of stored data without reading many rows past it.
  // (Not .iterate(): see SqliteDatabase.stmt().)
  while (out.length < wanted && bytes < maxBytes) {
    const rows = d
      .stmt(
        'SELECT run_id, seq, type, at, data, bytes FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?',
      )
      .all(runId, after, Math.min(ROWS_AT_ONCE, wanted - out.length)) as EventRow[]
    for (const row of rows) {
      if (bytes >= maxBytes) break
      out.push(toEvent(row))
      // As the page is held: output bytes as base64.
      bytes += row.data.length + Math.ceil((row.bytes?.length ?? 0) / 3) * 4
      after = row.seq
    }
    if (rows.length < ROWS_AT_ONCE) break
  }
  return out
}

export function outputEnd(d: SqliteDatabase, runId: string, stream: OutputStream): number {
  const { end } = (
    stream === 'output'
      ? d
          .stmt(
            'SELECT COALESCE(MAX(merged_end), 0) AS end FROM events WHERE run_id = ? AND merged_end IS NOT NULL',
          )
          .get(runId)
      : d
          .stmt(
            `SELECT COALESCE(MAX(out_end), 0) AS end FROM events
               WHERE run_id = ? AND out_stream = ? AND out_end IS NOT NULL`,
          )
          .get(runId, stream)
  ) as { end: number }
  return end
}

export function outputTailSeq(d: SqliteDatabase, runId: string, bytes: number): number {
  const end = outputEnd(d, runId, 'output')
  if (end <= bytes) return 0
  const first = d
    .stmt(
      `SELECT seq FROM events WHERE run_id = ? AND merged_end IS NOT NULL AND merged_end > ?
         ORDER BY merged_end LIMIT 1`,
    )
    .get(runId, end - bytes) as { seq: number } | undefined
  return first ? first.seq - 1 : 0
}

export function outputSlices(
  d: SqliteDatabase,
  runId: string,
  stream: OutputStream,
  from: number,
  to: number,
): OutputSlice[] {
  if (to <= from) return []
  // Offsets only grow, so the events ending after `from`, by their end, start with the one holding it.
  const slices: OutputSlice[] = []
  for (let after = from; ; ) {
    const rows = outputChunks(d, runId, stream, after, ROWS_AT_ONCE)
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

export function outputChunks(
  d: SqliteDatabase,
  runId: string,
  stream: OutputStream,
  after: number,
  limit: number,
): OutputChunk[] {
  const rows = (
    stream === 'output'
      ? d
          .stmt(
            `SELECT out_stream AS stream, merged_end AS end, data, bytes FROM events
               WHERE run_id = ? AND merged_end IS NOT NULL AND merged_end > ? ORDER BY merged_end LIMIT ?`,
          )
          .all(runId, after, limit)
      : d
          .stmt(
            `SELECT out_stream AS stream, out_end AS end, data, bytes FROM events
               WHERE run_id = ? AND out_stream = ? AND out_end IS NOT NULL AND out_end > ?
               ORDER BY out_end LIMIT ?`,
          )
          .all(runId, stream, after, limit)
  ) as { stream: string; end: number; data: string; bytes: Buffer | null }[]
  return rows.map((row) => ({
    stream: row.stream === 'stderr' ? 'stderr' : 'stdout',
    end: row.end,
    bytes: bytesOf(row),
  }))
}
