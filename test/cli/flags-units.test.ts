// On the command line a duration or size needs its unit: `--timeout 2` is not two milliseconds.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { policyInput } from '../../src/cli/flags.js'
import { PolicyError } from '../../src/index.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))

describe('units on the command line', () => {
  it('refuses a bare number for a duration or a size, naming the flag and what to write', () => {
    for (const [values, field, hint] of [
      [{ timeout: '2' }, 'limits.wallTimeMs', /2s or 2ms/],
      [{ killGrace: '1.5' }, 'limits.killGraceMs', /1\.5s/],
      [{ memory: '512' }, 'limits.memoryBytes', /512M/],
    ] as const) {
      assert.throws(
        () => policyInput(values),
        (e: unknown) => e instanceof PolicyError && e.field === field && hint.test(e.message),
      )
    }
  })

  it('takes a number with its unit, and plain counts as they are', () => {
    assert.deepEqual(policyInput({ timeout: '2s', memory: '64M', maxProcs: '8' }), {
      limits: { wallTimeMs: '2s', memoryBytes: '64M', maxProcesses: 8 },
    })
  })

  it('the CLI says so: exit 125 naming --timeout', () => {
    const r = spawnSync(process.execPath, [CLI, 'run', '--timeout', '2', '--', 'true'], { encoding: 'utf8' })
    assert.equal(r.status, 125)
    assert.match(r.stderr, /--timeout: "2" needs a unit/)
  })
})

describe('cordon run --help', () => {
  it('shows each default, examples and the exit codes', () => {
    const r = spawnSync(process.execPath, [CLI, 'run', '--help'], { encoding: 'utf8' })
    assert.equal(r.status, 0)
    assert.match(r.stdout, /--timeout <DURATION> .*\(default: 30s\)/)
    assert.match(r.stdout, /--memory <SIZE> .*\(default: 512M\)/)
    assert.match(r.stdout, /--net <[^>]+> .*\(default: none\)/)
    assert.match(r.stdout, /Examples:\n {2}cordon run -- /)
    assert.match(r.stdout, /Exit codes:[\s\S]*124 {4}a limit was hit[\s\S]*130 {4}canceled/)
    assert.doesNotMatch(r.stdout, /namespace tier \(repeatable\)/)
  })
})
