import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { setImmediate as tick } from 'node:timers/promises'
import { ChunkQueue } from '../../src/run/queue.js'

async function collect<T>(queue: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const item of queue) out.push(item)
  return out
}

describe('ChunkQueue', () => {
  it('yields items pushed before iteration starts, then ends', async () => {
    const queue = new ChunkQueue<number>()
    queue.push(1)
    queue.push(2)
    queue.push(3)
    queue.end()
    assert.deepEqual(await collect(queue), [1, 2, 3])
  })

  it('yields items pushed after iteration starts, in order', async () => {
    const queue = new ChunkQueue<string>()
    const done = collect(queue)
    await tick()
    queue.push('a')
    await tick()
    queue.push('b')
    queue.push('c')
    await tick()
    queue.push('d')
    queue.end()
    assert.deepEqual(await done, ['a', 'b', 'c', 'd'])
  })

  it('mixes items pushed before and after iteration starts', async () => {
    const queue = new ChunkQueue<number>()
    queue.push(1)
    const seen: number[] = []
    const done = (async () => {
      for await (const n of queue) seen.push(n)
    })()
    await tick()
    assert.deepEqual(seen, [1])
    queue.push(2)
    await tick()
    assert.deepEqual(seen, [1, 2])
    queue.push(3)
    queue.end()
    await done
    assert.deepEqual(seen, [1, 2, 3])
  })

  it('end() finishes an iteration that is waiting', async () => {
    const queue = new ChunkQueue<number>()
    let finished = false
    const done = collect(queue).then((items) => {
      finished = true
      return items
    })
    await tick()
    assert.equal(finished, false)
    queue.end()
    assert.deepEqual(await done, [])
    assert.equal(finished, true)
  })

  it('delivers items still queued when end() is called', async () => {
    const queue = new ChunkQueue<number>()
    const done = collect(queue)
    await tick()
    queue.push(1)
    queue.push(2)
    queue.end()
    assert.deepEqual(await done, [1, 2])
  })

  it('an iteration started after end() drains what is left and finishes', async () => {
    const queue = new ChunkQueue<string>()
    queue.end()
    assert.deepEqual(await collect(queue), [])
  })

  it('lets the consumer stop early', async () => {
    const queue = new ChunkQueue<number>()
    for (const n of [1, 2, 3]) queue.push(n)
    const seen: number[] = []
    for await (const n of queue) {
      seen.push(n)
      if (n === 2) break
    }
    assert.deepEqual(seen, [1, 2])
  })

  it('a second iterator while one is running throws at once, instead of leaving one of them hanging', async () => {
    const queue = new ChunkQueue<number>()
    const first = collect(queue)
    await tick()
    assert.throws(() => queue[Symbol.asyncIterator](), /output is being iterated already/)
    queue.push(1)
    queue.end()
    assert.deepEqual(await first, [1])
  })

  it('an iterator that stopped early hands over: the next one goes on where it stopped', async () => {
    const queue = new ChunkQueue<number>()
    for (const n of [1, 2, 3]) queue.push(n)
    queue.end()
    for await (const n of queue) {
      assert.equal(n, 1)
      break
    }
    assert.deepEqual(await collect(queue), [2, 3])
  })
})
