// The store's contract: runs, their events and stdin, keys, webhooks, workers. Every method is a promise,
// so that a store on a server (PostgreSQL, for API nodes and workers on many machines) is one more
// implementation of it, beside SQLite (one machine: `cordon serve` alone), and one contract test suite
// runs against both (test/service/store-contract.ts).
//
// The store is the truth. Who runs a run is decided here by one compare-and-set (claimRun: queued ->
// running), and every later write of that worker carries the fence the claim returned: a worker that lost
// its run (its lease ran out while it was frozen, or the run was reaped) writes nothing more of it.
import type { RunResult } from '../index.js'
import type {
  KeyRecord,
  NewRun,
  OutputChunk,
  OutputSlice,
  OutputStream,
  PendingWebhook,
  RunEvent,
  RunEventType,
  RunFilter,
  RunRecord,
  RunState,
  StoredResult,
  WebhookAttempt,
} from './types.js'

/** The lease a claim gave: which worker runs the run, and which attempt of it (the fencing token). */
export interface Fence {
  workerId: string
  attempt: number
}

/** A write carrying a fence that is no longer the run's: the worker lost it and must stop its sandbox. */
export class FencedError extends Error {
  constructor(readonly runId: string) {
    super(`run ${runId} is no longer this worker's (its lease ended or it was reaped)`)
    this.name = 'FencedError'
  }
}

/** The server's bounds on admission, beside the key's own quota (KeyRecord.quota). */
export interface AdmissionBounds {
  /** Runs queued in all, at most: past it `queue-full`. A bound, not exact across API nodes. */
  maxQueued: number
}

/** An event to append: the store numbers it. */
export interface NewEvent {
  type: RunEventType
  data: Record<string, unknown>
}

/** A machine that runs sandboxes (`cordon worker`, or the service's own workers). */
export interface WorkerInfo {
  id: string
  host: string
  pid: number
  version: string
  concurrency: number
}

export interface WorkerRecord extends WorkerInfo {
  startedAt: string
  heartbeatAt: string
  draining: boolean
  /** Runs it holds now. */
  running: number
}

/** Why a worker must stop one of its runs (the heartbeat's answer). */
export interface StopOrder {
  runId: string
  reason: 'canceled' | 'revoked' | 'lost'
}

/** A run of stdin bytes as stored (or its end, `data: null`), numbered per run. */
export interface StdinChunk {
  seq: number
  data: Buffer | null
}

/** What stdin a run may hold stored and not yet taken by its worker, per run and per key. */
export interface StdinBounds {
  perRun: number
  perKey: number
}

export interface RunStore {
  // ---- runs
  /**
   * Admits the run (the key's quota: runs queued or running at once, runs admitted a minute; the queue's
   * bound) and stores it `queued` with its `queued` event, in one transaction: both or neither. Throws
   * ServiceError `quota` (with retryAfterS) or `queue-full`.
   */
  admitRun(key: KeyRecord, run: NewRun, bounds: AdmissionBounds): Promise<RunRecord>
  /** The run, with its result's summary (its output is not read); null when there is none. */
  getRun(id: string): Promise<RunRecord | null>
  /** A run's whole request (its files, stdin…): for its worker and its webhook. */
  runRequest(id: string): Promise<unknown>
  listRuns(filter: RunFilter): Promise<{ runs: RunRecord[]; nextCursor: string | null }>
  /** The id of the key that made a run, without reading the run (null: no such run). */
  runKeyId(id: string): Promise<string | null>
  /** About how many bytes a run's whole view is, without reading it (0: no such run). */
  runViewBytes(id: string): Promise<number>
  /**
   * queued -> running for `workerId`, its lease `leaseMs` from now (by the store's clock), attempt + 1:
   * the fence every later write of that worker carries. Null when the run is not queued (taken, finished,
   * deleted) or its cancel was asked: the caller must not run it. Exactly one of many concurrent claims of
   * one run succeeds.
   */
  claimRun(id: string, workerId: string, leaseMs: number): Promise<Fence | null>
  /**
   * queued or running -> finished with its result, its `end` event (`{ result: endResult(result) }`) and
   * its webhook pending, in one transaction; that event, or null when the run was finished already or is
   * gone (a run ends once). With a fence: only while the run is running under that fence (else null).
   * A result's text (stdout, stderr, output) is not stored: it is the output events' bytes (text.ts).
   */
  finishRun(id: string, result: RunResult, fence?: Fence): Promise<RunEvent | null>
  /** A finished run's result as stored (null: not finished, or no such run). */
  storedResult(id: string): Promise<StoredResult | null>
  /** Only a finished run, with its events, stdin and webhook state; false when it is not (409). */
  deleteRun(id: string): Promise<boolean>
  /**
   * Marks that the run's cancel was asked (a claim of it then fails, a heartbeat of its worker is told to
   * stop it), and says where it stands; null when there is no such run.
   */
  requestCancel(id: string): Promise<{ state: RunState; workerId: string | null } | null>

