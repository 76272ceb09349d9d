import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { policySchema } from '../../src/index.js'
import { runRequestSchema } from '../../src/service/request.js'

describe('runRequestSchema', () => {
  it('gives a request without options the library’s defaults, as one with options: {}', () => {
    const bare = runRequestSchema.parse({ cmd: ['true'] }).options
    assert.deepEqual(bare, runRequestSchema.parse({ cmd: ['true'], options: {} }).options)
    assert.deepEqual(bare.limits, policySchema.shape.limits.parse({}))
    assert.equal(bare.network, 'none')
    assert.equal(bare.isolation, 'auto')
  })

  it('bounds what the server builds its redaction from: the redact list and the environment', () => {
    // Each string becomes states of an automaton in the server's own heap (~700 bytes a character): an
    // 8 MiB body of 100 000 strings ran a 4 GiB heap out (the whole server, every key's runs with it).
    const field = (body: unknown) => {
      const parsed = runRequestSchema.safeParse(body)
      return parsed.success ? null : parsed.error.issues[0]?.path.join('.')
    }
    const ok = { cmd: ['true'] }
    assert.equal(
      field({ ...ok, options: { redact: Array.from({ length: 64 }, (_, i) => `secret-${i}`) } }),
      null,
    )
    assert.equal(
      field({ ...ok, options: { redact: Array.from({ length: 65 }, (_, i) => `s${i}`) } }),
      'options.redact',
    )
    assert.equal(
      field({ ...ok, options: { redact: ['x'.repeat(8192), 'y'.repeat(8193)] } }),
      'options.redact',
    )
    const env = (n: number, size: number) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`TOKEN_${i}`, 'v'.repeat(size)]))
    assert.equal(field({ ...ok, options: { env: env(256, 100) } }), null)
    assert.equal(field({ ...ok, options: { env: env(257, 1) } }), 'options.env')
    assert.equal(field({ ...ok, options: { env: env(2, 20 * 1024) } }), 'options.env')
  })
})
