// A proxy connection as the HTTP server reads it: in small pieces, and only while the connection has room
// for another request. Node's parser turns all it is given into requests at once, before any handler can
// say no: one 64 KiB read of pipelined requests would be ~1500 request objects held on the host (~3 MB),
// with 96 connections per run. Given a piece at a time, the parser makes at most a piece's worth beyond
// what the proxy lets wait.
import type net from 'node:net'
import { Duplex } from 'node:stream'

/**
 * At most this much reaches the parser at once: ~90 of the smallest absolute-URI requests. Smaller costs
 * uploads through the proxy more (2 KiB: about half the throughput); CONNECT tunnels never go through it.
 */
export const PIECE_BYTES = 4096

const EMPTY = Buffer.alloc(0)

export class Metered extends Duplex {
  /** Read from the connection, not yet given to the parser (at most one read of the connection's). */
  private pending: Buffer = EMPTY
  private ended = false
  private detached = false
  private readonly onData = (chunk: Buffer) => {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    this.feed()
  }
  private readonly onEnd = () => {
    this.ended = true
    this.feed()
  }
  private readonly onClose = () => this.destroy()
  private readonly onTimeout = () => this.emit('timeout')

  /** `room`: whether the connection may have another request parsed now. */
  constructor(
    readonly raw: net.Socket,
    private readonly room: () => boolean,
  ) {
    super({ allowHalfOpen: true })
    raw.on('data', this.onData)
    raw.on('end', this.onEnd)
    raw.on('close', this.onClose)
    raw.on('timeout', this.onTimeout)
    // The reader starts, or goes on after a pause (a request body's backpressure): feed it. Pushes made
    // before its first read would only be buffered, and a buffered piece is not parsed yet.
    this.on('resume', () => this.feed())
  }

  /**
   * Give the parser what it may have: a piece at a time, each parsed before the next (a push to a flowing
   * stream is its 'data' event at once), while the reader flows and the proxy says there is room.
   */
  feed(): void {
    while (this.pending.length > 0) {
      if (this.detached || this.destroyed) return
      // A piece still buffered was not parsed yet (a push in _read, or a paused reader): wait for _read.
      if (this.readableFlowing !== true || this.readableLength > 0 || !this.room())
        return void this.raw.pause()
      const piece = this.pending.subarray(0, PIECE_BYTES)
      this.pending = this.pending.subarray(piece.length)
      this.push(piece)
    }
    if (this.detached || this.destroyed) return
    if (this.ended) this.push(null)
    else this.raw.resume()
  }

  /** A reader that wants more: fed outside _read, where a push is buffered rather than parsed at once. */
  override _read(): void {
    process.nextTick(() => this.feed())
  }

  override _write(chunk: Buffer, encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.raw.write(chunk, encoding, done)
  }

  override _final(done: () => void): void {
    this.raw.end(done)
  }

  /**
   * The server's close after a last response (`connection: close`, a 503): written out, then gone for
   * good, as a socket's destroySoon. Only half closed, a client still sending (whose writes the proxy no
   * longer reads) would hold the connection open.
   */
  destroySoon(): void {
    if (this.writableFinished) return void this.destroy()
    this.once('finish', () => this.destroy())
    this.end()
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    if (!this.detached) this.raw.destroy()
    done(error)
  }

  /** The server's keep-alive and idle timeouts hold for the connection itself. */
  setTimeout(ms: number, callback?: () => void): this {
    this.raw.setTimeout(ms)
    if (callback) this.once('timeout', callback)
    return this
  }

  /**
   * The connection itself, given back (after a CONNECT): paused, with everything the parser has not
   * consumed in front (`head`, the parser's rest, then what was still held back), in order.
   */
  detach(head: Buffer): net.Socket {
    this.detached = true
    this.raw.pause()
    this.raw.off('data', this.onData)
    this.raw.off('end', this.onEnd)
    // Its 'close' still ends this stream: a response still on it (a request before the CONNECT) goes too.
    this.raw.off('timeout', this.onTimeout)
    const unread: Buffer[] = [head]
    for (let chunk = this.read() as Buffer | null; chunk !== null; chunk = this.read() as Buffer | null)
      unread.push(chunk)
    unread.push(this.pending)
    this.pending = EMPTY
    const rest = Buffer.concat(unread)
    if (rest.length > 0) {
      if (this.ended) this.raw.destroy()
      else this.raw.unshift(rest)
    }
    return this.raw
  }
}
