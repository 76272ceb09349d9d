// A finished run's text, rebuilt from its stored output events: exactly what the worker's result had
// (TextOfChunks), whatever the bytes and however the events cut them; its JSON view, a piece at a time.
import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'
import { errorResult } from '../../src/index.js'
import { SqliteSyncStore as SqliteStore } from '../../src/service/sqlite-sync.js'
import { jsonTextBytes, textPieces, viewJson, wholeResult } from '../../src/service/text.js'
import { type RunRecord, runView, type StoredResult } from '../../src/service/types.js'
import { TextOfChunks } from '../../src/service/worker.js'
import { tempDir } from '../helpers.js'

const at = '2026-01-01T00:00:00.000Z'

/** A deterministic generator of bytes (xorshift), so that a failure can be run again. */
function random(seed: number) {
  let x = seed
  return (n: number) => {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return (x >>> 0) % n
  }
}

/**
 * A run whose output is `chunks` (in arrival order), stored as the worker stores it, finished with the
 * result the worker builds from it (TextOfChunks): returns that result.
 */
function storedRun(store: SqliteStore, id: string, chunks: { stream: 'stdout' | 'stderr'; bytes: Buffer }[]) {
  store.createRun({ id, keyId: 'k', createdAt: at, metadata: { m: 'v' }, request: {} })
  store.startRun(id, at)
  const text = new TextOfChunks()
  const offsets = { stdout: 0, stderr: 0 }
  const kept = { stdout: [] as Buffer[], stderr: [] as Buffer[], output: [] as Buffer[] }
  for (const { stream, bytes } of chunks) {
    store.appendEvent(id, 'output', {
      stream,
      offset: offsets[stream],
      bytes: bytes.length,
      data: bytes.toString('base64'),
    })
    offsets[stream] += bytes.length
    text.push(stream, bytes.length)
    kept[stream].push(bytes)
    kept.output.push(bytes)
  }
  const result = text.result({
    ...errorResult('x', 'y'),
    status: 'ok',
    violation: null,
    stdout: Buffer.concat(kept.stdout),
    stderr: Buffer.concat(kept.stderr),
    output: Buffer.concat(kept.output),
    outputBytes: offsets.stdout + offsets.stderr,
    logs: [{ level: 'warn', msg: 'a log line' }],
  })
  store.finishRun(id, result, at)
  return result
}

const open = () => new SqliteStore(path.join(tempDir('cordon-text-'), 'data'))

describe('a run’s text from its events', () => {
  it('is what the worker’s result had: characters cut across events, invalid bytes, both streams', () => {
    const store = open()
    const pieces = ['a', 'é', '€', '😀', '\u0001', '"', '\\', '\n', '\u2028']
    for (let seed = 1; seed <= 40; seed++) {
      const next = random(seed)
      // Text with stray bytes, cut anywhere (inside a character too) into chunks of either stream.
      const all: Buffer[] = []
      for (let i = 0; i < 200; i++)
        all.push(
          next(8) === 0
            ? Buffer.from([0x80 + next(128)])
            : Buffer.from(pieces[next(pieces.length)] as string),
        )
      const bytes = Buffer.concat(all)
      const chunks: { stream: 'stdout' | 'stderr'; bytes: Buffer }[] = []
      for (let i = 0; i < bytes.length; ) {
        const n = 1 + next(12)
        chunks.push({ stream: next(3) === 0 ? 'stderr' : 'stdout', bytes: bytes.subarray(i, i + n) })
        i += n
      }
      const id = `run_${seed}`
      const result = storedRun(store, id, chunks)
      assert.ok(result.stdout.length > 0)
      const stored = store.storedResult(id) as StoredResult
      assert.equal(stored.textFromEvents, true)
      assert.equal('stdout' in stored.result, false, 'the text is not stored')
      assert.deepEqual(wholeResult(store, id, stored), result, `seed ${seed}`)
      const run = store.getRun(id) as RunRecord
      assert.deepEqual(
        JSON.parse([...viewJson(store, run)].join('')),
        JSON.parse(JSON.stringify(runView(run, result))),
      )
      // The view's size is known without reading it, and is not under it.
      const viewBytes = Buffer.byteLength(JSON.stringify(runView(run, result)))
      const estimate = store.runViewBytes(id)
      assert.ok(estimate >= viewBytes && estimate < viewBytes + 1024, `${estimate} for ${viewBytes}`)
    }
    store.close()
  })

  it('keeps a result without text as it is, and reads a run still going as its summary', () => {
    const store = open()
    store.createRun({ id: 'r', keyId: 'k', createdAt: at, metadata: {}, request: {} })
    store.startRun('r', at)
    store.appendEvent('r', 'output', { stream: 'stdout', offset: 0, bytes: 2, data: 'aGk=' })
    const running = store.getRun('r') as RunRecord
    assert.deepEqual(JSON.parse([...viewJson(store, running)].join('')), runView(running))
    // An interrupted run's result has no text (the worker never made one), whatever its events hold.
    const interrupted = errorResult('interrupted', 'the server stopped')
    store.finishRun('r', interrupted, at)
    assert.deepEqual(store.storedResult('r'), { result: interrupted, textFromEvents: false })
    assert.deepEqual(wholeResult(store, 'r', store.storedResult('r') as StoredResult), interrupted)
    store.close()
  })

  it('reads a long output an event at a time, and fails when its events go meanwhile', () => {
    const store = open()
    const piece = Buffer.alloc(64 * 1024, 0x01)
    storedRun(
      store,
      'long',
      Array.from({ length: 64 }, () => ({ stream: 'stdout' as const, bytes: piece })),
    )
    let chunks = 0
    const outputChunks = store.outputChunks.bind(store)
    store.outputChunks = (...args) => {
      const page = outputChunks(...args)
      chunks += page.length
      return page
    }
    const view = viewJson(store, store.getRun('long') as RunRecord)[Symbol.iterator]()
    let text = ''
    while (!text.includes('"stdout":"')) text += view.next().value
    text += view.next().value
    assert.ok(chunks <= 4, `${chunks} events read for the view's first piece`)
    const stdout = textPieces(store, 'long', 'stdout')
    stdout.next()
    assert.equal(store.deleteRun('long'), true)
    assert.throws(() => [...stdout], /gone/)
    assert.throws(() => [...view], /gone/)
    store.close()
  })

  it('counts the bytes of a text as JSON as JSON.stringify writes it', () => {
    for (const text of [
      '',
      'plain',
      '\u0000\u0001\u001f\b\t\n\f\r"\\/',
      'é€😀\u2028\u2029',
      '\ud800 lone \udfff',
      '😀'.slice(0, 1),
      `${'a'.repeat(1000)}\u007f\u0080`,
    ])
      assert.equal(jsonTextBytes(text), Buffer.byteLength(JSON.stringify(text)), JSON.stringify(text))
  })
})
