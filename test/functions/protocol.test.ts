// Function-call reply frames: the nonce in the clear, then a length-prefixed structured clone.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { serialize } from 'node:v8'
import {
  type CallReply,
  errorInfo,
  findReplies,
  findReply,
  frame,
  scanReplies,
} from '../../src/functions/protocol.js'

const NONCE = '3f2b1c9e-0000-4000-8000-123456789abc'
const OTHER = '3f2b1c9e-0000-4000-8000-cba987654321'

/** A length-prefixed frame around arbitrary bytes. */
function rawFrame(payload: Buffer): Buffer {
  const header = Buffer.alloc(4)
  header.writeUInt32BE(payload.length)
  return Buffer.concat([header, payload])
}

const valueReply = (value: unknown, nonce = NONCE): CallReply => ({ nonce, kind: 'value', value })

/** LEB128, as v8 writes a length. */
function varint(n: number): Buffer {
  const out: number[] = []
  for (; n >= 0x80; n >>>= 7) out.push((n & 0x7f) | 0x80)
  out.push(n)
  return Buffer.from(out)
}

/**
 * About `total` bytes of frames carrying the nonce, each body a v8 one-byte string holding every frame
 * after it: each deserializes (to a string, not a reply) at the cost of all the rest.
 */
function nestedFrames(nonce: string, total: number): Buffer {
  const frames: Buffer[] = []
  for (let size = 0; size < total; ) {
    const body = Buffer.concat([Buffer.from([0xff, 0x0f, 0x22]), varint(size)])
    const head = Buffer.alloc(4)
    head.writeUInt32BE(body.length + size)
    const f = Buffer.concat([Buffer.from(nonce, 'latin1'), head, body])
    frames.push(f)
    size += f.length
  }
  return Buffer.concat(frames.reverse())
}

