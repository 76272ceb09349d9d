// The request/reply frames of a function call. Values cross by structured clone (v8 serialization:
// Map, Set, Date, BigInt, typed arrays survive); each reply carries the caller's nonce.
import { deserialize, serialize } from 'node:v8'

export interface CallRequest {
  /** file: URL of the module. */
  module: string
  exportName: string
  args: unknown[]
  nonce: string
}

export interface ErrorInfo {
  name: string
  message: string
  stack?: string
}

export type CallReply =
  | { nonce: string; kind: 'value'; value: unknown }
  | { nonce: string; kind: 'threw'; error: ErrorInfo }
  | { nonce: string; kind: 'guard' | 'load-error' | 'no-export' | 'not-cloneable'; error: ErrorInfo }

/** Where the runner's guard (native/guard.c) is, relative to the runner (dist/functions/child.js). */
export const GUARD_FROM_RUNNER = '../../native/cordon-guard.node'

/** What was thrown, as plain data; never throws itself, whatever the value (an object without a prototype, say). */
export function errorInfo(error: unknown): ErrorInfo {
  const text = (v: unknown): string => {
    try {
      return String(v)
    } catch {
      return Object.prototype.toString.call(v)
    }
  }
  if (error instanceof Error) {
    return {
      name: text(error.name),
      message: text(error.message),
      ...(error.stack ? { stack: text(error.stack) } : {}),
    }
  }
  return { name: 'Error', message: text(error) }
}

/**
 * A frame: the nonce in the clear, a 4-byte big-endian length, then that many bytes of v8 serialization
 * (which carries the nonce again). The nonce up front lets the host find the reply by a scan, whatever
 * else was written to the channel around it.
 */
export function frame(message: CallReply): Buffer {
  const payload = serialize(message)
  const header = Buffer.alloc(4)
  header.writeUInt32BE(payload.length)
  return Buffer.concat([Buffer.from(message.nonce, 'latin1'), header, payload])
}

/** What the reply channel holds: the replies carrying the nonce, and whether anything else did. */
export interface ReplyScan {
  replies: CallReply[]
  /** The serialized size of each reply, in order: what it cost its writer (anything else on the channel
   * cost the writer too, but is not part of the reply). */
  sizes: number[]
  /**
   * The nonce stood in the clear where no reply begins: whoever wrote it knew the nonce (the function, which
   * is the runner's own process), so no reply on the channel is trusted. A frame cut short at the end (a
   * run killed as it wrote) is not one, unless a reply came before it: the run's status says why there is
   * no reply.
   */
  forged: boolean
}

/**
 * The replies carrying `nonce`, in order. Only where the nonce stands in the clear is a frame read: what
 * else is on the channel (written by the function or what it started, without the nonce) is passed over
 * by one scan, never parsed, so neither its cost to the host (a failed deserialize per 4 bytes was ~0.7 s
 * a MiB) nor a stray length prefix (which swallowed the reply after it) depends on it. A frame read is
 * passed over whole (the nonce inside its payload is not another frame), and the scan stops at the first
 * nonce that begins none: read from each, frames nested in one another cost a pass each over all the rest
 * (2 MiB held the host ~44 s). So every byte is deserialized at most once. Only the runner should know the
 * nonce, so more than one reply, or a nonce where none begins, means something else wrote one.
 */
export function scanReplies(data: Buffer, nonce: string): ReplyScan {
  const replies: CallReply[] = []
  const sizes: number[] = []
  const mark = Buffer.from(nonce, 'latin1')
  if (mark.length === 0) return { replies, sizes, forged: false }
  for (let at = data.indexOf(mark); at >= 0; ) {
    const start = at + mark.length
    // Cut short: the runner's own frame as a killed run left it, unless a reply came before (the runner
    // writes one and exits).
    const cut = { replies, sizes, forged: replies.length > 0 }
    if (start + 4 > data.length) return cut
    const length = data.readUInt32BE(start)
    const body = data.subarray(start + 4, start + 4 + length)
    if (body.length < length) return cut
    let message: CallReply | null = null
    try {
      message = deserialize(body) as CallReply
    } catch {
      // not a reply
    }
    if (!message || typeof message !== 'object' || message.nonce !== nonce)
      return { replies, sizes, forged: true }
    replies.push(message)
    sizes.push(length)
    at = data.indexOf(mark, start + 4 + length)
  }
  return { replies, sizes, forged: false }
}

/** Every reply carrying `nonce`, in order, as scanReplies reads them. */
export function findReplies(data: Buffer, nonce: string): CallReply[] {
  return scanReplies(data, nonce).replies
}

/** The reply carrying `nonce` when exactly one does and none was forged (see scanReplies); null otherwise. */
export function findReply(data: Buffer, nonce: string): CallReply | null {
  const { replies, forged } = scanReplies(data, nonce)
  return replies.length === 1 && !forged ? replies[0]! : null
}
