// The dashboard's routes in process (hono's app.request) over the real service: the runs' feed
// (`GET /v1/runs/events`: its sync, its run and removed events, whose runs each key sees, its resumption,
// its bounds and its end at a revocation), a run's command as shown (redacted, cut), a run's request as
// its page shows it (never a value of env, a redact string, a file's content), a run made again by its own
// key only, what a key may ask (`GET /v1/keys/me`), and the list's key filter.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { parseSse, type SseMessage } from '../../src/client/client.js'
import { createApp } from '../../src/service/http/app.js'
import { createService } from '../../src/service/service.js'
import { tempDir } from '../helpers.js'

type Json = Record<string, unknown>

/** A stream's next events, a few at a time, with a deadline. */
function reader(res: Response) {
  const messages = parseSse(res.body as ReadableStream<Uint8Array>)
  return {
    async next(ms = 15_000): Promise<SseMessage> {
      const timer = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no event')), ms))
      const got = await Promise.race([messages.next(), timer])
      if (got.done) throw new Error('the stream ended')
      return got.value
    },
    /** Events until `until` is true of one (it included). */
    async until(until: (m: SseMessage) => boolean, ms = 20_000): Promise<SseMessage[]> {
      const out: SseMessage[] = []
      const end = Date.now() + ms
      for (;;) {
        const m = await this.next(Math.max(1, end - Date.now()))
        out.push(m)
        if (until(m)) return out
      }
    },
    /** Resolves true once the stream has ended. */
    async ended(ms = 5000): Promise<boolean> {
      const timer = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms))
      const done = (async () => {
        for (;;) if ((await messages.next()).done) return true
      })()
      return Promise.race([done, timer])
    },
    close: () => messages.return(undefined),
  }
}

