// A run's events as Server-Sent Events: `id: <seq>`, `event: <type>`, `data: <json>`, the stored ones after
// the client's last, then each new one as it comes, a `: heartbeat` comment between, closed only after
// `end` or `interrupted` (or when the client goes, or its key is revoked, or it resumed after a finished
// run's last event). Output is stored as base64; it is sent as text unless `?encoding=base64`, decoded by
// one streaming UTF-8 decoder per stream, so that a character split between two chunks comes out whole.
//
// The stream is pulled: what this process holds for a client is bounded by `maxQueuedBytes`, however slowly
// it reads. Events are written only while the client keeps up; once it falls behind, live events are no
// longer followed (the store keeps them) and, when it has caught up, the stream reads on from the store
// after the last event it sent, by seq, then follows again. The store is read a page at a time, the next
// page only once the client has taken the last: a replay of a long history holds one page, not all of it.
import type { KeyRecord, RunEvent, Service } from '../types.js'

export interface SseOptions {
  encoding: 'utf8' | 'base64'
  heartbeatMs: number
  /** The request's: aborted when the client goes. */
  signal?: AbortSignal
  /** Bytes queued for a slow client before the stream stops following (default 256 KiB). */
  maxQueuedBytes?: number
  /** Checked at each heartbeat: false (the key was revoked) ends the stream. */
  stillValid?: () => boolean
  /** Called once when the stream ends, however it ends. */
  onClose?: () => void
  /** Given the stream's close, once it starts: a caller that learns the key was revoked ends it at once. */
  onOpen?: (close: (reason: string) => void) => void
}

export const DEFAULT_SSE_QUEUED_BYTES = 256 * 1024

const encoder = new TextEncoder()

/** One event as its SSE lines (JSON has no raw newline, so `data` is one line). */
export function formatEvent(event: RunEvent, data: Record<string, unknown>): string {
  return `id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify({ seq: event.seq, at: event.at, ...data })}\n\n`
}

/**
 * The stream of `id`'s events after `after`. Throws (ServiceError) before any byte when the key may not
 * read the run, so the caller answers with an error status instead of a broken stream.
 */
export function sseStream(
  service: Service,
  key: KeyRecord,
  id: string,
  after: number,
  opts: SseOptions,
): ReadableStream<Uint8Array> {
  const decoders = new Map<string, TextDecoder>()
  let last = after
  let closed = false
  let controller: ReadableStreamDefaultController<Uint8Array> | null = null
  let heartbeat: NodeJS.Timeout | undefined
  // Stored events not sent yet, from `next` on; `behind`: live events were let go, read on from the store.
  let pending: RunEvent[] = []
  let next = 0
  let behind = false

  const dataOf = (event: RunEvent): Record<string, unknown> => {
    if (event.type !== 'output' || opts.encoding === 'base64' || typeof event.data.data !== 'string') {
      return event.data
    }
    const stream = String(event.data.stream)
    let decoder = decoders.get(stream)
    if (!decoder) {
      decoder = new TextDecoder('utf-8')
      decoders.set(stream, decoder)
    }
    const text = decoder.decode(Buffer.from(event.data.data, 'base64'), { stream: true })
    return { ...event.data, data: text }
  }

  const stopped = () => {
    if (closed) return false
    closed = true
    clearInterval(heartbeat)
    sub.stop()
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

  const write = (event: RunEvent) => {
    // Each event once: a live one may also be among the stored ones read at the start.
    if (closed || event.seq <= last) return
    last = event.seq
    controller?.enqueue(encoder.encode(formatEvent(event, dataOf(event))))
    if (event.type === 'end' || event.type === 'interrupted') close()
  }
  const room = () => !closed && controller !== null && (controller.desiredSize ?? 0) > 0

  const live = (event: RunEvent) => {
    if (closed || event.seq <= last || behind) return
    if (next >= pending.length && room()) return write(event)
    // The client is behind: stop following; the store has this event for when it catches up.
    behind = true
    sub.stop()
  }

  /**
   * The stored events after `from`, one page: followed live after it when it is the last, read on from
   * the store (`behind`) when there is more.
   */
  const open = (from: number) => {
    sub = service.events(key, id, from, live)
    pending = sub.past
    next = 0
    behind = sub.more
  }
  let sub = service.events(key, id, after, live)
  pending = sub.past
  behind = sub.more
  // Nothing after `after` of a finished run: nothing will come. (An EventSource reconnects after `end` with
  // the end's id; held open, the stream would only beat, and hold one of the key's streams.)
  const over = pending.length === 0 && !behind && service.get(key, id).state === 'finished'

  /** Writes what is pending while the client has room, reading the next page only once this one is out. */
  const fill = () => {
    while (room()) {
      if (next < pending.length) {
        write(pending[next++] as RunEvent)
        continue
      }
      pending = []
      next = 0
      if (!behind) return
      try {
        open(last)
      } catch {
        return close('the run is gone')
      }
      if (pending.length === 0 && !behind) return
    }
  }

  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c
        // A comment first: the client sees the stream open even before the run says anything.
        c.enqueue(encoder.encode(': stream\n\n'))
        heartbeat = setInterval(() => {
          if (opts.stillValid && !opts.stillValid()) return close('the key was revoked')
          if (room()) controller?.enqueue(encoder.encode(': heartbeat\n\n'))
        }, opts.heartbeatMs)
        if (opts.signal?.aborted) close()
        else if (over) close(`the run has ended, and has no event after ${after}`)
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
