// The HTTP layer against clients that hold on: a client that never reads its event stream, many streams
// or long polls, a key revoked mid-stream, a malformed path. The real service, except where a stream's
// buffer must be watched (a service that counts what the stream took).
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { sseStream } from '../../src/service/http/sse.js'
import type { KeyRecord, RunEvent, Service } from '../../src/service/types.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** A service with one run whose events are `stored`; counts the events a stream formatted. */
function countingService(stored: RunEvent[]) {
  const followers = new Set<(e: RunEvent) => void>()
  let taken = 0
  const counted = (e: RunEvent): RunEvent => ({
    ...e,
    get data() {
      taken++
      return e.data
    },
  })
  const service = {
    events(_key: KeyRecord, _id: string, afterSeq: number, follow: (e: RunEvent) => void) {
      const f = (e: RunEvent) => follow(counted(e))
      followers.add(f)
      return { past: stored.filter((e) => e.seq > afterSeq).map(counted), stop: () => followers.delete(f) }
    },
  } as unknown as Service
  const append = (type: RunEvent['type'], data: Record<string, unknown>) => {
    const e: RunEvent = { runId: 'run_x', seq: stored.length + 1, type, at: new Date().toISOString(), data }
    stored.push(e)
    for (const f of [...followers]) f(e)
  }
  return { service, append, taken: () => taken, following: () => followers.size }
}

describe('http limits', () => {
  it('holds a bounded amount for an event stream nobody reads, then sends every event once when read', async () => {
    const chunk = Buffer.alloc(6 * 1024, 'a').toString('base64') // 8 KiB an event
    const stored: RunEvent[] = []
    const fake = countingService(stored)
    for (let i = 0; i < 500; i++) fake.append('output', { stream: 'stdout', data: chunk })
    const body = sseStream(fake.service, {} as KeyRecord, 'run_x', 0, {
      encoding: 'base64',
      heartbeatMs: 60_000,
    })
    await sleep(20)
    for (let i = 0; i < 500; i++) fake.append('output', { stream: 'stdout', data: chunk })
    await sleep(20)
    // 1000 events (8 MiB) stored: a stream that nobody reads took a few of them, not all.
    assert.ok(fake.taken() < 100, `took ${fake.taken()} events before any read`)
    assert.equal(fake.following(), 0, 'stopped following a client that is behind')
    fake.append('end', { result: {} })
    const text = await new Response(body).text()
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))
    assert.deepEqual(
      ids,
      stored.map((e) => e.seq),
      'each event once, in order, the end last',
    )
  })
})
