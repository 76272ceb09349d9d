// The synchronous store the service is written against until it moves to the async contract (store.ts):
// the same SQLite database and statements as SqliteStore, called directly.
import type Database from 'better-sqlite3'
import type { RunResult } from '../index.js'
import { SqliteDatabase, type SqliteOptions } from './sqlite/database.js'
import * as events from './sqlite/events.js'
import * as keys from './sqlite/keys.js'
import * as life from './sqlite/lifecycle.js'
import { RUN_COLUMNS, type RunRow, toRun } from './sqlite/rows.js'
import * as runs from './sqlite/runs.js'
import * as stdin from './sqlite/stdin.js'
import * as webhooks from './sqlite/webhooks.js'
import type {
  KeyRecord,
  NewRun,
  PendingWebhook,
  RunEventType,
  RunFilter,
  RunRecord,
  Store,
  WebhookAttempt,
} from './types.js'

export class SqliteSyncStore implements Store {
  readonly database: SqliteDatabase
  constructor(dataDir: string, options: SqliteOptions = {}) {
    this.database = new SqliteDatabase(dataDir, options)
  }
  get db(): Database.Database {
    return this.database.db
  }
  version = () => this.database.version()
  createRun = (run: NewRun) => this.database.tx(() => runs.insertRun(this.database, run))
  getRun = (id: string) => runs.getRun(this.database, id)
  runRequest = (id: string) => runs.runRequest(this.database, id)
  listRuns = (filter: RunFilter) => runs.listRuns(this.database, filter)
  startRun = (id: string, at: string) =>
    this.database
      .stmt(`UPDATE runs SET state = 'running', started_at = ? WHERE id = ? AND state = 'queued'`)
      .run(at, id).changes === 1
  finishRun = (id: string, result: RunResult, at: string) =>
    life.finishRun(this.database, id, result, undefined, at)
  storedResult = (id: string) => runs.storedResult(this.database, id)
  deleteRun = (id: string) => life.deleteRun(this.database, id)
  appendEvent = (runId: string, type: RunEventType, data: Record<string, unknown>) =>
    events.appendEvents(this.database, runId, [{ type, data }])[0] as ReturnType<Store['appendEvent']>
  events = (runId: string, afterSeq: number, limit: number, maxBytes?: number) =>
    events.events(this.database, runId, afterSeq, limit, maxBytes)
  outputSlices: Store['outputSlices'] = (runId, stream, from, to) =>
    events.outputSlices(this.database, runId, stream, from, to)
  outputChunks: Store['outputChunks'] = (runId, stream, after, limit) =>
    events.outputChunks(this.database, runId, stream, after, limit)
  outputEnd: Store['outputEnd'] = (runId, stream) => events.outputEnd(this.database, runId, stream)
  outputTailSeq = (runId: string, bytes: number) => events.outputTailSeq(this.database, runId, bytes)
  appendStdin = (runId: string, data: Buffer | null) =>
    this.database.tx(() => {
      const { seq } = this.database
        .stmt('UPDATE runs SET stdin_seq = stdin_seq + 1 WHERE id = ? RETURNING stdin_seq AS seq')
        .get(runId) as { seq: number }
      this.database.stmt('INSERT INTO stdin (run_id, seq, data) VALUES (?, ?, ?)').run(runId, seq, data)
    })
  stdinState = (runId: string) => stdin.stdinState(this.database, runId)
  takeStdin = (runId: string) =>
    this.database.tx(() => {
      const rows = stdin.readStdin(this.database, runId, 0, Number.MAX_SAFE_INTEGER)
      this.database.stmt('DELETE FROM stdin WHERE run_id = ?').run(runId)
      const chunks = rows.flatMap((r) => (r.data === null ? [] : [r.data]))
      return { chunks, closed: rows.some((r) => r.data === null) }
    })
  interruptRunning = (at: string) => life.interruptRunning(this.database, at)
  queuedRuns = (): RunRecord[] =>
    (
      this.database
        .stmt(`SELECT ${RUN_COLUMNS} FROM runs WHERE state = 'queued' ORDER BY created_at, id`)
        .all() as RunRow[]
    ).map(toRun)
  sweep = (now: string, maxRetentionMs: number | null = null) =>
    life.sweep(this.database, maxRetentionMs, now)
  recordWebhookAttempt = (runId: string, attempt: WebhookAttempt, next?: PendingWebhook | null) =>
    webhooks.recordWebhookAttempt(this.database, runId, attempt, next)
  webhookAttempts = (runId: string) => webhooks.webhookAttempts(this.database, runId)
  pendingWebhooks = () => webhooks.pendingWebhooks(this.database)
  dropPendingWebhook = (runId: string) => webhooks.dropPendingWebhook(this.database, runId)
  runKeyId = (id: string) => runs.runKeyId(this.database, id)
  runViewBytes = (id: string) => runs.runViewBytes(this.database, id)
  createKey = (key: KeyRecord) => keys.createKey(this.database, key)
  keyByHash = (hash: string) => keys.keyByHash(this.database, hash)
  getKey = (id: string) => keys.getKey(this.database, id)
  listKeys = () => keys.listKeys(this.database)
  revokeKey = (id: string, at: string) => keys.revokeKey(this.database, id, at)
  close = () => this.database.close()
}
