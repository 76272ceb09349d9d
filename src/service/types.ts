// The service's contract between its parts: the HTTP API (http/), the queue and its workers (queue.ts,
// worker.ts) and the store (store.ts; SQLite in sqlite.ts). The store and the queue sit behind these small
// interfaces so that a PostgreSQL store or a Redis queue is a new implementation, not a rewrite.
// The service is a face: it uses the engine only through the public API (../index.ts).
import type * as z from 'zod'
import type { Limits, LogEntry, NetworkEvent, Policy, RunResult } from '../index.js'
import type { apiOptionsSchema } from './request.js'

/** What a run of a key gets (ceilings.ts): each limit's default and ceiling, and the network it may ask. */
export interface RunBounds {
  /** `default`: what a run leaving the limit unset gets, min(the library's default, `ceiling`); null: none. */
  limits: Record<keyof Limits, { default: number; ceiling: number | null }>
  /** The key's network ceiling (`none` when it has none): "host", an allowlist, or a list of modes. */
  network: 'none' | 'host' | Exclude<Policy['network'], string> | ('none' | 'allow' | 'host')[]
}

/** A run's lifecycle, never mixed with its verdict (`result.status`). */
export type RunState = 'queued' | 'running' | 'finished'

/**
 * A run as stored, read without what may be large: its result's summary (what `GET /v1/runs` lists and
 * webhooks send; the whole result is the service's `result()` and the view of `GET /v1/runs/{id}`), and
 * of its request only its command (the whole request, up to the body limit, is `Store.runRequest`).
 */
export interface RunRecord {
  id: string
  /** The key that created it: only that key (or an admin) may read, cancel or list it. */
  keyId: string
  state: RunState
  /** ISO 8601, UTC. */
  createdAt: string
  startedAt: string | null
  finishedAt: string | null
  metadata: Record<string, string>
  /**
   * Its request's command as it is shown (the views' `cmd`): redacted by the run's own redaction and cut
   * to SHOWN_CMD_CHARS when the run is made (shown.ts). The run runs its request's, whole.
   */
  cmd: string[]
  /**
   * Once finished, the library's RunResult without the fields its run's events carried (EndResult: no
   * stdout, stderr, output, logs or network), read without reading the output; null before.
   */
  result: EndResult | null
}

export type RunEventType = 'queued' | 'started' | 'output' | 'log' | 'network' | 'end' | 'interrupted'

/**
 * The run options a request may carry (`POST /v1/runs`'s `options`), as a client writes them: the library's
 * own zod-derived input type, picked as apiOptionsSchema picks it, but for RegExp redactions, which JSON
 * cannot carry.
 */
export type RequestOptions = Omit<z.input<typeof apiOptionsSchema>, 'redact'> & {
  redact?: Extract<NonNullable<z.input<typeof apiOptionsSchema>['redact']>[number], string>[]
}

/** Each event type's `data`, as the API sends it (an `output`'s `data`: text, or base64 when asked). */
export interface RunEventData {
  queued: Record<string, never>
  /** `warm`: whether the run took a warm member (`--warm`). */
  started: { pid: number | null; warm?: boolean }
  output: { stream: 'stdout' | 'stderr'; offset: number; bytes: number; data: string }
  log: LogEntry
  network: NetworkEvent
  /** The result without what the run's events carried (`get` has it whole). */
  end: { result: EndResult }
  /** `worker` (the worker that held it) when `reason` is `worker-lost`. */
  interrupted: { reason: string; worker?: string | null }
}

/**
 * A run as `GET /v1/runs/{id}` shows it, with its whole result: of its request only its command as shown
 * (redacted, cut), and the key that made it.
 */
export type RunView = Omit<RunRecord, 'result'> & { result?: RunResult }

/**
 * A run as `GET /v1/runs` lists it, webhooks send it and `GET /v1/runs/{id}?view=summary` shows it: its
 * result without stdout, stderr, output, logs and network (as its `end` event has it).
 */
export type RunSummaryView = Omit<RunRecord, 'result'> & { result?: EndResult }

/** A run's summary view (`result`: the whole one instead, for its full view). `result` comes last. */
export function runView(run: RunRecord): RunSummaryView
export function runView(run: RunRecord, result: RunResult | null): RunView
export function runView(run: RunRecord, result?: RunResult | null): RunView | RunSummaryView {
  const { id, keyId, state, createdAt, startedAt, finishedAt, cmd, metadata } = run
  const shown = result === undefined ? run.result : result
  return {
    id,
    keyId,
    state,
    createdAt,
    startedAt,
    finishedAt,
    cmd,
    metadata,
    ...(shown ? { result: shown } : {}),
  }
}

