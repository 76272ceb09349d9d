// What loadWasm and runWasm refuse before anything runs, each a PolicyError naming the field.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { PolicyError } from '../../src/errors.js'
import { loadWasm, runWasm } from '../../src/wasm/index.js'
import { wat } from './guests.js'

const rejects = (p: Promise<unknown>, field: string, reason: RegExp) =>
  assert.rejects(p, (e: unknown) => e instanceof PolicyError && e.field === field && reason.test(e.reason))

const adder = wat(`(module (func (export "add") (param i32 i64) (result i64)
  (i64.add (i64.extend_i32_s (local.get 0)) (local.get 1))))`)

describe('loadWasm and runWasm refuse before anything runs', () => {
  it('a source that is none, a missing file, a bad memory limit, an unknown import', async () => {
    await rejects(
      runWasm({ name: 'x', imports: [], exports: [], memoryBytes: 1 } as never),
      'module',
      /from loadWasm/,
    )
    await rejects(loadWasm('/nonexistent/guest.wasm'), 'module', /cannot be read \(ENOENT\)/)
    await rejects(loadWasm(adder, { memoryBytes: '1K' }), 'memoryBytes', /64K/)
    await rejects(loadWasm(wat('(module (import "env" "f" (func)))')), 'module', /cordon provides only/)
  })

  it('an export that is not there, or arguments that do not fit its parameters', async () => {
    await rejects(
      runWasm(adder),
      'invoke',
      /exports no _start: name the export to call \(its functions: add\)/,
    )
    await rejects(runWasm(adder, { invoke: 'sub', args: [1, 2] }), 'invoke', /no exported function "sub"/)
    await rejects(
      runWasm(adder, { invoke: 'add', args: [1] }),
      'args',
      /takes 2 arguments \(i32, i64\), got 1/,
    )
    await rejects(runWasm(adder, { invoke: 'add', args: [2 ** 32, 1] }), 'args.0', /32-bit integer/)
    await rejects(runWasm(adder, { invoke: 'add', args: [1, 'x'] }), 'args.1', /64-bit integer/)
  })

  it('takes numbers, bigints and strings of digits as the parameters want them; an i64 comes back a bigint', async () => {
    const r = await runWasm(adder, { invoke: 'add', args: ['-5', 2n ** 40n] })
    assert.equal(r.status, 'ok', r.violation?.message)
    assert.equal(r.value, 2n ** 40n - 5n)
  })

  it('keeps its own copy of the bytes: the caller changing theirs after load changes nothing', async () => {
    const bytes = adder.slice()
    const mod = await loadWasm(bytes)
    bytes.fill(0)
    assert.equal((await runWasm(mod, { invoke: 'add', args: [1, 2] })).value, 3n)
  })
})
