import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
} from 'node:fs'
import path from 'node:path'
import * as z from 'zod'
import { errorResult, openSpawner, PolicyError, type RunResult, type Spawner } from '../index.js'
import {
  applyCeilings,
  DEFAULT_MAX_RETENTION_MS,
  DEFAULT_MAX_WORKSPACE_BYTES,
  DEFAULT_SERVER_LIMIT_CEILINGS,
  runBounds,
  type ServerLimitCeilings,
} from './ceilings.js'
import { Finisher, type ServiceLog, silentLog } from './finish.js'
import { newKeyRecord } from './key-schema.js'
import { hashKey } from './keys.js'
import { lockDataDir } from './lock.js'
import { RunQueue } from './queue.js'
import {
  type HostOptions,
  hostOptionsSchema,
  type RunRequest,
  runRequestSchema,
  SERVER_ONLY_OPTIONS,
} from './request.js'
import { type RunExtras, runExtras } from './run-extras.js'
import { RunFeed } from './run-feed.js'
import { shownCommand } from './shown.js'
import { newRunId } from './sqlite.js'
import { SqliteSyncStore } from './sqlite-sync.js'
import { RunStdins } from './stdin.js'
import { errorFields, mapStoreFull } from './store-errors.js'
import { viewJson, wholeResult } from './text.js'
import type { KeyRecord, RunEvent, RunEventType, RunRecord, Scope, Service, Store } from './types.js'
import { runView, ServiceError } from './types.js'
import { MAX_WARM, WarmMembers } from './warm.js'
import { checkWebhookUrl, deliverWebhook } from './webhook.js'
import { executeRun, filesDir } from './worker.js'
import { Workspaces } from './workspace.js'

export type { ServiceLog } from './finish.js'

export interface ServiceOptions {
  /** Holds cordon.db, the runs' workspaces (work/) and their collected files (files/). Made 0700. */
  dataDir: string
  /** Runs at once (default 2). */
  concurrency?: number
  /** Runs waiting at most (default 100). */
  maxQueued?: number
  /**
   * Bytes of stdin written to a run and not yet read by it, held at most (default 1 MiB): a write that
   * would pass it is refused (429; 413 for a write larger than it).
   */
  maxStdinBuffered?: number
  /** The same, for all the runs of one key together (default 8 MiB). */
  maxStdinBufferedPerKey?: number
  /** Bytes of collected files kept per run (default 64 MiB). */
  maxCollectBytes?: number
  /**
   * Bytes a run's workspace may hold (default DEFAULT_MAX_WORKSPACE_BYTES, 1 GiB): as root a tmpfs of
   * that size, otherwise measured as the run runs (workspace.ts).
   */
  maxWorkspaceBytes?: number
  /** Mount a tmpfs per workspace (default: as root); false measures them instead. */
  mountWorkspaces?: boolean
  /** How often finished runs past their key's retention are removed (default 1 min). */
  sweepIntervalMs?: number
  /**
   * How long a finished run is kept at most, whatever its key's retention (default 30 days,
   * DEFAULT_MAX_RETENTION_MS; null: as long as its key says, forever for a key with none).
   */
  maxRetentionMs?: number | null
  /** Start runs through one spawner (default true; none when it cannot be opened). */
  useSpawner?: boolean
  /**
   * Warm members kept ready (`--warm`; default 0, at most MAX_WARM): namespace-tier sandboxes made ahead
   * of their runs, each in a workspace of its own (warm.ts). A run of another shape runs cold.
   */
  warm?: number
  /** Called with each run once it is finished (webhooks hang here). Errors are ignored. */
  onFinished?: (run: RunRecord, key: KeyRecord | null) => void
  /**
   * Limits no request may pass, whatever its key's ceilings (the lower of the two bounds). Default:
   * DEFAULT_SERVER_LIMIT_CEILINGS (maxOutputBytes and maxLogBytes 16 MiB, which the server holds itself;
   * wallTimeMs 1 h).
   */
  limitCeilings?: ServerLimitCeilings
  /** Webhooks may target private and loopback addresses (`--allow-private-webhooks`); default false. */
  allowPrivateWebhooks?: boolean
  /** The wait before webhook attempt n+1, in ms (default: 1 s doubling, at most 1 min). */
  webhookBackoff?: (attempt: number) => number
  /**
   * Host paths and host state every run gets, set by the operator (`cordon mcp --cwd DIR --writable DIR`),
   * never by a request: validated by the library's schema (a bad one throws PolicyError naming it). With
   * `cwd`, runs start in it instead of a fresh workspace, and a request's `files` and `collect` are
   * refused (the server writes nothing into the operator's directory; the run's command may, where
   * `writable` lets it). Without, the fresh workspace stays the cwd, and the rest is added to each run.
   */
  hostOptions?: HostOptions
  /**
   * Where the service says what goes wrong outside any request: a store that could not take a run's
   * event, its finish or a webhook attempt (pino's logger fits; default: nothing is said).
   */
  log?: ServiceLog
}