/** The fields of a result that a run's own events carry (`output`, `log`, `network`): never in `end`. */
export const STREAMED_FIELDS = ['stdout', 'stderr', 'output', 'logs', 'network'] as const

/** What an `end` event says of a run's result: all of it but what the run's events carried already. */
export type EndResult = Omit<RunResult, (typeof STREAMED_FIELDS)[number]>

/**
 * `result` without the fields its run's events carried: an `end` event holding the output again (three
 * times: stdout, stderr and both) was up to ~48 MiB, stored once more and queued whole for a slow reader.
 * The whole result is the run view's (`GET /v1/runs/{id}`).
 */
export function endResult(result: RunResult): EndResult {
  const { stdout: _o, stderr: _e, output: _m, logs: _l, network: _n, ...rest } = result
  return rest
}

/** One event of a run, numbered per run from 1 with no gap: SSE resumes after any of them. */
export interface RunEvent {
  runId: string
  seq: number
  type: RunEventType
  /** ISO 8601, UTC. */
  at: string
  /**
   * Redacted before it is stored: `output` `{ stream, offset, bytes, data }` (data base64), `end`
   * `{ result }` (an EndResult: no output, logs or network)…
   */
  data: Record<string, unknown>
}

/** A run's kept output: one stream, or both interleaved in arrival order (`output`). */
export type OutputStream = 'stdout' | 'stderr' | 'output'

/** One output event's bytes, and where they start in the stream read. */
export interface OutputSlice {
  start: number
  bytes: Buffer
}

/** One stored output event: its stream, where its bytes end in the stream read, and its bytes. */
export interface OutputChunk {
  stream: 'stdout' | 'stderr'
  end: number
  bytes: Buffer
}

/** A result's text: the fields a finished run's store keeps as its output events' bytes only. */
export const TEXT_FIELDS = ['stdout', 'stderr', 'output'] as const
export type TextField = (typeof TEXT_FIELDS)[number]

/**
 * A finished run's result as stored: whole, or, `textFromEvents`, without its text (stdout, stderr and
 * output), which is its output events' bytes decoded (text.ts).
 */
export interface StoredResult {
  result: Omit<RunResult, TextField> & Partial<Pick<RunResult, TextField>>
  textFromEvents: boolean
}

export interface RunFilter {
  /** Only this key's runs; undefined: every key's (admin). */
  keyId?: string
  state?: RunState
  status?: string
  metadata?: Record<string, string>
  createdAfter?: string
  limit: number
  /** Opaque, from a previous page's `nextCursor`. */
  cursor?: string
}

export type Scope = 'runs:write' | 'runs:read' | 'admin'

/** An API key as stored: its secret only as a hash. */
export interface KeyRecord {
  id: string
  name: string
  /** sha256 of the key, hex; the key itself is shown once, at creation. */
  hash: string
  scopes: Scope[]
  /** The most a request may ask, in the options' own shape (validated by the service's key schema). */
  ceilings: Record<string, unknown>
  quota: { concurrentRuns: number | null; runsPerMinute: number | null }
  /** Injected as env into this key's runs and always redacted. Stored as given (the data dir is 0700). */
  secrets: Record<string, string>
  /** How long this key's finished runs are kept, in ms; null: forever. */
  retentionMs: number | null
  /** Signs this key's webhooks (HMAC-SHA256). */
  webhookSecret: string
  createdAt: string
  revokedAt: string | null
}

/** Durable runs, their events and the keys. Every method is synchronous (SQLite) or a promise (others). */
/** A run as it is made: its validated request (its options, files, stdin…), what the worker runs. */
export type NewRun = Omit<RunRecord, 'state' | 'startedAt' | 'finishedAt' | 'result' | 'cmd'> & {
  /** Never holds key secrets. */
  request: unknown
  /** The command as shown (RunRecord.cmd); the request's own when not given. */
  cmd?: string[]
}

