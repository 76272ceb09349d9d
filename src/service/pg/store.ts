// The store on PostgreSQL, for API nodes and workers on many machines (`cordon serve --store postgres…`,
// `cordon worker`): the same contract as SQLite's (store.ts), by the database's clock, safe from many
// processes at once. Who runs a run is one compare-and-set (claimRun); every later write of its worker
// carries the fence it returned, checked in the same statement as the write. Each method is one statement
// or one transaction; the statements are fixed strings (beside their functions, in this folder) with
// parameters, never SQL made from input. Open one with openPgStore (open.ts), which checks the schema.
//
// interruptRunning() is for one machine only (it ends every running run, whoever runs it): with many
// nodes, reapLostRuns() is what ends the runs of a dead worker.
import type { RunResult } from '../../index.js'
import type {
  AdmissionBounds,
  Fence,
  NewEvent,
  RunStore,
  StdinBounds,
  StdinChunk,
  StopOrder,
  WorkerInfo,
  WorkerRecord,
} from '../store.js'
import type {
  KeyRecord,
  NewRun,
  OutputChunk,
  OutputSlice,
  OutputStream,
  PendingWebhook,
  RunEvent,
  RunFilter,
  RunRecord,
  RunState,
  StoredResult,
  WebhookAttempt,
} from '../types.js'
import type { Db, PgModule } from './db.js'
import * as events from './events.js'
import { PgFiles } from './files.js'
import { Keys } from './keys.js'
import { interruptRunning, type Liveness, reapLostRuns, Workers } from './liveness.js'
import * as runs from './runs.js'
import type { Sealer } from './secrets.js'
import * as stdin from './stdin.js'
import * as webhooks from './webhooks.js'

export type { Liveness } from './liveness.js'

export class PgStore implements RunStore {
  /** The runs' collected files, in the same database. */
  readonly files: PgFiles
  private readonly keys: Keys
  private readonly workers: Workers
  private closed = false

  constructor(
    private readonly db: Db,
    pgm: PgModule,
    options: { liveness: Liveness; sealer: Sealer | null },
  ) {
    this.files = new PgFiles(db)
    this.keys = new Keys(db, options.sealer)
    this.workers = new Workers(db, pgm, options.liveness)
  }

  // ---- runs
  admitRun(key: KeyRecord, run: NewRun, bounds: AdmissionBounds): Promise<RunRecord> {
    return runs.admitRun(this.db, key, run, bounds)
  }
  getRun(id: string): Promise<RunRecord | null> {
    return runs.getRun(this.db, id)
  }
  runRequest(id: string): Promise<unknown> {
    return runs.runRequest(this.db, id)
  }
  listRuns(filter: RunFilter): Promise<{ runs: RunRecord[]; nextCursor: string | null }> {
    return runs.listRuns(this.db, filter)
  }
  runKeyId(id: string): Promise<string | null> {
    return runs.runKeyId(this.db, id)
  }
  runViewBytes(id: string): Promise<number> {
    return runs.runViewBytes(this.db, id)
  }
  claimRun(id: string, workerId: string, leaseMs: number): Promise<Fence | null> {
    return runs.claimRun(this.db, id, workerId, leaseMs)
  }
  finishRun(id: string, result: RunResult, fence?: Fence): Promise<RunEvent | null> {
    return runs.finishRun(this.db, id, result, fence)
  }
  storedResult(id: string): Promise<StoredResult | null> {
    return runs.storedResult(this.db, id)
  }
  deleteRun(id: string): Promise<boolean> {
    return runs.deleteRun(this.db, id)
  }
  requestCancel(id: string): Promise<{ state: RunState; workerId: string | null } | null> {
    return runs.requestCancel(this.db, id)
  }

