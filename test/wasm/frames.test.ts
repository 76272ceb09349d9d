import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { MAX_CALL_BYTES } from '../../src/wasm/abi.js'
import { encodeFrame, type Frame, FrameError, FrameReader } from '../../src/wasm/frames.js'

describe('frames', () => {
  it('round-trip calls and replies (i64 values, empty and missing bytes) across any split', () => {
    const frames: Frame[] = [
      { kind: 'hello', nonce: 'n-1' },
      {
        kind: 'call',
        name: 'platform_sandbox.sandbox_exec',
        values: [1, -2, 3, 4, 65536],
        bytes: new Uint8Array([1, 2]),
      },
      { kind: 'call', name: 'cordon.exec', values: [0, 0], bytes: new Uint8Array(0) },
      { kind: 'reply', values: [2n ** 63n - 1n, -(2n ** 63n), 0] },
    ]
    const wire = Buffer.concat(frames.map(encodeFrame))
    fc.assert(
      fc.property(fc.array(fc.nat(wire.length), { maxLength: 6 }), (cuts) => {
        const reader = new FrameReader()
        const got: Frame[] = []
        let at = 0
        for (const cut of [...cuts].sort((a, b) => a - b)) {
          got.push(...reader.push(wire.subarray(at, cut)))
          at = cut
        }
        got.push(...reader.push(wire.subarray(at)))
        assert.deepEqual(got, frames)
      }),
    )
  })

  it('refuses a frame past the bounds before keeping it, and junk as a FrameError', () => {
    const head = Buffer.alloc(8)
    head.writeUInt32BE(2, 0)
    head.writeUInt32BE(MAX_CALL_BYTES + 1, 4)
    assert.throws(() => new FrameReader().push(head), FrameError)
    const big = Buffer.alloc(8)
    big.writeUInt32BE(1 << 30, 0)
    assert.throws(() => new FrameReader().push(big), FrameError)
    for (const header of [
      'nope',
      '[1]',
      '{"kind":"call","name":"x","values":[1.5]}',
      '{"kind":"reply","values":[{"i64":"1e3"}]}',
      '{"kind":"x","values":[]}',
    ]) {
      const h = Buffer.from(header)
      const frame = Buffer.alloc(8)
      frame.writeUInt32BE(h.length, 0)
      assert.throws(() => new FrameReader().push(Buffer.concat([frame, h])), FrameError, header)
    }
  })
})