export interface CreatedService {
  service: Service & ServiceExtras & RunExtras
  /** On the first start (no keys yet): the admin key, to show once. */
  adminKey?: string
}

/** What the service offers beyond the Service contract. */
export interface ServiceExtras {
  /** The paths of a run's collected files. */
  files(key: KeyRecord, id: string): string[]
  /** One collected file's bytes. */
  file(key: KeyRecord, id: string, filePath: string): Buffer
  /** One collected file, opened (the caller reads it as its client takes it, and closes the fd). */
  openFile(key: KeyRecord, id: string, filePath: string): { fd: number; size: number }
  /**
   * About how many bytes a run's whole view takes (its result as JSON, its text escaped, and metadata),
   * without loading it.
   */
  viewBytes(key: KeyRecord, id: string): number
  /**
   * A run's whole view (`GET /v1/runs/{id}`) as JSON, a piece at a time as they are taken: its output is
   * read an event at a time, never held whole. The run as it is now (finished or not).
   */
  viewJson(key: KeyRecord, id: string): Iterable<string>
  readonly store: Store
  /** The warm members (`warm`), or null without. */
  readonly warm: WarmMembers | null
}
/** What the service offers a dashboard (run-extras.ts). */
export type { RunExtras } from './run-extras.js'

/** A zod error as ServiceError('invalid'), naming the first issue's dotted path. */
function invalid(error: z.ZodError, prefix = ''): ServiceError {
  const issue = error.issues[0]
  const field = [prefix, ...(issue?.path ?? []).map(String)].filter(Boolean).join('.')
  return new ServiceError('invalid', `${field || 'body'}: ${issue?.message ?? 'invalid'}`, field || undefined)
}

const nowIso = () => new Date().toISOString()

/** The most of a run's stored events read at once: a history may hold as much as the output cap. */
export const EVENT_PAGE = { events: 1000, bytes: 1024 * 1024 }

/** The result of a run canceled before it started: as the library words one. */
function canceledResult(message = 'canceled before start'): RunResult {
  return {
    ...errorResult('signal', message),
    status: 'canceled',
    violation: { kind: 'canceled', limit: 'signal', message },
  }
}

