// The store on one SQLite file (<dataDir>/cordon.db), for one machine: `cordon serve` alone. The store's
// contract is promises (store.ts), so that a store on a server is one more implementation of it; here each
// method is one synchronous call on the database (a transaction where it writes more than a row), run when
// the method is called, its answer (or its error) given as a settled promise. Single-node semantics: the
// service's own worker claims its runs; leases are kept as the contract says, though with one process
// nothing reaps them (a start-up ends what a dead server left running: interruptRunning).
// The statements live beside it, by concern (sqlite/*.ts); the schema grows by appending to MIGRATIONS.
import type Database from 'better-sqlite3'
import type { RunResult } from '../index.js'
import { SqliteDatabase, type SqliteOptions } from './sqlite/database.js'
import * as events from './sqlite/events.js'
import * as keys from './sqlite/keys.js'
import * as life from './sqlite/lifecycle.js'
import * as runs from './sqlite/runs.js'
import * as stdin from './sqlite/stdin.js'
import * as webhooks from './sqlite/webhooks.js'
import * as workers from './sqlite/workers.js'
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
} from './store.js'
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
} from './types.js'

export type { SqliteOptions } from './sqlite/database.js'
export { MIGRATIONS } from './sqlite/migrations.js'
export { encodeCursor, LIST_PAGE_BYTES, newRunId } from './sqlite/rows.js'

export class SqliteStore implements RunStore {
  /** The database and its statements, on which every method is one synchronous call. */
  readonly database: SqliteDatabase

  /** Opens (creating, 0700/0600) `<dataDir>/cordon.db` and brings its schema up to date. */
  constructor(dataDir: string, options: SqliteOptions = {}) {
    this.database = new SqliteDatabase(dataDir, options)
  }

  /** better-sqlite3's handle (tests make the disk fail through it). */
  get db(): Database.Database {
    return this.database.db
  }

  // ---- runs
  async admitRun(key: KeyRecord, run: NewRun, bounds: AdmissionBounds): Promise<RunRecord> {
    return runs.admitRun(this.database, key, run, bounds)
  }
  async getRun(id: string): Promise<RunRecord | null> {
    return runs.getRun(this.database, id)
  }
  async runRequest(id: string): Promise<unknown> {
    return runs.runRequest(this.database, id)
  }
  async listRuns(filter: RunFilter): Promise<{ runs: RunRecord[]; nextCursor: string | null }> {
    return runs.listRuns(this.database, filter)
  }
  async runKeyId(id: string): Promise<string | null> {
    return runs.runKeyId(this.database, id)
  }
  async runViewBytes(id: string): Promise<number> {
    return runs.runViewBytes(this.database, id)
  }
  async claimRun(id: string, workerId: string, leaseMs: number): Promise<Fence | null> {
    return life.claimRun(this.database, id, workerId, leaseMs)
  }
  async finishRun(id: string, result: RunResult, fence?: Fence): Promise<RunEvent | null> {
    return life.finishRun(this.database, id, result, fence)
  }
  async storedResult(id: string): Promise<StoredResult | null> {
    return runs.storedResult(this.database, id)
  }
  async deleteRun(id: string): Promise<boolean> {
    return life.deleteRun(this.database, id)
  }
  async requestCancel(id: string): Promise<{ state: RunState; workerId: string | null } | null> {
    return life.requestCancel(this.database, id)
  }

  // ---- events
  async appendEvents(runId: string, batch: NewEvent[], fence?: Fence): Promise<RunEvent[]> {
    return events.appendEvents(this.database, runId, batch, fence)
  }
  async events(runId: string, afterSeq: number, limit: number, maxBytes?: number): Promise<RunEvent[]> {
    return events.events(this.database, runId, afterSeq, limit, maxBytes)
  }
  async outputSlices(runId: string, stream: OutputStream, from: number, to: number): Promise<OutputSlice[]> {
    return events.outputSlices(this.database, runId, stream, from, to)
  }
  async outputChunks(
    runId: string,
    stream: OutputStream,
    after: number,
    limit: number,
  ): Promise<OutputChunk[]> {
    return events.outputChunks(this.database, runId, stream, after, limit)
  }
  async outputEnd(runId: string, stream: OutputStream): Promise<number> {
    return events.outputEnd(this.database, runId, stream)
  }
  async outputTailSeq(runId: string, bytes: number): Promise<number> {
    return events.outputTailSeq(this.database, runId, bytes)
  }

