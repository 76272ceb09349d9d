// One byte budget for stdout and stderr together. Bytes past the cap are never kept; text is decoded
// per stream with a streaming decoder so a character split across reads survives, then redacted.
// With `encoding: 'buffer'` the bytes are kept as they are (redaction reads them as Latin-1, one character
// a byte, and matches each secret as its UTF-8 bytes). Byte counts are what the sandbox wrote, before
// redaction.
import { isAscii } from 'node:buffer'
import { StringDecoder } from 'node:string_decoder'
import type { Encoding, OutputChunk, OutputData } from '../policy/schema.js'
import { MarkerRuns, Redaction, type Scanner } from './redact.js'

type Stream = OutputChunk['stream']
/** What a run keeps: each stream, and both interleaved in arrival order. */
export interface OutputViews<D extends OutputData = string> {
  stdout: D
  stderr: D
  output: D
}
const TAIL_CHARS = 4096

/** `tail` with `more` (latin1: one char a byte) written after it, cut to the last TAIL_CHARS. */
export function tailAfter(tail: string, more: string): string {
  return (tail + more).slice(-TAIL_CHARS)
}

/**
 * Kept bytes are copied into a reused buffer and decoded for the result a batch at a time: each read
 * (~20 KiB) would otherwise become a young-generation string the GC copies again, while a multi-MiB string
 * is allocated where it stays. The buffer starts small (most runs print little) and doubles each time a
 * stream fills it; measured on 256 MiB, reusing it instead of concatenating reads is ~20% faster.
 */
const BATCH_BYTES = 4 * 1024 * 1024
const FIRST_BATCH_BYTES = 16 * 1024

/** Bytes → text for one stream. */
interface Decoder {
  push(data: Buffer): string
  /** What is left when the stream ends. */
  end(): string
}

/** Bytes as Latin-1, one character a byte: redaction scans them as text and gives the same bytes back. */
const bytesAsLatin1 = (): Decoder => ({ push: (data) => data.toString('latin1'), end: () => '' })

/** A streaming UTF-8 decoder. */
class TextPipe implements Decoder {
  private readonly decoder = new StringDecoder('utf8')
  /** The decoder holds no part of a character: pure ASCII may skip it. */
  private clean = true

  /**
   * UTF-8 decoding runs at ~1.3 GB/s; ASCII read as latin1 is the same text at ~3.5 GB/s. The fast path
   * is taken only when the decoder holds nothing, and it holds nothing after a chunk ending in ASCII.
   */
  push(data: Buffer): string {
    if (this.clean && isAscii(data)) return data.toString('latin1')
    if (data.length > 0) this.clean = data[data.length - 1]! < 0x80
    return this.decoder.write(data)
  }

  /** What is left: a cut character becomes U+FFFD. */
  end(): string {
    return this.decoder.end()
  }
}

/**
 * Output with redaction: stdout, stderr and their interleaving are three views of what the sandbox wrote,
 * and a secret must appear whole in none of them, nor in the live chunks read per stream or together.
 * Each stream is scanned on its own; what a stream's scan has decided goes on, in that order, into one
 * interleaved sequence that is scanned again; a character is masked if either scan masked it, and
 * MarkerRuns writes the markers so no clear text joins across a hidden character. `output` and the live
 * chunks are that interleaved sequence, which is arrival order except that each scan holds back up to its
 * window (a stream's held tail comes out after what the other stream wrote meanwhile; at the end the
 * tails come out in arrival order).
 */
class RedactedOutput {
  private readonly pipes: Record<Stream, Decoder>
  private readonly scans: Record<Stream, Scanner>
  private readonly merged: Scanner
  /** Which stream each not yet written character of `merged` came from: [stream, its end], in order. */
  private owners: [Stream, number][] = []
  private written = 0
  private readonly runs = new MarkerRuns<Stream>()
  /** Per stream, when each piece arrived: [arrival number, its end in the stream's scan]; not yet forwarded. */
  private readonly arrivals: Record<Stream, [number, number][]> = { stdout: [], stderr: [] }
  private arrived = 0
  private readonly bytes = { stdout: 0, stderr: 0 }
  /** What a push or the end writes, coalesced per stream, then handed on with the bytes read meanwhile. */
  private out: [Stream, string][] = []

  constructor(
    redaction: Redaction,
    private readonly write: (stream: Stream, text: string, bytes: number) => void,
    decoder: () => Decoder,
  ) {
    this.pipes = { stdout: decoder(), stderr: decoder() }
    this.scans = { stdout: redaction.scanner(), stderr: redaction.scanner() }
    this.merged = redaction.scanner()
  }