describe('the dashboard’s routes', () => {
  let created: Awaited<ReturnType<typeof createService>>
  let app: ReturnType<typeof createApp>['app']
  let admin: string
  let keys: Record<'alice' | 'bob' | 'writer' | 'reader', { id: string; key: string }>

  before(async () => {
    created = await createService({ dataDir: tempDir('cordon-ui-routes-'), concurrency: 2, maxQueued: 50 })
    app = createApp(created.service, { heartbeatMs: 200, maxStreamsPerKey: 2 }).app
    admin = created.adminKey as string
    const make = async (name: string, body: Json) => {
      const res = await call('/v1/keys', { method: 'POST', body: JSON.stringify({ name, ...body }) })
      assert.equal(res.status, 201, await res.clone().text())
      return (await res.json()) as { id: string; key: string }
    }
    keys = {
      alice: await make('alice', {
        scopes: ['runs:write', 'runs:read'],
        ceilings: {
          limits: { wallTimeMs: '20s', memoryBytes: '1G' },
          network: { allow: ['*.example.com', 'api.test:443'], deny: ['bad.example.com'] },
        },
        secrets: { API_TOKEN: 'tok-alice-secret-42' },
      }),
      bob: await make('bob', {
        scopes: ['runs:write', 'runs:read'],
        ceilings: { network: ['none', 'allow'] },
      }),
      writer: await make('writer', { scopes: ['runs:write'] }),
      reader: await make('reader', { scopes: ['runs:read'] }),
    }
  })
  after(async () => {
    await created?.service.close()
  })

  function call(path: string, init: RequestInit & { key?: string } = {}) {
    const { key = admin, ...rest } = init
    const headers = new Headers(rest.headers)
    headers.set('authorization', `Bearer ${key}`)
    return app.request(path, { ...rest, headers })
  }
  const submit = async (key: string, body: Json) => {
    const res = await call('/v1/runs', { method: 'POST', key, body: JSON.stringify(body) })
    assert.equal(res.status, 201, await res.clone().text())
    return (await res.json()) as Json
  }
  const errorOf = async (res: Response) => ((await res.json()) as { error: Json }).error

  it('feeds each run’s state changes as its summary, and its removal; syncs first', async () => {
    const res = await call('/v1/runs/events', { key: keys.alice.key })
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/)
    const feed = reader(res)
    const sync = await feed.next()
    assert.equal(sync.event, 'sync')
    assert.match(String(sync.id), /^[0-9a-f]{12}-\d+$/)
    const run = await submit(keys.alice.key, { cmd: ['sh', '-c', 'echo fed'], metadata: { name: 'fed' } })
    const seen = await feed.until((m) => m.event === 'run' && JSON.parse(m.data).state === 'finished')
    const states = seen.map((m) => [m.event, JSON.parse(m.data).id, JSON.parse(m.data).state])
    assert.deepEqual(states, [
      ['run', run.id, 'queued'],
      ['run', run.id, 'running'],
      ['run', run.id, 'finished'],
    ])
    const last = JSON.parse(seen.at(-1)?.data as string)
    assert.equal(last.result.status, 'ok')
    assert.deepEqual(last.cmd, ['sh', '-c', 'echo fed'])
    assert.equal(last.keyId, keys.alice.id)
    assert.deepEqual(last.metadata, { name: 'fed' })
    assert.ok(!('stdout' in last.result) && !('output' in last.result), 'a summary: no output')
    assert.equal((await call(`/v1/runs/${run.id}`, { method: 'DELETE', key: keys.alice.key })).status, 204)
    const removed = await feed.next()
    assert.deepEqual([removed.event, JSON.parse(removed.data)], ['removed', { id: run.id }])
    await feed.close()
  })

  it('shows a key its own runs only, an admin every key’s; needs runs:read', async () => {
    const bob = reader(await call('/v1/runs/events', { key: keys.bob.key }))
    const all = reader(await call('/v1/runs/events'))
    assert.equal((await bob.next()).event, 'sync')
    assert.equal((await all.next()).event, 'sync')
    const alices = await submit(keys.alice.key, { cmd: ['true'], wait: '20s' })
    const bobs = await submit(keys.bob.key, { cmd: ['true'], wait: '20s' })
    const adminSaw = await all.until(
      (m) => JSON.parse(m.data).id === bobs.id && JSON.parse(m.data).state === 'finished',
    )
    assert.ok(
      adminSaw.some((m) => JSON.parse(m.data).id === alices.id),
      'the admin sees alice’s run',
    )
    const bobSaw = await bob.until((m) => JSON.parse(m.data).state === 'finished')
    assert.ok(
      bobSaw.every((m) => JSON.parse(m.data).id === bobs.id),
      'bob sees only his own',
    )
    await bob.close()
    await all.close()
    const writer = await call('/v1/runs/events', { key: keys.writer.key })
    assert.equal(writer.status, 403)
    assert.equal((await errorOf(writer)).code, 'forbidden')
    assert.equal((await app.request('/v1/runs/events')).status, 401)
  })

  it('resumes after the last event seen with nothing missed; syncs after a restart’s id; refuses a malformed one', async () => {
    const first = reader(await call('/v1/runs/events', { key: keys.alice.key }))
    const sync = await first.next()
    await first.close()
    // Changes made while no stream was open.
    const run = await submit(keys.alice.key, { cmd: ['true'], wait: '20s' })
    const resumed = reader(
      await call('/v1/runs/events', { key: keys.alice.key, headers: { 'last-event-id': String(sync.id) } }),
    )
    const got = await resumed.until((m) => m.event === 'run' && JSON.parse(m.data).state === 'finished')
    assert.ok(
      got.every((m) => m.event === 'run' && JSON.parse(m.data).id === run.id),
      'replayed, not synced',
    )
    assert.deepEqual(
      got.map((m) => JSON.parse(m.data).state),
      ['queued', 'running', 'finished'],
    )
    await resumed.close()
    const other = reader(
      await call('/v1/runs/events', { key: keys.alice.key, headers: { 'last-event-id': '0123456789ab-4' } }),
    )
    assert.equal((await other.next()).event, 'sync')
    await other.close()
    const bad = await call('/v1/runs/events', { key: keys.alice.key, headers: { 'last-event-id': '<x>' } })
    assert.equal(bad.status, 400)
    assert.equal((await errorOf(bad)).field, 'Last-Event-ID')
  })

  it('counts the feed among the key’s event streams, and ends it when the key is revoked', async () => {
    const made = await call('/v1/keys', {
      method: 'POST',
      body: JSON.stringify({ name: 'short-lived', scopes: ['runs:read'] }),
    })
    const { id, key } = (await made.json()) as { id: string; key: string }
    const one = reader(await call('/v1/runs/events', { key }))
    const two = reader(await call('/v1/runs/events', { key }))
    await one.next()
    await two.next()
    const three = await call('/v1/runs/events', { key })
    assert.equal(three.status, 429)
    assert.ok(Number(three.headers.get('retry-after')) >= 1)
    assert.equal((await call(`/v1/keys/${id}`, { method: 'DELETE' })).status, 204)
    assert.equal(await one.ended(), true, 'the first stream ended at the revocation')
    assert.equal(await two.ended(), true, 'the second too')
  })

  it('shows a command redacted by the run’s own redaction and the key’s secrets, then cut', async () => {
    const long = 'x'.repeat(5000)
    const run = await submit(keys.alice.key, {
      cmd: ['echo', 'tok-alice-secret-42', 'pw=hunter22', `MY_TOKEN=${'v'.repeat(8)}`, long],
      options: { redact: ['hunter22'], env: { MY_TOKEN: 'v'.repeat(8) } },
      wait: '20s',
    })
    const cmd = run.cmd as string[]
    assert.deepEqual(cmd.slice(0, 4), ['echo', '[REDACTED]', 'pw=[REDACTED]', 'MY_TOKEN=[REDACTED]'])
    assert.ok(cmd.join(' ').length <= 1001 + 3, `cut: ${cmd.join(' ').length}`)
    assert.match(cmd.at(-1) as string, /^x+…$/)
    // The run ran its own command, whole.
    const out = await call(`/v1/runs/${run.id}/output?stream=stdout`, { key: keys.alice.key })
    assert.ok((await out.text()).endsWith(`${long}\n`), 'every x of its last argument')
    const listed = (await (await call('/v1/runs?limit=5', { key: keys.alice.key })).json()) as {
      runs: Json[]
    }
    assert.deepEqual(listed.runs.find((r) => r.id === run.id)?.cmd, cmd)
  })

  it('shows a run’s request on its page: limits in force, names, never a secret value', async () => {
    const run = await submit(keys.alice.key, {
      cmd: ['sh', '-c', 'true'],
      files: [{ path: 'a/tok-alice-secret-42.txt', content: 'TOP SECRET CONTENT' }],
      collect: ['out/*'],
      stdin: 'some stdin',
      options: {
        limits: { wallTimeMs: '5s' },
        env: { PLAIN: 'plain-value', DB_PASSWORD: 'pw-value-1234' },
        redact: ['redact-me-please'],
        network: { allow: ['api.example.com'] },
      },
      webhook: { url: 'https://hooks.example.com/t/very-secret-token' },
    })
    const res = await call(`/v1/runs/${run.id}/request`, { key: keys.alice.key })
    assert.equal(res.status, 200)
    const text = await res.clone().text()
    for (const secret of [
      'plain-value',
      'pw-value-1234',
      'redact-me-please',
      'TOP SECRET',
      'very-secret-token',
      'tok-alice-secret-42',
      'some stdin',
    ])
      assert.ok(!text.includes(secret), `${secret} is not shown: ${text}`)
    const shown = (await res.json()) as Json & { limits: Json; files: Json[] }
    assert.equal(shown.limits.wallTimeMs, 5000)
    assert.equal(shown.limits.cpuTimeMs, 30_000, 'the default for the rest')
    assert.equal(shown.limits.memoryBytes, 512 * 1024 * 1024, 'min(default, ceiling)')
    assert.deepEqual(shown.env, ['DB_PASSWORD', 'PLAIN'])
    assert.equal(shown.redact, 1)
    assert.deepEqual(shown.files, [{ path: 'a/[REDACTED].txt', bytes: 18, mode: null }])
    assert.deepEqual(shown.stdin, { kind: 'text', bytes: 10 })
    assert.equal(shown.webhook, true)
    assert.deepEqual((shown.network as Json).allow, ['api.example.com'])
    assert.deepEqual((shown.network as Json).deny, ['bad.example.com'], "the key's deny is added")
    // An admin reads it (redacted by the run's key's secrets); another key finds no such run.
    assert.equal((await call(`/v1/runs/${run.id}/request`)).status, 200)
    assert.equal((await call(`/v1/runs/${run.id}/request`, { key: keys.bob.key })).status, 404)
    assert.equal((await call(`/v1/runs/${run.id}/request`, { key: keys.writer.key })).status, 403)
    assert.equal((await call('/v1/runs/run_nope/request')).status, 404)
  })

  it('runs a run again with its whole stored request, for its own key only', async () => {
    const run = await submit(keys.alice.key, {
      cmd: ['sh', '-c', 'cat in.txt; cat; echo "$API_TOKEN"'],
      files: [{ path: 'in.txt', content: 'from-file\n' }],
      stdin: 'from-stdin\n',
      metadata: { name: 'again' },
      wait: '20s',
    })
    const res = await call(`/v1/runs/${run.id}/rerun`, { method: 'POST', key: keys.alice.key })
    assert.equal(res.status, 201, await res.clone().text())
    const again = (await res.json()) as Json
    assert.notEqual(again.id, run.id)
    assert.equal(res.headers.get('location'), `/v1/runs/${again.id}`)
    assert.deepEqual(again.metadata, { name: 'again' })
    const done = (await (
      await call(`/v1/runs/${again.id}?wait=20s`, { key: keys.alice.key })
    ).json()) as Json & {
      result: Json
    }
    assert.equal(done.result.stdout, 'from-file\nfrom-stdin\n[REDACTED]\n', 'files, stdin and secrets again')
    // An admin reads it but may not make it with the admin's key; another key finds no such run.
    const byAdmin = await call(`/v1/runs/${run.id}/rerun`, { method: 'POST' })
    assert.equal(byAdmin.status, 403)
    assert.match(String((await errorOf(byAdmin)).message), /only the key that made it/)
    assert.equal((await call(`/v1/runs/${run.id}/rerun`, { method: 'POST', key: keys.bob.key })).status, 404)
    assert.equal(
      (await call(`/v1/runs/${run.id}/rerun`, { method: 'POST', key: keys.reader.key })).status,
      403,
    )
    // A key that may only write is told the new run's id, nothing of it.
    const mine = await submit(keys.writer.key, { cmd: ['true'] })
    const written = await call(`/v1/runs/${mine.id}/rerun`, { method: 'POST', key: keys.writer.key })
    assert.equal(written.status, 201)
    assert.deepEqual(Object.keys((await written.json()) as Json), ['id'])
  })

  it('tells a key what it may ask: its limits’ defaults and most, its network, no secret value', async () => {
    const me = (await (await call('/v1/keys/me', { key: keys.alice.key })).json()) as Json & {
      allowance: { limits: Record<string, Json>; network: Json }
    }
    assert.equal(me.id, keys.alice.id)
    assert.equal(me.name, 'alice')
    assert.deepEqual(me.secrets, ['API_TOKEN'])
    assert.ok(!JSON.stringify(me).includes('tok-alice-secret-42'))
    assert.deepEqual(me.allowance.limits.wallTimeMs, { default: 20_000, max: 20_000 })
    assert.deepEqual(me.allowance.limits.memoryBytes, { default: 512 * 1024 * 1024, max: 1024 ** 3 })
    assert.deepEqual(me.allowance.limits.maxOutputBytes, { default: 1024 * 1024, max: 16 * 1024 * 1024 })
    assert.deepEqual(me.allowance.network.modes, ['none', 'allow'])
    assert.deepEqual((me.allowance.network.allow as Json).allow, ['*.example.com', 'api.test:443'])
    const bob = (await (await call('/v1/keys/me', { key: keys.bob.key })).json()) as Json & {
      allowance: { network: Json }
    }
    assert.deepEqual(bob.allowance.network, { modes: ['none', 'allow'], allow: 'public' })
    const root = (await (await call('/v1/keys/me')).json()) as Json & { allowance: { network: Json } }
    assert.deepEqual(root.allowance.network, { modes: ['none'], allow: null }, 'no network ceiling: none')
    const writer = await call('/v1/keys/me', { key: keys.writer.key })
    assert.equal(writer.status, 200, 'any key may know itself')
    assert.equal((await app.request('/v1/keys/me')).status, 401)
  })

  it('filters the list by key for an admin; another key lists its own only', async () => {
    const bobs = await submit(keys.bob.key, { cmd: ['true'], metadata: { by: 'key-filter' }, wait: '20s' })
    await submit(keys.alice.key, { cmd: ['true'], metadata: { by: 'key-filter' }, wait: '20s' })
    const list = async (query: string, key = admin) =>
      ((await (await call(`/v1/runs?metadata.by=key-filter&${query}`, { key })).json()) as { runs: Json[] })
        .runs
    const onlyBob = await list(`key=${keys.bob.id}`)
    assert.deepEqual(
      onlyBob.map((r) => r.id),
      [bobs.id],
    )
    assert.equal((await list('')).length, 2)
    assert.deepEqual(await list(`key=${keys.bob.id}`, keys.alice.key), [], "alice may not list bob's")
    assert.equal((await list(`key=${keys.alice.id}`, keys.alice.key)).length, 1)
  })
})
