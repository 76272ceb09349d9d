// `GET /v1/runs/events`: the runs' feed (run-feed.ts) as Server-Sent Events, for a list to follow live
// rather than poll: `run` (the run's summary, as `GET /v1/runs` lists it) each time a run is made, starts
// or finishes, `removed` (`{ id }`) when one is deleted, and `sync` when the client must read the list
// again: at its start, and when it resumes (`Last-Event-ID`) after more than the feed still holds (or
// after a restart). A key sees its own runs; an admin every key's.
//
// Bounded as the runs' own event streams are: it is one of the key's event streams (8 a key, 256 in all),
// its key (and its session) is checked at each heartbeat, a revocation here ends it at once, and what it
// holds for a slow client is bounded by bytes: past them it stops writing, and once the client has taken
// what was queued it reads on from the feed's ring after the last item it sent, or says `sync`.
import type { Context } from 'hono'
import type { FeedItem, RunFeed } from '../../run-feed.js'
import { RunFeed as Feed } from '../../run-feed.js'
import { type KeyRecord, ServiceError } from '../../types.js'
import { DEFAULT_SSE_QUEUED_BYTES } from '../sse.js'

export interface FeedStreamOptions {
  heartbeatMs: number
  /** Bytes queued for a slow client before the stream stops writing (default 256 KiB). */
  maxQueuedBytes?: number
  /** The request's: aborted when the client goes. */
  signal?: AbortSignal
  /** Checked at each heartbeat: false (the key was revoked, the session ended) ends the stream. */
  stillValid?: () => boolean
  /** Called once when the stream ends, however it ends. */
  onClose?: () => void
  /** Given the stream's close once it starts: a revocation here ends it at once. */
  onOpen?: (close: (reason: string) => void) => void
}

const encoder = new TextEncoder()

const itemText = (feed: RunFeed, item: FeedItem) =>
  `id: ${feed.idOf(item.n)}\nevent: ${item.type}\ndata: ${item.data}\n\n`

/**
 * The feed for `key` after `lastEventId` (none: from now, after a `sync`). Throws (ServiceError) before
 * any byte when the key may not read runs.
 */
export function feedStream(
  feed: RunFeed,
  key: KeyRecord,
  lastEventId: string | undefined,
  opts: FeedStreamOptions,
): ReadableStream<Uint8Array> {
  let controller: ReadableStreamDefaultController<Uint8Array> | null = null
  let closed = false
  let heartbeat: NodeJS.Timeout | undefined
  /** The id of the last item (or sync) sent: where a catch-up reads on from. */
  let last = feed.position()
  /** Items read from the ring, not sent yet; `behind`: live items were let go, read on from the ring. */
  let pending: FeedItem[] = []
  let next = 0
  let behind = false

  const room = () => !closed && controller !== null && (controller.desiredSize ?? 0) > 0
  const sync = () => {
    last = feed.position()
    pending = []
    next = 0
    controller?.enqueue(encoder.encode(`id: ${last}\nevent: sync\ndata: {}\n\n`))
  }
  const send = (item: FeedItem) => {
    last = feed.idOf(item.n)
    controller?.enqueue(encoder.encode(itemText(feed, item)))
  }
  const live = (item: FeedItem) => {
    if (closed || behind) return
    if (next >= pending.length && room()) return send(item)
    behind = true
  }
  const stop = feed.follow(key, live)

  // Where it starts: after the client's last item when the ring still has every one since, else a sync.
  let replay: FeedItem[] | null = null
  if (lastEventId !== undefined) replay = feed.after(key, lastEventId)

  const stopped = () => {
    if (closed) return false
    closed = true
    clearInterval(heartbeat)
    stop()
    pending = []
    opts.signal?.removeEventListener('abort', onAbort)
    opts.onClose?.()
    return true
  }
  function close(reason?: string) {
    if (!stopped()) return
    try {
      if (reason) controller?.enqueue(encoder.encode(`: closed: ${reason}\n\n`))
      controller?.close()
    } catch {
      // the client canceled it already
    }
  }
  const onAbort = () => close()

  /** Writes what is pending while the client has room; once out, reads on from the ring if behind. */
  const fill = () => {
    while (room()) {
      if (next < pending.length) {
        send(pending[next++] as FeedItem)
        continue
      }
      pending = []
      next = 0
      if (!behind) return
      behind = false
      const items = feed.after(key, last)
      if (items === null) sync()
      else pending = items
      if (pending.length === 0) return
    }
  }

  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c
        c.enqueue(encoder.encode(': stream\n\n'))
        if (replay === null) sync()
        else {
          last = lastEventId as string
          pending = replay
        }
        heartbeat = setInterval(() => {
          if (opts.stillValid && !opts.stillValid()) return close('the key was revoked')
          if (room()) controller?.enqueue(encoder.encode(': heartbeat\n\n'))
        }, opts.heartbeatMs)
        if (opts.signal?.aborted) close()
        else {
          opts.signal?.addEventListener('abort', onAbort, { once: true })
          opts.onOpen?.(close)
        }
      },
      pull() {
        fill()
      },
      cancel() {
        stopped()
      },
    },
    { highWaterMark: opts.maxQueuedBytes ?? DEFAULT_SSE_QUEUED_BYTES, size: (chunk) => chunk.byteLength },
  )
}

/** The client's `Last-Event-ID`, checked for shape (a malformed one is a 400 naming it). */
export function lastEventIdOf(c: Context): string | undefined {
  const header = c.req.header('last-event-id')?.trim()
  if (header === undefined || header === '') return undefined
  if (!Feed.valid(header))
    throw new ServiceError('invalid', 'Last-Event-ID: must be an id of this feed', 'Last-Event-ID')
  return header
}