  push(stream: Stream, data: Buffer): void {
    this.bytes[stream] += data.length
    const text = this.pipes[stream].push(data)
    if (text) {
      const scan = this.scans[stream]
      scan.push(text)
      this.arrivals[stream].push([this.arrived++, scan.length])
      this.forward(stream, scan.decided)
      this.writeDecided()
    }
    this.flushOut()
  }

  /** `cut`: the streams the cap cut (something they wrote was left out). */
  finish(cut: ReadonlySet<Stream> = new Set()): void {
    for (const stream of ['stdout', 'stderr'] as const) {
      const text = this.pipes[stream].end()
      const scan = this.scans[stream]
      // Before a character the cut split (U+FFFD): what precedes it is the secret's beginning.
      if (cut.has(stream)) scan.cut()
      if (text) {
        scan.push(text)
        this.arrivals[stream].push([this.arrived++, scan.length])
      }
      scan.end()
    }
    // The held tails, in the order they arrived.
    for (;;) {
      const next = (['stdout', 'stderr'] as const)
        .filter((s) => this.arrivals[s].length > 0)
        .sort((a, b) => this.arrivals[a][0]![0] - this.arrivals[b][0]![0])[0]
      if (!next) break
      this.forward(next, this.arrivals[next][0]![1])
    }
    this.merged.end()
    this.writeDecided()
    this.runs.closeAll((stream, text) => this.add(stream, text))
    this.flushOut()
  }

  /** Move `stream`'s scanned text up to `upTo` into the interleaved sequence. */
  private forward(stream: Stream, upTo: number): void {
    const arrivals = this.arrivals[stream]
    while (arrivals.length > 0 && arrivals[0]![1] <= upTo) arrivals.shift()
    for (const [text, masked] of this.scans[stream].release(upTo)) {
      const at = this.merged.length
      this.merged.push(text)
      if (masked) this.merged.mask(at, at + text.length)
      const last = this.owners.at(-1)
      if (last && last[0] === stream) last[1] = at + text.length
      else this.owners.push([stream, at + text.length])
    }
  }

  private writeDecided(): void {
    let at = this.written
    let owner = 0
    for (const [text, masked] of this.merged.release(this.merged.decided)) {
      for (let i = 0; i < text.length; ) {
        const [stream, end] = this.owners[owner]!
        const take = Math.min(text.length - i, end - at)
        this.runs.emit(stream, text.slice(i, i + take), masked, (s, t) => this.add(s, t))
        i += take
        at += take
        if (at === end) owner++
      }
    }
    this.owners.splice(0, owner)
    this.written = at
  }

  private add(stream: Stream, text: string): void {
    const last = this.out.at(-1)
    if (last && last[0] === stream) last[1] += text
    else this.out.push([stream, text])
  }

  private flushOut(): void {
    for (const [stream, text] of this.out) {
      this.write(stream, text, this.bytes[stream])
      this.bytes[stream] = 0
    }
    this.out = []
  }
}

/**
 * The kept bytes for `encoding: 'buffer'`: one growing copy of everything in arrival order, and where the
 * stream changes (a run of one stream per entry, so many small reads cost no object each); the streams
 * are cut out of it at the end.
 */
class ByteStore {
  private buf = Buffer.alloc(0)
  private length = 0
  /** Offsets in `buf` where the stream changes; the first run is `first`'s, then they alternate. */
  private readonly switches: number[] = []
  private first: Stream = 'stdout'
  private last: Stream | null = null
  private readonly sizes = { stdout: 0, stderr: 0 }

  push(stream: Stream, data: Buffer): void {
    if (data.length === 0) return
    if (this.last === null) this.first = stream
    else if (this.last !== stream) this.switches.push(this.length)
    this.last = stream
    if (this.length + data.length > this.buf.length) {
      const grown = Buffer.allocUnsafeSlow(
        Math.max(FIRST_BATCH_BYTES, this.buf.length * 2, this.length + data.length),
      )
      this.buf.copy(grown, 0, 0, this.length)
      this.buf = grown
    }
    this.length += data.copy(this.buf, this.length)
    this.sizes[stream] += data.length
  }

