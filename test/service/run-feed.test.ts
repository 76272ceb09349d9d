// The runs' feed in process: a state change becomes an item of its run's summary, a key sees its own
// runs' (an admin every key's), a client resumes after an item it saw with nothing missed, and is told to
// list again (null) when the ring no longer holds all it missed, or the id is another boot's.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type FeedItem, RunFeed } from '../../src/service/run-feed.js'
import type { KeyRecord, RunEvent, RunRecord } from '../../src/service/types.js'

const key = (id: string, scopes: KeyRecord['scopes'] = ['runs:read']): KeyRecord =>
  ({ id, scopes, revokedAt: null }) as unknown as KeyRecord

const runs = new Map<string, RunRecord>()
const make = (id: string, keyId: string, state: RunRecord['state'] = 'queued') => {
  runs.set(id, {
    id,
    keyId,
    state,
    createdAt: '2025-01-01T00:00:00.000Z',
    startedAt: null,
    finishedAt: null,
    metadata: {},
    cmd: ['true'],
    result: null,
  })
}
const event = (runId: string, type: RunEvent['type']): RunEvent => ({ runId, seq: 1, type, at: '', data: {} })

describe('the runs’ feed', () => {
  it('turns state events into summaries, for their key and admins only', () => {
    const feed = new RunFeed((id) => runs.get(id) ?? null)
    make('r1', 'k1')
    make('r2', 'k2')
    const seen: Record<string, FeedItem[]> = { k1: [], admin: [] }
    feed.follow(key('k1'), (i) => seen.k1?.push(i))
    feed.follow(key('admin', ['admin']), (i) => seen.admin?.push(i))
    feed.see(event('r1', 'queued'))
    feed.see(event('r1', 'output'))
    feed.see(event('r1', 'log'))
    feed.see(event('r2', 'started'))
    feed.removed({ id: 'r1', keyId: 'k1' })
    assert.deepEqual(
      seen.k1?.map((i) => [i.type, JSON.parse(i.data).id]),
      [
        ['run', 'r1'],
        ['removed', 'r1'],
      ],
    )
    assert.equal(seen.admin?.length, 3)
    assert.deepEqual(JSON.parse(seen.k1?.[0]?.data as string).cmd, ['true'])
    assert.throws(() => feed.follow(key('w', ['runs:write']), () => {}), { code: 'forbidden' })
    assert.throws(() => feed.after(key('w', ['runs:write']), feed.position()), { code: 'forbidden' })
  })

  it('replays what a client missed from the ring, or says to list again', () => {
    const feed = new RunFeed((id) => runs.get(id) ?? null, { items: 5 })
    make('a', 'k1')
    make('b', 'k2')
    const k1 = key('k1')
    const start = feed.position()
    feed.see(event('a', 'queued'))
    const mid = feed.position()
    feed.see(event('b', 'queued'))
    feed.see(event('a', 'started'))
    assert.deepEqual(
      feed.after(k1, start)?.map((i) => i.n),
      [1, 3],
    )
    assert.deepEqual(
      feed.after(k1, mid)?.map((i) => i.n),
      [3],
    )
    assert.deepEqual(feed.after(k1, feed.position()), [])
    // Past the ring: item 1 is gone after 6 more, and a client after 0 or 1 missed it.
    for (let i = 0; i < 6; i++) feed.see(event('a', 'end'))
    assert.equal(feed.after(k1, start), null)
    assert.equal(feed.after(k1, mid), null)
    assert.ok(feed.after(k1, `${feed.boot}-5`), 'item 6 is still there')
    // Another boot (a restart), an id not given yet, a malformed one.
    assert.equal(feed.after(k1, `000000000000-1`), null)
    assert.equal(feed.after(k1, `${feed.boot}-999`), null)
    assert.equal(feed.after(k1, 'nope'), null)
    assert.equal(RunFeed.valid(`${feed.boot}-3`), true)
    assert.equal(RunFeed.valid('3'), false)
  })

  it('bounds its ring by bytes as well as by items', () => {
    const feed = new RunFeed((id) => runs.get(id) ?? null, { items: 1000, bytes: 2500 })
    make('big', 'k1')
    const run = runs.get('big') as RunRecord
    run.metadata = { blob: 'x'.repeat(900) }
    const start = feed.position()
    for (let i = 0; i < 10; i++) feed.see(event('big', 'started'))
    assert.equal(feed.after(key('k1'), start), null, 'the first items went')
    const kept = feed.after(key('k1'), `${feed.boot}-8`)
    assert.deepEqual(
      kept?.map((i) => i.n),
      [9, 10],
    )
  })

  it('skips a run the store cannot read, and never throws to the service', () => {
    const feed = new RunFeed(() => {
      throw new Error('disk')
    })
    assert.doesNotThrow(() => feed.see(event('x', 'queued')))
    assert.equal(feed.position(), `${feed.boot}-0`)
  })
})
