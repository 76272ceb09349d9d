// `encoding: 'buffer'` through real pipes: the program's bytes exactly, in the result and in every live chunk.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'
import { type OutputChunk, type RunResult, run, start } from '../../src/index.js'
import { skipTier, TIERS } from '../helpers.js'

/** Byte equality without assert's diff, which takes minutes on a few hundred KiB that differ. */
function same(actual: unknown, expected: Buffer, what = 'bytes'): void {
  assert.ok(Buffer.isBuffer(actual), `${what}: a Buffer, got ${typeof actual}`)
  assert.ok(actual.equals(expected), `${what}: ${actual.length} bytes, not the ${expected.length} expected`)
}

for (const tier of TIERS) {
  describe(`encoding 'buffer' (${tier} tier)`, { skip: skipTier(tier) }, () => {
    const isolation = tier

    it('4096 random bytes come out exactly, on stdout and on stderr', async () => {
      const bytes = randomBytes(4096)
      const out = await run(['cat'], { isolation, stdin: bytes, encoding: 'buffer' })
      assert.equal(out.status, 'ok')
      assert.ok(Buffer.isBuffer(out.stdout) && Buffer.isBuffer(out.stderr) && Buffer.isBuffer(out.output))
      same(out.stdout, bytes)
      same(out.output, bytes)
      assert.equal(out.stderr.length, 0)
      assert.equal(out.outputBytes, 4096)
      const err = await run(['sh', '-c', 'cat >&2'], { isolation, stdin: bytes, encoding: 'buffer' })
      same(err.stderr, bytes)
      assert.equal(err.stdout.length, 0)
    })

    it('live chunks are Buffers that join to the result, from onOutput and from start()', async () => {
      const bytes = randomBytes(300_000)
      const seen: OutputChunk<Buffer>[] = []
      const r = await run(['cat'], {
        isolation,
        stdin: bytes,
        encoding: 'buffer',
        onOutput: (chunk) => seen.push(chunk),
      })
      assert.ok(seen.length > 0 && seen.every((c) => Buffer.isBuffer(c.data) && c.stream === 'stdout'))
      same(Buffer.concat(seen.map((c) => c.data)), bytes)
      same(r.stdout, bytes)

      const handle = start(['cat'], { isolation, stdin: bytes, encoding: 'buffer' })
      const chunks: Buffer[] = []
      for await (const chunk of handle.output) chunks.push(chunk.data)
      same(Buffer.concat(chunks), bytes)
      same((await handle.result).stdout, bytes)
    })

    it('the cap keeps the exact first bytes', async () => {
      const bytes = randomBytes(100_000)
      const r = await run(['cat'], {
        isolation,
        stdin: bytes,
        encoding: 'buffer',
        limits: { maxOutputBytes: 4099 },
      })
      assert.equal(r.status, 'output-limit')
      assert.equal(r.truncated, true)
      assert.equal(r.outputBytes, 4099)
      same(r.stdout, bytes.subarray(0, 4099))
    })

    it('a secret is hidden as its UTF-8 bytes, written in two pieces, among bytes that are not UTF-8', async () => {
      const secret = 'tök€n-42'
      const seen: Buffer[] = []
      const r = await run(['sh', '-c', "printf '\\377tö'; sleep 0.2; printf 'k€n-42\\376'"], {
        isolation,
        encoding: 'buffer',
        redact: [secret],
        onOutput: (chunk) => seen.push(chunk.data),
      })
      const hidden = Buffer.concat([Buffer.from([0xff]), Buffer.from('[REDACTED]'), Buffer.from([0xfe])])
      assert.deepEqual(r.stdout, hidden)
      assert.deepEqual(Buffer.concat(seen), hidden)
      assert.ok(seen.length >= 1)
    })

    it('a run refused before it starts has empty Buffers', async () => {
      const r = await run(['rm', '/nothing'], { isolation, deny: ['rm'], encoding: 'buffer' })
      assert.equal(r.status, 'denied')
      assert.deepEqual([r.stdout, r.stderr, r.output], [Buffer.alloc(0), Buffer.alloc(0), Buffer.alloc(0)])
    })

    it('the types follow the encoding, without casts', async () => {
      const bytes: RunResult<Buffer> = await run(['true'], { isolation, encoding: 'buffer' })
      const text: RunResult = await run(['true'], { isolation })
      bytes.stdout satisfies Buffer
      text.stdout satisfies string
      start(['true'], { isolation, encoding: 'buffer' }).result satisfies Promise<RunResult<Buffer>>
      // @ts-expect-error: text is not a Buffer
      text.stdout satisfies Buffer
      // @ts-expect-error: an onOutput for text does not take Buffer chunks
      await run(['true'], { isolation, encoding: 'buffer', onOutput: (c: OutputChunk<string>) => c })
    })
  })
}
