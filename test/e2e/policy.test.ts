// Secure defaults and command policy, end to end through run().
import assert from 'node:assert/strict'
import { existsSync, lchownSync, readdirSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { uidPoolSchema } from '../../src/host/uid-pool.js'
import { PolicyError, type RunOptions, run } from '../../src/index.js'
import { parsePolicy } from '../../src/policy/schema.js'
import { leftBehind, notRoot, skipTier, TIERS, tempDir, worldWritableDir } from '../helpers.js'

describe('policy through run()', () => {
  it('defaults are on: limits set, network none, auto isolation', () => {
    const p = parsePolicy({})
    assert.equal(p.network, 'none')
    assert.equal(p.limits.wallTimeMs, 30_000)
    assert.equal(p.limits.memoryBytes, 512 * 1024 * 1024)
    assert.equal(p.limits.maxOutputBytes, 1024 * 1024)
    assert.equal(p.limits.maxProcesses, 64)
  })

  it('the environment starts clean: host variables stay out unless passed', async () => {
    process.env.CORDON_TEST_VALUE = 'hunter2'
    try {
      const clean = await run(['sh', '-c', 'echo "[$CORDON_TEST_VALUE]"'])
      assert.equal(clean.stdout, '[]\n')
      const passed = await run(['sh', '-c', 'echo "[$CORDON_TEST_VALUE] [$X]"'], {
        passEnv: ['CORDON_TEST_VALUE'],
        env: { X: 'y' },
      })
      assert.equal(passed.stdout, '[hunter2] [y]\n')
    } finally {
      delete process.env.CORDON_TEST_VALUE
    }
  })

  it('a symlink named echo that points at rm cannot slip past deny', async () => {
    const dir = tempDir('cordon-link-')
    symlinkSync('/bin/rm', path.join(dir, 'echo'))
    const r = await run([path.join(dir, 'echo'), '-rf', '/nothing'], { deny: ['rm'] })
    assert.equal(r.status, 'denied')
    const dotted = await run(['/usr/bin/../bin/rm', '/nothing'], { deny: ['rm'] })
    assert.equal(dotted.status, 'denied')
  })

  it('a non-empty allow list denies everything else; deny wins', async () => {
    assert.equal((await run(['ls'], { allow: ['echo'] })).status, 'denied')
    assert.equal((await run(['echo'], { allow: ['echo'] })).status, 'ok')
    assert.equal((await run(['echo'], { allow: ['echo'], deny: ['echo'] })).status, 'denied')
  })

  it('not-found and denied are results, not exceptions', async () => {
    const r = await run(['definitely-not-a-program-xyz'])
    assert.equal(r.status, 'not-found')
    assert.equal(r.violation?.kind, 'not-found')
  })

  for (const isolation of TIERS) {
    it(`${isolation}: a command that is there but cannot be executed is denied, limit executable`, {
      skip: skipTier(isolation),
    }, async () => {
      const plain = path.join(tempDir('cordon-exec-', { mode: 0o755 }), 'plain.sh')
      writeFileSync(plain, 'echo never\n', { mode: 0o644 })
      const r = await run([plain], { isolation })
      assert.equal(r.status, 'denied')
      assert.deepEqual(r.violation, {
        kind: 'denied',
        limit: 'executable',
        message: `${plain}: Permission denied (not executable)`,
      })
      assert.equal((await run([path.dirname(plain)], { isolation })).violation?.limit, 'executable')
    })
  }

  it("a writable or cwd that goes through a symlink a sandbox uid owns is refused; root's are fine", {
    skip: notRoot,
  }, async () => {
    const dir = worldWritableDir()
    const target = worldWritableDir()
    const planted = path.join(dir, 'out')
    symlinkSync(target, planted)
    lchownSync(planted, 60123, 60000) // as a sandbox of an earlier run would have left it
    const cases: [RunOptions, string][] = [
      [{ writable: [planted] }, 'writable.0'],
      [{ cwd: planted }, 'cwd'],
    ]
    for (const [options, field] of cases) {
      await assert.rejects(
        run(['true'], options),
        (e: unknown) =>
          e instanceof PolicyError && e.field === field && /symlink owned by uid 60123/.test(e.message),
        field,
      )
    }
    lchownSync(planted, 0, 0)
    const r = await run(['true'], { writable: [planted], cwd: planted })
    assert.equal(r.status, 'ok', r.stderr)
  })

  it('a cgroup parent that cannot hold sandboxes is refused, not dropped for rlimits', async () => {
    const r = await run(['true'], { cgroup: { parent: '/cordon-no-such-parent' } })
    assert.equal(r.status, 'error')
    assert.equal(r.violation?.limit, 'cgroup')
    assert.match(r.violation?.message ?? '', /cgroup.parent \/cordon-no-such-parent cannot hold sandboxes/)
  })

  it('what exec refuses (an environment too big) is an error result, and leaves no uid lock or cgroup', async () => {
    const lockDir = uidPoolSchema.parse({}).lockDir
    const ours = () =>
      (existsSync(lockDir) ? readdirSync(lockDir) : []).filter((f) => {
        try {
          return readlinkSync(path.join(lockDir, f)) === String(process.pid)
        } catch {
          return false
        }
      })
    for (const isolation of ['process', 'namespace'] as const) {
      if (skipTier(isolation)) continue
      const r = await run(['true'], { isolation, env: { BIG: 'x'.repeat(3 << 20) } })
      assert.equal(r.status, 'error')
      assert.match(r.violation?.message ?? '', /E2BIG/)
      assert.deepEqual(ours(), [])
      assert.deepEqual(leftBehind(process.pid), [])
    }
  })

  it('invalid options throw a PolicyError naming the field', async () => {
    const cases: [unknown[], unknown, string][] = [
      [['true'], { cwd: '/does/not/exist' }, 'cwd'],
      [['true'], { limits: { memoryBytes: 'banana' } }, 'limits.memoryBytes'],
      [['true'], { limits: { wallTimeMs: -5 } }, 'limits.wallTimeMs'],
      [['true'], { bogus: 1 }, 'bogus'],
      [['true'], { allow: ['no-such-program-xyz'] }, 'allow.0'],
      [['true'], { deny: ['no-such-program-xyz'] }, 'deny.0'],
      [[], {}, 'command'],
      [['true'], { writable: ['/does/not/exist'] }, 'writable.0'],
      // The sandbox's /proc is its own (namespace tier) or the host's kernel interface (process tier).
      [['true'], { writable: ['/tmp', '/proc/sys'] }, 'writable.1'],
      [['true'], { writable: ['/proc'] }, 'writable.0'],
      // exec cannot pass a NUL inside a variable.
      [['true'], { env: { A: 'x\0y' } }, 'env.A'],
    ]
    for (const [command, options, field] of cases) {
      await assert.rejects(
        run(command as string[], options as object),
        (e: unknown) => e instanceof PolicyError && e.field === field,
        `field ${field}`,
      )
    }
  })
})