  // ---- events
  appendEvents(runId: string, batch: NewEvent[], fence?: Fence): Promise<RunEvent[]> {
    return events.appendEvents(this.db, runId, batch, fence)
  }
  events(runId: string, afterSeq: number, limit: number, maxBytes?: number): Promise<RunEvent[]> {
    return events.events(this.db, runId, afterSeq, limit, maxBytes)
  }
  outputSlices(runId: string, stream: OutputStream, from: number, to: number): Promise<OutputSlice[]> {
    return events.outputSlices(this.db, runId, stream, from, to)
  }
  outputChunks(runId: string, stream: OutputStream, after: number, limit: number): Promise<OutputChunk[]> {
    return events.outputChunks(this.db, runId, stream, after, limit)
  }
  outputEnd(runId: string, stream: OutputStream): Promise<number> {
    return events.outputEnd(this.db, runId, stream)
  }
  outputTailSeq(runId: string, bytes: number): Promise<number> {
    return events.outputTailSeq(this.db, runId, bytes)
  }

  // ---- stdin
  appendStdin(runId: string, keyId: string, data: Buffer | null, bounds: StdinBounds): Promise<void> {
    return stdin.appendStdin(this.db, runId, keyId, data, bounds)
  }
  readStdin(runId: string, afterSeq: number, limit: number): Promise<StdinChunk[]> {
    return stdin.readStdin(this.db, runId, afterSeq, limit)
  }
  ackStdin(runId: string, seq: number, fence?: Fence): Promise<void> {
    return stdin.ackStdin(this.db, runId, seq, fence)
  }
  stdinState(runId: string): Promise<{ bytes: number; closed: boolean }> {
    return stdin.stdinState(this.db, runId)
  }

  // ---- recovery and liveness
  /** One machine only: ends every running run, whichever worker runs it. */
  interruptRunning(): Promise<string[]> {
    return interruptRunning(this.db)
  }
  queuedRuns(olderThanMs: number, limit: number): Promise<{ id: string; keyId: string }[]> {
    return runs.queuedRuns(this.db, olderThanMs, limit)
  }
  /**
   * With `liveness: 'session'` (the store's default unless opened otherwise) the worker's heartbeats go
   * on a session of its own, whose end the reaper sees at once; with 'lease', only leases count.
   */
  registerWorker(info: WorkerInfo, options: { liveness?: Liveness } = {}): Promise<void> {
    return this.workers.register(info, options.liveness)
  }
  heartbeat(workerId: string, leaseMs: number): Promise<StopOrder[]> {
    return this.workers.heartbeat(workerId, leaseMs)
  }
  deregisterWorker(workerId: string): Promise<void> {
    return this.workers.deregister(workerId)
  }
  listWorkers(): Promise<WorkerRecord[]> {
    return this.workers.list()
  }
  reapLostRuns(): Promise<string[]> {
    return reapLostRuns(this.db)
  }

  // ---- retention and webhooks
  sweep(maxRetentionMs: number | null): Promise<number> {
    return runs.sweep(this.db, maxRetentionMs)
  }
  recordWebhookAttempt(runId: string, attempt: WebhookAttempt, next: PendingWebhook | null): Promise<void> {
    return webhooks.recordWebhookAttempt(this.db, runId, attempt, next)
  }
  webhookAttempts(runId: string): Promise<WebhookAttempt[]> {
    return webhooks.webhookAttempts(this.db, runId)
  }
  claimDueWebhooks(
    nodeId: string,
    limit: number,
    leaseMs: number,
  ): Promise<({ runId: string } & PendingWebhook)[]> {
    return webhooks.claimDueWebhooks(this.db, nodeId, limit, leaseMs)
  }
  pendingWebhooks(): Promise<({ runId: string } & PendingWebhook)[]> {
    return webhooks.pendingWebhooks(this.db)
  }
  dropPendingWebhook(runId: string): Promise<void> {
    return webhooks.dropPendingWebhook(this.db, runId)
  }

  // ---- keys
  createKey(key: KeyRecord): Promise<void> {
    return this.keys.create(key)
  }
  keyByHash(hash: string): Promise<KeyRecord | null> {
    return this.keys.byHash(hash)
  }
  getKey(id: string): Promise<KeyRecord | null> {
    return this.keys.get(id)
  }
  listKeys(): Promise<KeyRecord[]> {
    return this.keys.list()
  }
  revokeKey(id: string, at: string): Promise<boolean> {
    return this.keys.revoke(id, at)
  }

  // ---- the store itself
  async version(): Promise<number> {
    const row = await this.db.row<{ version: number }>('SELECT version FROM cordon_schema')
    return row?.version ?? 0
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.workers.closeAll()
    await this.db.pool.end()
  }
}
