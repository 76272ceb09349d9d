// A run's events as Server-Sent Events: `id: <seq>`, `event: <type>`, `data: <json>`, the stored ones after
// the client's last, then each new one as it comes, a `: heartbeat` comment between, closed only after
// `end` or `interrupted` (or when the client goes). Output is stored as base64; it is sent as text unless
// `?encoding=base64`, decoded by one streaming UTF-8 decoder per stream, so that a character split between
// two chunks comes out whole.
import type { KeyRecord, RunEvent, Service } from '../types.js'

export interface SseOptions {
  encoding: 'utf8' | 'base64'
  heartbeatMs: number
  /** The request's: aborted when the client goes. */
  signal?: AbortSignal
}

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
  const early: RunEvent[] = []
  let heartbeat: NodeJS.Timeout | undefined

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

  const close = () => {
    if (closed) return
    closed = true
    clearInterval(heartbeat)
    sub.stop()
    opts.signal?.removeEventListener('abort', close)
    try {
      controller?.close()
    } catch {
      // the client canceled it already
    }
  }

  const send = (event: RunEvent) => {
    // Each event once: a live one may also be among the stored ones read at the start.
    if (closed || event.seq <= last) return
    if (!controller) return void early.push(event)
    last = event.seq
    controller.enqueue(encoder.encode(formatEvent(event, dataOf(event))))
    if (event.type === 'end' || event.type === 'interrupted') close()
  }

  const sub = service.events(key, id, after, send)

  return new ReadableStream<Uint8Array>({
    start(c) {
      controller = c
      // A comment first: the client sees the stream open even before the run says anything.
      c.enqueue(encoder.encode(': stream\n\n'))
      for (const event of [...sub.past, ...early.sort((a, b) => a.seq - b.seq)]) send(event)
      if (closed) return
      heartbeat = setInterval(() => {
        if (!closed) controller?.enqueue(encoder.encode(': heartbeat\n\n'))
      }, opts.heartbeatMs)
      if (opts.signal?.aborted) close()
      else opts.signal?.addEventListener('abort', close, { once: true })
    },
    cancel() {
      closed = true
      clearInterval(heartbeat)
      sub.stop()
      opts.signal?.removeEventListener('abort', close)
    },
  })
}
