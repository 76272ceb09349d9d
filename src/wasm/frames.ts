// Host calls on a stream (isolation 'sandbox': the guest's runtime in a sandbox, the host outside, a unix
// socket between): each frame is a 4-byte header length, a 4-byte payload length (both big-endian), a
// JSON header, then the payload's bytes. Both lengths are bounded before anything is kept, so a runtime
// gone rogue cannot make the host hold more than one frame's worth.
import { type HostReply, MAX_CALL_BYTES } from './abi.js'

export type Frame =
  | { kind: 'hello'; nonce: string }
  | { kind: 'call'; name: string; values: (number | bigint)[]; bytes?: Uint8Array }
  | { kind: 'reply'; values: (number | bigint)[]; bytes?: Uint8Array }

const MAX_HEADER = 16 * 1024

export class FrameError extends Error {
  override readonly name = 'FrameError'
}

/** A value as JSON carries it: an i64 as {"i64": "digits"}. */
const toJson = (v: number | bigint) => (typeof v === 'bigint' ? { i64: v.toString() } : v)

function fromJson(v: unknown): number | bigint {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v
  if (typeof v === 'object' && v !== null && typeof (v as { i64?: unknown }).i64 === 'string') {
    const text = (v as { i64: string }).i64
    if (/^-?\d{1,20}$/.test(text)) return BigInt(text)
  }
  throw new FrameError('a value is neither an integer nor an i64')
}

export function encodeFrame(frame: Frame): Buffer {
  const { bytes, ...rest } = frame as Frame & { bytes?: Uint8Array }
  // `bytes: true` says there are bytes, even none: an empty read is not a failed one.
  const fields = 'values' in rest ? { ...rest, values: rest.values.map(toJson) } : rest
  const header = Buffer.from(JSON.stringify(bytes ? { ...fields, bytes: true } : fields))
  const head = Buffer.alloc(8)
  head.writeUInt32BE(header.length, 0)
  head.writeUInt32BE(bytes?.length ?? 0, 4)
  return Buffer.concat([head, header, bytes ?? new Uint8Array(0)])
}

/** The frame a header and payload make, checked field by field. */
function decode(header: Buffer, payload: Buffer): Frame {
  let raw: unknown
  try {
    raw = JSON.parse(header.toString('utf8'))
  } catch {
    throw new FrameError('a frame header is not JSON')
  }
  if (typeof raw !== 'object' || raw === null) throw new FrameError('a frame header is not an object')
  const h = raw as Record<string, unknown>
  const bytes = h.bytes === true ? { bytes: new Uint8Array(payload) } : {}
  if (h.kind === 'hello' && typeof h.nonce === 'string') return { kind: 'hello', nonce: h.nonce }
  if (!Array.isArray(h.values) || h.values.length > 8) throw new FrameError('a frame has no values')
  const values = h.values.map(fromJson)
  if (h.kind === 'call' && typeof h.name === 'string' && h.name.length <= 128)
    return { kind: 'call', name: h.name, values, ...bytes }
  if (h.kind === 'reply') return { kind: 'reply', values, ...bytes }
  throw new FrameError('a frame of no known kind')
}

/** Cuts a stream into frames; throws FrameError (and keeps nothing) at the first that breaks the bounds. */
export class FrameReader {
  private pending: Buffer[] = []
  private size = 0

  push(data: Buffer): Frame[] {
    this.pending.push(data)
    this.size += data.length
    const frames: Frame[] = []
    for (;;) {
      if (this.size < 8) return frames
      const all = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending)
      this.pending = [all]
      const headerLength = all.readUInt32BE(0)
      const payloadLength = all.readUInt32BE(4)
      if (headerLength > MAX_HEADER || payloadLength > MAX_CALL_BYTES) {
        this.pending = []
        this.size = 0
        throw new FrameError(`a frame of ${headerLength} + ${payloadLength} bytes, past the bounds`)
      }
      const end = 8 + headerLength + payloadLength
      if (this.size < end) return frames
      frames.push(decode(all.subarray(8, 8 + headerLength), all.subarray(8 + headerLength, end)))
      this.pending = [all.subarray(end)]
      this.size -= end
    }
  }
}

/** A reply as the bridge posts it to the guest's worker. */
export const replyOf = (frame: Frame & { kind: 'reply' }): HostReply =>
  frame.bytes ? { values: frame.values, bytes: frame.bytes } : { values: frame.values }
