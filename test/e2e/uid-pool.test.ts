// An exhausted uid pool is a result like every other thing that happens to a run, not an exception.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { run, start } from '../../src/index.js'
import { notRoot, skipTier, TIERS, tempDir } from '../helpers.js'

for (const tier of TIERS) {
  describe(`an exhausted uid pool (${tier} tier)`, { skip: notRoot || skipTier(tier) }, () => {
    it('is an `error` result naming uidPool while the only uid is taken; the next run gets it back', async () => {
      const uidPool = { first: 64000, count: 1, lockDir: tempDir('cordon-uids-') }
      const holder = start(['sleep', '30'], { isolation: tier, uidPool })
      try {
        const r = await run(['true'], { isolation: tier, uidPool })
        assert.equal(r.status, 'error')
        assert.equal(r.violation?.limit, 'uidPool')
        assert.match(r.violation!.message, /uid/)
      } finally {
        holder.kill()
        await holder.result
      }
      assert.equal((await run(['true'], { isolation: tier, uidPool })).status, 'ok')
    })
  })
}
