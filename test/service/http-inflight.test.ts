// Request bodies held at once: the budget itself, and the app refusing a body past it (503 with
// Retry-After) while another is still arriving, then taking it once that one was read.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { createApp } from '../../src/service/http/app.js'
import { bodyCost, byteBudget } from '../../src/service/http/inflight.js'
import { createService } from '../../src/service/service.js'
import { tempDir } from '../helpers.js'

describe('byteBudget', () => {
  it('takes up to its bound, always one body alone, and gives back', () => {
    const budget = byteBudget(100)
    assert.equal(budget.take(150), true, 'one body alone goes through')
    assert.equal(budget.take(1), false)
    budget.give(150)
    assert.equal(budget.take(60), true)
    assert.equal(budget.take(40), true)
    assert.equal(budget.take(1), false)
    budget.give(40)
    assert.equal(budget.held, 60)
  })

  it('lets one owner hold at most its share, past its first body', () => {
    const budget = byteBudget(100, 30)
    assert.equal(budget.take(50, 'a'), true, 'an owner’s first body goes through')
    assert.equal(budget.take(1, 'a'), false, 'past its share')
    assert.equal(budget.take(30, 'b'), true)
    assert.equal(budget.take(1, 'b'), false)
    assert.equal(budget.take(20, 'c'), true)
    budget.give(50, 'a')
    assert.equal(budget.take(10, 'a'), true)
    assert.equal(budget.take(20, 'a'), true)
    assert.equal(budget.held, 80)
  })

  it('costs a body its Content-Length, or the largest body when it declares none or nonsense', () => {
    assert.equal(bodyCost('1234', 8192), 1234)
    assert.equal(bodyCost(' 12 ', 8192), 12)
    assert.equal(bodyCost(undefined, 8192), 8192)
    assert.equal(bodyCost('-5', 8192), 8192)
    assert.equal(bodyCost('1e9', 8192), 8192)
    assert.equal(bodyCost('99999999999', 8192), 8192)
  })
})

describe('bodies in flight over the app', () => {
  let created: Awaited<ReturnType<typeof createService>>
  let app: ReturnType<typeof createApp>['app']
  let admin: string
  before(async () => {
    created = await createService({ dataDir: tempDir('cordon-http-inflight-'), concurrency: 1 })
    app = createApp(created.service, { maxBodyBytes: 1 << 20, maxBodyBytesInFlight: 1 << 20 }).app
    admin = created.adminKey as string
  })
  after(async () => {
    await created.service.close()
  })

  const body = (bytes: number) => {
    const head = '{"cmd":["true"],"files":[{"path":"pad","content":"'
    const tail = '"}]}'
    return `${head}${'x'.repeat(bytes - head.length - tail.length)}${tail}`
  }
  const post = (text: string | ReadableStream<Uint8Array>, length: number) =>
    app.request('/v1/runs', {
      method: 'POST',
      body: text,
      headers: { authorization: `Bearer ${admin}`, 'content-length': String(length) },
      ...(typeof text === 'string' ? {} : { duplex: 'half' }),
    } as RequestInit)

  it('refuses a body past the budget while another arrives (503, Retry-After), takes it after', async () => {
    const slow = body(800_000)
    let sendRest: () => void = () => {}
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(Buffer.from(slow.slice(0, 1000)))
        sendRest = () => {
          controller.enqueue(Buffer.from(slow.slice(1000)))
          controller.close()
        }
      },
    })
    const first = post(stream, slow.length)
    await new Promise((r) => setTimeout(r, 50))

    const small = body(300_000)
    const refused = await post(small, small.length)
    assert.equal(refused.status, 503)
    assert.equal(refused.headers.get('retry-after'), '1')
    const error = ((await refused.json()) as { error: { code: string } }).error
    assert.equal(error.code, 'busy')

    sendRest()
    assert.equal((await first).status, 201)
    const again = await post(small, small.length)
    assert.equal(again.status, 201, await again.text())
  })

  it('gives the budget back once the body is read, not when the wait ends', async () => {
    const big = JSON.stringify({
      cmd: ['sleep', '2'],
      wait: '10s',
      files: [{ path: 'pad', content: 'y'.repeat(700_000) }],
    })
    const waiting = post(big, big.length)
    await new Promise((r) => setTimeout(r, 300))
    const small = body(500_000)
    const res = await post(small, small.length)
    assert.equal(res.status, 201, await res.text())
    assert.equal((await waiting).status, 201)
  })

  it('keeps one key from holding the whole budget with bodies that never end', async () => {
    // Bodies of at most 256 KiB, 1 MiB of them at once: four bodies of one key would fill it.
    const shared = createApp(created.service, { maxBodyBytes: 1 << 18, maxBodyBytesInFlight: 1 << 20 }).app
    const made = await shared.request('/v1/keys', {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}` },
      body: JSON.stringify({ name: 'hog', scopes: ['runs:write'] }),
    })
    const hog = ((await made.json()) as { key: string }).key
    // Bodies without a length, each costing the largest body, sent a byte and then held open.
    const ends: (() => void)[] = []
    const held: Promise<Response>[] = []
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) {
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(Buffer.from('{'))
          ends.push(() => controller.close())
        },
      })
      const res = shared.request('/v1/runs', {
        method: 'POST',
        body: stream,
        headers: { authorization: `Bearer ${hog}` },
        duplex: 'half',
      } as RequestInit)
      held.push(Promise.resolve(res))
      const first = await Promise.race([res, new Promise((r) => setTimeout(() => r(null), 50))])
      if (first) statuses.push((first as Response).status)
    }
    try {
      assert.ok(
        statuses.length >= 2 && statuses.every((s) => s === 503),
        `the hog's later bodies: ${statuses}`,
      )
      const small = body(200_000)
      const res = await shared.request('/v1/runs', {
        method: 'POST',
        body: small,
        headers: { authorization: `Bearer ${admin}`, 'content-length': String(small.length) },
      })
      assert.equal(res.status, 201, 'another key still sends its body')
    } finally {
      for (const end of ends) end()
      await Promise.all(held)
    }
  })
})
