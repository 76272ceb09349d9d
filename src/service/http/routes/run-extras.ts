// The dashboard's routes beside the runs' own: what the key may ask (`GET /v1/keys/me`), a run's request
// as its page shows it (`GET /v1/runs/{id}/request`), the run made again (`POST /v1/runs/{id}/rerun`),
// and the runs' feed (`GET /v1/runs/events`, run-feed.ts). The service checks scopes and ownership
// (run-extras.ts); the feed is bounded as the runs' event streams are, with the app's own counters.
import type { Context, Hono } from 'hono'
import type { RunExtras } from '../../run-extras.js'
import { type KeyRecord, type RunRecord, runView, ServiceError } from '../../types.js'
import { keyView } from '../views.js'
import { feedStream, lastEventIdOf } from './run-feed.js'

export interface RunExtrasRoutes {
  /** The service's extras; a service without them answers 404 on these routes. */
  service: Partial<RunExtras>
  heartbeatMs: number
  maxQueuedBytes?: number
  /** Takes one of the key's event streams (throws `quota` past them); returns its release. */
  holdStream(key: KeyRecord): () => void
  /** Registers a stream's close, to end it when the key is revoked here; returns its removal. */
  trackStream(key: KeyRecord, close: (reason: string) => void): () => void
  /** Whether the request's key (and its session) is still valid: checked at each heartbeat. */
  stillValid(c: Context): () => boolean
  /** A run was made (the app counts it). */
  onSubmitted(key: KeyRecord, run: RunRecord): void
}

/** Whether `key` may read runs: its view of a run it made again, or only the run's id. */
const mayRead = (key: KeyRecord) => key.scopes.includes('runs:read') || key.scopes.includes('admin')

function needs<T>(value: T | undefined): T {
  if (value === undefined) throw new ServiceError('not-found', 'this service has no dashboard routes')
  return value
}

/**
 * Registers the routes on `app`, behind its auth. Call it before `GET /v1/runs/:id`, which would take
 * `events` for a run's id.
 */
export function registerRunExtras<E extends { Variables: { key: KeyRecord } }>(
  app: Hono<E>,
  deps: RunExtrasRoutes,
): void {
  const { service } = deps

  app.get('/v1/keys/me', (c) => {
    const key = c.get('key') as KeyRecord
    const allowance = needs(service.allowance)(key)
    return c.json({ ...keyView(key), allowance })
  })

  app.get('/v1/runs/events', (c) => {
    const key = c.get('key') as KeyRecord
    const feed = needs(service.feed)
    const after = lastEventIdOf(c)
    const holding = deps.holdStream(key)
    let untrack = () => {}
    const release = () => {
      holding()
      untrack()
    }
    let body: ReadableStream<Uint8Array>
    try {
      body = feedStream(feed, key, after, {
        heartbeatMs: deps.heartbeatMs,
        signal: c.req.raw.signal,
        ...(deps.maxQueuedBytes !== undefined ? { maxQueuedBytes: deps.maxQueuedBytes } : {}),
        stillValid: deps.stillValid(c),
        onClose: release,
        onOpen: (close) => {
          untrack = deps.trackStream(key, close)
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

  app.get('/v1/runs/:id/request', (c) => {
    const key = c.get('key') as KeyRecord
    return c.json(needs(service.shownRequest)(key, c.req.param('id')))
  })

  app.post('/v1/runs/:id/rerun', (c) => {
    const key = c.get('key') as KeyRecord
    const run = needs(service.rerun)(key, c.req.param('id'))
    deps.onSubmitted(key, run)
    c.header('Location', `/v1/runs/${run.id}`)
    if (!mayRead(key)) return c.json({ id: run.id }, 201)
    return c.json(runView(run), 201)
  })
}
