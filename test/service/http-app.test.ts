// The HTTP API in process (hono's app.request), over the real service: its store, queue and runs.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { parseSse } from '../../src/client/client.js'
import { run as runLocal } from '../../src/index.js'
import { createApp } from '../../src/service/http/app.js'
import { createService } from '../../src/service/service.js'
import { tempDir } from '../helpers.js'

type Json = Record<string, unknown>

describe('http app', () => {
  let created: Awaited<ReturnType<typeof createService>>
  let app: ReturnType<typeof createApp>['app']
  let admin: string

  before(async () => {
    created = await createService({ dataDir: tempDir('cordon-http-'), concurrency: 2, maxQueued: 20 })
    app = createApp(created.service, { maxBodyBytes: 64 * 1024, heartbeatMs: 200 }).app
    admin = created.adminKey as string
    assert.match(admin, /^cordon_/)
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

  it('refuses a request without a key, or with an unknown one (401, the one error shape)', async () => {
    for (const key of [null, 'cordon_nope']) {
      const res = await call('/v1/runs', { key })
      assert.equal(res.status, 401)
      const error = await errorOf(res)
      assert.equal(error.code, 'unauthorized')
      assert.equal(typeof error.message, 'string')
    }
  })

  it('submits a run and answers once it finished (wait), then reads it back', async () => {
    const res = await post('/v1/runs', { cmd: ['sh', '-c', 'echo hi'], wait: '30s', metadata: { job: 'a' } })
    assert.equal(res.status, 201)
    const run = (await res.json()) as Json & { result: Json }
    assert.equal(res.headers.get('location'), `/v1/runs/${run.id}`)
    assert.equal(run.state, 'finished')
    assert.equal(run.result.status, 'ok', JSON.stringify(run.result))
    assert.equal(run.result.stdout, 'hi\n')
    assert.deepEqual(run.metadata, { job: 'a' })
    assert.ok(!('request' in run), 'never the request')
    // Of it, only its command as shown, and which key made it.
    assert.deepEqual(run.cmd, ['sh', '-c', 'echo hi'])
    assert.match(String(run.keyId), /^key_/)
    const again = (await (await call(`/v1/runs/${run.id}`)).json()) as Json
    assert.deepEqual(again, run)
    const out = await call(`/v1/runs/${run.id}/output?stream=stdout`)
    assert.equal(out.headers.get('content-type'), 'application/octet-stream')
    assert.equal(await out.text(), 'hi\n')
  })

  it('long-polls a run with ?wait= until it finished', async () => {
    const res = await post('/v1/runs', { cmd: ['sleep', '0.3'] })
    const { id } = (await res.json()) as Json
    const run = (await (await call(`/v1/runs/${id}?wait=20s`)).json()) as Json & { result: Json }
    assert.equal(run.state, 'finished')
    assert.equal(run.result.status, 'ok')
  })

  it('lists runs a page at a time, by label and state', async () => {
    const ids: string[] = []
    for (let i = 0; i < 3; i++) {
      const res = await post('/v1/runs', { cmd: ['true'], metadata: { batch: 'list-1' }, wait: '20s' })
      ids.push((await res.json()).id)
    }
    const seen: string[] = []
    let cursor: string | null = null
    do {
      const q: string = `/v1/runs?metadata.batch=list-1&state=finished&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`
      const page = (await (await call(q)).json()) as { runs: Json[]; nextCursor: string | null }
      assert.ok(page.runs.length <= 2)
      for (const r of page.runs) seen.push(r.id as string)
      cursor = page.nextCursor
    } while (cursor)
    assert.deepEqual([...seen].sort(), [...ids].sort())
    const bad = await call('/v1/runs?limit=0')
    assert.equal(bad.status, 400)
    assert.equal((await errorOf(bad)).field, 'limit')
    const unknown = await call('/v1/runs?colour=red')
    assert.equal(unknown.status, 400)
    assert.equal((await errorOf(unknown)).field, 'colour')
    // A run holds at most 32 labels: a filter naming more can match nothing, and is refused.
    const many = Array.from({ length: 33 }, (_, i) => `metadata.k${i}=v`).join('&')
    const tooMany = await call(`/v1/runs?${many}`)
    assert.equal(tooMany.status, 400)
    assert.equal((await errorOf(tooMany)).field, 'metadata')
  })

  it('says what is wrong with a body in one shape: malformed JSON, an unknown field, a server-only option, a huge body', async () => {
    const malformed = await post('/v1/runs', '{"cmd": [')
    assert.equal(malformed.status, 400)
    assert.equal((await errorOf(malformed)).code, 'invalid')

    const unknown = await post('/v1/runs', { cmd: ['true'], bogus: 1 })
    assert.equal(unknown.status, 400)
    const u = await errorOf(unknown)
    assert.equal(u.code, 'invalid')
    assert.match(String(u.message), /bogus/)

    const cwd = await post('/v1/runs', { cmd: ['true'], options: { cwd: '/etc' } })
    assert.equal(cwd.status, 403)
    const c = await errorOf(cwd)
    assert.equal(c.code, 'forbidden-option')
    assert.equal(c.field, 'options.cwd')

    const huge = await post('/v1/runs', { cmd: ['true'], stdin: 'x'.repeat(128 * 1024) })
    assert.equal(huge.status, 413)
    const h = await errorOf(huge)
    assert.equal(h.code, 'too-large')
    assert.doesNotMatch(JSON.stringify(h), /at .*\.ts:\d+/, 'no stack trace')

    const hook = await post('/v1/runs', { cmd: ['true'], webhook: { url: 'http://127.0.0.1:9/hook' } })
    assert.equal(hook.status, 400, 'a webhook to the host itself is refused at once')
    assert.equal((await errorOf(hook)).field, 'webhook.url')

    const none = await call('/v1/runs/run_missing')
    assert.equal(none.status, 404)
    assert.equal((await errorOf(none)).code, 'not-found')
  })

  it('streams events as SSE, and resumes after Last-Event-ID with each event once', async () => {
    const res = await post('/v1/runs', {
      cmd: ['sh', '-c', 'printf "a\\303"; sleep 0.1; printf "\\251b"'],
      wait: '20s',
    })
    const { id } = (await res.json()) as Json
    const read = async (headers: Record<string, string> = {}, query = '') => {
      const r = await call(`/v1/runs/${id}/events${query}`, { headers })
      assert.equal(r.status, 200)
      assert.match(r.headers.get('content-type') ?? '', /^text\/event-stream/)
      return await eventsOf(await r.text())
    }
    const all = await read()
    assert.deepEqual(
      all.map((e) => e.id),
      all.map((_, i) => String(i + 1)),
      'numbered from 1, no gap',
    )
    assert.equal(all.at(-1)?.event, 'end')
    const text = all
      .filter((e) => e.event === 'output')
      .map((e) => (JSON.parse(e.data) as { data: string }).data)
      .join('')
    assert.equal(text, 'a\u00e9b', 'a character split across chunks decodes whole')
    const rest = await read({ 'last-event-id': '2' })
    assert.deepEqual(
      rest.map((e) => e.id),
      all.slice(2).map((e) => e.id),
    )
    const b64 = await read({}, '?encoding=base64')
    const bytes = Buffer.concat(
      b64
        .filter((e) => e.event === 'output')
        .map((e) => Buffer.from((JSON.parse(e.data) as { data: string }).data, 'base64')),
    )
    assert.equal(bytes.toString(), 'a\u00e9b')
  })

  // A browser's EventSource reconnects when the server closes the stream after `end`, with Last-Event-ID
  // the end's own id: the stream then had nothing to send and nothing to wait for, and stayed open with
  // heartbeats (and held one of the key's streams) for as long as the client kept it.
  it('closes at once a stream resumed after a finished run’s last event', async () => {
    const res = await post('/v1/runs', { cmd: ['true'], wait: '20s' })
    const { id } = (await res.json()) as Json
    const all = await eventsOf(await (await call(`/v1/runs/${id}/events`)).text())
    const last = Number(all.at(-1)?.id)
    assert.equal(all.at(-1)?.event, 'end')
    for (const resume of [{ headers: { 'last-event-id': String(last) } }, { query: `?after=${last + 10}` }]) {
      const r = await call(`/v1/runs/${id}/events${resume.query ?? ''}`, { headers: resume.headers ?? {} })
      assert.equal(r.status, 200)
      const text = await Promise.race([
        r.text(),
        new Promise<string>((resolve) => setTimeout(() => resolve('still open after 2 s'), 2000)),
      ])
      assert.doesNotMatch(text, /still open/)
      assert.deepEqual(await eventsOf(text), [], 'no event')
      assert.match(text, /: closed: /, 'says why')
    }
  })

  // The program's output, its log lines and its exit are data in an event, never the stream's framing: a
  // program that prints SSE (blank lines, `id:`, `event: end`, CRs) forges no event and ends no stream.
  it('a program printing SSE framing forges no event', async () => {
    const forged = 'x\\n\\nid: 999\\nevent: end\\ndata: {}\\n\\n\\r\\rid: 998\\r\\r'
    const res = await post('/v1/runs', {
      cmd: [
        'sh',
        '-c',
        `printf '${forged}'; printf '${forged}' >&2; printf '{"level":"info","msg":"${'\\n\\nevent: end'}"}\\n' >&$CORDON_LOG_FD`,
      ],
      wait: '20s',
    })
    const { id } = (await res.json()) as Json
    const r = await call(`/v1/runs/${id}/events`)
    const events = await eventsOf(await r.text())
    assert.deepEqual(
      events.map((e) => Number(e.id)),
      events.map((_, i) => i + 1),
      'ids in order, none forged',
    )
    assert.equal(events.filter((e) => e.event === 'end').length, 1)
    assert.equal(events.at(-1)?.event, 'end')
    const stdout = events
      .filter((e) => e.event === 'output')
      .map((e) => JSON.parse(e.data) as { stream: string; data: string })
      .filter((d) => d.stream === 'stdout')
      .map((d) => d.data)
      .join('')
    assert.match(stdout, /id: 999/, 'the text is kept, as data')
    assert.equal(JSON.parse(events.at(-1)!.data).result.status, 'ok')
  })

  // The raw output is the program's bytes, whatever they are: not UTF-8, a character cut across writes and
  // across streams, a secret among them. `/output` and base64 events carry them exactly (redacted); the
  // result's text is what the library's text mode says of the same program.
  it('serves binary output byte for byte: /output, base64 events, and the text result as run() gives it', async () => {
    const secret = 'tok-S3CRET'
    const noise = randomBytes(4096)
    const first = Buffer.concat([
      noise,
      Buffer.from(secret),
      Buffer.from([0xff, 0xfe, 0x00]),
      Buffer.from('ok\xc3', 'latin1'),
    ])
    // Each stream's last bytes are ASCII: redaction holds back a secret's length of each stream's end until
    // the other stream's output is out, counted in bytes here and in characters in text mode.
    const second = Buffer.from('\xa9 and the tail\n', 'latin1')
    const script = 'cat a.bin; sleep 0.1; cat b.bin; sleep 0.1; cat a.bin b.bin >&2'
    const res = await post('/v1/runs', {
      cmd: ['sh', '-c', script],
      files: [
        { path: 'a.bin', content: first.toString('base64'), encoding: 'base64' },
        { path: 'b.bin', content: second.toString('base64'), encoding: 'base64' },
      ],
      options: { redact: [secret] },
      wait: '30s',
    })
    const run = (await res.json()) as Json & { id: string; result: Record<string, unknown> }
    assert.equal(run.result.status, 'ok', JSON.stringify(run.result))
    // The library's own runs of the same program and bytes: as bytes, and in its text mode.
    const dir = tempDir('cordon-bytes-', { mode: 0o777 })
    writeFileSync(path.join(dir, 'a.bin'), first)
    writeFileSync(path.join(dir, 'b.bin'), second)
    const asBytes = await runLocal(['sh', '-c', script], { cwd: dir, redact: [secret], encoding: 'buffer' })
    const local = await runLocal(['sh', '-c', script], { cwd: dir, redact: [secret] })
    assert.equal(local.status, 'ok')
    const { stdout, stderr } = asBytes
    assert.ok(stdout.subarray(0, noise.length).equals(noise), 'the bytes as written')
    assert.ok(!stdout.includes(secret) && !stderr.includes(secret), 'the secret redacted')
    const raw = async (query: string) => {
      const r = await call(`/v1/runs/${run.id}/output?${query}`)
      assert.equal(r.status, 200)
      assert.equal(r.headers.get('content-type'), 'application/octet-stream')
      return Buffer.from(await r.arrayBuffer())
    }
    assert.ok((await raw('stream=stdout')).equals(stdout), 'stdout byte for byte')
    assert.ok((await raw('stream=stderr')).equals(stderr), 'stderr byte for byte')
    assert.ok((await raw('stream=output')).equals(asBytes.output), 'both, in order')
    assert.ok((await raw('stream=stdout&offset=4000&limit=200')).equals(stdout.subarray(4000, 4200)))
    assert.ok((await raw('stream=output&offset=4100&limit=100000')).equals(asBytes.output.subarray(4100)))
    assert.equal((await raw('stream=stdout&offset=999999')).length, 0)

    const events = async (query: string) => {
      const r = await call(`/v1/runs/${run.id}/events${query}`)
      return (await eventsOf(await r.text()))
        .filter((e) => e.event === 'output')
        .map((e) => JSON.parse(e.data) as { stream: string; data: string; offset: number; bytes: number })
    }
    const b64 = await events('?encoding=base64')
    const joined = (stream: string) =>
      Buffer.concat(b64.filter((e) => e.stream === stream).map((e) => Buffer.from(e.data, 'base64')))
    assert.ok(joined('stdout').equals(stdout), 'base64 events put together are the bytes')
    assert.ok(joined('stderr').equals(stderr))
    for (const e of b64) assert.equal(Buffer.from(e.data, 'base64').length, e.bytes)
    const text = await events('')
    const textOf = (stream: string) =>
      text
        .filter((e) => e.stream === stream)
        .map((e) => e.data)
        .join('')

    assert.equal(run.result.stdout, local.stdout, 'stdout as text mode decodes it')
    assert.equal(run.result.stderr, local.stderr)
    assert.equal(run.result.output, local.output)
    assert.equal(run.result.outputBytes, local.outputBytes)
    assert.ok(!String(run.result.output).includes(secret))
    assert.ok(String(run.result.stdout).includes('\ufffd'), 'invalid UTF-8 decoded as text mode does')
    assert.ok(
      String(run.result.stdout).endsWith('ok\u00e9 and the tail\n'),
      'a character cut across writes decodes whole',
    )
    assert.equal(textOf('stdout'), local.stdout, 'text events put together are the text')
    assert.equal(textOf('stderr'), local.stderr)
  })

  it('serves the files a run collected', async () => {
    const res = await post('/v1/runs', {
      cmd: ['sh', '-c', 'mkdir -p out && echo made > out/a.txt'],
      collect: ['out/*.txt'],
      wait: '20s',
    })
    const run = (await res.json()) as Json & { result: Json }
    assert.equal(run.result.status, 'ok', JSON.stringify(run.result))
    const list = (await (await call(`/v1/runs/${run.id}/files`)).json()) as { files: string[] }
    assert.deepEqual(list.files, ['out/a.txt'])
    const file = await call(`/v1/runs/${run.id}/files/out/a.txt`)
    assert.equal(file.status, 200)
    assert.equal(await file.text(), 'made\n')
    const outside = await call(`/v1/runs/${run.id}/files/..%2F..%2Fcordon.db`)
    assert.equal(outside.status, 404)
  })

  it('deletes a finished run, and keeps it while it runs (409)', async () => {
    const res = await post('/v1/runs', { cmd: ['sleep', '5'] })
    const { id } = (await res.json()) as Json
    const busy = await call(`/v1/runs/${id}`, { method: 'DELETE' })
    assert.equal(busy.status, 409)
    assert.equal((await errorOf(busy)).code, 'conflict')
    const canceled = await post(`/v1/runs/${id}/cancel`, '')
    assert.equal(canceled.status, 200)
    const done = (await (await call(`/v1/runs/${id}?wait=20s`)).json()) as Json & { result: Json }
    assert.equal(done.result.status, 'canceled')
    assert.equal((await call(`/v1/runs/${id}`, { method: 'DELETE' })).status, 204)
    assert.equal((await call(`/v1/runs/${id}`)).status, 404)
  })

  it('feeds stdin written later, then closed', async () => {
    const res = await post('/v1/runs', { cmd: ['cat'], stdin: 'open' })
    const { id } = (await res.json()) as Json
    assert.equal((await call(`/v1/runs/${id}/stdin`, { method: 'POST', body: 'fed\n' })).status, 204)
    assert.equal((await call(`/v1/runs/${id}/stdin`, { method: 'DELETE' })).status, 204)
    const run = (await (await call(`/v1/runs/${id}?wait=20s`)).json()) as Json & { result: Json }
    assert.equal(run.result.stdout, 'fed\n')
  })

  it('creates, lists and revokes keys (admin); a key sees only its own runs', async () => {
    const made = await post('/v1/keys', { name: 'ci', scopes: ['runs:write', 'runs:read'] })
    assert.equal(made.status, 201)
    const key = (await made.json()) as Json
    assert.match(String(key.key), /^cordon_/)
    const list = (await (await call('/v1/keys')).json()) as { keys: Json[] }
    assert.ok(list.keys.some((k) => k.id === key.id))
    assert.ok(list.keys.every((k) => !('hash' in k) && !('webhookSecret' in k)))
    const theirs = await post('/v1/runs', { cmd: ['true'] }, key.key as string)
    assert.equal(theirs.status, 201)
    const mine = (await (await call('/v1/runs?limit=1000', { key: key.key as string })).json()) as {
      runs: Json[]
    }
    assert.equal(mine.runs.length, 1)
    assert.equal((await call('/v1/keys', { key: key.key as string })).status, 403)
    assert.equal((await call(`/v1/keys/${key.id}`, { method: 'DELETE' })).status, 204)
    assert.equal((await call('/v1/runs', { key: key.key as string })).status, 401)
  })

  it('refuses a wait a write-only key may not do before making the run, not after', async () => {
    // The run was made and the answer was 403: a client retrying the refusal made the run again.
    const made = (await (await post('/v1/keys', { name: 'writer', scopes: ['runs:write'] })).json()) as {
      key: string
    }
    const before = (await (await call('/v1/runs?limit=1000')).json()) as { runs: Json[] }
    const res = await post('/v1/runs', { cmd: ['true'], wait: '5s' }, made.key)
    assert.equal(res.status, 403)
    assert.equal((await errorOf(res)).field, 'wait')
    const after = (await (await call('/v1/runs?limit=1000')).json()) as { runs: Json[] }
    assert.equal(after.runs.length, before.runs.length, 'no run was made')
    assert.equal((await post('/v1/runs', { cmd: ['true'] }, made.key)).status, 201)
  })

  it('serves /healthz, /readyz, /metrics and an OpenAPI 3.1 document with every route', async () => {
    assert.equal((await app.request('/healthz')).status, 200)
    assert.equal((await app.request('/readyz')).status, 200)
    const metrics = await (await call('/metrics')).text()
    assert.match(metrics, /cordon_http_request_duration_seconds_bucket/)
    assert.match(metrics, /cordon_runs_finished_total\{status="ok",isolation="\w+"\} \d/)
    const doc = (await (await app.request('/openapi.json')).json()) as { openapi: string; paths: Json }
    assert.equal(doc.openapi, '3.1.0')
    const routes: Record<string, string[]> = {
      '/v1/runs': ['post', 'get'],
      '/v1/runs/{id}': ['get', 'delete'],
      '/v1/runs/{id}/cancel': ['post'],
      '/v1/runs/{id}/output': ['get'],
      '/v1/runs/{id}/stdin': ['post', 'delete'],
      '/v1/runs/{id}/events': ['get'],
      '/v1/runs/{id}/files': ['get'],
      '/v1/runs/{id}/files/{path}': ['get'],
      '/v1/keys': ['post', 'get'],
      '/v1/keys/{id}': ['delete'],
      '/healthz': ['get'],
      '/readyz': ['get'],
      '/metrics': ['get'],
      '/openapi.json': ['get'],
    }
    for (const [path, methods] of Object.entries(routes)) {
      for (const m of methods) assert.ok((doc.paths[path] as Json | undefined)?.[m], `${m} ${path}`)
    }
  })

  it('/metrics needs an admin key unless publicMetrics; /openapi.json needs none', async () => {
    const none = await app.request('/metrics')
    assert.equal(none.status, 401)
    assert.equal((await errorOf(none)).code, 'unauthorized')
    const made = (await (
      await post('/v1/keys', { name: 'metrics-user', scopes: ['runs:read'], ceilings: {} })
    ).json()) as { key: string }
    const user = await call('/metrics', { key: made.key })
    assert.equal(user.status, 403)
    assert.equal((await errorOf(user)).code, 'forbidden')
    assert.equal((await call('/metrics')).status, 200)
    assert.equal((await app.request('/openapi.json')).status, 200)
    const open = createApp(created.service, { publicMetrics: true }).app
    const res = await open.request('/metrics')
    assert.equal(res.status, 200)
    assert.match(await res.text(), /cordon_http_request_duration_seconds/)
  })

  it('drains: /readyz and new runs answer 503 with Retry-After', async () => {
    await created.service.drain()
    assert.equal((await app.request('/readyz')).status, 503)
    const res = await post('/v1/runs', { cmd: ['true'] })
    assert.equal(res.status, 503)
    assert.ok(Number(res.headers.get('retry-after')) >= 1)
    assert.equal((await errorOf(res)).code, 'draining')
  })
})

/** The events of an SSE text (comments skipped), by the client's parser. */
async function eventsOf(text: string): Promise<{ id: string; event: string; data: string }[]> {
  const out: { id: string; event: string; data: string }[] = []
  for await (const m of parseSse(new Response(text).body as ReadableStream<Uint8Array>)) {
    if (m.id !== null) out.push({ id: m.id, event: m.event, data: m.data })
  }
  return out
}