  // ---- stdin
  async appendStdin(runId: string, keyId: string, data: Buffer | null, bounds: StdinBounds): Promise<void> {
    stdin.appendStdin(this.database, runId, keyId, data, bounds)
  }
  async readStdin(runId: string, afterSeq: number, limit: number): Promise<StdinChunk[]> {
    return stdin.readStdin(this.database, runId, afterSeq, limit)
  }
  async ackStdin(runId: string, seq: number, fence?: Fence): Promise<void> {
    stdin.ackStdin(this.database, runId, seq, fence)
  }
  async stdinState(runId: string): Promise<{ bytes: number; closed: boolean }> {
    return stdin.stdinState(this.database, runId)
  }

  // ---- recovery and liveness
  async interruptRunning(): Promise<string[]> {
    return life.interruptRunning(this.database)
  }
  async queuedRuns(olderThanMs: number, limit: number): Promise<{ id: string; keyId: string }[]> {
    return life.queuedRuns(this.database, olderThanMs, limit)
  }
  async registerWorker(info: WorkerInfo): Promise<void> {
    workers.registerWorker(this.database, info)
  }
  async heartbeat(workerId: string, leaseMs: number): Promise<StopOrder[]> {
    return workers.heartbeat(this.database, workerId, leaseMs)
  }
  async deregisterWorker(workerId: string): Promise<void> {
    workers.deregisterWorker(this.database, workerId)
  }
  async listWorkers(): Promise<WorkerRecord[]> {
    return workers.listWorkers(this.database)
  }
  async reapLostRuns(): Promise<string[]> {
    return life.reapLostRuns(this.database)
  }

  // ---- retention and webhooks
  async sweep(maxRetentionMs: number | null): Promise<number> {
    return life.sweep(this.database, maxRetentionMs)
  }
  async recordWebhookAttempt(
    runId: string,
    attempt: WebhookAttempt,
    next: PendingWebhook | null,
  ): Promise<void> {
    webhooks.recordWebhookAttempt(this.database, runId, attempt, next)
  }
  async webhookAttempts(runId: string): Promise<WebhookAttempt[]> {
    return webhooks.webhookAttempts(this.database, runId)
  }
  async claimDueWebhooks(
    nodeId: string,
    limit: number,
    leaseMs: number,
  ): Promise<({ runId: string } & PendingWebhook)[]> {
    return webhooks.claimDueWebhooks(this.database, nodeId, limit, leaseMs)
  }
  async pendingWebhooks(): Promise<({ runId: string } & PendingWebhook)[]> {
    return webhooks.pendingWebhooks(this.database)
  }
  async dropPendingWebhook(runId: string): Promise<void> {
    webhooks.dropPendingWebhook(this.database, runId)
  }

  // ---- keys
  async createKey(key: KeyRecord): Promise<void> {
    keys.createKey(this.database, key)
  }
  async keyByHash(hash: string): Promise<KeyRecord | null> {
    return keys.keyByHash(this.database, hash)
  }
  async getKey(id: string): Promise<KeyRecord | null> {
    return keys.getKey(this.database, id)
  }
  async listKeys(): Promise<KeyRecord[]> {
    return keys.listKeys(this.database)
  }
  async revokeKey(id: string, at: string): Promise<boolean> {
    return keys.revokeKey(this.database, id, at)
  }

  // ---- the store itself
  async version(): Promise<number> {
    return this.database.version()
  }
  async close(): Promise<void> {
    this.database.close()
  }
}
