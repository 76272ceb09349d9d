// `cordon serve` as an operator runs it: the built CLI, real HTTP on loopback, real runs; `cordon keys` on
// the same data dir while it serves; SIGTERM drains.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { parseSse } from '../../src/client/client.js'
import { SIGNATURE_HEADER, verifyWebhook } from '../../src/service/webhook.js'
import { type Served, startServe, tempDir } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))

const serve = startServe

const api =
  (s: Served, key: string) =>
  (path: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers)
    headers.set('authorization', `Bearer ${key}`)
    return fetch(`${s.url}${path}`, { ...init, headers })
  }

interface SseEvent {
  id: string
  event: string
  data: string
}

/** Reads SSE events from `res` (the client's parser) until `stopAfter` of them came, or the stream ended. */
async function readEvents(res: Response, stopAfter = Number.POSITIVE_INFINITY): Promise<SseEvent[]> {
  const events: SseEvent[] = []
  for await (const m of parseSse(res.body as ReadableStream<Uint8Array>)) {
    if (m.id === null) continue
    events.push({ id: m.id, event: m.event, data: m.data })
    if (events.length >= stopAfter) break
  }
  return events
}

describe('cordon serve', { timeout: 300_000 }, () => {
  it('prints the admin key on the first start only, and answers with it over loopback', async () => {
    const dir = tempDir('cordon-serve-')
    const first = await serve(dir)
    assert.match(first.url, /^http:\/\/127\.0\.0\.1:\d+$/)
    assert.ok(first.adminKey, first.stdout())
    const call = api(first, first.adminKey)
    assert.equal((await fetch(`${first.url}/v1/runs`)).status, 401)
    const res = await call('/v1/runs', {
      method: 'POST',
      body: JSON.stringify({ cmd: ['echo', 'served'], wait: '30s' }),
    })
    assert.equal(res.status, 201)
    const run = (await res.json()) as { id: string; result: { status: string; stdout: string } }
    assert.equal(run.result.status, 'ok')
    assert.equal(run.result.stdout, 'served\n')
    const doc = (await (await fetch(`${first.url}/openapi.json`)).json()) as {
      paths: Record<string, unknown>
    }
    assert.ok(doc.paths['/v1/runs/{id}/events'])
    first.child.kill('SIGTERM')
    assert.equal(await first.exited, 0)

    const second = await serve(dir)
    assert.equal(second.adminKey, null, 'the admin key is shown once')
    const again = (await (await api(second, first.adminKey)(`/v1/runs/${run.id}`)).json()) as { id: string }
    assert.equal(again.id, run.id, 'runs outlive the server')
    second.child.kill('SIGTERM')
    assert.equal(await second.exited, 0)
  })

  /** What a key made without ceilings gets from a `cordon serve ARGS` for a run asking `limits`. */
  async function openKeyAsks(args: readonly string[], limits: Record<string, string>) {
    const s = await serve(tempDir('cordon-serve-'), [...args])
    try {
      const admin = api(s, s.adminKey as string)
      const made = (await (
        await admin('/v1/keys', {
          method: 'POST',
          body: JSON.stringify({ name: 'open', scopes: ['runs:write', 'runs:read'] }),
        })
      ).json()) as { key: string }
      const res = await api(s, made.key)('/v1/runs', {
        method: 'POST',
        body: JSON.stringify({ cmd: ['true'], options: { limits }, wait: '20s' }),
      })
      const body = (await res.json()) as { error?: { code: string; field: string; message: string } }
      return { status: res.status, body }
    } finally {
      s.child.kill('SIGTERM')
      assert.equal(await s.exited, 0)
    }
  }

  it("bounds a run's wall time at 1h for a key made without ceilings; --max-wall-time raises it", async () => {
    for (const [args, allowed] of [
      [[], false],
      [['--max-wall-time', '3h', '--max-collect', '8M', '--max-retention', '90d'], true],
    ] as const) {
      const { status, body } = await openKeyAsks(args, { wallTimeMs: '2h' })
      if (allowed) assert.equal(status, 201, JSON.stringify(body))
      else {
        assert.equal(status, 403)
        assert.equal(body.error?.field, 'options.limits.wallTimeMs')
        assert.match(body.error?.message ?? '', /this server's ceiling of 3600s/)
      }
    }
  })

  it("bounds a run's workspace by --max-workspace", async () => {
    const s = await serve(tempDir('cordon-serve-'), ['--max-workspace', '2M'])
    try {
      const res = await api(s, s.adminKey as string)('/v1/runs', {
        method: 'POST',
        body: JSON.stringify({
          cmd: [
            'sh',
            '-c',
            'i=0; while [ $i -lt 40 ]; do head -c 262144 /dev/zero >> big || break; i=$((i+1)); sleep 0.1; done; wc -c < big',
          ],
          options: { limits: { wallTimeMs: '60s' } },
          wait: '60s',
        }),
      })
      const run = (await res.json()) as { result: { status: string; stdout: string; stderr: string } }
      if (process.getuid?.() === 0) {
        // A tmpfs of 2 MiB: the write past it fails, ENOSPC.
        assert.equal(run.result.status, 'ok', JSON.stringify(run.result))
        assert.ok(Number(run.result.stdout) <= 2 * 1024 * 1024, run.result.stdout)
        assert.match(run.result.stderr, /No space left on device/)
      } else assert.equal(run.result.status, 'file-size', JSON.stringify(run.result))
    } finally {
      s.child.kill('SIGTERM')
      assert.equal(await s.exited, 0)
    }
  })

  it('bounds what a run makes the server hold, for a key made without ceilings; --max-output raises it', async () => {
    for (const [args, asked, allowed] of [
      [[], '1G', false],
      [[], '16M', true],
      [['--max-output', '64M'], '32M', true],
    ] as const) {
      const { status, body } = await openKeyAsks(args, { maxOutputBytes: asked })
      if (allowed) assert.equal(status, 201, JSON.stringify(body))
      else {
        assert.equal(status, 403)
        assert.equal(body.error?.code, 'over-ceiling')
        assert.equal(body.error?.field, 'options.limits.maxOutputBytes')
        assert.match(body.error?.message ?? '', /this server's ceiling of 16M/)
      }
    }
  })

  it('resumes a dropped event stream from Last-Event-ID with every event exactly once', async () => {
    const s = await serve(tempDir('cordon-serve-'))
    const call = api(s, s.adminKey as string)
    const script = 'for i in 1 2 3 4 5 6; do echo line$i; sleep 0.15; done'
    const { id } = (await (
      await call('/v1/runs', { method: 'POST', body: JSON.stringify({ cmd: ['sh', '-c', script] }) })
    ).json()) as { id: string }
    const abort = new AbortController()
    const first = await readEvents(await call(`/v1/runs/${id}/events`, { signal: abort.signal }), 3)
    abort.abort() // the connection drops mid-run
    assert.equal(first.length, 3)
    const last = first.at(-1)?.id as string
    const rest = await readEvents(await call(`/v1/runs/${id}/events`, { headers: { 'last-event-id': last } }))
    const all = [...first, ...rest]
    assert.deepEqual(
      all.map((e) => Number(e.id)),
      all.map((_, i) => i + 1),
      'each event once, in order',
    )
    assert.equal(all.at(-1)?.event, 'end')
    const text = all
      .filter((e) => e.event === 'output')
      .map((e) => (JSON.parse(e.data) as { data: string }).data)
      .join('')
    assert.equal(text, 'line1\nline2\nline3\nline4\nline5\nline6\n')
    s.child.kill('SIGTERM')
    assert.equal(await s.exited, 0)
  })

  it('refuses bodies in one error shape: malformed, unknown field, a server-only option, too large', async () => {
    const s = await serve(tempDir('cordon-serve-'))
    const call = api(s, s.adminKey as string)
    const post = (body: string) => call('/v1/runs', { method: 'POST', body })
    const malformed = await post('{')
    assert.equal(malformed.status, 400)
    assert.equal(((await malformed.json()) as { error: { code: string } }).error.code, 'invalid')
    const cwd = await post(JSON.stringify({ cmd: ['true'], options: { cwd: '/' } }))
    assert.equal(cwd.status, 403)
    assert.deepEqual(
      ((await cwd.json()) as { error: { code: string; field: string } }).error.field,
      'options.cwd',
    )
    const huge = await post(JSON.stringify({ cmd: ['true'], stdin: 'x'.repeat(9 * 1024 * 1024) }))
    assert.equal(huge.status, 413)
    assert.equal(((await huge.json()) as { error: { code: string } }).error.code, 'too-large')
    s.child.kill('SIGTERM')
    assert.equal(await s.exited, 0)
  })

  it('SIGTERM drains: readyz and new runs answer 503, the running run finishes, then exit 0', async () => {
    const dir = tempDir('cordon-serve-')
    const s = await serve(dir)
    const call = api(s, s.adminKey as string)
    const res = await call('/v1/runs', { method: 'POST', body: JSON.stringify({ cmd: ['sleep', '1.5'] }) })
    const { id } = (await res.json()) as { id: string }
    await call(`/v1/runs/${id}?wait=1s`) // started
    s.child.kill('SIGTERM')
    await new Promise((r) => setTimeout(r, 200))
    assert.equal((await fetch(`${s.url}/readyz`)).status, 503)
    const refused = await call('/v1/runs', { method: 'POST', body: JSON.stringify({ cmd: ['true'] }) })
    assert.equal(refused.status, 503)
    assert.ok(Number(refused.headers.get('retry-after')) >= 1)
    assert.equal(await s.exited, 0)
    const back = await serve(dir)
    const run = (await (await api(back, s.adminKey as string)(`/v1/runs/${id}`)).json()) as {
      result: { status: string }
    }
    assert.equal(run.result.status, 'ok', 'drained, not interrupted')
    back.child.kill('SIGTERM')
    assert.equal(await back.exited, 0)
  })

  it('cordon keys creates, lists and revokes keys on the data dir of a running server', async () => {
    const dir = tempDir('cordon-serve-')
    const s = await serve(dir)
    const keys = (...args: string[]) =>
      spawnSync(process.execPath, [CLI, 'keys', ...args, '--data-dir', dir], {
        encoding: 'utf8',
        timeout: 30_000,
      })
    const made = keys('create', '--name', 'ci', '--json')
    assert.equal(made.status, 0, made.stderr)
    const key = JSON.parse(made.stdout) as { id: string; key: string; name: string }
    assert.equal(key.name, 'ci')
    const call = api(s, key.key)
    assert.equal((await call('/v1/runs')).status, 200)
    const list = keys('list', '--json')
    assert.ok((JSON.parse(list.stdout) as { id: string }[]).some((k) => k.id === key.id))
    assert.doesNotMatch(list.stdout, /hash|webhookSecret/)
    assert.equal(keys('revoke', key.id).status, 0)
    assert.equal((await call('/v1/runs')).status, 401)
    const unknown = keys('revoke', 'key_nope')
    assert.equal(unknown.status, 125)
    assert.match(unknown.stderr, /^cordon: .*key_nope/)
    s.child.kill('SIGTERM')
    assert.equal(await s.exited, 0)
  })

  it("POSTs a finished run to its webhook, signed with its key's webhook secret", async () => {
    let port = 0
    // Wrapped: a promise resolved with a promise would wait for the webhook itself.
    const { got } = await new Promise<{ got: Promise<{ body: string; signature: string }> }>((listening) => {
      const received = new Promise<{ body: string; signature: string }>((resolve) => {
        const receiver = createServer((req, res) => {
          let body = ''
          req.setEncoding('utf8').on('data', (s: string) => (body += s))
          req.on('end', () => {
            res.end('ok')
            receiver.close()
            resolve({ body, signature: String(req.headers[SIGNATURE_HEADER.toLowerCase()]) })
          })
        })
        receiver.listen(0, '127.0.0.1', () => {
          port = (receiver.address() as AddressInfo).port
          listening({ got: received })
        })
      })
    })
    const dir = tempDir('cordon-serve-')
    const s = await serve(dir, ['--allow-private-webhooks'])
    const made = spawnSync(
      process.execPath,
      [CLI, 'keys', 'create', '--name', 'hooks', '--json', '--data-dir', dir],
      {
        encoding: 'utf8',
      },
    )
    const key = JSON.parse(made.stdout) as { key: string; webhookSecret: string }
    const res = await api(s, key.key)('/v1/runs', {
      method: 'POST',
      body: JSON.stringify({ cmd: ['echo', 'hooked'], webhook: { url: `http://127.0.0.1:${port}/hook` } }),
    })
    assert.equal(res.status, 201)
    const { id } = (await res.json()) as { id: string }
    const { body, signature } = await got
    assert.ok(verifyWebhook(key.webhookSecret, body, signature), 'signed with the key’s secret')
    const run = JSON.parse(body) as { id: string; result: { status: string }; request?: unknown }
    assert.equal(run.id, id)
    // The run's summary: its output is the API's to read.
    assert.equal(run.result.status, 'ok')
    assert.ok(!('stdout' in run.result))
    assert.ok(!('request' in run))
    s.child.kill('SIGTERM')
    assert.equal(await s.exited, 0)
  })
})