export interface Store {
  createRun(run: NewRun): RunRecord
  getRun(id: string): RunRecord | null
  /** A run's whole request (up to the body limit: its files), for what needs it (its worker, its webhook). */
  runRequest(id: string): unknown
  listRuns(filter: RunFilter): { runs: RunRecord[]; nextCursor: string | null }
  /** queued → running; false when it was not queued (canceled or deleted meanwhile). */
  startRun(id: string, at: string): boolean
  /**
   * queued or running → finished with its result, and its `end` event (`{ result: endResult(result) }`),
   * in one transaction; returns that event, or null when the run was already finished or is gone (a run
   * ends once). A result with text (stdout, stderr or output not empty) is kept without it: that text is
   * the run's output events' bytes, decoded as the worker decodes them (text.ts), rebuilt when read, so
   * that the output is stored once, as bytes (as escaped JSON, 16 MiB of control characters was 192 MB).
   */
  finishRun(id: string, result: RunResult, at: string): RunEvent | null
  /** A finished run's result as stored (null: not finished, or no such run). */
  storedResult(id: string): StoredResult | null
  /** Only a finished run; false when it is not (409). */
  deleteRun(id: string): boolean
  /** Appends the next event of the run and returns it (with its seq). */
  appendEvent(runId: string, type: RunEventType, data: Record<string, unknown>): RunEvent
  /**
   * Events after `afterSeq`, in order, at most `limit`, and no more once `maxBytes` of their data were
   * read (at least one): a page of a history that may be as large as the run's output.
   */
  events(runId: string, afterSeq: number, limit: number, maxBytes?: number): RunEvent[]
  /**
   * The bytes of output events that hold bytes [from, to) of `stream` (`output`: both, interleaved), in
   * order, each with where it starts in that stream; only those events are read.
   */
  outputSlices(runId: string, stream: OutputStream, from: number, to: number): OutputSlice[]
  /**
   * The output events of `stream` (`output`: both, in order) whose bytes end past `after`, at most
   * `limit`, in order: a finished run's text is rebuilt from them a few at a time.
   */
  outputChunks(runId: string, stream: OutputStream, after: number, limit: number): OutputChunk[]
  /** Bytes of `stream` kept so far (`output`: both), from the index: no event is read. */
  outputEnd(runId: string, stream: OutputStream): number
  /** The seq just before the output event holding the last `bytes` of output (0: all of it fits). */
  outputTailSeq(runId: string, bytes: number): number
  /**
   * Appends to a queued run's stdin (null: its end), durably: a write is acknowledged only once stored.
   * A run's stored stdin goes when it starts (takeStdin) or finishes.
   */
  appendStdin(runId: string, data: Buffer | null): void
  /** What a run's stored stdin holds: its bytes, and whether it was closed. */
  stdinState(runId: string): { bytes: number; closed: boolean }
  /** Takes a run's stored stdin as it starts: its chunks in order, and whether it was closed. */
  takeStdin(runId: string): { chunks: Buffer[]; closed: boolean }
  /** At start-up: runs left `running` by a dead server end `error`/`interrupted`; returns their ids. */
  interruptRunning(at: string): string[]
  /** Runs still queued, oldest first (re-queued at start-up). */
  queuedRuns(): RunRecord[]
  /**
   * Finished runs past their key's retention, or past `maxRetentionMs` whatever the key's (null: no such
   * bound), removed with their events; returns how many.
   */
  sweep(now: string, maxRetentionMs?: number | null): number
  /**
   * One attempt to deliver a run's webhook, kept with the run, and in the same transaction what is left
   * to do: `next` (the attempt to make, and when), or null when the delivery is over (delivered, refused or
   * out of attempts). A finished run with a webhook is pending from the moment it finishes.
   */
  recordWebhookAttempt(runId: string, attempt: WebhookAttempt, next?: PendingWebhook | null): void
  webhookAttempts(runId: string): WebhookAttempt[]
  /** Deliveries not over (a restarted server resumes them), soonest first. */
  pendingWebhooks(): ({ runId: string } & PendingWebhook)[]
  /** Gives up a pending delivery (its run or key is gone). */
  dropPendingWebhook(runId: string): void

  /** The id of the key that made a run, without reading the run (null: no such run). */
  runKeyId(id: string): string | null
  /**
   * About how many bytes a run's whole view is (its result as JSON, its text escaped, and metadata),
   * without reading it (0: no such run).
   */
  runViewBytes(id: string): number
  createKey(key: KeyRecord): void
  keyByHash(hash: string): KeyRecord | null
  getKey(id: string): KeyRecord | null
  listKeys(): KeyRecord[]
  revokeKey(id: string, at: string): boolean

  close(): void
}

/** A webhook delivery not over: the attempt to make next, and when (ISO 8601, UTC). */
export interface PendingWebhook {
  attempt: number
  at: string
}

