import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { PolicyError } from '../../src/errors.js'
import { clockSpec, DEFAULT_CLOCK_START, parseWasmOptions } from '../../src/wasm/options.js'

const refused = (options: unknown, field: string, reason: RegExp) =>
  assert.throws(
    () => parseWasmOptions(options),
    (e: unknown) => e instanceof PolicyError && e.field === field && reason.test(e.reason),
  )

describe('parseWasmOptions', () => {
  it('defaults: exec off (maxExecs 0), the real clock, a worker, 256M of memory, 30s', () => {
    const p = parseWasmOptions({})
    assert.equal(p.exec.maxExecs, 0)
    assert.equal(p.clock, 'real')
    assert.equal(p.isolation, 'worker')
    assert.equal(p.limits.memoryBytes, 256 * 1024 * 1024)
    assert.equal(p.limits.wallTimeMs, 30_000)
    assert.equal(p.memoryExport, 'memory')
  })

  it("the CLI's clock: real, fixed:T (ms or ISO), step:MS, both", () => {
    const spec = (clock: string) => clockSpec(parseWasmOptions({ clock }).clock)
    assert.deepEqual(spec('real'), { mode: 'real' })
    assert.deepEqual(spec('fixed:1700000000000'), {
      mode: 'virtual',
      startMs: 1700000000000,
      stepMs: 0,
      execAdvanceMs: 0,
      seed: 0,
    })
    assert.equal(
      (spec('fixed:2024-01-01T00:00:00Z') as { startMs: number }).startMs,
      Date.parse('2024-01-01T00:00:00Z'),
    )
    assert.deepEqual(spec('step:2s'), {
      mode: 'virtual',
      startMs: DEFAULT_CLOCK_START,
      stepMs: 2000,
      execAdvanceMs: 2000,
      seed: 0,
    })
    assert.deepEqual(spec('fixed:5,step:1'), {
      mode: 'virtual',
      startMs: 5,
      stepMs: 1,
      execAdvanceMs: 1,
      seed: 0,
    })
    refused({ clock: 'sometimes' }, 'clock', /must be real, fixed:T, step:MS/)
    refused({ clock: 'fixed:yesterday' }, 'clock.start', /ISO 8601/)
  })

  it("refuses by field: limits, the execs' own options (by run()'s schema), what each exec sets, unknowns", () => {
    refused({ limits: { memoryBytes: '1K' } }, 'limits.memoryBytes', /from 64K to 4G/)
    refused({ limits: { memoryBytes: '8G' } }, 'limits.memoryBytes', /from 64K to 4G/)
    refused({ exec: { maxExecs: -1 } }, 'exec.maxExecs', /./)
    refused({ exec: { envAllow: ['A B'] } }, 'exec.envAllow.0', /environment variable name/)
    refused(
      { exec: { options: { limits: { wallTimeMs: 'soon' } } } },
      'exec.options.limits.wallTimeMs',
      /duration/,
    )
    refused({ exec: { options: { nework: 'none' } } }, 'exec.options.nework', /unknown option/)
    refused({ exec: { options: { stdin: 'x' } } }, 'exec.options.stdin', /set by each exec/)
    refused({ exec: { options: { encoding: 'utf8' } } }, 'exec.options.encoding', /set by each exec/)
    refused({ isolation: 'process' }, 'isolation', /./)
    refused({ invokee: 'run' }, 'invokee', /unknown option/)
    refused({ environ: { 'A=B': 'x' } }, 'environ.A=B', /./)
  })
})
