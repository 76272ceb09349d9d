// Redaction end to end: every kept copy and every live chunk, secrets split across writes included.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type OutputChunk, run, start } from '../../src/index.js'
import { skipTier, TIERS } from '../helpers.js'

const SECRET = 'tok-9f8e7d6c5b4a'

for (const tier of TIERS) {
  describe(`redaction (${tier} tier)`, { skip: skipTier(tier) }, () => {
    it('secret env values and listed patterns never reach stdout, stderr, output or live chunks', async () => {
      const chunks: OutputChunk[] = []
      // The secret arrives split across two writes 100 ms apart, on both streams.
      const script = `printf 'a ${SECRET.slice(0, 7)}'; sleep 0.1; printf '${SECRET.slice(7)} b\\n'; echo "err $GITHUB_TOKEN hunter42" >&2`
      const r = await run(['sh', '-c', script], {
        isolation: tier,
        env: { GITHUB_TOKEN: SECRET },
        redact: [/hunter\d+/],
        onOutput: (c) => chunks.push(c),
      })
      assert.equal(r.stdout, 'a [REDACTED] b\n')
      assert.equal(r.stderr, 'err [REDACTED] [REDACTED]\n')
      for (const text of [r.output, ...chunks.map((c) => c.data)]) {
        assert.ok(!text.includes(SECRET.slice(0, 7)) || !text.includes(SECRET.slice(7)), `leak in ${text}`)
        assert.ok(!text.includes('hunter42'), `leak in ${text}`)
      }
      assert.ok(
        !chunks
          .map((c) => c.data)
          .join('')
          .includes(SECRET),
        'joined live chunks leak',
      )
    })

    it('byte counts and the cap count what the sandbox wrote, not the redacted text', async () => {
      const r = await run(['sh', '-c', `printf '${SECRET}${SECRET}'`], {
        isolation: tier,
        redact: [SECRET],
        limits: { maxOutputBytes: SECRET.length * 2 },
      })
      assert.equal(r.outputBytes, SECRET.length * 2)
      assert.equal(r.stdout, '[REDACTED][REDACTED]')
      assert.equal(r.status, 'ok')
    })

    it('the live iterator of start() is redacted too', async () => {
      const handle = start(['sh', '-c', `echo ${SECRET}`], { isolation: tier, redact: [SECRET] })
      const seen: string[] = []
      for await (const chunk of handle.output) seen.push(chunk.data)
      await handle.result
      assert.equal(seen.join(''), '[REDACTED]\n')
    })
  })
}
