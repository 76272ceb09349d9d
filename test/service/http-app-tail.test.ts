// `GET /v1/runs/{id}/events?tail=BYTES`: a reader that wants only the end of a long run's output (the
// dashboard opening a finished run) starts with the events holding its last bytes, not a replay of all.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { createApp } from '../../src/service/http/app.js'
import { createService } from '../../src/service/service.js'
import { tempDir } from '../helpers.js'

describe('events ?tail=', () => {
  let created: Awaited<ReturnType<typeof createService>>
  let app: ReturnType<typeof createApp>['app']
  let admin: string
  let id: string
  before(async () => {
    created = await createService({ dataDir: tempDir('cordon-http-tail-'), concurrency: 1 })
    app = createApp(created.service).app
    admin = created.adminKey as string
    // 200 lines of 1000 bytes, one a write 30 ms apart: many output events.
    const script = 'for i in $(seq 1 200); do printf "%0999d\\n" $i; [ $((i % 20)) = 0 ] && sleep 0.03; done'
    const res = await call('/v1/runs', {
      method: 'POST',
      body: JSON.stringify({ cmd: ['sh', '-c', script], wait: '60s' }),
    })
    const run = (await res.json()) as { id: string; state: string; result: { stdout: string } }
    assert.equal(run.state, 'finished')
    assert.equal(run.result.stdout.length, 200_000)
    id = run.id
  })
  after(async () => {
    await created.service.close()
  })

  function call(path: string, init: RequestInit = {}) {
    const headers = new Headers(init.headers)
    headers.set('authorization', `Bearer ${admin}`)
    return app.request(path, { ...init, headers })
  }
  /** The stream's events: seq, type and the output text they carry. */
  async function events(query: string, headers: Record<string, string> = {}) {
    const res = await call(`/v1/runs/${id}/events${query}`, { headers })
    assert.equal(res.status, 200)
    const text = await res.text()
    return [...text.matchAll(/^id: (\d+)\nevent: (\S+)\ndata: (.*)$/gm)].map((m) => ({
      seq: Number(m[1]),
      type: m[2] as string,
      data: JSON.parse(m[3] as string) as { data?: string },
    }))
  }
  const outputOf = (list: { type: string; data: { data?: string } }[]) =>
    list
      .filter((e) => e.type === 'output')
      .map((e) => e.data.data)
      .join('')

  it('starts with the event holding the last bytes, and goes on to the end', async () => {
    const all = await events('')
    const tail = await events('?tail=5000')
    assert.ok(all.filter((e) => e.type === 'output').length > 3, 'several output events')
    assert.ok(tail.length < all.length, `${tail.length} of ${all.length} events`)
    assert.equal(tail.at(-1)?.type, 'end')
    const text = outputOf(tail)
    assert.ok(text.length >= 5000, `${text.length} bytes`)
    assert.ok(outputOf(all).endsWith(text), 'the same bytes as the end of the whole output')
    // The first event delivered is the one holding byte total-5000: the one before it ends before that.
    const before = all.filter((e) => e.type === 'output' && e.seq < (tail[0]?.seq ?? 0))
    assert.ok(outputOf(all).length - outputOf(before).length >= 5000)
    assert.ok(outputOf(all).length - outputOf(before).length - 5000 < text.length)
  })

  it('replays everything when the tail holds it all, and a resume wins over the tail', async () => {
    const all = await events('')
    assert.deepEqual(
      (await events('?tail=10000000')).map((e) => e.seq),
      all.map((e) => e.seq),
    )
    const last = all.at(-2)?.seq as number
    assert.deepEqual(
      (await events('?tail=10', { 'last-event-id': String(last) })).map((e) => e.seq),
      all.filter((e) => e.seq > last).map((e) => e.seq),
    )
    assert.deepEqual(
      (await events(`?tail=10&after=${last}`)).map((e) => e.seq),
      all.filter((e) => e.seq > last).map((e) => e.seq),
    )
  })

  it('refuses a tail that is not a byte count (400 naming it)', async () => {
    const res = await call(`/v1/runs/${id}/events?tail=-1`)
    assert.equal(res.status, 400)
    assert.equal(((await res.json()) as { error: { field: string } }).error.field, 'tail')
  })
})
