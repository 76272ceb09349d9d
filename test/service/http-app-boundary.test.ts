// The HTTP API's boundary, in process (hono's app.request) over the real service: what a key without
// `runs:read` is told of a run (only its id), and a body that is not UTF-8 (400 naming the body).
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { createApp } from '../../src/service/http/app.js'
import { createService } from '../../src/service/service.js'
import { tempDir } from '../helpers.js'

type Json = Record<string, unknown>

describe('http boundary', () => {
  let created: Awaited<ReturnType<typeof createService>>
  let app: ReturnType<typeof createApp>['app']
  let admin: string

  before(async () => {
    created = await createService({
      dataDir: tempDir('cordon-http-boundary-'),
      concurrency: 2,
      maxQueued: 20,
      allowPrivateWebhooks: true,
    })
    app = createApp(created.service, { heartbeatMs: 200 }).app
    admin = created.adminKey as string
  })
  after(async () => {
    await created.service.close()
  })

  const call = (path: string, init: RequestInit & { key?: string | null } = {}) => {
    const { key = admin, ...rest } = init
    const headers = new Headers(rest.headers)
    if (key) headers.set('authorization', `Bearer ${key}`)
    return app.request(path, { ...rest, headers })
  }
  const post = (path: string, body: unknown, key: string | null = admin) =>
    call(path, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body), key })
  const errorOf = async (res: Response) => ((await res.json()) as { error: Json }).error
  const newKey = async (body: Json) => {
    const res = await post('/v1/keys', { name: 'k', ...body })
    assert.equal(res.status, 201, await res.clone().text())
    return (await res.json()) as { id: string; key: string }
  }

  describe('a key without runs:read is told a run’s id, never its data', () => {
    it('submit answers the id only', async () => {
      const writer = await newKey({ scopes: ['runs:write'] })
      const res = await post('/v1/runs', { cmd: ['sh', '-c', 'echo secret-output'] }, writer.key)
      assert.equal(res.status, 201)
      const body = (await res.json()) as Json
      assert.deepEqual(Object.keys(body), ['id'])
      assert.equal(res.headers.get('location'), `/v1/runs/${body.id}`)
      const done = (await (await call(`/v1/runs/${body.id}?wait=20s`)).json()) as { result: Json }
      assert.equal(done.result.stdout, 'secret-output\n')
    })

    it('cancel answers 202 and the id, on a running run and on a finished one', async () => {
      const writer = await newKey({ scopes: ['runs:write'] })
      // A finished run: the whole result came back from cancel.
      const finished = (await (
        await post('/v1/runs', { cmd: ['sh', '-c', 'echo done-output'] }, writer.key)
      ).json()) as Json
      await call(`/v1/runs/${finished.id}?wait=20s`)
      const res = await post(`/v1/runs/${finished.id}/cancel`, '', writer.key)
      assert.equal(res.status, 202)
      const text = await res.text()
      assert.deepEqual(JSON.parse(text), { id: finished.id })
      assert.doesNotMatch(text, /done-output/)

      const running = (await (await post('/v1/runs', { cmd: ['sleep', '30'] }, writer.key)).json()) as Json
      const canceled = await post(`/v1/runs/${running.id}/cancel`, '', writer.key)
      assert.equal(canceled.status, 202)
      assert.deepEqual(await canceled.json(), { id: running.id })
      const ended = (await (await call(`/v1/runs/${running.id}?wait=20s`)).json()) as { result: Json }
      assert.equal(ended.result.status, 'canceled', 'the cancel was done')
      // A key that may read gets the run, as before.
      const mine = (await (await post('/v1/runs', { cmd: ['true'] })).json()) as Json
      const read = await post(`/v1/runs/${mine.id}/cancel`, '')
      assert.equal(read.status, 200)
      assert.equal(((await read.json()) as Json).id, mine.id)
    })

    it('every route that reads a run is 403 for it', async () => {
      const writer = await newKey({ scopes: ['runs:write'] })
      const run = (await (
        await post('/v1/runs', { cmd: ['sh', '-c', 'echo x > f'], collect: ['f'] }, writer.key)
      ).json()) as Json
      await call(`/v1/runs/${run.id}?wait=20s`)
      const reads = [
        `/v1/runs/${run.id}`,
        `/v1/runs/${run.id}?wait=1s`,
        '/v1/runs',
        `/v1/runs/${run.id}/output`,
        `/v1/runs/${run.id}/events`,
        `/v1/runs/${run.id}/files`,
        `/v1/runs/${run.id}/files/f`,
      ]
      for (const path of reads) {
        const res = await call(path, { key: writer.key })
        assert.equal(res.status, 403, path)
        assert.equal((await errorOf(res)).code, 'forbidden', path)
      }
      // Writes that answer nothing of the run stay the key's.
      assert.equal((await call(`/v1/runs/${run.id}`, { method: 'DELETE', key: writer.key })).status, 204)
    })

    it('a webhook, which would carry the result, needs runs:read too (before the run is made)', async () => {
      const writer = await newKey({ scopes: ['runs:write'] })
      const before = (await (await call('/v1/runs?limit=1000')).json()) as { runs: Json[] }
      const res = await post(
        '/v1/runs',
        { cmd: ['true'], webhook: { url: 'http://127.0.0.1:9/hook' } },
        writer.key,
      )
      assert.equal(res.status, 403)
      const error = await errorOf(res)
      assert.equal(error.code, 'forbidden')
      assert.equal(error.field, 'webhook')
      const after = (await (await call('/v1/runs?limit=1000')).json()) as { runs: Json[] }
      assert.equal(after.runs.length, before.runs.length, 'no run was made')
    })
  })

  describe('a body that is not UTF-8 is a 400 naming the body, on every route that takes JSON', () => {
    // 0xff never occurs in UTF-8; 0xc3 0x28 is a lead byte without its continuation; an overlong `/`.
    const bad = [
      Buffer.concat([Buffer.from('{"cmd":["echo","'), Buffer.from([0xff]), Buffer.from('"]}')]),
      Buffer.concat([Buffer.from('{"cmd":["echo","'), Buffer.from([0xc3, 0x28]), Buffer.from('"]}')]),
      Buffer.concat([Buffer.from('{"cmd":["echo","'), Buffer.from([0xc0, 0xaf]), Buffer.from('"]}')]),
      // A lone surrogate, encoded (CESU-style): not UTF-8 either.
      Buffer.concat([Buffer.from('{"cmd":["echo","'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"]}')]),
    ]
    for (const route of ['/v1/runs', '/v1/keys']) {
      it(route, async () => {
        const before = (await (await call('/v1/runs?limit=1000')).json()) as { runs: Json[] }
        for (const body of bad) {
          const res = await call(route, { method: 'POST', body: new Uint8Array(body) })
          assert.equal(res.status, 400, body.toString('hex'))
          const error = await errorOf(res)
          assert.equal(error.code, 'invalid')
          assert.equal(error.field, 'body')
          assert.match(String(error.message), /UTF-8/)
        }
        const after = (await (await call('/v1/runs?limit=1000')).json()) as { runs: Json[] }
        assert.equal(after.runs.length, before.runs.length, 'no run was made')
      })
    }

    it('while UTF-8 of every plane is taken as it is', async () => {
      const text = 'é ✓ 𝄞'
      const res = await post('/v1/runs', { cmd: ['printf', '%s', text], wait: '20s' })
      assert.equal(res.status, 201)
      assert.equal(((await res.json()) as { result: Json }).result.stdout, text)
    })
  })
})