  finish(): OutputViews<Buffer> {
    const output = Buffer.from(this.buf.subarray(0, this.length))
    const views = { stdout: Buffer.alloc(this.sizes.stdout), stderr: Buffer.alloc(this.sizes.stderr), output }
    const at = { stdout: 0, stderr: 0 }
    let stream = this.first
    let start = 0
    for (const end of [...this.switches, this.length]) {
      at[stream] += output.copy(views[stream], at[stream], start, end)
      start = end
      stream = stream === 'stdout' ? 'stderr' : 'stdout'
    }
    return views
  }
}

/** What both streams wrote from the moment the cap was exceeded, sharing the `room` that was left then. */
class Contest {
  /** In arrival order; of each stream no more than the whole room. */
  private readonly pieces: [Stream, Buffer][] = []
  private readonly staged = { stdout: 0, stderr: 0 }
  private readonly wrote = { stdout: 0, stderr: 0 }
  /** After settle(): the streams that keep less than they wrote. */
  readonly cut = new Set<Stream>()

  constructor(private readonly room: number) {}

  stage(stream: Stream, data: Buffer): void {
    this.wrote[stream] += data.length
    const take = Math.min(data.length, this.room - this.staged[stream])
    if (take <= 0) return
    this.pieces.push([stream, data.subarray(0, take)])
    this.staged[stream] += take
  }

  /** What each stream keeps: the first of what it wrote, half the room each unless one needs less. */
  settle(): [Stream, Buffer][] {
    const { room, staged } = this
    const half = Math.floor(room / 2)
    const share = { stdout: half, stderr: room - half }
    if (staged.stdout < share.stdout) share.stderr = room - staged.stdout
    else if (staged.stderr < share.stderr) share.stdout = room - staged.stderr
    const kept: [Stream, Buffer][] = []
    for (const [stream, data] of this.pieces) {
      const take = Math.min(data.length, share[stream])
      if (take > 0) kept.push([stream, data.subarray(0, take)])
      share[stream] -= take
    }
    for (const stream of ['stdout', 'stderr'] as const) {
      const took = kept.reduce((n, [s, d]) => (s === stream ? n + d.length : n), 0)
      if (took < this.wrote[stream]) this.cut.add(stream)
    }
    return kept
  }
}

export class OutputBuffer<D extends OutputData = string> {
  bytes = 0
  truncated = false
  /**
   * Last few KiB of stderr as written (of both streams when merged), kept even past the cap, for classifying
   * how a program died.
   */
  stderrTail = ''
  // Built with `+=`: V8 keeps these as ropes sharing their pieces, so the interleaved text and the
  // per-stream texts cost no copy and no final join.
  private readonly text = { stdout: '', stderr: '', output: '' }
  /** Decodes batches for the result. */
  private readonly store: Record<Stream, TextPipe>
  /** Decodes each read for the live consumer, when there is one; its strings die young. */
  private readonly live: Record<Stream, TextPipe> | null
  /** Bytes read but not yet part of a live chunk (part of a character or held back), reported with the next. */
  private readonly pending = { stdout: 0, stderr: 0 }
  /** Set when there is anything to redact: then it alone turns bytes into both the kept and the live text. */
  private readonly redacted: RedactedOutput | null
  /** Kept bytes not yet decoded for the result: `batchBytes` of `batchStream` at the start of `batch`. */
  private batch = Buffer.alloc(0)
  private batchBytes = 0
  private batchStream: Stream = 'stdout'
  /** With `encoding: 'buffer'`: the kept bytes, instead of the text above. */
  private readonly bytesKept: ByteStore | null
  private readonly onChunk: (chunk: OutputChunk<OutputData>) => void
  private readonly isLive: boolean

  private readonly merged: boolean
  /** From the push that went past the cap to the end: what competes for the room that was left. */
  private contest: Contest | null = null

  /**
   * `live`: someone sees chunks as they arrive (onOutput, start()'s iterator). `encoding` must be 'buffer'
   * exactly when D is Buffer. `merged`: stdout is both streams (mergeOutput), so its tail is the one to
   * classify by.
   */
  constructor(
    private readonly cap: number,
    onChunk: (chunk: OutputChunk<D>) => void,
    redact: readonly (string | RegExp)[] | Redaction = [],
    {
      live = true,
      encoding = 'utf8',
      merged = false,
    }: { live?: boolean; encoding?: Encoding; merged?: boolean } = {},
  ) {
    this.merged = merged
    this.onChunk = onChunk as (chunk: OutputChunk<OutputData>) => void
    this.isLive = live
    const redaction = redact instanceof Redaction ? redact : new Redaction(redact)
    const bytes = encoding === 'buffer'
    this.bytesKept = bytes ? new ByteStore() : null
    this.store = { stdout: new TextPipe(), stderr: new TextPipe() }
    this.live = live && !bytes ? { stdout: new TextPipe(), stderr: new TextPipe() } : null
    this.redacted = redaction.active
      ? new RedactedOutput(
          bytes ? redaction.forBytes() : redaction,
          (stream, text, count) => {
            const data = bytes ? Buffer.from(text, 'latin1') : text
            this.keep(stream, data)
            if (live) this.onChunk({ stream, data, bytes: count })
          },
          bytes ? bytesAsLatin1 : () => new TextPipe(),
        )
      : null
  }

