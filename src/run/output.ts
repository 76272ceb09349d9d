// One byte budget for stdout and stderr together. Bytes past the cap are never kept; text is decoded
// per stream with a streaming decoder so a character split across reads survives, then redacted.
// Byte counts are what the sandbox wrote, before redaction.
import { StringDecoder } from 'node:string_decoder'
import type { OutputChunk } from '../policy/schema.js'
import { Redactor } from './redact.js'

type Stream = OutputChunk['stream']
const TAIL_CHARS = 4096

export class OutputBuffer {
  bytes = 0
  truncated = false
  /** Last few KiB of stderr as written, kept even past the cap, for classifying how a program died. */
  stderrTail = ''
  private readonly parts: { stream: Stream; text: string }[] = []
  private readonly decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') }
  /** Bytes kept but still inside the decoder (part of a character), reported with the next text. */
  private readonly pending = { stdout: 0, stderr: 0 }

  private readonly redactors: Record<Stream, Redactor>

  constructor(
    private readonly cap: number,
    private readonly onChunk: (chunk: OutputChunk) => void,
    redact: readonly (string | RegExp)[] = [],
  ) {
    this.redactors = { stdout: new Redactor(redact), stderr: new Redactor(redact) }
  }

  /** Keep what fits in the budget; returns false once the budget is exceeded. */
  push(stream: Stream, data: Buffer): boolean {
    if (stream === 'stderr') this.stderrTail = (this.stderrTail + data.toString('latin1')).slice(-TAIL_CHARS)
    if (this.truncated) return false
    const room = this.cap - this.bytes
    const kept = data.length > room ? data.subarray(0, room) : data
    if (data.length > room) this.truncated = true
    this.bytes += kept.length
    this.emit(stream, this.decoders[stream].write(kept), kept.length)
    return !this.truncated
  }

  private emit(stream: Stream, decoded: string, bytes: number, last = false): void {
    this.pending[stream] += bytes
    const redactor = this.redactors[stream]
    const text = redactor.push(decoded) + (last ? redactor.flush() : '')
    if (!text) return
    this.parts.push({ stream, text })
    this.onChunk({ stream, data: text, bytes: this.pending[stream] })
    this.pending[stream] = 0
  }

  /** Flush partial characters (a cut at the cap becomes U+FFFD) and return the three views. */
  finish(): { stdout: string; stderr: string; output: string } {
    for (const stream of ['stdout', 'stderr'] as const)
      this.emit(stream, this.decoders[stream].end(), 0, true)
    const join = (stream?: Stream) =>
      this.parts
        .filter((p) => !stream || p.stream === stream)
        .map((p) => p.text)
        .join('')
    const output = join()
    // One stream only (the common case): its text is the interleaved text; build it once, not twice.
    const streams = new Set(this.parts.map((p) => p.stream))
    if (streams.size < 2) {
      return {
        stdout: streams.has('stdout') ? output : '',
        stderr: streams.has('stderr') ? output : '',
        output,
      }
    }
    return { stdout: join('stdout'), stderr: join('stderr'), output }
  }
}
