// mergeOutput: one pipe as both fd 1 and fd 2 of the sandbox (2>&1), so the order of writes across the two
// is exact; with and without a spawner.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type OutputChunk, openSpawner, run, type Spawner, start } from '../../src/index.js'
import { noSpawner, skipTier, TIERS } from '../helpers.js'

/** 500 lines, alternating between stdout and stderr, each its own write. */
const ALTERNATING = 'i=0; while [ $i -lt 250 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done'
const EXPECTED = Array.from({ length: 250 }, (_, i) => `out ${i}\nerr ${i}\n`).join('')

for (const tier of TIERS) {
  describe(`mergeOutput (${tier} tier)`, { skip: skipTier(tier) }, () => {
    const isolation = tier
    let spawner: Spawner | undefined
    before(async () => {
      if (!noSpawner) spawner = await openSpawner()
    })
    after(async () => {
      await spawner?.close()
    })
    const vias = () =>
      [['without a spawner', {}], ...(spawner ? [['with a spawner', { spawner }] as const] : [])] as const

    it('every write in the order it was made: result.output and stdout, stderr empty, chunks on stdout', async () => {
      for (const [via, options] of vias()) {
        const chunks: OutputChunk[] = []
        const r = await run(['sh', '-c', ALTERNATING], {
          isolation,
          mergeOutput: true,
          onOutput: (chunk) => chunks.push(chunk),
          ...options,
        })
        assert.equal(r.status, 'ok', `${via}: ${r.stderr}`)
        assert.equal(r.output, EXPECTED, via)
        assert.equal(r.stdout, EXPECTED, via)
        assert.equal(r.stderr, '', via)
        assert.equal(r.outputBytes, Buffer.byteLength(EXPECTED), via)
        assert.ok(
          chunks.every((c) => c.stream === 'stdout'),
          via,
        )
        assert.equal(chunks.map((c) => c.data).join(''), EXPECTED, via)
      }
    })

    it('fd 1 and fd 2 are one pipe in the sandbox, and it is no terminal', async () => {
      for (const [via, options] of vias()) {
        const r = await run(
          ['sh', '-c', 'stat -L -c %i /proc/self/fd/1 /proc/self/fd/2 >&2; [ -t 2 ] || echo notty'],
          {
            isolation,
            mergeOutput: true,
            ...options,
          },
        )
        assert.equal(r.status, 'ok', via)
        const [one, two, kind] = r.output.trim().split('\n')
        assert.equal(one, two, `${via}: ${r.output}`)
        assert.equal(kind, 'notty', via)
      }
    })

    it('with start(), in Buffers, under the cap: the same one stream', async () => {
      const handle = start(['sh', '-c', ALTERNATING], {
        isolation,
        mergeOutput: true,
        encoding: 'buffer',
        limits: { maxOutputBytes: 100 },
      })
      const chunks: Buffer[] = []
      for await (const chunk of handle.output) {
        assert.equal(chunk.stream, 'stdout')
        chunks.push(chunk.data)
      }
      const r = await handle.result
      assert.equal(r.status, 'output-limit')
      assert.deepEqual(r.output, Buffer.from(EXPECTED.slice(0, 100)))
      assert.deepEqual(r.stdout, r.output)
      assert.equal(r.stderr.length, 0)
      assert.deepEqual(Buffer.concat(chunks), r.output)
    })

    it('a program that is not there: its error is in the one stream, and the status is not-found', async () => {
      const r = await run(['/nonexistent/program'], { isolation, mergeOutput: true })
      assert.equal(r.status, 'not-found')
      assert.equal(r.stderr, '')
    })
  })
}
