// What a module may be: its imports checked against the import sets (with their signatures) before it is
// instantiated, its memory's maximum rewritten to the limit, and what cordon cannot bound refused.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { PolicyError } from '../../src/errors.js'
import { IMPORT_SETS } from '../../src/wasm/imports/sets.js'
import { checkImports, clampMemory, inspectModule } from '../../src/wasm/module.js'
import { wat } from './guests.js'

const bytes = (text: string) => new Uint8Array(wat(text))
const refused = (fn: () => unknown, pattern: RegExp, field = 'module') =>
  assert.throws(fn, (e: unknown) => e instanceof PolicyError && e.field === field && pattern.test(e.reason))
const check = (text: string) => checkImports(inspectModule(bytes(text)), IMPORT_SETS)

describe('inspectModule', () => {
  it('lists imports and exports with their signatures', () => {
    const info = inspectModule(
      bytes(`(module
        (import "platform_sandbox" "sandbox_exec" (func (param i32 i32 i32 i32) (result i32)))
        (memory (export "memory") 2 10)
        (func (export "run") (param i64 f64) (result f32) f32.const 1))`),
    )
    assert.deepEqual(info.imports, [
      {
        module: 'platform_sandbox',
        name: 'sandbox_exec',
        kind: 'function',
        signature: { params: ['i32', 'i32', 'i32', 'i32'], results: ['i32'] },
      },
    ])
    assert.deepEqual(info.memory, { min: 2, max: 10 })
    assert.deepEqual(info.exports, [
      { name: 'memory', kind: 'memory' },
      { name: 'run', kind: 'function', signature: { params: ['i64', 'f64'], results: ['f32'] } },
    ])
  })

  it('refuses what is not a module, a component, an imported memory, a shared one', () => {
    refused(() => inspectModule(new Uint8Array([1, 2, 3])), /not a valid WebAssembly module/)
    refused(() => inspectModule(new Uint8Array(Buffer.from('0061736d0d000100', 'hex'))), /not a valid/)
    refused(() => check('(module (import "env" "memory" (memory 1)))'), /imports its memory/)
    // A shared memory, memory64 and two memories, spelt by hand (wabt wants flags for each).
    const shared = new Uint8Array(Buffer.from('0061736d010000000504010301' + '02', 'hex'))
    assert.ok(WebAssembly.validate(shared))
    refused(() => inspectModule(shared), /shared memory/)
  })

  // Spelt by hand: memory64 (flags 4) and two memories, where this Node's V8 validates them (Node 24 has both).
  const mem64 = new Uint8Array(Buffer.from('0061736d01000000050401040101', 'hex'))
  const two = new Uint8Array(Buffer.from('0061736d0100000005050200010001', 'hex'))
  it('refuses memory64', {
    skip: !WebAssembly.validate(mem64) && `this Node (${process.version}) has no memory64`,
  }, () => {
    refused(() => inspectModule(mem64), /memory64/)
  })
  it('refuses two memories', {
    skip: !WebAssembly.validate(two) && `this Node (${process.version}) has no multi-memory`,
  }, () => {
    refused(() => inspectModule(two), /multi-memory/)
  })

  it('fuzz: a valid module never makes it loop or throw anything but PolicyError', () => {
    const base = bytes(`(module
      (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
      (memory (export "memory") 1 4) (func (export "_start")))`)
    fc.assert(
      fc.property(fc.nat(base.length - 1), fc.integer({ min: 0, max: 255 }), (at, byte) => {
        const m = base.slice()
        m[at] = byte
        try {
          inspectModule(m)
        } catch (error) {
          if (!(error instanceof PolicyError)) throw error
        }
      }),
      { numRuns: 3000 },
    )
  })
})

describe('checkImports', () => {
  it('takes the import sets with their signatures, and a WASI import outside the subset as a stub', () => {
    check(`(module
      (import "platform_sandbox" "sandbox_exec" (func (param i32 i32 i32 i32) (result i32)))
      (import "platform_sandbox" "get_timestamp" (func (result i64)))
      (import "cordon" "exec" (func (param i32 i32) (result i32)))
      (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
      (import "wasi_snapshot_preview1" "path_open" (func (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32))))`)
  })

  it('refuses an unknown module or name, a wrong signature, and what is not a function', () => {
    refused(() => check('(module (import "env" "f" (func)))'), /imports env\.f: cordon provides only/)
    refused(
      () => check('(module (import "platform_sandbox" "rm_rf" (func)))'),
      /which cordon does not provide/,
    )
    refused(
      () => check('(module (import "platform_sandbox" "sandbox_exec" (func (param i32) (result i32))))'),
      /imports platform_sandbox\.sandbox_exec with \(i32\)->\(i32\); expected \(i32,i32,i32,i32\)->\(i32\)/,
    )
    refused(() => check('(module (import "cordon" "exec" (global i32)))'), /as a global: only functions/)
    refused(
      () => check('(module (import "wasi_snapshot_preview1" "odd" (func (result i64))))'),
      /does not provide/,
    )
    refused(() => check('(module (import "__proto__" "x" (func)))'), /cordon provides only/)
  })
})

describe('clampMemory', () => {
  const grower = (memory: string) =>
    bytes(`(module (memory (export "memory") ${memory})
      (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))`)
  const grow = async (module: Uint8Array, pages: number) => {
    const { instance } = await WebAssembly.instantiate(module as Uint8Array<ArrayBuffer>)
    return (instance.exports.grow as (n: number) => number)(pages)
  }

  it('an unbounded memory gets the limit as its maximum: growing past it fails (-1), within it works', async () => {
    const module = grower('1')
    assert.equal(await grow(module, 1000), 1, 'unclamped, it grows')
    const clamped = clampMemory(module, 16)
    assert.deepEqual(inspectModule(clamped).memory, { min: 1, max: 16 })
    assert.equal(await grow(clamped, 1000), -1)
    assert.equal(await grow(clamped, 15), 1)
  })

  it('keeps a smaller declared maximum, lowers a larger one, refuses a start above the limit', () => {
    assert.deepEqual(inspectModule(clampMemory(grower('1 8'), 16)).memory, { min: 1, max: 8 })
    assert.deepEqual(inspectModule(clampMemory(grower('1 100'), 16)).memory, { min: 1, max: 16 })
    refused(() => clampMemory(grower('17'), 16), /starts at 1114112 bytes/, 'limits.memoryBytes')
    // LEB128 lengths change with the numbers: the rest of the module must stay intact.
    const big = clampMemory(grower('200'), 65536)
    assert.deepEqual(inspectModule(big).memory, { min: 200, max: 65536 })
    assert.ok(WebAssembly.validate(big))
  })

  it('leaves a module without memory as it is', () => {
    const none = bytes('(module (func (export "f")))')
    assert.equal(clampMemory(none, 16), none)
  })
})
