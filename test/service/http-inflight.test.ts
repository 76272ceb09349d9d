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
})