  /**
   * Keep what fits in the budget; returns false once the budget is exceeded (the sandbox is then stopped).
   * Until then output is kept as it arrives. What arrives from the push that goes past the cap to the end
   * (the sandbox stopped at once: all of it written before the stop) shares the room that was left: each
   * stream gets half, and a stream that wrote less leaves the rest to the other. So a stream read first (libuv
   * reads one pipe up to 32 times before the next) cannot take all of it. That part comes out at the end.
   */
  push(stream: Stream, data: Buffer): boolean {
    if (stream === 'stderr' || this.merged)
      this.stderrTail = tailAfter(this.stderrTail, data.toString('latin1'))
    if (this.contest) {
      this.contest.stage(stream, data)
      return false
    }
    if (this.truncated) return false
    const room = this.cap - this.bytes
    if (data.length > room) {
      // Known now, whatever the split: the room is filled, and something is left out.
      this.truncated = true
      this.bytes = this.cap
      this.contest = new Contest(room)
      this.contest.stage(stream, data)
      return false
    }
    this.bytes += data.length
    this.take(stream, data)
    return true
  }

  /** Keep `kept`, which fits in the budget. */
  private take(stream: Stream, kept: Buffer): void {
    if (this.redacted) {
      this.redacted.push(stream, kept)
      return
    }
    if (this.bytesKept) {
      this.bytesKept.push(stream, kept)
      if (this.isLive && kept.length > 0) this.onChunk({ stream, data: kept, bytes: kept.length })
      return
    }
    if (this.live) this.deliver(stream, this.live[stream].push(kept), kept.length)
    // Arrival order across streams is kept: the other stream's batch is decoded first.
    if (this.batchStream !== stream) this.decodeBatch()
    this.batchStream = stream
    if (this.batchBytes + kept.length > this.batch.length) {
      this.decodeBatch()
      if (kept.length >= BATCH_BYTES) {
        this.keep(stream, this.store[stream].push(kept))
        return
      }
      if (this.batch.length < BATCH_BYTES) {
        const size = Math.max(FIRST_BATCH_BYTES, this.batch.length * 2, kept.length)
        this.batch = Buffer.allocUnsafeSlow(Math.min(BATCH_BYTES, size))
      }
    }
    this.batchBytes += kept.copy(this.batch, this.batchBytes)
  }

  private deliver(stream: Stream, text: string, bytes: number): void {
    this.pending[stream] += bytes
    if (!text) return
    this.onChunk({ stream, data: text, bytes: this.pending[stream] })
    this.pending[stream] = 0
  }

  private decodeBatch(): void {
    if (this.batchBytes === 0) return
    const stream = this.batchStream
    this.keep(stream, this.store[stream].push(this.batch.subarray(0, this.batchBytes)))
    this.batchBytes = 0
  }

  private keep(stream: Stream, data: OutputData): void {
    if (typeof data !== 'string') {
      this.bytesKept?.push(stream, data)
      return
    }
    this.text[stream] += data
    this.text.output += data
  }

  /** Flush partial characters (a cut at the cap becomes U+FFFD) and return the three views. */
  finish(): OutputViews<D> {
    const contest = this.contest
    for (const [stream, kept] of contest?.settle() ?? []) this.take(stream, kept)
    this.contest = null
    this.redacted?.finish(contest?.cut)
    if (this.bytesKept) return this.bytesKept.finish() as OutputViews<OutputData> as OutputViews<D>
    this.decodeBatch()
    for (const stream of ['stdout', 'stderr'] as const) {
      this.keep(stream, this.store[stream].end())
      if (this.live) this.deliver(stream, this.live[stream].end(), 0)
    }
    return { ...this.text } as OutputViews<OutputData> as OutputViews<D>
  }
}