/** mulberry32: deterministic bytes for garbage. */
function randomBytes(seed: number, n: number): Buffer {
  let a = seed >>> 0
  const out = Buffer.alloc(n)
  for (let i = 0; i < n; i++) {
    a = (a + 0x6d2b79f5) >>> 0
    let t = Math.imul(a ^ (a >>> 15), a | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    out[i] = (t ^ (t >>> 14)) & 0xff
  }
  return out
}

describe('frame', () => {
  it('is the nonce, a 4-byte big-endian length, then that many bytes of v8 serialization', () => {
    const message = valueReply({ a: 1 })
    const f = frame(message)
    const payload = serialize(message)
    assert.equal(f.subarray(0, NONCE.length).toString('latin1'), NONCE)
    assert.equal(f.readUInt32BE(NONCE.length), payload.length)
    assert.equal(f.length, NONCE.length + 4 + payload.length)
    assert.deepEqual(f.subarray(NONCE.length + 4), payload)
  })

  it('throws for a value that cannot be cloned', () => {
    assert.throws(() => frame(valueReply(() => 1)))
    assert.throws(() => frame(valueReply({ s: Symbol('x') })))
  })
})

describe('frame / findReply round trip', () => {
  it('structured-clone values survive: Map, Set, Date, BigInt, Uint8Array, nested objects', () => {
    const value = {
      map: new Map<unknown, unknown>([
        ['k', 1],
        [2, { deep: [new Set([1, 'two'])] }],
      ]),
      set: new Set(['a', 'b']),
      date: new Date('2024-05-06T07:08:09.010Z'),
      big: 2n ** 70n,
      negBig: -12345678901234567890n,
      bytes: new Uint8Array([0, 1, 254, 255]),
      floats: new Float64Array([1.5, -0, Number.NaN]),
      nested: { a: { b: { c: [1, null, undefined, 'x', { d: true }] } } },
      regex: /ab+c/gi,
      special: [Number.POSITIVE_INFINITY, -0, Number.NaN],
      unicode: 'caf\u00e9 \u{1F600}',
      empty: {},
    }
    const reply = findReply(frame(valueReply(value)), NONCE)
    assert.ok(reply, 'reply found')
    assert.equal(reply.kind, 'value')
    assert.equal(reply.nonce, NONCE)
    const got = (reply as { value: typeof value }).value
    assert.deepEqual(got, value)
    assert.ok(got.map instanceof Map, 'Map stays a Map')
    assert.ok(got.set instanceof Set, 'Set stays a Set')
    assert.ok(got.date instanceof Date, 'Date stays a Date')
    assert.equal(got.date.toISOString(), '2024-05-06T07:08:09.010Z')
    assert.equal(typeof got.big, 'bigint')
    assert.equal(got.big, 2n ** 70n)
    assert.ok(got.bytes instanceof Uint8Array, 'Uint8Array stays a Uint8Array')
    assert.deepEqual([...got.bytes], [0, 1, 254, 255])
    assert.ok(Object.is(got.special[1], -0), '-0 survives')
    assert.ok(Number.isNaN(got.special[2]), 'NaN survives')
    assert.ok('c' in got.nested.a.b && got.nested.a.b.c.length === 5, 'undefined array slots kept')
  })

  it('primitive values and undefined round trip', () => {
    for (const value of [undefined, null, 0, -1.5, 'text', '', true, false, 7n]) {
      const reply = findReply(frame(valueReply(value)), NONCE)
      assert.ok(reply && reply.kind === 'value', `reply for ${String(value)}`)
      assert.equal(reply.value, value)
    }
  })

  it('circular references survive', () => {
    const a: { self?: unknown; list: unknown[] } = { list: [] }
    a.self = a
    a.list.push(a)
    const reply = findReply(frame(valueReply(a)), NONCE)
    assert.ok(reply && reply.kind === 'value', 'reply found')
    const got = reply.value as typeof a
    assert.equal(got.self, got)
    assert.equal(got.list[0], got)
  })

  it('error replies round trip with their error info', () => {
    const error = errorInfo(new RangeError('too far'))
    for (const kind of ['threw', 'load-error', 'no-export', 'not-cloneable'] as const) {
      const reply = findReply(frame({ nonce: NONCE, kind, error }), NONCE)
      assert.deepEqual(reply, { nonce: NONCE, kind, error })
    }
  })

  it('a large value round trips', () => {
    const bytes = new Uint8Array(1 << 20).map((_, i) => i & 0xff)
    const reply = findReply(frame(valueReply(bytes)), NONCE)
    assert.ok(reply && reply.kind === 'value', 'reply found')
    assert.deepEqual(reply.value, bytes)
  })
})

describe('findReply: nonce and garbage', () => {
  it('a frame with a different nonce is ignored', () => {
    assert.equal(findReply(frame(valueReply('forged', OTHER)), NONCE), null)
  })

  it('the right frame is found after forged frames with other nonces', () => {
    const data = Buffer.concat([
      frame(valueReply('forged 1', OTHER)),
      frame({ nonce: '', kind: 'threw', error: { name: 'Error', message: 'x' } }),
      frame(valueReply('forged 2', NONCE.toUpperCase())),
      frame(valueReply('real')),
      frame(valueReply('after', OTHER)),
    ])
    assert.deepEqual(findReply(data, NONCE), valueReply('real'))
  })

  it('framed garbage and non-reply messages before the reply are skipped', () => {
    const data = Buffer.concat([
      rawFrame(Buffer.alloc(0)),
      rawFrame(Buffer.from('definitely not v8')),
      rawFrame(randomBytes(1, 64)),
      rawFrame(randomBytes(2, 300)),
      rawFrame(serialize('a string')),
      rawFrame(serialize(null)),
      rawFrame(serialize(42)),
      rawFrame(serialize({ kind: 'value', value: 'no nonce' })),
      rawFrame(serialize({ nonce: 123, kind: 'value' })),
      frame(valueReply('real')),
    ])
    assert.deepEqual(findReply(data, NONCE), valueReply('real'))
  })

  it('random framed garbage never throws and never yields a reply', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const garbage = rawFrame(randomBytes(seed, seed % 97))
      assert.equal(findReply(garbage, NONCE), null, `seed ${seed}`)
      assert.deepEqual(findReply(Buffer.concat([garbage, frame(valueReply(seed))]), NONCE), valueReply(seed))
    }
  })

  it('unframed bytes never throw and never hide the reply after them', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const data = Buffer.concat([randomBytes(seed, seed % 13), frame(valueReply('real'))])
      assert.deepEqual(findReply(data, NONCE), valueReply('real'), `seed ${seed}`)
    }
  })

  it('junk on the channel costs a scan, not a parse per frame: 16 MiB of empty frames', () => {
    // Zero bytes read as frames of length 0, each one a failed deserialize: ~0.7 s a MiB on the host's
    // event loop, so the 64 MiB a reply may have blocked it for most of a minute.
    for (const junk of [Buffer.alloc(16 << 20), Buffer.concat(Array(2 << 20).fill(rawFrame(serialize(0))))]) {
      const started = performance.now()
      assert.deepEqual(findReply(Buffer.concat([junk, frame(valueReply('real'))]), NONCE), valueReply('real'))
      const ms = performance.now() - started
      assert.ok(ms < 500, `${junk.length} bytes of junk took ${ms.toFixed(0)} ms`)
    }
  })

  it('two frames carrying the nonce, wherever they are: both are found, and findReply takes neither', () => {
    const data = Buffer.concat([frame(valueReply('first')), frame(valueReply('second'))])
    assert.deepEqual(findReplies(data, NONCE), [valueReply('first'), valueReply('second')])
    assert.equal(findReply(data, NONCE), null)
    const threw: CallReply = { nonce: NONCE, kind: 'threw', error: { name: 'Error', message: 'real' } }
    const apart = Buffer.concat([
      frame(valueReply('forged')),
      frame(valueReply('other', OTHER)),
      rawFrame(Buffer.from('junk')),
      frame(threw),
    ])
    assert.deepEqual(findReplies(apart, NONCE), [valueReply('forged'), threw])
    assert.equal(findReply(apart, NONCE), null)
    assert.deepEqual(findReplies(frame(valueReply('other', OTHER)), NONCE), [])
  })
})

