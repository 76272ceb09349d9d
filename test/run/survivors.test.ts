// When run() resolves nothing of the sandbox is left, whatever the program did to escape.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { run } from '../../src/index.js'
import { marker, notRoot, processesWith, skipTier, TIERS, waitFor } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url))

for (const tier of TIERS) {
  describe(`no survivors (${tier} tier)`, { skip: skipTier(tier) || (tier === 'process' && notRoot) }, () => {
    it('setsid, nohup and double-forked children are gone when run() resolves', async () => {
      const m = marker()
      const script = `setsid sleep ${m} & nohup sleep ${m} >/dev/null 2>&1 & (sleep ${m} &) ; sh -c "sleep ${m} &" ; echo spawned`
      const r = await run(['sh', '-c', script], { isolation: tier })
      assert.equal(r.status, 'ok')
      assert.equal(r.stdout, 'spawned\n')
      assert.deepEqual(processesWith(m), [])
    })

    it('escapees are gone after a timeout too', async () => {
      const m = marker()
      const r = await run(['sh', '-c', `setsid sleep ${m} & sleep ${m}`], {
        isolation: tier,
        limits: { wallTimeMs: 300, killGraceMs: 200 },
      })
      assert.equal(r.status, 'timeout')
      assert.deepEqual(processesWith(m), [])
    })
  })
}

describe('host killed with SIGKILL', () => {
  for (const tier of TIERS) {
    it(`takes its ${tier}-tier sandbox with it`, { skip: skipTier(tier) }, async () => {
      const m = marker()
      // In the process tier only the launched process carries a parent-death signal, so the program is
      // the sandbox's only process here; deeper trees are killed when the uid is next claimed.
      const host = spawn(process.execPath, [CLI, 'run', '--isolation', tier, '--', 'sleep', m], {
        stdio: 'ignore',
      })
      assert.ok(await waitFor(() => processesWith(m).length > 0, 10_000), 'sandbox started')
      host.kill('SIGKILL')
      assert.ok(await waitFor(() => processesWith(m).length === 0, 10_000), 'sandbox died with its host')
    })
  }
})
