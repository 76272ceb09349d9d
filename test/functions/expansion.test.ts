import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { deserialize, serialize } from 'node:v8'
import { expandedSize } from '../../src/functions/expansion.js'

describe('expandedSize', () => {
  it('counts every slot a tree walker visits', () => {
    assert.equal(expandedSize(5, 100), 1)
    assert.equal(expandedSize('text', 100), 1)
    assert.equal(expandedSize([1, 2, 3], 100), 4)
    assert.equal(expandedSize({ a: 1, b: [2, 3] }, 100), 5)
    assert.equal(expandedSize(new Map([['k', { v: 1 }]]), 100), 4)
    assert.equal(expandedSize(new Set([1, 2]), 100), 3)
    // Bytes are carried one for one: one slot whatever their length.
    assert.equal(expandedSize(new Uint8Array(1_000_000), 100), 1)
    assert.equal(expandedSize([new ArrayBuffer(8)], 100), 2)
  })

  it("an array counts its length, holes too: a sparse array's free length is seen at once", () => {
    const sparse: unknown[] = []
    sparse.length = 2 ** 32 - 1
    const started = performance.now()
    assert.equal(expandedSize(sparse, 1000), 1001)
    assert.equal(expandedSize({ inner: [sparse] }, 1000), 1001)
    assert.ok(performance.now() - started < 1000)
    const holes: unknown[] = []
    holes.length = 10
    assert.equal(expandedSize(holes, 100), 11)
  })

  it('a shared object counts at every reference; a reference back into a cycle counts once', () => {
    const row = { id: 1 }
    assert.equal(expandedSize({ a: row, b: row }, 100), 5)
    let laughs: unknown = ['lol']
    for (let i = 0; i < 64; i++) laughs = [laughs, laughs]
    const started = performance.now()
    assert.equal(expandedSize(laughs, 1_000_000), 1_000_001)
    assert.ok(performance.now() - started < 1000)
    const self: Record<string, unknown> = { n: 1 }
    self.me = self
    assert.equal(expandedSize(self, 100), 3)
    const a: Record<string, unknown> = {}
    const b: Record<string, unknown> = { a }
    a.b = b
    // Within a cycle the count is a bound, not exact: sizes are remembered as first measured.
    assert.ok(expandedSize([a, b], 100) <= 7)
  })

  it('a value nested deeper than the stack is measured without recursion', () => {
    let deep: unknown = 0
    for (let i = 0; i < 200_000; i++) deep = [deep]
    assert.equal(expandedSize(deep, 1_000_000), 200_001)
  })

  it('a reply without sharing or sparse arrays never counts more slots than its bytes', () => {
    const values = [
      { rows: Array.from({ length: 500 }, (_, i) => ({ id: i, name: `n${i}`, tags: ['a', 'b'] })) },
      new Map(Array.from({ length: 300 }, (_, i) => [i, new Set([i, `${i}`])])),
      Array.from({ length: 1000 }, () => undefined),
    ]
    for (const value of values) {
      const bytes = serialize(value).length
      assert.ok(expandedSize(deserialize(serialize(value)), 10 ** 9) <= bytes, `${bytes}`)
    }
  })
})