export async function createService(options: ServiceOptions): Promise<CreatedService> {
  const warmSize = options.warm ?? 0
  if (!(Number.isInteger(warmSize) && warmSize >= 0 && warmSize <= MAX_WARM))
    throw new PolicyError('warm', `must be a whole number from 0 to ${MAX_WARM}, got ${warmSize}`)
  let host: HostOptions | undefined
  if (options.hostOptions) {
    const parsed = hostOptionsSchema.safeParse(options.hostOptions)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw new PolicyError((issue?.path ?? []).map(String).join('.'), issue?.message ?? 'invalid')
    }
    host = parsed.data
  }
  mkdirSync(path.resolve(options.dataDir), { recursive: true, mode: 0o700 })
  // Its real path: runs are handed their workspace in it by that path, and a named path reached through
  // a symlink of the server's own uid into what is hidden (the data dir is) is refused (see paths.ts).
  const dataDir = realpathSync(path.resolve(options.dataDir))
  // Before anything is read: a second server would end the first one's running runs as interrupted.
  const lock = lockDataDir(dataDir)
  let store: SqliteSyncStore
  try {
    store = new SqliteSyncStore(dataDir)
  } catch (error) {
    lock.release()
    throw error
  }
  const concurrency = options.concurrency ?? 2
  const log = options.log ?? silentLog
  const limitCeilings = options.limitCeilings ?? DEFAULT_SERVER_LIMIT_CEILINGS
  let spawner: Spawner | undefined
  if (options.useSpawner !== false) {
    try {
      spawner = await openSpawner()
    } catch {
      spawner = undefined // runs fork the host instead
    }
  }

  const followers = new Map<string, Set<(e: RunEvent) => void>>()
  // Every run's state changes, for a list to follow (run-feed.ts).
  const feed = new RunFeed((id) => store.getRun(id))
  const waiters = new Map<string, Set<() => void>>()
  const controllers = new Map<string, AbortController>()
  const stdins = new RunStdins(store, {
    perRun: options.maxStdinBuffered ?? 1024 * 1024,
    perKey: options.maxStdinBufferedPerKey ?? 8 * 1024 * 1024,
  })
  let draining = false
  let closed = false

  const publish = (event: RunEvent) => {
    feed.see(event)
    for (const f of followers.get(event.runId) ?? []) {
      try {
        f(event)
      } catch {
        // a follower's failure is its own
      }
    }
  }
  const emit = (runId: string, type: RunEventType, data: Record<string, unknown>): RunEvent => {
    const event = store.appendEvent(runId, type, data)
    publish(event)
    return event
  }
  // Webhooks go out in the background, each attempt recorded as it ends; close() stops the retries.
  const deliveries = new AbortController()
  let storeClosed = false
  const delivering = new Set<Promise<unknown>>()
  // Each run's delivery, to stop its retries once the run is deleted (by its key, or by retention).
  const deliveryOf = new Map<string, AbortController>()
  const stopDelivery = (runId: string) => {
    deliveryOf.get(runId)?.abort()
    deliveryOf.delete(runId)
  }
  // What is left to do is stored with each attempt (the store made the delivery pending when the run
  // finished), so a restarted server resumes it: `from` is where it was.
  // Never throws: it is called as a run finishes, and a store that fails here fails the delivery alone
  // (still pending in the store, it is resumed by the next start).
  const deliver = (runId: string, from?: { attempt: number; at: string }) => {
    try {
      startDelivery(runId, from)
    } catch (error) {
      log.error({ runId, err: errorFields(error) }, 'could not start the webhook delivery of a run')
    }
  }
  const startDelivery = (runId: string, from?: { attempt: number; at: string }) => {
    const run = store.getRun(runId)
    const url = (store.runRequest(runId) as RunRequest | null)?.webhook?.url
    const key = run && store.getKey(run.keyId)
    if (!run || !url || !key) {
      store.dropPendingWebhook(runId)
      return
    }
    const stop = new AbortController()
    deliveryOf.set(runId, stop)
    // The body is the run's summary (its result without its output, logs and connections: the receiver
    // reads those from the API), made for each attempt from the store. The whole view is up to ~200 MB
    // (16 MiB of control characters, escaped, twice), and every delivery due at once (a restart resumes
    // them all) held one. A run deleted meanwhile ends it.
    const body = () => {
      const now = store.getRun(runId)
      return now ? JSON.stringify(runView(now)) : null
    }
    const sent = deliverWebhook(url, body, key.webhookSecret, {
      allowPrivate: options.allowPrivateWebhooks ?? false,
      signal: AbortSignal.any([deliveries.signal, stop.signal]),
      ...(options.webhookBackoff ? { backoff: options.webhookBackoff } : {}),
      ...(from ? { firstAttempt: from.attempt, delayMs: Math.max(0, Date.parse(from.at) - Date.now()) } : {}),
      onAttempt: (attempt, next) => {
        if (storeClosed) return
        try {
          store.recordWebhookAttempt(runId, attempt, next)
        } catch (error) {
          // The attempt was made all the same; what is left to do stays as last stored.
          log.error(
            { runId, attempt: attempt.attempt, err: errorFields(error) },
            'could not record a webhook attempt',
          )
        }
      },
    })
    delivering.add(sent)
    sent
      .catch((error: unknown) => {
        log.error({ runId, err: errorFields(error) }, 'a webhook delivery failed')
      })
      .finally(() => {
        delivering.delete(sent)
        if (deliveryOf.get(runId) === stop) deliveryOf.delete(runId)
      })
  }

  /** What follows a stored finish: its `end` to followers, waiters, the webhook, the hook. */
  const announce = (runId: string, end: RunEvent | null) => {
    if (end) publish(end)
    for (const w of waiters.get(runId) ?? []) w()
    waiters.delete(runId)
    if (end) deliver(runId)
    if (end && options.onFinished) {
      try {
        const run = store.getRun(runId)
        if (run) options.onFinished(run, store.getKey(run.keyId))
      } catch {
        // a hook's failure is not the run's
      }
    }
  }
  // A finish the store refused is held and stored once it can (finish.ts): no run stays running for ever.
  const finisher = new Finisher(store, log, announce)
  /** A run is over: its result is stored now, or kept and stored as soon as the store can. Never throws. */
  const finished = (runId: string, result: RunResult) => {
    controllers.delete(runId)
    stdins.end(runId)
    finisher.finish(runId, result, nowIso())
  }

  // Every run the queue started reaches finished() (executeRun never throws), whatever the store does.
  const execute = async (runId: string): Promise<void> => {
    let run: RunRecord | null
    let key: KeyRecord | null
    try {
      run = store.getRun(runId)
      key = run && store.getKey(run.keyId)
    } catch (error) {
      finished(
        runId,
        errorResult('store', `the run could not be read from the store: ${errorFields(error).message}`),
      )
      return
    }
    if (!run) return
    let result: RunResult
    if (!key || key.revokedAt !== null) {
      result = errorResult('key', 'the key that submitted this run was revoked')
    } else {
      const controller = controllers.get(runId) ?? new AbortController()
      controllers.set(runId, controller)
      result = await executeRun({
        dataDir,
        runId,
        request: store.runRequest(runId) as RunRequest,
        key,
        spawner,
        signal: controller.signal,
        stdin: stdins.start(runId),
        emit: (type, data) => emit(runId, type, data),
        maxCollectBytes: options.maxCollectBytes ?? 64 * 1024 * 1024,
        workspaces,
        ...(host ? { host } : {}),
        ...(warm ? { warm } : {}),
        onStoreError: (error) =>
          log.error({ runId, err: errorFields(error) }, 'could not store an event of a run: it is stopped'),
      })
    }
    finished(runId, result)
  }

  const queue = new RunQueue({
    store,
    concurrency,
    maxQueued: options.maxQueued ?? 100,
    execute,
    onStoreError: (runId, error) =>
      log.error(
        { runId, err: errorFields(error) },
        'could not start a run: it stays queued, and is tried again',
      ),
  })

  /**
   * A revoked key does nothing more: its waiting runs never start, its running ones are canceled. At
   * once for a revocation made here; within a sweep for one made by `cordon keys revoke` on the data dir.
   */
  const stopRunsOf = (keyId: string) => {
    for (const runId of queue.removeKey(keyId))
      finished(runId, canceledResult('canceled: the key was revoked'))
    for (const [runId, controller] of controllers) {
      if (store.getRun(runId)?.keyId === keyId) controller.abort()
    }
  }

  // Start-up: what a dead server left running is over (its workspaces with it); what it left queued runs now.
  store.interruptRunning(nowIso())
  let workspaces: Workspaces
  try {
    workspaces = await Workspaces.open({
      dataDir,
      maxBytes: options.maxWorkspaceBytes ?? DEFAULT_MAX_WORKSPACE_BYTES,
      ...(options.mountWorkspaces !== undefined ? { mount: options.mountWorkspaces } : {}),
      onMountFailed: (error) =>
        log.warn(
          { err: errorFields(error) },
          'could not mount a tmpfs for the workspaces: each is measured as its run runs instead',
        ),
    })
  } catch (error) {
    store.close()
    lock.release()
    await spawner?.close().catch(() => undefined)
    throw error
  }
  const warm =
    warmSize > 0
      ? new WarmMembers({
          size: warmSize,
          dataDir,
          workspaces,
          host,
          spawner,
          onError: (error) =>
            log.warn({ err: errorFields(error) }, 'could not make a warm member its workspace'),
        })
      : null
  for (const run of store.queuedRuns()) {
    if ((store.runRequest(run.id) as RunRequest).stdin === 'open') stdins.open(run.id, run.keyId)
    queue.push(run.id, run.keyId)
  }
  // Webhooks a dead (or stopped) server still owed, the interrupted runs' included.
  for (const pending of store.pendingWebhooks()) deliver(pending.runId, pending)

  let adminKey: string | undefined
  if (store.listKeys().length === 0) {
    const made = newKeyRecord({ name: 'admin', scopes: ['admin', 'runs:write', 'runs:read'], ceilings: {} })
    store.createKey(made.record)
    adminKey = made.key
  }

  const sweepNow = () => {
    const keyIds = queue.waitingKeys()
    for (const runId of controllers.keys()) {
      const keyId = store.getRun(runId)?.keyId
      if (keyId) keyIds.add(keyId)
    }
    for (const keyId of keyIds) if (store.getKey(keyId)?.revokedAt != null) stopRunsOf(keyId)
    store.sweep(
      nowIso(),
      options.maxRetentionMs === undefined ? DEFAULT_MAX_RETENTION_MS : options.maxRetentionMs,
    )
    for (const runId of [...deliveryOf.keys()]) if (!store.getRun(runId)) stopDelivery(runId)
    // Collected files of runs no longer stored (swept or deleted while we were down).
    const dir = path.join(dataDir, 'files')
    if (!existsSync(dir)) return
    for (const id of readdirSync(dir)) {
      if (!store.getRun(id)) rmSync(path.join(dir, id), { recursive: true, force: true })
    }
  }
  sweepNow()
  const sweeper = setInterval(() => {
    try {
      sweepNow()
    } catch {
      // next time
    }
  }, options.sweepIntervalMs ?? 60_000)
  sweeper.unref()

  const need = (key: KeyRecord, scope: Scope) => {
    if (key.revokedAt !== null) throw new ServiceError('unauthorized', 'this key was revoked')
    if (!key.scopes.includes(scope) && !key.scopes.includes('admin')) {
      throw new ServiceError('forbidden', `this key lacks the ${scope} scope`)
    }
  }
  const own = (key: KeyRecord, id: string, scope: Scope): RunRecord => {
    need(key, scope)
    const run = store.getRun(id)
    if (!run || (run.keyId !== key.id && !key.scopes.includes('admin'))) {
      throw new ServiceError('not-found', `no run ${id}`)
    }
    return run
  }
  /**
   * own(), for a read that needs only to know the run is the key's (its output, events, files, stdin):
   * the run is not loaded, as its request (up to 8 MiB of files) would be parsed for each piece of output
   * read.
   */
  const owns = (key: KeyRecord, id: string, scope: Scope): void => {
    need(key, scope)
    const keyId = store.runKeyId(id)
    if (keyId === null || (keyId !== key.id && !key.scopes.includes('admin'))) {
      throw new ServiceError('not-found', `no run ${id}`)
    }
  }

  const service: Service & ServiceExtras & RunExtras = {
    store,
    warm,
    ...runExtras({
      store,
      submit: (key, body) => service.submit(key, body),
      feed,
      limitCeilings,
      ...(host ? { host } : {}),
    }),

    authenticate(token) {
      const key = store.keyByHash(hashKey(token))
      return key && key.revokedAt === null ? key : null
    },

    bounds(key) {
      return runBounds(key, limitCeilings)
    },

    submit(key, body) {
      need(key, 'runs:write')
      if (closed || draining) throw new ServiceError('draining', 'the server is shutting down', undefined, 5)
      // Server-only options are refused by name before the schema, which would only call them unknown.
      const rawOptions = (body as { options?: unknown } | null)?.options
      if (rawOptions && typeof rawOptions === 'object') {
        for (const field of SERVER_ONLY_OPTIONS) {
          if (Object.hasOwn(rawOptions, field)) {
            throw new ServiceError(
              'forbidden-option',
              `options.${field} is set by the server only`,
              `options.${field}`,
            )
          }
        }
      }
      const parsed = runRequestSchema.safeParse(body)
      if (!parsed.success) throw invalid(parsed.error)
      const request = applyCeilings(key, body, parsed.data, limitCeilings)
      if (host?.cwd !== undefined) {
        for (const field of ['files', 'collect'] as const) {
          if (request[field].length > 0)
            throw new ServiceError(
              'forbidden-option',
              `${field}: runs start in the operator's directory (${host.cwd}), where the server writes and keeps no files; the command itself may write where the operator made it writable`,
              field,
            )
        }
      }
      // A webhook carries the run's result: a key that may not read its runs may not have it sent either.
      if (request.webhook && !key.scopes.includes('runs:read') && !key.scopes.includes('admin'))
        throw new ServiceError('forbidden', 'webhook: this key lacks the runs:read scope', 'webhook')
      // A webhook to a private or loopback address is refused now (400 naming webhook.url), not at delivery.
      if (request.webhook)
        checkWebhookUrl(request.webhook.url, { allowPrivate: options.allowPrivateWebhooks ?? false })
      queue.admit(key)
      const run = store.createRun({
        id: newRunId(),
        keyId: key.id,
        createdAt: nowIso(),
        metadata: request.metadata,
        request,
        cmd: shownCommand(request, key, host),
      })
      if (request.stdin === 'open') stdins.open(run.id, key.id)
      try {
        emit(run.id, 'queued', {})
      } catch (error) {
        // The run is stored: it runs. Only this event of it is missing; refusing now would leave it queued
        // in the store, run by the next start after its client was told it was not taken.
        log.error({ runId: run.id, err: errorFields(error) }, 'could not store the queued event of a run')
      }
      queue.submit(key, run.id)
      return store.getRun(run.id) ?? run
    },

    get(key, id) {
      return own(key, id, 'runs:read')
    },

    result(key, id) {
      owns(key, id, 'runs:read')
      const stored = store.storedResult(id)
      return stored ? wholeResult(store, id, stored) : null
    },

    list(key, filter) {
      need(key, 'runs:read')
      const all = key.scopes.includes('admin')
      if (!all && filter.keyId !== undefined && filter.keyId !== key.id) return { runs: [], nextCursor: null }
      return store.listRuns(all ? filter : { ...filter, keyId: key.id })
    },

    wait(key, id, ms) {
      const run = own(key, id, 'runs:read')
      if (run.state === 'finished' || ms <= 0) return Promise.resolve(run)
      return new Promise((resolve) => {
        const done = () => {
          clearTimeout(timer)
          waiters.get(id)?.delete(done)
          resolve(store.getRun(id) ?? run)
        }
        const timer = setTimeout(done, ms)
        let set = waiters.get(id)
        if (!set) {
          set = new Set()
          waiters.set(id, set)
        }
        set.add(done)
      })
    },

    cancel(key, id) {
      const run = own(key, id, 'runs:write')
      if (run.state === 'queued' && queue.remove(id)) {
        finished(id, canceledResult())
      } else if (run.state === 'running') {
        controllers.get(id)?.abort()
      }
      return store.getRun(id) ?? run
    },

    remove(key, id) {
      const run = own(key, id, 'runs:write')
      if (run.state !== 'finished' || !store.deleteRun(id)) {
        throw new ServiceError('conflict', `run ${id} is ${run.state}: cancel it first`)
      }
      stopDelivery(id)
      feed.removed(run)
      rmSync(filesDir(dataDir, id), { recursive: true, force: true })
    },

    events(key, id, afterSeq, follow) {
      owns(key, id, 'runs:read')
      // Subscribe first, then read what is stored: an event appended in between is both buffered and
      // read, and the seq decides which copy is delivered. One page at most is read: a full page means
      // there may be more, and the caller asks again after it, not followed meanwhile.
      let last = afterSeq
      let stopped = false
      let buffered: RunEvent[] | null = []
      const deliver = (e: RunEvent) => {
        if (stopped || e.seq <= last) return
        last = e.seq
        follow(e)
      }
      const listener = (e: RunEvent) => (buffered ? buffered.push(e) : deliver(e))
      let set = followers.get(id)
      if (!set) {
        set = new Set()
        followers.set(id, set)
      }
      set.add(listener)
      const stop = () => {
        stopped = true
        const s = followers.get(id)
        s?.delete(listener)
        if (s?.size === 0) followers.delete(id)
      }
      const past = store.events(id, afterSeq, EVENT_PAGE.events, EVENT_PAGE.bytes)
      const more = past.length > 0 && store.events(id, past.at(-1)?.seq ?? afterSeq, 1).length > 0
      if (more) {
        stop()
        return { past, more, stop }
      }
      last = past.at(-1)?.seq ?? afterSeq
      // Live events go out only after the caller has `past` in hand, in order.
      queueMicrotask(() => {
        const early = buffered ?? []
        buffered = null
        for (const e of early) deliver(e)
      })
      return { past, more, stop }
    },

    tailAfter(key, id, bytes) {
      owns(key, id, 'runs:read')
      return store.outputTailSeq(id, Math.max(0, bytes))
    },

    outputBytes(key, id, stream) {
      owns(key, id, 'runs:read')
      return store.outputEnd(id, stream)
    },

    output(key, id, stream, offset, limit) {
      owns(key, id, 'runs:read')
      // From the stored events, during the run and after it: the program's bytes as kept and redacted.
      const from = Math.max(0, offset)
      const to = from + Math.max(0, limit)
      const parts: Buffer[] = []
      for (const slice of store.outputSlices(id, stream, from, to)) {
        parts.push(slice.bytes.subarray(Math.max(0, from - slice.start), to - slice.start))
      }
      return Buffer.concat(parts)
    },

    writeStdin(key, id, data) {
      owns(key, id, 'runs:write')
      // A client writing faster than the program reads (or to a run still queued, or to one that never
      // reads) is told to wait, not held without end: see stdin.ts.
      stdins.write(id, data)
    },

    closeStdin(key, id) {
      owns(key, id, 'runs:write')
      stdins.close(id)
    },

    viewBytes(key, id) {
      owns(key, id, 'runs:read')
      return store.runViewBytes(id)
    },

    viewJson(key, id) {
      return viewJson(store, own(key, id, 'runs:read'))
    },

    files(key, id) {
      owns(key, id, 'runs:read')
      const root = filesDir(dataDir, id)
      if (!existsSync(root)) return []
      return readdirSync(root, { recursive: true, withFileTypes: true })
        .filter((d) => d.isFile())
        .map((d) => path.relative(root, path.join(d.parentPath, d.name)))
        .sort()
    },

    file(key, id, filePath) {
      const { fd } = service.openFile(key, id, filePath)
      try {
        return readFileSync(fd)
      } finally {
        closeSync(fd)
      }
    },

    openFile(key, id, filePath) {
      owns(key, id, 'runs:read')
      const root = filesDir(dataDir, id)
      const target = path.resolve(root, filePath)
      let fd: number | undefined
      try {
        // Only what collect() wrote: regular files, inside the run's own directory.
        if (!realpathSync(target).startsWith(`${realpathSync(root)}/`)) throw new Error('outside')
        fd = openSync(target, constants.O_RDONLY | constants.O_NOFOLLOW)
        const st = fstatSync(fd)
        if (!st.isFile()) throw new Error('not a file')
        return { fd, size: st.size }
      } catch {
        if (fd !== undefined) closeSync(fd)
        throw new ServiceError('not-found', `no collected file ${filePath}`)
      }
    },

    createKey(admin, body) {
      need(admin, 'admin')
      let made: ReturnType<typeof newKeyRecord>
      try {
        made = newKeyRecord(body)
      } catch (error) {
        if (error instanceof z.ZodError) throw invalid(error)
        throw error
      }
      store.createKey(made.record)
      return made
    },

    listKeys(admin) {
      need(admin, 'admin')
      return store.listKeys()
    },

    revokeKey(admin, id) {
      need(admin, 'admin')
      if (!store.revokeKey(id, nowIso())) throw new ServiceError('not-found', `no active key ${id}`)
      stopRunsOf(id)
    },

    ready() {
      return !draining && !closed
    },

    async drain() {
      draining = true
      queue.pause()
      await queue.idle()
    },

    async close() {
      if (closed) return
      draining = true
      closed = true
      queue.pause()
      clearInterval(sweeper)
      for (const c of controllers.values()) c.abort()
      await queue.idle()
      await warm?.close()
      for (const set of waiters.values()) for (const w of set) w()
      waiters.clear()
      followers.clear()
      if (spawner) await spawner.close().catch(() => undefined)
      // Retries stop; an attempt in flight ends (its own timeout bounds it) and is recorded.
      deliveries.abort()
      await Promise.allSettled([...delivering])
      // Finishes the store refused: one last try. What it still refuses stays `running` in the store, and
      // the next start ends it `interrupted`, as after a crash.
      finisher.close()
      storeClosed = true
      store.close()
      await workspaces.close()
      lock.release()
    },
  }
  // A full store, whatever method meets it, is a 503 with Retry-After for the client, never a 500.
  return { service: mapStoreFull(service), ...(adminKey ? { adminKey } : {}) }
}
