// The typed client of `cordon serve` (docs/service.md): plain fetch (Node >= 20), no dependency. It is a
// face like the CLI: it knows the API's JSON, and imports the engine and the service for their types only,
// so `import { connect } from 'cordon/client'` loads neither the sandbox nor hono nor SQLite.
import type { RunResult } from '../index.js'
import type {
  EndResult,
  RequestOptions,
  RunEventData,
  RunEventType,
  RunState,
  RunSummaryView,
  RunView,
} from '../service/types.js'

/**
 * RunView: a run as `GET /v1/runs/{id}` shows it (`result`, the whole RunResult, once it finished).
 * RunSummaryView: as `list()` shows it (`result` without stdout, stderr, output, logs and network).
 */
export type { EndResult, RequestOptions, RunEventData, RunSummaryView, RunView }

/** `POST /v1/runs`'s body (docs/service.md#runs); `options` are the library's, as the server validates them. */
export interface RunRequestBody {
  cmd: string[]
  /** Text, bytes as base64, or 'open' to write it later. */
  stdin?: string | { base64: string } | 'open'
  files?: { path: string; content: string; encoding?: 'utf8' | 'base64'; mode?: number }[]
  collect?: string[]
  /**
   * The library's run options a client may set (limits, network, env, isolation…), typed as the library
   * types them: validated by the server, within the key's ceilings.
   */
  options?: RequestOptions
  metadata?: Record<string, string>
  webhook?: { url: string }
  /** Answer once the run finished, or after this long (`'20s'`, or ms). */
  wait?: string | number
}

export interface ListFilter {
  state?: RunState
  status?: string
  metadata?: Record<string, string>
  /** ISO 8601. */
  createdAfter?: string
  limit?: number
  cursor?: string
}

/**
 * One event of a run, as the SSE stream gives it (`id:` is `seq`); its `data` is typed by its `type`:
 * `output` `{ stream, offset, bytes, data }`, `end` `{ result }` (an EndResult: the RunResult without
 * stdout, stderr, output, logs and network, which the run's own events carried; `get` has it whole),
 * `interrupted` `{ reason }`…
 */
export type ClientEvent<T extends RunEventType = RunEventType> = {
  [K in T]: {
    seq: number
    type: K
    /** ISO 8601, UTC. */
    at: string
    data: RunEventData[K]
  }
}[T]

export interface EventsOptions {
  /** Resume after this event (its seq); default 0: from the first. */
  after?: number
  /** `output` data as text (default), or as base64 of the exact bytes. */
  encoding?: 'utf8' | 'base64'
  /** Reconnections in a row without a new event before giving up with a ClientError; default 5. */
  retries?: number
  /** First backoff, doubled at each failure in a row (capped at 5 s); default 200 ms. */
  backoffMs?: number
  signal?: AbortSignal
}

export interface ConnectOptions {
  /** The server's base URL, e.g. http://127.0.0.1:7070. */
  url: string
  /** An API key (`cordon_…`). */
  key: string
  /** Another fetch (a test's, a proxy's); default globalThis.fetch. */
  fetch?: typeof fetch
}

/** Why a call failed: the server's `{ error: { code, message, field } }`, or no answer (`status` 0). */
export class ClientError extends Error {
  override readonly name = 'ClientError'
  constructor(
    /** The HTTP status; 0 when there was no response (a network error, a dropped stream). */
    readonly status: number,
    /** The server's code (`invalid`, `forbidden-option`, `queue-full`…), or `network`. */
    readonly code: string,
    message: string,
    /** The request field at fault, dotted (`options.writable`), when the server named one. */
    readonly field?: string,
    /** From Retry-After (429, 503). */
    readonly retryAfterS?: number,
  ) {
    super(message)
  }
}

export interface Client {
  /**
   * Runs `cmd` and resolves with the library's RunResult once it finished (long-polling as needed): its
   * text as text (the bytes exactly are `output()`'s).
   */
  run(
    cmd: string[],
    body?: Omit<RunRequestBody, 'cmd' | 'wait'>,
    opts?: { signal?: AbortSignal },
  ): Promise<RunResult>
  /** Submits a run (`201`); with `wait`, answers once it finished or the wait ended. */
  submit(body: RunRequestBody): Promise<RunView>
  get(id: string, opts?: { wait?: string | number; signal?: AbortSignal }): Promise<RunView>
  /** Each run's summary (`get()` a run for its whole result, `output()` for its output). */
  list(filter?: ListFilter): Promise<{ runs: RunSummaryView[]; nextCursor: string | null }>
  cancel(id: string): Promise<RunView>
  /** Removes a finished run. */
  remove(id: string): Promise<void>
  /** The kept, redacted output as bytes. */
  output(
    id: string,
    stream: 'stdout' | 'stderr' | 'output',
    opts?: { offset?: number; limit?: number },
  ): Promise<Uint8Array>
  /**
   * The run's events in order, each once, until `end` or `interrupted`; a dropped connection is resumed
   * (Last-Event-ID) by itself, with backoff.
   */
  events(id: string, opts?: EventsOptions): AsyncGenerator<ClientEvent, void, undefined>
}

