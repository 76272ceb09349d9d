import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { run, start } from '../../src/index.js'
import { marker, notRoot, processesWith, skipTier, TIERS } from '../helpers.js'

for (const tier of TIERS) {
  describe(`cancellation (${tier} tier)`, { skip: skipTier(tier) || (tier === 'process' && notRoot) }, () => {
    it('aborting the signal cancels the run and leaves no process behind', async () => {
      const m = marker()
      const controller = new AbortController()
      setTimeout(() => controller.abort(), 300)
      const r = await run(['sh', '-c', `setsid sleep ${m} & sleep ${m}`], {
        isolation: tier,
        signal: controller.signal,
      })
      assert.equal(r.status, 'canceled')
      assert.equal(r.violation?.kind, 'canceled')
      assert.deepEqual(processesWith(m), [])
    })

    it('an already aborted signal runs nothing', async () => {
      const r = await run(['true'], { isolation: tier, signal: AbortSignal.abort() })
      assert.equal(r.status, 'canceled')
    })

    it('handle.kill() cancels', async () => {
      const handle = start(['sleep', '30'], { isolation: tier })
      setTimeout(() => handle.kill(), 200)
      const r = await handle.result
      assert.equal(r.status, 'canceled')
      assert.ok(r.wallMs < 5000, 'r.wallMs < 5000')
    })

    it('handle.kill() at once, before the launcher has set anything up, stops it without waiting out the grace', async () => {
      for (let i = 0; i < 5; i++) {
        const m = marker()
        const started = performance.now()
        const handle = start(['sleep', m], { isolation: tier, limits: { killGraceMs: 10_000 } })
        handle.kill()
        const r = await handle.result
        const took = performance.now() - started
        assert.equal(r.status, 'canceled')
        assert.ok(took < 5000, `attempt ${i}: took ${took.toFixed(0)} ms (the grace is 10 s)`)
        assert.deepEqual(processesWith(m), [], `attempt ${i}: nothing left`)
      }
    })
  })
}
