// The HTTP API: a thin face over the Service. Every route authenticates the bearer key (or the dashboard's
// session cookie: ui.ts), hands the request to the service (which checks scopes, ownership, the request
// schema, server-only options and ceilings) and maps what it throws to one error shape:
// `{ "error": { "code", "message", "field"? } }`, never a stack trace. The handlers parse bodies
// themselves rather than through zod-openapi's validators, so a server-only option is the service's 403
// (not a strict schema's 400), and the OpenAPI document is still generated from the very schemas the
// service validates with.
import { createReadStream } from 'node:fs'
import { Readable } from 'node:stream'
import { OpenAPIHono } from '@hono/zod-openapi'
import type { Context, MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import { Counter, Histogram, Registry } from 'prom-client'
import * as z from 'zod'
import { durationSchema } from '../../index.js'
import { hostChecker } from '../hosts.js'
import { REQUEST_BOUNDS } from '../request.js'
import type { RunExtras, ServiceExtras } from '../service.js'
import {
  type KeyRecord,
  type RunEvent,
  type RunRecord,
  runView,
  type Service,
  ServiceError,
} from '../types.js'
import { parseJsonBody } from './body.js'
import { type ByteBudget, bodyCost, byteBudget } from './inflight.js'
import { registerOpenApi } from './openapi.js'
import { registerRunExtras } from './routes/run-extras.js'
import { eventsQuerySchema, getQuerySchema, listQuerySchema, outputQuerySchema } from './schemas.js'
import { sseStream } from './sse.js'
import { createSessions, pageTokenOk, SESSION_HEADER, sameOrigin, sessionOf, uiRoutes } from './ui.js'
import { keyView } from './views.js'

/** The log calls the app makes (pino's shape). */
export interface AppLogger {
  info(obj: Record<string, unknown>, msg?: string): void
  error(obj: Record<string, unknown>, msg?: string): void
}

export interface AppOptions {
  /** Largest request body, bytes (413 past it). Default 8 MiB. */
  maxBodyBytes?: number
  /** Longest `wait` a request gets, ms. Default 60 s. */
  maxWaitMs?: number
  /** Between SSE heartbeat comments, ms. Default 15 s. */
  heartbeatMs?: number
  /** Event streams open at once, per key (default 8) and in all (default 256); past it 429. */
  maxStreamsPerKey?: number
  maxStreams?: number
  /** Long polls (`wait`) held at once, per key (default 32) and in all (default 1024); past it 429. */
  maxWaitsPerKey?: number
  maxWaits?: number
  /** Bytes an event stream holds for a client that reads slowly (default 256 KiB). */
  maxStreamQueuedBytes?: number
  /**
   * Bytes of big answers (run views carry their output) being sent at once (default 256 MiB), and per key
   * (default 64 MiB, past its first answer); past it 503 with Retry-After.
   */
  maxAnswerBytesInFlight?: number
  maxAnswerBytesInFlightPerKey?: number
  /**
   * Answers sent a piece at a time as their client reads (a collected file, a range of output, a big view)
   * at once, per key (default 16) and in all (default 512); past it 429. A response has no timeout: a
   * client that reads nothing holds its connection (and a file's fd) for as long as it likes.
   */
  maxAnswersPerKey?: number
  maxAnswers?: number
  /** Request bodies held at once, bytes, by their length (default 64 MiB); past it 503. */
  maxBodyBytesInFlight?: number
  /** The most of that one key holds past its first body (default a quarter of it). */
  maxBodyBytesInFlightPerKey?: number
  /** Where request and error lines go; none by default. */
  logger?: AppLogger
  /** How long a dashboard session lasts, ms (default 12 h). */
  sessionTtlMs?: number
  /** Routes a higher layer adds (the MCP endpoint), behind the same bearer keys and body limit. */
  mounts?: AppMount[]
  /** Serve /metrics without a key (default false: it needs a key with the admin scope). */
  publicMetrics?: boolean
  /**
   * Host names served besides IP literals, localhost and *.localhost (`.corp.example`: it and its
   * subdomains; `any`: every Host), parsed by allowedHostsSchema. Any other Host is 403: DNS rebinding.
   */
  allowedHosts?: readonly string[]
}

/**
 * A route the app serves without knowing what it is: the request as it came, the caller's key, and the
 * app's budget of answer bytes being sent (shared with /v1's big answers: one bound, per key and in all).
 */
export interface AppMount {
  path: string
  handler(request: Request, key: KeyRecord, context: MountContext): Promise<Response>
}

export interface MountContext {
  /** Bytes of answers being sent, by owner (the key's id): take before holding, give once sent. */
  answers: ByteBudget
}

export const DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
/** What an answer read from disk or the store (a file, a range of output) holds for its client at once. */
const ANSWER_PIECE = 256 * 1024
export const DEFAULT_MAX_WAIT_MS = 60_000
export const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT = 64 * 1024 * 1024

/** For everything but the pages: nothing loads, nothing runs, nothing frames it. */
const API_CSP = "default-src 'none'; sandbox; frame-ancestors 'none'"

type ErrorCode = ServiceError['code'] | 'too-large' | 'busy' | 'internal' | 'not-implemented'

const STATUS: Record<ErrorCode, ContentfulStatusCode> = {
  invalid: 400,
  unauthorized: 401,
  forbidden: 403,
  'forbidden-option': 403,
  'over-ceiling': 403,
  'not-found': 404,
  conflict: 409,
  'too-large': 413,
  quota: 429,
  'queue-full': 503,
  busy: 503,
  draining: 503,
  'store-full': 503,
  internal: 500,
  'not-implemented': 501,
}

type Env = {
  Variables: { key: KeyRecord; token: string; bodyRead: () => void; session: string | undefined }
}

function errorBody(code: ErrorCode, message: string, field?: string) {
  return { error: { code, message, ...(field ? { field } : {}) } }
}

/** The first issue of a zod error, as the field it names (dotted) and its message. */
function zodIssue(error: z.ZodError, prefix = ''): { field: string; message: string } {
  const issue = error.issues[0]
  // An unknown key is reported on its object: the field at fault is the key itself.
  const key = issue?.code === 'unrecognized_keys' && issue.keys.length === 1 ? issue.keys : []
  const path = [prefix, ...(issue?.path ?? []).map(String), ...key].filter(Boolean).join('.')
  return { field: path, message: issue?.message ?? 'invalid' }
}

/** Whether `key` may read runs (their state, result, output): `runs:read`, or admin. */
const mayRead = (key: KeyRecord) => key.scopes.includes('runs:read') || key.scopes.includes('admin')

function parseQuery<S extends z.ZodType>(schema: S, query: Record<string, string>): z.output<S> {
  const parsed = schema.safeParse(query)
  if (!parsed.success) {
    const { field, message } = zodIssue(parsed.error)
    throw new ServiceError('invalid', `${field || 'query'}: ${message}`, field || undefined)
  }
  return parsed.data
}

export interface App {
  app: OpenAPIHono<Env>
  /** The app's Prometheus metrics (served at /metrics). */
  registry: Registry
}

/** The service, and the collected files of its runs when it keeps them (createService's does). */
export type AppService = Service &
  Partial<Pick<ServiceExtras, 'files' | 'file' | 'openFile' | 'viewBytes' | 'viewJson'>> &
  Partial<RunExtras>

export function createApp(service: AppService, opts: AppOptions = {}): App {
  const maxBodyBytes = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  const maxWaitMs = opts.maxWaitMs ?? DEFAULT_MAX_WAIT_MS
  const heartbeatMs = opts.heartbeatMs ?? 15_000
  const log = opts.logger

  /**
   * Held requests (event streams, long polls) counted per key and in all: each holds a socket, timers and
   * a follower in this process, so a key (or every key together) may hold only so many.
   */
  const holds = (perKey: number, total: number, what: string) => {
    const byKey = new Map<string, number>()
    let all = 0
    const full = (key: KeyRecord) => (byKey.get(key.id) ?? 0) >= perKey || all >= total
    const take = (key: KeyRecord): (() => void) => {
      const mine = byKey.get(key.id) ?? 0
      if (mine >= perKey || all >= total)
        throw new ServiceError(
          'quota',
          mine >= perKey ? `this key holds ${perKey} ${what} already` : `the server holds ${total} ${what}`,
          undefined,
          1,
        )
      byKey.set(key.id, mine + 1)
      all++
      let released = false
      return () => {
        if (released) return
        released = true
        all--
        const left = (byKey.get(key.id) ?? 1) - 1
        if (left > 0) byKey.set(key.id, left)
        else byKey.delete(key.id)
      }
    }
    return Object.assign(take, { full })
  }
  const holdStream = holds(opts.maxStreamsPerKey ?? 8, opts.maxStreams ?? 256, 'event streams')
  // Each key's open event streams, to end them the moment the key is revoked here (one revoked by
  // `cordon keys revoke` ends at the next heartbeat's check).
  const streamsOf = new Map<string, Set<(reason: string) => void>>()
  const endStreamsOf = (keyId: string, reason: string) => {
    for (const close of [...(streamsOf.get(keyId) ?? [])]) close(reason)
    streamsOf.delete(keyId)
  }
  const holdWait = holds(opts.maxWaitsPerKey ?? 32, opts.maxWaits ?? 1024, 'long polls')
  const holdAnswer = holds(opts.maxAnswersPerKey ?? 16, opts.maxAnswers ?? 512, 'answers being sent')
  /**
   * `body` as an answer of `key`'s sent as its client reads: it holds one of the key's answers until it
   * has ended, failed or been canceled, and a revocation of the key here ends it, with its connection (a
   * client that reads nothing would not see a stream's end).
   */
  const sending = (c: Context<Env>, body: ReadableStream<Uint8Array>, release: () => void) => {
    const key = c.get('key')
    const reader = body.getReader()
    let done = false
    const end = () => {
      if (done) return
      done = true
      release()
      streamsOf.get(key.id)?.delete(close)
    }
    const close = () => {
      end()
      reader.cancel().catch(() => {})
      ;(c.env as { outgoing?: { destroy?: () => void } } | undefined)?.outgoing?.destroy?.()
    }
    let set = streamsOf.get(key.id)
    if (!set) {
      set = new Set()
      streamsOf.set(key.id, set)
    }
    set.add(close)
    return new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          try {
            const { done: over, value } = await reader.read()
            if (!over) return controller.enqueue(value)
            end()
            controller.close()
          } catch (error) {
            end()
            controller.error(error)
          }
        },
        cancel(reason) {
          end()
          return reader.cancel(reason)
        },
      },
      { highWaterMark: 0 },
    )
  }

  const waitHeld = async (key: KeyRecord, id: string, ms: number) => {
    const release = holdWait(key)
    try {
      return await service.wait(key, id, ms)
    } finally {
      release()
    }
  }

  const registry = new Registry()
  const latency = new Histogram({
    name: 'cordon_http_request_duration_seconds',
    help: 'HTTP requests by route and status, in seconds',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.005, 0.025, 0.1, 0.5, 2.5, 10, 60],
    registers: [registry],
  })
  const submitted = new Counter({
    name: 'cordon_runs_submitted_total',
    help: 'Runs accepted by POST /v1/runs',
    registers: [registry],
  })
  const started = new Counter({
    name: 'cordon_runs_started_total',
    help: 'Runs accepted here that started, by path: in a warm member (--warm) or cold',
    labelNames: ['path'],
    registers: [registry],
  })
  const finished = new Counter({
    name: 'cordon_runs_finished_total',
    help: 'Runs accepted here that finished, by status and isolation tier',
    labelNames: ['status', 'isolation'],
    registers: [registry],
  })

  /** Counts the run's end (its `end` or `interrupted` event) once, then stops following it. */
  const countEnd = (key: KeyRecord, id: string) => {
    let stop: (() => void) | null = null
    let done = false
    const see = (event: RunEvent) => {
      if (!done && event.type === 'started')
        started.inc({ path: (event.data as { warm?: unknown }).warm === true ? 'warm' : 'cold' })
      if (done || (event.type !== 'end' && event.type !== 'interrupted')) return
      done = true
      const result = (event.data as { result?: { status?: unknown; isolation?: unknown } }).result
      finished.inc({
        status: typeof result?.status === 'string' ? result.status : event.type,
        isolation: typeof result?.isolation === 'string' ? result.isolation : 'none',
      })
      stop?.()
    }
    try {
      let sub = service.events(key, id, 0, see)
      for (;;) {
        for (const event of sub.past) see(event)
        if (!sub.more || done) break
        sub = service.events(key, id, sub.past.at(-1)?.seq ?? 0, see)
      }
      stop = sub.stop
      if (done) sub.stop()
    } catch {
      // deleted already, or the key lost its read scope: not counted
    }
  }

  const app = new OpenAPIHono<Env>()

  app.onError((error, c) => {
    if (error instanceof ServiceError) {
      if (error.retryAfterS !== undefined)
        c.header('Retry-After', String(Math.max(1, Math.ceil(error.retryAfterS))))
      return c.json(errorBody(error.code, error.message, error.field), STATUS[error.code])
    }
    if (error instanceof z.ZodError) {
      const { field, message } = zodIssue(error)
      return c.json(errorBody('invalid', field ? `${field}: ${message}` : message, field || undefined), 400)
    }
    // PolicyError (by name: the face needs no class of the engine to tell it)
    const named = error as { name?: unknown; field?: unknown; reason?: unknown }
    if (named.name === 'PolicyError' && typeof named.field === 'string') {
      const reason = typeof named.reason === 'string' ? named.reason : error.message
      return c.json(errorBody('invalid', `${named.field}: ${reason}`, named.field), 400)
    }
    log?.error({ err: { message: error.message, stack: error.stack }, path: c.req.path }, 'request failed')
    return c.json(errorBody('internal', 'internal error'), 500)
  })
  app.notFound((c) => c.json(errorBody('not-found', `no route ${c.req.method} ${c.req.path}`), 404))

  // HEAD runs the GET route; hono then drops its body unread, never cancelled. A body that holds
  // something until it is read or cancelled (a file's fd, a view's share of the answer budget, an event
  // stream's place among its key's) would hold it for the server's life, one per HEAD: it is cancelled
  // here, and the answer keeps its status and headers only.
  app.use('*', async (c, next) => {
    await next()
    if (c.req.method !== 'HEAD' || c.res.body === null) return
    const res = c.res
    c.res = undefined
    c.res = new Response(null, res)
    res.body?.cancel().catch(() => {})
  })
  // What the API serves is often a program's bytes (its output, its collected files), on the dashboard's
  // origin: no browser may sniff them into a page, run them, or frame them. The pages set their own policy.
  app.use('*', async (c, next) => {
    await next()
    c.res.headers.set('X-Content-Type-Options', 'nosniff')
    if (!c.res.headers.has('Content-Security-Policy')) c.res.headers.set('Content-Security-Policy', API_CSP)
  })
  app.use('*', async (c, next) => {
    const start = process.hrtime.bigint()
    await next()
    const seconds = Number(process.hrtime.bigint() - start) / 1e9
    // The route's pattern, not its path: one series per route, not per run id.
    const route = c.req.routePath === '/*' ? 'unmatched' : c.req.routePath
    latency.observe({ method: c.req.method, route, status: String(c.res.status) }, seconds)
    log?.info({ method: c.req.method, path: c.req.path, status: c.res.status, ms: seconds * 1000 }, 'request')
  })

  // DNS rebinding: a page of another name that resolves to this server is refused before anything else,
  // on every path (the pages, the API, its event streams, /mcp, the probes), key or no key.
  const hostAllowed = hostChecker(opts.allowedHosts ?? [])
  app.use('*', async (c, next) => {
    // The Host, and the target's authority: an absolute-form target (`GET http://evil.example/`) names
    // the host the request is for, whatever the Host says, and the app's URL is built from it.
    const header = c.req.header('host')
    const target = new URL(c.req.url).host
    const host = hostAllowed(header) ? target : header
    if (hostAllowed(host)) return next()
    const name = host?.replace(/:\d*$/, '').replace(/\.$/, '').toLowerCase()
    return c.json(
      errorBody(
        'forbidden',
        `Host ${JSON.stringify(host)} is not served (DNS rebinding): start cordon serve with ` +
          `--allowed-host ${name} to serve it`,
      ),
      403,
    )
  })

  // The dashboard's sessions: with no Authorization header, its cookie and its page token (the header the
  // page sends) stand for the key it was made with. The cookie alone is nothing: it reaches every port of
  // the host (ui.ts). A page of another origin is refused whatever it sends.
  const sessions = createSessions(service, opts.sessionTtlMs)
  const auth: MiddlewareHandler<Env> = async (c, next) => {
    const session = c.req.header('authorization') === undefined ? sessionOf(c, sessions) : null
    if (session) {
      if (!sameOrigin(c))
        return c.json(errorBody('forbidden', 'a request signed in by cookie must come from this origin'), 403)
      if (!pageTokenOk(c, session)) {
        c.header('WWW-Authenticate', 'Bearer')
        return c.json(
          errorBody(
            'unauthorized',
            `the session cookie needs the ${SESSION_HEADER} header the dashboard sends: sign in again`,
          ),
          401,
        )
      }
      c.set('key', session.key)
      c.set('token', session.token)
      c.set('session', session.id)
      return next()
    }
    const header = c.req.header('authorization') ?? ''
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header)
    const key = m ? service.authenticate(m[1] as string) : null
    if (!key) {
      c.header('WWW-Authenticate', 'Bearer')
      return c.json(
        errorBody('unauthorized', m ? 'unknown or revoked key' : 'needs Authorization: Bearer <key>'),
        401,
      )
    }
    c.set('key', key)
    c.set('token', m?.[1] as string)
    await next()
  }
  app.use('/v1/*', auth)
  const inFlight = opts.maxBodyBytesInFlight ?? DEFAULT_MAX_BODY_BYTES_IN_FLIGHT
  const bodies = byteBudget(inFlight, opts.maxBodyBytesInFlightPerKey ?? Math.floor(inFlight / 4))
  const holdBody: MiddlewareHandler<Env> = async (c, next) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD' || c.req.method === 'DELETE') return next()
    const cost = bodyCost(c.req.header('content-length'), maxBodyBytes)
    const owner = c.get('key').id
    if (!bodies.take(cost, owner)) {
      c.header('Retry-After', '1')
      return c.json(errorBody('busy', 'the server is receiving too many request bodies at once: retry'), 503)
    }
    // Given back once the body is read (a submission may then wait a minute for its run), or at the end.
    let held = true
    c.set('bodyRead', () => {
      if (held) bodies.give(cost, owner)
      held = false
    })
    try {
      await next()
    } finally {
      c.get('bodyRead')()
    }
  }
  const limitBody = bodyLimit({
    maxSize: maxBodyBytes,
    onError: (c) => c.json(errorBody('too-large', `the body must be at most ${maxBodyBytes} bytes`), 413),
  })
  app.use('/v1/*', holdBody, limitBody)

  // Answers as big as a run's output (its view carries stdout, stderr and output) are held until their
  // client has read them: each takes its size from a budget, per key and in all, while it is sent, a piece
  // at a time as the client reads (node-server writes with backpressure), and gives it back at the end or
  // when the client goes. A small answer takes nothing.
  const answers = byteBudget(
    opts.maxAnswerBytesInFlight ?? 256 * 1024 * 1024,
    opts.maxAnswerBytesInFlightPerKey ?? 64 * 1024 * 1024,
  )

  // A higher layer's routes (/mcp), behind the same keys and body bounds, and the same answer budget.
  for (const mount of opts.mounts ?? []) {
    app.use(mount.path, auth, holdBody, limitBody)
    app.all(mount.path, (c) => mount.handler(c.req.raw, c.get('key'), { answers }))
  }
  const heldJson = (
    c: Context<Env>,
    value: unknown,
    status: ContentfulStatusCode = 200,
    { refusable = true } = {},
  ): Response => {
    const text = JSON.stringify(value)
    if (text.length < ANSWER_PIECE) return c.json(value, status)
    const data = Buffer.from(text)
    const owner = c.get('key').id
    // A submission's answer is sent even past the budget (counted, so that reads wait): refusing it
    // would tell the client no while its run goes on. Long polls bound how many there are.
    // A submission's answer is not counted among the key's answers either (its run is made).
    const holding = refusable ? holdAnswer(c.get('key')) : () => {}
    if (!answers.take(data.length, owner) && !(refusable === false && answers.force(data.length, owner))) {
      holding()
      c.header('Retry-After', '1')
      return c.json(errorBody('busy', 'the server is sending too many big answers at once: retry'), 503)
    }
    let at = 0
    const release = () => {
      answers.give(data.length, owner)
      holding()
    }
    const pieces = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (at >= data.length) return controller.close()
          controller.enqueue(data.subarray(at, at + ANSWER_PIECE))
          at += ANSWER_PIECE
        },
      },
      { highWaterMark: 0 },
    )
    return c.body(sending(c, pieces, release), status, {
      'Content-Type': 'application/json',
      'Content-Length': String(data.length),
    })
  }

  /**
   * A run's whole view (its RunResult whole): read and sent a piece at a time as the client reads (its
   * output an event at a time, never held whole), its size as the store estimates it (without reading it)
   * taken from the answers' budget while it is sent, as heldJson's. A small one is sent at once.
   */
  const viewAnswer = (
    c: Context<Env>,
    run: RunRecord,
    status: ContentfulStatusCode = 200,
    { refusable = true } = {},
  ): Response => {
    const key = c.get('key')
    // Not finished: no result, nothing of the run's output to read (a write-only key's submission).
    if (!run.result) return c.json(runView(run), status)
    if (!service.viewJson)
      return heldJson(c, runView(run, service.result(key, run.id)), status, { refusable })
    const bytes = service.viewBytes?.(key, run.id) ?? 0
    const pieces = service.viewJson(key, run.id)[Symbol.iterator]()
    if (bytes < ANSWER_PIECE) {
      let text = ''
      for (let p = pieces.next(); !p.done; p = pieces.next()) text += p.value
      return c.body(text, status, { 'Content-Type': 'application/json' })
    }
    const holding = refusable ? holdAnswer(key) : () => {}
    if (!answers.take(bytes, key.id) && !(refusable === false && answers.force(bytes, key.id))) {
      holding()
      c.header('Retry-After', '1')
      return c.json(errorBody('busy', 'the server is sending too many big answers at once: retry'), 503)
    }
    const release = () => {
      answers.give(bytes, key.id)
      holding()
    }
    const encoder = new TextEncoder()
    let canceled = false
    const body = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          // A turn of the event loop between pieces: a client reading as fast as loopback goes has each
          // write done at once and the next asked for at once (drain on nextTick), and a whole view of
          // 200 MB was made in one stretch, /healthz unanswered 1.2 s meanwhile.
          await new Promise((resolve) => setImmediate(resolve))
          if (canceled) return
          let text = ''
          let over = false
          while (text.length < ANSWER_PIECE) {
            const p = pieces.next()
            if (p.done) {
              over = true
              break
            }
            text += p.value
          }
          if (text) controller.enqueue(encoder.encode(text))
          if (over) controller.close()
        },
        cancel() {
          canceled = true
          pieces.return?.(undefined)
        },
      },
      { highWaterMark: 0 },
    )
    return c.body(sending(c, body, release), status, { 'Content-Type': 'application/json' })
  }

  const jsonBody = async (c: Context<Env>): Promise<unknown> => {
    const bytes = new Uint8Array(await c.req.arrayBuffer())
    c.get('bodyRead')?.()
    return parseJsonBody(bytes)
  }
  const waitMs = (wait: unknown): number | null => {
    if (wait === undefined) return null
    const parsed = durationSchema.safeParse(wait)
    if (!parsed.success) throw new ServiceError('invalid', `wait: ${zodIssue(parsed.error).message}`, 'wait')
    return Math.min(parsed.data, maxWaitMs)
  }

  // Runs.
  app.post('/v1/runs', async (c) => {
    const key = c.get('key')
    const body = await jsonBody(c)
    const wait = waitMs(body && typeof body === 'object' ? (body as { wait?: unknown }).wait : undefined)
    // Waiting reads the run: a key that may not is told before the run is made, not after (a client
    // retrying the refusal would make it again).
    if (wait !== null && !mayRead(key))
      throw new ServiceError(
        'forbidden',
        'wait: this key lacks the runs:read scope that waiting needs',
        'wait',
      )
    // The long poll too is taken before the run is made: past the key's, 429 and no run.
    const release = wait !== null ? holdWait(key) : () => {}
    let run: RunRecord
    try {
      run = service.submit(key, body)
      submitted.inc()
      countEnd(key, run.id)
      if (wait !== null && run.state !== 'finished') run = await service.wait(key, run.id, wait)
    } finally {
      release()
    }
    c.header('Location', `/v1/runs/${run.id}`)
    // A key that may not read runs is told the id it needs to act on its run, and nothing of the run.
    if (!mayRead(key)) return c.json({ id: run.id }, 201)
    return viewAnswer(c, run, 201, { refusable: false })
  })

  app.get('/v1/runs', (c) => {
    const key = c.get('key')
    const all = c.req.query()
    // Without a prototype: `metadata.__proto__=x` is a filter on that label (which no run has), not an
    // assignment that drops it and lists every run.
    const metadata: Record<string, string> = Object.create(null)
    const rest: Record<string, string> = Object.create(null)
    for (const [name, value] of Object.entries(all)) {
      if (name.startsWith('metadata.') && name.length > 'metadata.'.length) metadata[name.slice(9)] = value
      else rest[name] = value
    }
    // A run holds at most that many labels, and each filter is work for every run listed.
    if (Object.keys(metadata).length > REQUEST_BOUNDS.metadata)
      throw new ServiceError(
        'invalid',
        `metadata: at most ${REQUEST_BOUNDS.metadata} filters (a run has at most ${REQUEST_BOUNDS.metadata} labels)`,
        'metadata',
      )
    const q = parseQuery(listQuerySchema, rest)
    const page = service.list(key, {
      limit: q.limit,
      ...(q.state ? { state: q.state } : {}),
      ...(q.status ? { status: q.status } : {}),
      ...(q.createdAfter ? { createdAfter: new Date(q.createdAfter).toISOString() } : {}),
      ...(q.key ? { keyId: q.key } : {}),
      ...(q.cursor ? { cursor: q.cursor } : {}),
      ...(Object.keys(metadata).length ? { metadata } : {}),
    })
    // Each run's summary: its output, logs and connections are its view's (a page of them was up to a
    // page of runs' whole output, each read and escaped: 8 lists of 16 MiB runs held the thread ~9 s).
    return heldJson(c, { runs: page.runs.map((run) => runView(run)), nextCursor: page.nextCursor })
  })

  // The dashboard's routes (routes/run-extras.ts): the runs' feed among the key's event streams.
  registerRunExtras(app, {
    service,
    heartbeatMs,
    ...(opts.maxStreamQueuedBytes !== undefined ? { maxQueuedBytes: opts.maxStreamQueuedBytes } : {}),
    holdStream,
    trackStream: (key, close) => {
      let set = streamsOf.get(key.id)
      if (!set) {
        set = new Set()
        streamsOf.set(key.id, set)
      }
      set.add(close)
      return () => streamsOf.get(key.id)?.delete(close)
    },
    stillValid: (c) => {
      const token = (c as Context<Env>).get('token')
      const session = (c as Context<Env>).get('session')
      return () =>
        session === undefined ? service.authenticate(token) !== null : sessions.check(session) !== null
    },
    onSubmitted: (key, run) => {
      submitted.inc()
      countEnd(key, run.id)
    },
  })

  app.get('/v1/runs/:id', async (c) => {
    const key = c.get('key')
    const id = c.req.param('id')
    const { wait, view } = parseQuery(getQuerySchema, c.req.query())
    if (view === 'summary') {
      const run =
        wait === undefined ? service.get(key, id) : await waitHeld(key, id, Math.min(wait, maxWaitMs))
      return c.json(runView(run))
    }
    // A view the answers being sent have no room for is refused before the run is loaded and its answer
    // built (a run's result as JSON may be hundreds of MB, seconds of this thread): refused after, a
    // client asking again and again would hold the thread. A run finishing during a wait is judged after.
    const bytes = service.viewBytes?.(key, id) ?? 0
    if (bytes >= ANSWER_PIECE) {
      if (holdAnswer.full(key)) holdAnswer(key)
      if (!answers.fits(bytes, key.id)) {
        c.header('Retry-After', '1')
        return c.json(errorBody('busy', 'the server is sending too many big answers at once: retry'), 503)
      }
    }
    const run = wait === undefined ? service.get(key, id) : await waitHeld(key, id, Math.min(wait, maxWaitMs))
    return viewAnswer(c, run)
  })

  app.post('/v1/runs/:id/cancel', (c) => {
    const key = c.get('key')
    const run = service.cancel(key, c.req.param('id'))
    // The cancel is done (or the run was over already); its result is for a key that may read it.
    if (!mayRead(key)) return c.json({ id: run.id }, 202)
    return viewAnswer(c, run)
  })

  app.delete('/v1/runs/:id', (c) => {
    service.remove(c.get('key'), c.req.param('id'))
    return c.body(null, 204)
  })

  app.get('/v1/runs/:id/output', (c) => {
    const q = parseQuery(outputQuerySchema, c.req.query())
    const key = c.get('key')
    const id = c.req.param('id')
    // The first piece now (a refusal is a status, not a broken stream), the rest as the client takes it:
    // a client that reads nothing holds one piece here, not the whole range.
    const first = service.output(key, id, q.stream, q.offset, Math.min(q.limit, ANSWER_PIECE))
    if (first.length < Math.min(q.limit, ANSWER_PIECE))
      return c.body(new Uint8Array(first), 200, { 'Content-Type': 'application/octet-stream' })
    let at = q.offset + first.length
    const end = q.offset + q.limit
    let pending: Buffer | null = first
    const body = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (pending) {
            controller.enqueue(new Uint8Array(pending))
            pending = null
            return
          }
          const want = Math.min(end - at, ANSWER_PIECE)
          const piece = want > 0 ? service.output(key, id, q.stream, at, want) : Buffer.alloc(0)
          if (piece.length > 0) controller.enqueue(new Uint8Array(piece))
          at += piece.length
          // The output as kept now: a shorter piece is its end.
          if (piece.length < want || at >= end) controller.close()
        },
      },
      { highWaterMark: 0 },
    )
    return c.body(sending(c, body, holdAnswer(key)), 200, { 'Content-Type': 'application/octet-stream' })
  })

  app.post('/v1/runs/:id/stdin', async (c) => {
    const data = Buffer.from(await c.req.arrayBuffer())
    service.writeStdin(c.get('key'), c.req.param('id'), data)
    return c.body(null, 204)
  })

  app.delete('/v1/runs/:id/stdin', (c) => {
    service.closeStdin(c.get('key'), c.req.param('id'))
    return c.body(null, 204)
  })

  // The files a run's request asked to collect, kept after it.
  app.get('/v1/runs/:id/files', (c) => {
    if (!service.files) throw new ServiceError('not-found', 'this service keeps no files')
    return c.json({ files: service.files(c.get('key'), c.req.param('id')) })
  })
  app.get('/v1/runs/:id/files/*', (c) => {
    if (!service.file) throw new ServiceError('not-found', 'this service keeps no files')
    // From the raw path, decoded once: hono's c.req.path is decoded already (a second decoding would turn
    // `%252e` into `.`), and a malformed escape is a file that is not there, not a 500.
    const raw = new URL(c.req.url).pathname.split('/').slice(5).join('/')
    let filePath: string
    try {
      filePath = decodeURIComponent(raw)
    } catch {
      throw new ServiceError('not-found', 'no such collected file')
    }
    if (!service.openFile) {
      const bytes = service.file(c.get('key'), c.req.param('id'), filePath)
      return c.body(new Uint8Array(bytes), 200, { 'Content-Type': 'application/octet-stream' })
    }
    // Read from disk as the client takes it: a collected file may be 64 MiB, and a client that reads
    // nothing would otherwise hold all of it here.
    const release = holdAnswer(c.get('key'))
    let opened: { fd: number; size: number }
    try {
      opened = service.openFile(c.get('key'), c.req.param('id'), filePath)
    } catch (error) {
      release()
      throw error
    }
    const { fd, size } = opened
    const file = createReadStream('', { fd, highWaterMark: ANSWER_PIECE })
    return c.body(sending(c, Readable.toWeb(file) as ReadableStream<Uint8Array>, release), 200, {
      'Content-Type': 'application/octet-stream',
      'Content-Length': String(size),
    })
  })

  app.get('/v1/runs/:id/events', (c) => {
    const q = parseQuery(eventsQuerySchema, c.req.query())
    const header = c.req.header('last-event-id')
    let after = q.after ?? 0
    if (header !== undefined && q.after === undefined) {
      if (!/^\d{1,15}$/.test(header.trim()))
        throw new ServiceError('invalid', 'Last-Event-ID: must be an event id', 'Last-Event-ID')
      after = Number(header.trim())
    }
    const key = c.get('key')
    // A reader that wants only the end of a long run's output (the dashboard) starts there; a resume
    // (Last-Event-ID, after) starts where it left off.
    if (q.tail !== undefined && q.after === undefined && header === undefined)
      after = service.tailAfter(key, c.req.param('id'), q.tail)
    const token = c.get('token')
    const session = c.get('session')
    const holding = holdStream(key)
    let closer: ((reason: string) => void) | undefined
    const release = () => {
      holding()
      if (closer) streamsOf.get(key.id)?.delete(closer)
    }
    let body: ReadableStream<Uint8Array>
    try {
      body = sseStream(service, key, c.req.param('id'), after, {
        encoding: q.encoding,
        heartbeatMs,
        signal: c.req.raw.signal,
        ...(opts.maxStreamQueuedBytes !== undefined ? { maxQueuedBytes: opts.maxStreamQueuedBytes } : {}),
        // A stream outlives the check its request passed: the key (and the session, signed out or not) is
        // checked again at each heartbeat.
        stillValid: () =>
          session === undefined ? service.authenticate(token) !== null : sessions.check(session) !== null,
        onClose: release,
        onOpen: (close) => {
          closer = close
          let set = streamsOf.get(key.id)
          if (!set) {
            set = new Set()
            streamsOf.set(key.id, set)
          }
          set.add(close)
        },
      })
    } catch (error) {
      release()
      throw error
    }
    return c.body(body, 200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
    })
  })

  // Keys (admin: the service checks the scope).
  app.post('/v1/keys', async (c) => {
    const { record, key } = service.createKey(c.get('key'), await jsonBody(c))
    c.header('Location', `/v1/keys/${record.id}`)
    return c.json({ ...keyView(record), key, webhookSecret: record.webhookSecret }, 201)
  })
  app.get('/v1/keys', (c) => c.json({ keys: service.listKeys(c.get('key')).map(keyView) }))
  app.delete('/v1/keys/:id', (c) => {
    const id = c.req.param('id')
    // Only an admin may revoke (the service checks): the streams end first, so that nothing of the
    // key's runs (their end, as revoking cancels them) reaches them after the revocation.
    if (c.get('key').scopes.includes('admin')) endStreamsOf(id, 'the key was revoked')
    service.revokeKey(c.get('key'), id)
    return c.body(null, 204)
  })

  // Operations: no key needed (bind them to loopback, or proxy them), but for /metrics: its labels tell
  // how many runs of which status and isolation this server made, so it takes an admin key unless the
  // operator opens it (`--public-metrics`, for a scraper that sends no key). /openapi.json stays public:
  // it is the schema, the same for every cordon of this version, with no data in it.
  if (opts.publicMetrics !== true)
    app.use('/metrics', auth, async (c, next) => {
      if (!c.get('key').scopes.includes('admin'))
        throw new ServiceError('forbidden', 'this key lacks the admin scope')
      await next()
    })
  app.get('/healthz', (c) => c.json({ ok: true }))
  app.get('/readyz', (c) =>
    service.ready() ? c.json({ ready: true }) : c.json({ ready: false, reason: 'draining' }, 503),
  )
  app.get('/metrics', async (c) =>
    c.body(await registry.metrics(), 200, { 'Content-Type': registry.contentType }),
  )
  app.route('/', uiRoutes(service, sessions, opts.sessionTtlMs))
  registerOpenApi(app)
  let document: string | null = null
  app.get('/openapi.json', (c) => {
    document ??= JSON.stringify(
      app.getOpenAPI31Document({
        openapi: '3.1.0',
        info: {
          title: 'cordon',
          version: '1',
          description: 'Run untrusted commands under kernel-enforced limits.',
        },
      }),
    )
    return c.body(document, 200, { 'Content-Type': 'application/json' })
  })

  return { app, registry }
}