/** The server's wait cap is 60 s; a long-poll asks for it and asks again. */
const POLL = '60s'

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
  })

/** A non-2xx response as a ClientError (the body read whole: error bodies are small). */
async function errorOf(res: Response): Promise<ClientError> {
  const retry = res.headers.get('retry-after')
  const retryAfterS = retry !== null && /^\d+$/.test(retry.trim()) ? Number(retry) : undefined
  let code = `http-${res.status}`
  let message = `${res.status} ${res.statusText}`.trim()
  let field: string | undefined
  try {
    const body = (await res.json()) as { error?: { code?: unknown; message?: unknown; field?: unknown } }
    if (typeof body.error?.code === 'string') code = body.error.code
    if (typeof body.error?.message === 'string') message = body.error.message
    if (typeof body.error?.field === 'string') field = body.error.field
  } catch {
    // not the API's JSON (a proxy's page): the status says it
  }
  return new ClientError(res.status, code, message, field, retryAfterS)
}

const networkError = (error: unknown) =>
  new ClientError(0, 'network', error instanceof Error ? `${error.message}${causeOf(error)}` : String(error))

function causeOf(error: Error): string {
  const cause = (error as { cause?: unknown }).cause
  return cause instanceof Error ? `: ${cause.message}` : ''
}

/** One SSE event block's fields; null for a comment-only block. */
export interface SseMessage {
  id: string | null
  event: string
  data: string
}

/**
 * Splits an SSE byte stream into messages (the WHATWG rules: lines end in LF, CRLF or CR; `:` starts a
 * comment; `data:` lines join with LF; one optional space after the colon; a blank line dispatches).
 */
export async function* parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder('utf-8')
  const reader = body.getReader()
  let buffer = ''
  let id: string | null = null
  let event = ''
  let data: string[] = []
  let sawField = false
  try {
    for (;;) {
      const { value, done } = await reader.read()
      if (done) return
      buffer += decoder.decode(value, { stream: true })
      for (;;) {
        const m = /\r\n|\r|\n/.exec(buffer)
        // A CR at the very end may be the first half of CRLF: wait for the next chunk.
        if (!m || (m[0] === '\r' && m.index === buffer.length - 1)) break
        const line = buffer.slice(0, m.index)
        buffer = buffer.slice(m.index + m[0].length)
        if (line === '') {
          if (sawField) yield { id, event: event || 'message', data: data.join('\n') }
          id = null
          event = ''
          data = []
          sawField = false
          continue
        }
        if (line.startsWith(':')) continue
        const colon = line.indexOf(':')
        const name = colon < 0 ? line : line.slice(0, colon)
        let value = colon < 0 ? '' : line.slice(colon + 1)
        if (value.startsWith(' ')) value = value.slice(1)
        if (name === 'data') data.push(value)
        else if (name === 'event') event = value
        else if (name === 'id' && !value.includes('\0')) id = value
        else continue
        sawField = true
      }
    }
  } finally {
    await reader.cancel().catch(() => {})
  }
}

