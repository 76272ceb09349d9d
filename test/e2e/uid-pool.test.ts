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

  describe(`runs of other uids sharing a workspace (${tier} tier)`, {
    skip: notRoot || skipTier(tier),
  }, () => {
    it("group-writable files go nowhere another run sees: /tmp and /dev/shm are each run's own", async () => {
      // The pool's group may write what a run makes (umask 002): a place two runs shared would let one
      // change the other's files. A run's /tmp and /dev/shm are its own, in both tiers.
      let wrote: () => void = () => {}
      const written = new Promise<void>((resolve) => {
        wrote = resolve
      })
      const first = start(
        [
          'sh',
          '-c',
          'for d in /tmp /dev/shm; do echo mine > $d/cordon-pool-$$ 2>/dev/null; done; echo up; exec sleep 30',
        ],
        { isolation: tier, onOutput: () => wrote() },
      )
      try {
        await written
        const probe =
          'for f in /tmp/cordon-pool-* /dev/shm/cordon-pool-*; do [ -e "$f" ] && echo "saw $f"; done; true'
        const second = await run(['sh', '-c', probe], { isolation: tier })
        assert.equal(second.status, 'ok', second.stderr)
        assert.equal(second.stdout, '', "another run saw the first run's files")
      } finally {
        first.kill()
        await first.result
      }
    })

    it('what one run wrote in a writable directory, the next run (another uid of the pool) may change', async () => {
      // As root each run has a uid of its own, all of one group: "install, then run" over two runs needs
      // the first run's files and directories writable by the group, whatever the host's umask.
      const uidPool = { first: 64100, count: 2, lockDir: tempDir('cordon-uids-') }
      const ws = tempDir('cordon-ws-', { mode: 0o777, parent: '/var/tmp' })
      const options = { isolation: tier, uidPool, cwd: ws, writable: [ws] }
      // The first run stays alive once it has written, so the second has the pool's other uid.
      let wrote: () => void = () => {}
      const written = new Promise<void>((resolve) => {
        wrote = resolve
      })
      const first = start(['sh', '-c', 'mkdir d && echo one > d/f && echo up && exec sleep 30'], {
        ...options,
        onOutput: () => wrote(),
      })
      try {
        await written
        const second = await run(['sh', '-c', 'echo two >> d/f && touch d/g && cat d/f'], options)
        assert.equal(second.status, 'ok', second.stderr)
        assert.equal(second.stdout, 'one\ntwo\n')
      } finally {
        first.kill()
        await first.result
      }
    })
  })
}