describe('findReply: the nonce where no reply begins', () => {
  it('frames carrying the nonce nested in one another cost one pass, not one per frame', () => {
    // Each body a string holding all the frames after it: a deserialize per frame, each as long as the
    // rest, was quadratic (1 MiB: ~10 s, 2 MiB: ~44 s of the host's event loop). Only one who knows the
    // nonce writes it in the clear, and then no reply is trusted.
    const data = Buffer.concat([nestedFrames(NONCE, 1 << 20), frame(valueReply('real'))])
    const started = performance.now()
    const scan = scanReplies(data, NONCE)
    const ms = performance.now() - started
    assert.ok(ms < 500, `the scan took ${ms.toFixed(0)} ms`)
    assert.equal(scan.forged, true)
    assert.equal(findReply(data, NONCE), null)
  })

  it('the nonce in the clear before or after the reply, not beginning one, means it was forged', () => {
    const real = frame(valueReply('real'))
    const mark = Buffer.from(NONCE, 'latin1')
    const stray = [
      Buffer.concat([mark, rawFrame(serialize('a string'))]),
      Buffer.concat([mark, rawFrame(Buffer.from('junk'))]),
      Buffer.concat([mark, rawFrame(serialize({ nonce: OTHER, kind: 'value', value: 1 }))]),
      // Once read as a frame of junk to pass over: its bytes hold the nonce in the clear.
      rawFrame(serialize([NONCE])),
    ]
    for (const s of stray) {
      for (const data of [Buffer.concat([s, real]), Buffer.concat([real, s])]) {
        const scan = scanReplies(data, NONCE)
        // Before the reply, the nonce in the payload of serialize([NONCE]) announces a frame past the end.
        assert.ok(scan.forged || scan.replies.length === 0, 'forged, or the reply swallowed by it')
        assert.equal(findReply(data, NONCE), null)
      }
      // After the reply, even a frame cut short: the runner writes its one reply and exits.
      assert.equal(scanReplies(Buffer.concat([real, s]), NONCE).forged, true)
    }
    for (const s of stray.slice(0, 3)) {
      assert.equal(scanReplies(Buffer.concat([s, real]), NONCE).forged, true)
      assert.equal(scanReplies(Buffer.concat([real, s.subarray(0, NONCE.length + 2)]), NONCE).forged, true)
    }
    // The nonce inside the reply's own payload is not another frame.
    assert.deepEqual(scanReplies(real, NONCE), {
      replies: [valueReply('real')],
      sizes: [real.length - NONCE.length - 4],
      forged: false,
    })
    assert.deepEqual(findReply(frame(valueReply(`x${NONCE}y`)), NONCE), valueReply(`x${NONCE}y`))
  })
})