export function connect(options: ConnectOptions): Client {
  const base = options.url.replace(/\/+$/, '')
  const doFetch = options.fetch ?? globalThis.fetch
  const headers = (extra?: Record<string, string>) => ({ authorization: `Bearer ${options.key}`, ...extra })

  const request = async (path: string, init: RequestInit = {}): Promise<Response> => {
    let res: Response
    try {
      res = await doFetch(`${base}${path}`, {
        ...init,
        headers: headers(init.headers as Record<string, string> | undefined),
      })
    } catch (error) {
      if (init.signal?.aborted) throw error
      throw networkError(error)
    }
    if (!res.ok) throw await errorOf(res)
    return res
  }
  const json = async <T>(path: string, init?: RequestInit): Promise<T> =>
    (await (await request(path, init)).json()) as T
  const runPath = (id: string) => `/v1/runs/${encodeURIComponent(id)}`

  const client: Client = {
    submit(body) {
      return json<RunView>('/v1/runs', {
        method: 'POST',
        body: JSON.stringify(body),
        headers: { 'content-type': 'application/json' },
      })
    },

    get(id, opts = {}) {
      const q = opts.wait === undefined ? '' : `?wait=${encodeURIComponent(String(opts.wait))}`
      return json<RunView>(`${runPath(id)}${q}`, opts.signal ? { signal: opts.signal } : {})
    },

    async run(cmd, body = {}, opts = {}) {
      const init = opts.signal ? { signal: opts.signal } : {}
      let run = await json<RunView>('/v1/runs', {
        method: 'POST',
        body: JSON.stringify({ ...body, cmd, wait: POLL }),
        headers: { 'content-type': 'application/json' },
        ...init,
      })
      while (run.state !== 'finished' || !run.result) run = await client.get(run.id, { wait: POLL, ...init })
      return run.result
    },

    list(filter = {}) {
      const q = new URLSearchParams()
      for (const name of ['state', 'status', 'createdAfter', 'cursor'] as const) {
        const value = filter[name]
        if (value !== undefined) q.set(name, value)
      }
      if (filter.limit !== undefined) q.set('limit', String(filter.limit))
      for (const [k, v] of Object.entries(filter.metadata ?? {})) q.set(`metadata.${k}`, v)
      const text = q.toString()
      return json(`/v1/runs${text ? `?${text}` : ''}`)
    },

    cancel(id) {
      return json<RunView>(`${runPath(id)}/cancel`, { method: 'POST' })
    },

    async remove(id) {
      await request(runPath(id), { method: 'DELETE' })
    },

    async output(id, stream, opts = {}) {
      const q = new URLSearchParams({ stream })
      if (opts.offset !== undefined) q.set('offset', String(opts.offset))
      if (opts.limit !== undefined) q.set('limit', String(opts.limit))
      return new Uint8Array(await (await request(`${runPath(id)}/output?${q}`)).arrayBuffer())
    },

    async *events(id, opts = {}) {
      const retries = opts.retries ?? 5
      const backoffMs = opts.backoffMs ?? 200
      const encoding = opts.encoding ?? 'utf8'
      let last = opts.after ?? 0
      let failures = 0
      let lastError: ClientError | null = null
      for (;;) {
        if (failures > 0) {
          if (failures > retries) {
            throw new ClientError(
              0,
              'network',
              `the event stream of ${id} dropped ${failures} times in a row: ${lastError?.message ?? 'no answer'}`,
            )
          }
          await sleep(Math.min(5000, backoffMs * 2 ** (failures - 1)), opts.signal)
        }
        const controller = new AbortController()
        const abort = () => controller.abort(opts.signal?.reason)
        opts.signal?.addEventListener('abort', abort, { once: true })
        try {
          let res: Response
          try {
            res = await doFetch(`${base}${runPath(id)}/events?encoding=${encoding}`, {
              headers: headers({ accept: 'text/event-stream', 'last-event-id': String(last) }),
              signal: controller.signal,
            })
          } catch (error) {
            if (opts.signal?.aborted) throw error
            lastError = networkError(error)
            failures++
            continue
          }
          if (!res.ok) {
            const error = await errorOf(res)
            // A refusal is final; an overloaded or restarting server is retried.
            if (res.status !== 429 && res.status < 500) throw error
            lastError = error
            failures++
            continue
          }
          try {
            for await (const message of parseSse(res.body as ReadableStream<Uint8Array>)) {
              if (message.id === null || !/^\d+$/.test(message.id)) continue
              const seq = Number(message.id)
              // Each event once: after a resume the server starts after `last` anyway.
              if (seq <= last) continue
              const { seq: _seq, at, ...data } = JSON.parse(message.data) as Record<string, unknown>
              last = seq
              failures = 0
              const type = message.event as RunEventType
              // The server's own JSON, typed by its event type (RunEventData).
              yield { seq, type, at: typeof at === 'string' ? at : '', data } as ClientEvent
              if (type === 'end' || type === 'interrupted') return
            }
            // Closed before the end: resumed.
            lastError = new ClientError(0, 'network', 'the event stream closed before the run ended')
          } catch (error) {
            if (opts.signal?.aborted) throw error
            if (error instanceof SyntaxError) throw new ClientError(0, 'invalid-response', error.message)
            lastError = networkError(error)
          }
          failures++
        } finally {
          opts.signal?.removeEventListener('abort', abort)
          // Ends the response when the consumer stopped early (break, return, throw).
          controller.abort()
        }
      }
    },
  }
  return client
}
