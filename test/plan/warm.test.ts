// A warm member's plan (src/plan/warm.ts): what is pre-made (its key, its names) and what a run hands it.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { probeCapabilities } from '../../src/host/capabilities.js'
import { type LaunchPlan, prepare } from '../../src/plan/plan.js'
import { activationRecord, namedPaths } from '../../src/plan/warm.js'
import { parsePolicy, type RunOptions } from '../../src/policy/schema.js'
import { noNamespace, tempDir, worldWritableDir } from '../helpers.js'

const caps = probeCapabilities()

/** A new member's plan for `options`, given back at once (its uid and fds). */
function memberPlan(options: RunOptions): LaunchPlan {
  const prepared = prepare(
    null,
    parsePolicy({ isolation: 'namespace', ...options }),
    caps,
    undefined,
    undefined,
    {
      seed: null,
    },
  )
  assert.equal(prepared.kind, 'launch', JSON.stringify(prepared))
  const { plan } = prepared as { plan: LaunchPlan }
  plan.lease?.release()
  plan.pathFds.close()
  return plan
}

describe('warm plans', { skip: noNamespace }, () => {
  it("a member's launch runs cordon-await, with no rlimits of its own, and pipes its two fds", () => {
    const plan = memberPlan({})
    const args = plan.args.join(' ')
    assert.match(args, / -- \/dev\/\.cordon-exec$/)
    assert.doesNotMatch(args, /--cpu=|--nofile=|--fsize=/)
    assert.ok(plan.fds.includes(7) && plan.fds.includes(8))
    assert.equal(plan.warm?.activation, null)
  })

  it('every bwrap option of every kind of policy is known to namedPaths, and the names are whole', () => {
    const dir = worldWritableDir('cordon-warm-plan-')
    const secret = tempDir('cordon-warm-hide-', { mode: 0o755 })
    const policies: RunOptions[] = [
      {},
      { writable: [dir], hide: [secret], network: 'host' },
      { readable: [dir], cwd: dir },
      { limits: { tmpfsBytes: '8M' }, mergeOutput: true, denySyscalls: ['ptrace'] },
      { cgroup: { mode: 'off' } },
    ]
    for (const options of policies) {
      const names = namedPaths(memberPlan(options).args)
      assert.ok(names.includes('/proc') && names.includes('/tmp'), names.join(' '))
      if (options.writable) assert.ok(names.includes(dir) && names.includes(secret), names.join(' '))
      assert.ok(!names.includes('/'), 'the root itself is no name looked up')
    }
    assert.throws(() => namedPaths(['launch', '--', 'bwrap', '--new-option', 'x', '--', 'p']), /namedPaths/)
  })

  it('the key is the launch: another cwd or tmpfs size is another key, limits and env are not', () => {
    const base = parsePolicy({ isolation: 'namespace' })
    const first = prepare(null, base, caps, undefined, undefined, { seed: null })
    assert.equal(first.kind, 'launch')
    const { plan } = first as { plan: LaunchPlan }
    try {
      const seed = { lease: plan.lease!, cgroupName: plan.warm!.cgroupName }
      const keyOf = (options: RunOptions, command = ['true']) => {
        const p = prepare(
          command,
          parsePolicy({ isolation: 'namespace', ...options }),
          caps,
          undefined,
          undefined,
          {
            seed,
          },
        )
        assert.equal(p.kind, 'launch')
        const run = (p as { plan: LaunchPlan }).plan
        run.pathFds.close()
        return run.warm!
      }
      const same = keyOf({ limits: { memoryBytes: '64M', maxOpenFiles: 99 }, env: { A: '1' } })
      assert.equal(same.key, plan.warm!.key)
      assert.deepEqual(same.activation!.argv, [same.activation!.file])
      assert.equal(same.activation!.env.A, '1')
      assert.equal(same.activation!.env.PWD, process.cwd())
      assert.ok(same.activation!.rlimits.includes('--nofile=99'))
      assert.notEqual(keyOf({ cwd: '/' }).key, plan.warm!.key)
      assert.notEqual(keyOf({ limits: { tmpfsBytes: '8M' } }).key, plan.warm!.key)
      assert.notEqual(keyOf({ denySyscalls: ['mkdir'] }).key, plan.warm!.key, 'the filter is in the key')
      assert.notEqual(keyOf({ uidPool: { lockDir: '/run/cordon/other' } }).key, plan.warm!.key)
      assert.equal(
        prepare(['true'], parsePolicy({ isolation: 'process' }), caps, undefined, undefined, { seed }).kind,
        'cold',
      )
    } finally {
      plan.lease?.release()
      plan.pathFds.close()
    }
  })

  it('the record is NUL-separated fields, as native/await.c reads them', () => {
    const record = activationRecord(
      { file: '/usr/bin/env', argv: ['env', '-0'], env: { A: 'x=y', B: '' }, rlimits: ['--cpu=1:2'] },
      0o22,
      'null',
    )
    assert.deepEqual(record.toString().split('\0'), [
      'cordon-activation-1',
      '22',
      'null',
      '1',
      '--cpu=1:2',
      '/usr/bin/env',
      '2',
      'env',
      '-0',
      '2',
      'A=x=y',
      'B=',
      '',
    ])
  })
})
