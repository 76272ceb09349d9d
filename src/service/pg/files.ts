// A run's collected files in PostgreSQL (run_files), for API nodes and workers on different machines:
// the worker writes them under its fence, any API node reads them, a slice at a time (the column is
// stored uncompressed out of line, so a slice reads only its own pages), and they go with their run.
import { type Fence, FencedError, type RunFiles } from '../store.js'
import { type Db, pgCode } from './db.js'

/** Bytes read from the database at once while a file streams out. */
const SLICE = 256 * 1024

export class PgFiles implements RunFiles {
  constructor(private readonly db: Db) {}

  async put(runId: string, path: string, data: Buffer, fence?: Fence): Promise<void> {
    let rows: unknown[]
    // FOR SHARE: a reaper's or a finish's update of the run, committed meanwhile, is waited for and its
    // outcome checked against the fence (no file is kept for a run its worker no longer holds).
    try {
      rows = await this.db.rows(
        `INSERT INTO run_files (run_id, path, bytes)
         SELECT id, $2, $3 FROM runs
          WHERE id = $1 AND ($4::text IS NULL OR (state = 'running' AND worker_id = $4 AND attempt = $5::integer))
            FOR SHARE
         ON CONFLICT (run_id, path) DO UPDATE SET bytes = excluded.bytes
         RETURNING 1`,
        [runId, path, data, fence?.workerId ?? null, fence?.attempt ?? null],
      )
    } catch (error) {
      if (pgCode(error) !== '23503') throw error
      rows = [] // the run was deleted meanwhile
    }
    if (rows.length === 0 && fence) throw new FencedError(runId)
  }

  async list(runId: string): Promise<string[]> {
    const rows = await this.db.rows<{ path: string }>(
      'SELECT path FROM run_files WHERE run_id = $1 ORDER BY path',
      [runId],
    )
    return rows.map((r) => r.path)
  }

  async open(
    runId: string,
    path: string,
  ): Promise<{ size: number; stream: ReadableStream<Uint8Array> } | null> {
    const row = await this.db.row<{ size: number }>(
      'SELECT octet_length(bytes) AS size FROM run_files WHERE run_id = $1 AND path = $2',
      [runId, path],
    )
    if (!row) return null
    const { size } = row
    const db = this.db
    let at = 0
    const stream = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          if (at >= size) {
            controller.close()
            return
          }
          const slice = await db.row<{ bytes: Buffer }>(
            'SELECT substring(bytes FROM $3 FOR $4) AS bytes FROM run_files WHERE run_id = $1 AND path = $2',
            [runId, path, at + 1, Math.min(SLICE, size - at)],
          )
          if (!slice || slice.bytes.length === 0) {
            controller.error(new Error(`the file ${path} of run ${runId} is gone`))
            return
          }
          at += slice.bytes.length
          controller.enqueue(new Uint8Array(slice.bytes.buffer, slice.bytes.byteOffset, slice.bytes.length))
        },
      },
      { highWaterMark: 0 },
    )
    return { size, stream }
  }

  async remove(runId: string): Promise<void> {
    await this.db.rows('DELETE FROM run_files WHERE run_id = $1', [runId])
  }
}
