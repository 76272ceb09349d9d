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
})
