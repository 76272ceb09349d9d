// One rule for every limit: it is the status when it ended the run (cordon stopped the sandbox for it, or
// the program at the top died of it or failed after it); a child's hit that the program survives with
// exit 0 leaves the run `ok`.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { probeCapabilities, run } from '../../src/index.js'
import { skipTier, TIERS } from '../helpers.js'

const noCgroup = probeCapabilities().cgroup.version === null ? 'no usable cgroup here' : false
const grow = 'python3 -c "x = bytearray(512 * 1024 * 1024)"'

for (const tier of TIERS) {
  describe(`the limit rule (${tier} tier)`, { skip: skipTier(tier) }, () => {
    const isolation = tier

    it('a child over the file size, the memory or (per process) its CPU time, then exit 0: ok, alike', async () => {
      const cases: [string, object][] = [
        ['head -c 64K /dev/zero > $TMPDIR/f', { maxFileSizeBytes: '16K' }],
        // With a cgroup CPU time is the whole sandbox's, and cordon stops it: only a per-process hit is a child's.
        ...(noCgroup
          ? [['python3 -c "while True: pass"', { cpuTimeMs: '1s', wallTimeMs: '20s' }] as [string, object]]
          : [[grow, { memoryBytes: '64M' }] as [string, object]]),
      ]
      for (const [child, limits] of cases) {
        const r = await run(['sh', '-c', `${child}; echo survived; exit 0`], { isolation, limits })
        assert.equal(r.status, 'ok', `${child}: ${r.status} ${r.violation?.message} ${r.stderr}`)
        assert.equal(r.stdout, 'survived\n')
      }
    })

    it('the same hits when the program fails after them: the limit', async () => {
      const file = await run(['sh', '-c', 'head -c 64K /dev/zero > $TMPDIR/f'], {
        isolation,
        limits: { maxFileSizeBytes: '16K' },
      })
      assert.equal(file.status, 'file-size', file.stderr)
      if (!noCgroup) {
        const memory = await run(['sh', '-c', `${grow}; exit 3`], {
          isolation,
          limits: { memoryBytes: '64M' },
        })
        assert.equal(memory.status, 'memory', memory.stderr)
      }
    })

    it("Node's EFBIG (it ignores SIGXFSZ) is file-size", async () => {
      const write = "require('fs').writeFileSync(process.env.TMPDIR + '/f', Buffer.alloc(65536))"
      const r = await run(['node', '-e', write], { isolation, limits: { maxFileSizeBytes: '16K' } })
      assert.equal(r.status, 'file-size', r.stderr)
    })
  })
}

for (const tier of TIERS) {
  describe(`memory without a cgroup (${tier} tier)`, { skip: skipTier(tier) }, () => {
    it('the Node running this test starts under the default limit (Node 24 reserves ~560 MiB at start)', async () => {
      const r = await run([process.execPath, '-e', 'console.log("started")'], {
        isolation: tier,
        cgroup: { mode: 'off' },
      })
      assert.equal(r.status, 'ok', `${r.status} ${r.stderr.slice(0, 300)}`)
      assert.equal(r.stdout, 'started\n')
      assert.deepEqual(r.perProcessLimits.includes('memoryBytes'), true)
    })
  })
}