describe('findReply: truncated data', () => {
  it('empty data and a partial header give null', () => {
    assert.equal(findReply(Buffer.alloc(0), NONCE), null)
    const f = frame(valueReply('x'))
    for (let n = 1; n < 4; n++) assert.equal(findReply(f.subarray(0, n), NONCE), null, `${n} header bytes`)
  })

  it('every truncation of a frame gives null', () => {
    const f = frame(valueReply({ list: [1, 2, 3], text: 'hello' }))
    for (let n = 0; n < f.length; n++) assert.equal(findReply(f.subarray(0, n), NONCE), null, `cut at ${n}`)
    // Cut short (a run killed as it wrote) is no forgery: the run's own status says why there is none.
    for (let n = 0; n < f.length; n++) assert.equal(scanReplies(f.subarray(0, n), NONCE).forged, false)
    assert.deepEqual(findReply(f, NONCE), valueReply({ list: [1, 2, 3], text: 'hello' }))
  })

  it('a forged frame followed by a truncated real frame gives null', () => {
    const real = frame(valueReply('real'))
    const data = Buffer.concat([frame(valueReply('forged', OTHER)), real.subarray(0, real.length - 1)])
    assert.equal(findReply(data, NONCE), null)
  })

  it('a header announcing more bytes than exist does not swallow the reply after it', () => {
    const header = Buffer.alloc(4)
    header.writeUInt32BE(0xffffffff)
    assert.deepEqual(findReply(Buffer.concat([header, frame(valueReply('real'))]), NONCE), valueReply('real'))
    header.writeUInt32BE(0x100)
    assert.deepEqual(findReply(Buffer.concat([header, frame(valueReply('real'))]), NONCE), valueReply('real'))
  })

  it('bytes after a complete reply do not matter', () => {
    const data = Buffer.concat([frame(valueReply('real')), Buffer.from([0, 0, 9, 9, 1])])
    assert.deepEqual(findReply(data, NONCE), valueReply('real'))
  })
})

describe('errorInfo', () => {
  it('an Error gives name, message and stack', () => {
    const e = new Error('boom')
    const info = errorInfo(e)
    assert.equal(info.name, 'Error')
    assert.equal(info.message, 'boom')
    assert.equal(info.stack, e.stack)
    assert.ok(info.stack?.includes('boom'), 'the stack names the message')
  })

  it('built-in subclasses keep their names', () => {
    for (const E of [TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError]) {
      const info = errorInfo(new E('m'))
      assert.equal(info.name, E.name)
      assert.equal(info.message, 'm')
    }
    const agg = errorInfo(new AggregateError([new Error('a')], 'many'))
    assert.equal(agg.name, 'AggregateError')
    assert.equal(agg.message, 'many')
  })

  it('a user subclass that sets its name keeps it', () => {
    class ValidationError extends Error {
      override name = 'ValidationError'
    }
    class HttpError extends Error {
      constructor(readonly status: number) {
        super(`HTTP ${status}`)
        this.name = 'HttpError'
      }
    }
    assert.equal(errorInfo(new ValidationError('bad input')).name, 'ValidationError')
    const http = errorInfo(new HttpError(404))
    assert.equal(http.name, 'HttpError')
    assert.equal(http.message, 'HTTP 404')
    assert.ok(!('status' in http), 'only name, message and stack are taken')
  })

  it('a subclass that does not set its name reports Error', () => {
    class Quiet extends Error {}
    assert.equal(errorInfo(new Quiet('q')).name, 'Error')
  })

  it('an error without a stack has no stack key', () => {
    const e = new Error('no stack')
    e.stack = undefined
    const info = errorInfo(e)
    assert.deepEqual(info, { name: 'Error', message: 'no stack' })
    assert.ok(!('stack' in info), 'no stack key at all')
  })

  it('non-errors become { name: Error, message: String(value) }', () => {
    assert.deepEqual(errorInfo('a string'), { name: 'Error', message: 'a string' })
    assert.deepEqual(errorInfo(42), { name: 'Error', message: '42' })
    assert.deepEqual(errorInfo(undefined), { name: 'Error', message: 'undefined' })
    assert.deepEqual(errorInfo(null), { name: 'Error', message: 'null' })
    assert.deepEqual(errorInfo({ message: 'looks like one' }), { name: 'Error', message: '[object Object]' })
    assert.deepEqual(errorInfo({ toString: () => 'custom' }), { name: 'Error', message: 'custom' })
    assert.deepEqual(errorInfo(Symbol('sym')), { name: 'Error', message: 'Symbol(sym)' })
    assert.deepEqual(errorInfo(10n), { name: 'Error', message: '10' })
  })

  it('the result is always cloneable into a reply frame', () => {
    for (const thrown of [new Error('e'), new TypeError('t'), 'str', 1, undefined, { a: 1 }]) {
      const error = errorInfo(thrown)
      assert.deepEqual(findReply(frame({ nonce: NONCE, kind: 'threw', error }), NONCE), {
        nonce: NONCE,
        kind: 'threw',
        error,
      })
    }
  })

  it('a thrown value without a string form still gives error info', () => {
    const info = errorInfo(Object.create(null))
    assert.equal(info.name, 'Error')
    assert.equal(typeof info.message, 'string')
  })
})