/** One attempt to deliver a run's webhook, as recorded with the run. */
export interface WebhookAttempt {
  /** 1, 2, … */
  attempt: number
  /** ISO 8601, UTC: when it was sent. */
  at: string
  /** The response's status; null when there was none. */
  status: number | null
  /** Why it failed without a response (a network error, a timeout, a refused target); null otherwise. */
  error: string | null
  durationMs: number
}

/** Why the service refused a request: the HTTP layer maps `code` to its status (and `retryAfterS`). */
export type ServiceErrorCode =
  | 'invalid' // 400, naming `field`
  | 'unauthorized' // 401
  | 'forbidden' // 403: a scope, another key's run
  | 'forbidden-option' // 403: a server-only option, naming `field`
  | 'over-ceiling' // 403: more than the key's ceiling, naming `field` and the ceiling
  | 'not-found' // 404
  | 'conflict' // 409: deleting a running run, stdin of a run without it…
  | 'too-large' // 413: a write of stdin past what a run may hold
  | 'quota' // 429, with retryAfterS
  | 'queue-full' // 503, with retryAfterS
  | 'draining' // 503, with retryAfterS
  | 'store-full' // 503, with retryAfterS: the data dir's disk is full, nothing can be stored now

export class ServiceError extends Error {
  constructor(
    readonly code: ServiceErrorCode,
    message: string,
    readonly field?: string,
    readonly retryAfterS?: number,
  ) {
    super(message)
    this.name = 'ServiceError'
  }
}

/**
 * The service as its faces (HTTP, later MCP) use it: every method checks that `key` may do it (its scopes,
 * its own runs unless admin) and throws ServiceError otherwise.
 */
export interface Service {
  /** The key a bearer token stands for; null when none does (or it was revoked). */
  authenticate(token: string): KeyRecord | null
  /** Validates (request schema, server-only options, ceilings), stores it `queued`, enqueues it. */
  submit(key: KeyRecord, body: unknown): RunRecord
  /** What a run of `key` may ask and gets by default: its ceilings and the server's, together. */
  bounds(key: KeyRecord): RunBounds
  /** The run, with its result's summary (cheap: its output is not read). */
  get(key: KeyRecord, id: string): RunRecord
  /**
   * A finished run's whole result, its text rebuilt from its output events (null while it is not
   * finished): as much memory as its output, decoded, twice (its streams, and both in `output`).
   */
  result(key: KeyRecord, id: string): RunResult | null
  /** `keyId`: that key's runs only (a key that is not admin lists its own only: another's is none). */
  list(key: KeyRecord, filter: RunFilter): { runs: RunRecord[]; nextCursor: string | null }
  /** Resolves once the run is finished, or after `ms` with it as it is then. */
  wait(key: KeyRecord, id: string, ms: number): Promise<RunRecord>
  cancel(key: KeyRecord, id: string): RunRecord
  remove(key: KeyRecord, id: string): void
  /**
   * Stored events after `afterSeq`, a page at most. When the page is the last (`more` false), `follow` is
   * called with each later event, after `past` and with no gap or duplicate, until the returned stop().
   * When `more`, nothing is followed: ask again after the page's last event.
   */
  events(
    key: KeyRecord,
    id: string,
    afterSeq: number,
    follow: (event: RunEvent) => void,
  ): { past: RunEvent[]; more: boolean; stop(): void }
  /**
   * Where to start a run's events so that they hold its last `bytes` of output (both streams): the seq to
   * read after, 0 when all of it fits. Earlier events (the run's start, its first logs) are passed over.
   */
  tailAfter(key: KeyRecord, id: string, bytes: number): number
  /** How many bytes of the kept output there are so far: where its tail is read from. */
  outputBytes(key: KeyRecord, id: string, stream: 'stdout' | 'stderr' | 'output'): number
  /** The kept, redacted output as bytes: stdout, stderr or both interleaved (`output`). */
  output(
    key: KeyRecord,
    id: string,
    stream: 'stdout' | 'stderr' | 'output',
    offset: number,
    limit: number,
  ): Buffer
  writeStdin(key: KeyRecord, id: string, data: Buffer): void
  closeStdin(key: KeyRecord, id: string): void

  /** Admin: a new key; `key` and `webhookSecret` are returned this once. */
  createKey(admin: KeyRecord, body: unknown): { record: KeyRecord; key: string }
  listKeys(admin: KeyRecord): KeyRecord[]
  revokeKey(admin: KeyRecord, id: string): void

  /** False once draining began: /readyz answers 503. */
  ready(): boolean
  /** Stops taking runs (503 with Retry-After), lets running ones finish, then resolves. */
  drain(): Promise<void>
  close(): Promise<void>
}