  // ---- events (one writer per run: its worker, under its fence; or the service itself, unfenced)
  /**
   * Appends events in order and returns them numbered (seq from 1, no gap). With a fence, throws
   * FencedError when the run is no longer running under it (nothing is appended).
   */
  appendEvents(runId: string, batch: NewEvent[], fence?: Fence): Promise<RunEvent[]>
  /**
   * Events after `afterSeq`, in order, at most `limit`, and no more once `maxBytes` of their data were
   * read (at least one): a page of a history that may be as large as the run's output.
   */
  events(runId: string, afterSeq: number, limit: number, maxBytes?: number): Promise<RunEvent[]>
  /** The bytes of the output events holding bytes [from, to) of `stream`, each with where it starts. */
  outputSlices(runId: string, stream: OutputStream, from: number, to: number): Promise<OutputSlice[]>
  /** The output events of `stream` whose bytes end past `after`, at most `limit`, in order. */
  outputChunks(runId: string, stream: OutputStream, after: number, limit: number): Promise<OutputChunk[]>
  /** Bytes of `stream` kept so far, from the index: no event is read. */
  outputEnd(runId: string, stream: OutputStream): Promise<number>
  /** The seq just before the output event holding the last `bytes` of output (0: all of it fits). */
  outputTailSeq(runId: string, bytes: number): Promise<number>

  // ---- stdin ("stdin": "open"), stored until its worker has written it into the sandbox
  /**
   * Appends to a run's stdin (`null`: its end), acknowledged once stored. Refused, whole, when what the
   * run or its key holds stored and not yet taken would pass `bounds` (ServiceError `quota`, or
   * `too-large` for a write larger than a bound by itself), or when its stdin is closed or the run is
   * finished (`conflict`).
   */
  appendStdin(runId: string, keyId: string, data: Buffer | null, bounds: StdinBounds): Promise<void>
  /** A run's stdin after `afterSeq` (its worker), at most `limit` chunks. */
  readStdin(runId: string, afterSeq: number, limit: number): Promise<StdinChunk[]>
  /** The worker wrote the chunks up to `seq` into the sandbox: they no longer count against the bounds. */
  ackStdin(runId: string, seq: number, fence?: Fence): Promise<void>
  /** What a run's stdin holds not yet taken, and whether it was closed. */
  stdinState(runId: string): Promise<{ bytes: number; closed: boolean }>

  // ---- recovery and liveness
  /**
   * One machine, at start-up: every run left `running` (its worker was the dead process) ends `error`,
   * limit `interrupted`, with `interrupted` and `end` events; their ids. Never in scale-out mode (it would
   * end the runs of every other machine): reapLostRuns is.
   */
  interruptRunning(): Promise<string[]>
  /** Runs queued longer than `olderThanMs`, oldest first, at most `limit`: to be queued again (idempotent). */
  queuedRuns(olderThanMs: number, limit: number): Promise<{ id: string; keyId: string }[]>
  registerWorker(info: WorkerInfo): Promise<void>
  /**
   * Renews the worker's heartbeat and the leases of its running runs, by the store's clock; answers the
   * runs it must stop: a cancel asked, a key revoked, or a run that is no longer its own.
   */
  heartbeat(workerId: string, leaseMs: number): Promise<StopOrder[]>
  /** The worker stops (drained, or gone): it holds no run any more. */
  deregisterWorker(workerId: string): Promise<void>
  listWorkers(): Promise<WorkerRecord[]>
  /**
   * Ends the running runs whose lease ran out (or whose worker is known gone): `error`, limit
   * `worker-lost`, with `interrupted` and `end` events and the webhook pending, each in one transaction;
   * their ids. Safe from many nodes at once (each run is ended once).
   */
  reapLostRuns(): Promise<string[]>

  // ---- retention and webhooks
  /**
   * Finished runs past their key's retention, or past `maxRetentionMs` whatever the key's (null: no such
   * bound), removed with everything of theirs; how many.
   */
  sweep(maxRetentionMs: number | null): Promise<number>
  /**
   * One attempt to deliver a run's webhook, and in the same transaction what is left: `next` (the attempt
   * to make, and when), or null when the delivery is over.
   */
  recordWebhookAttempt(runId: string, attempt: WebhookAttempt, next: PendingWebhook | null): Promise<void>
  webhookAttempts(runId: string): Promise<WebhookAttempt[]>
  /**
   * At most `limit` deliveries due now, each leased to `nodeId` for `leaseMs` (another node does not take
   * it meanwhile; it is taken again once the lease ends without an attempt recorded).
   */
  claimDueWebhooks(
    nodeId: string,
    limit: number,
    leaseMs: number,
  ): Promise<({ runId: string } & PendingWebhook)[]>
  /** Deliveries not over, soonest first (what a start resumes). */
  pendingWebhooks(): Promise<({ runId: string } & PendingWebhook)[]>
  /** Gives up a pending delivery (its run or key is gone). */
  dropPendingWebhook(runId: string): Promise<void>

  // ---- keys
  createKey(key: KeyRecord): Promise<void>
  keyByHash(hash: string): Promise<KeyRecord | null>
  getKey(id: string): Promise<KeyRecord | null>
  listKeys(): Promise<KeyRecord[]>
  revokeKey(id: string, at: string): Promise<boolean>

  // ---- the store itself
  /** The schema version the store is at. */
  version(): Promise<number>
  close(): Promise<void>
}

/**
 * A run's collected files: on the data dir's disk with one machine, in the store's database (a blob table)
 * when API nodes and workers are on different machines. Workers write them, API nodes read them.
 */
export interface RunFiles {
  /** Keeps one file of a run (its bytes already redacted and within the run's cap). */
  put(runId: string, path: string, data: Buffer, fence?: Fence): Promise<void>
  /** The paths a run keeps, sorted. */
  list(runId: string): Promise<string[]>
  /** One file, to be read as its client takes it; null when there is no such file. */
  open(runId: string, path: string): Promise<{ size: number; stream: ReadableStream<Uint8Array> } | null>
  /** Everything of a run (deleted, or swept). */
  remove(runId: string): Promise<void>
}
