// A red team's pass over the HTTP API, in process (hono's app.request) over the real service: bodies built
// to cost the one thread (nesting bombs), names that vanish (`__proto__`), query strings that try the
// parser, paths that try to leave a run's collected files for another tenant's, near-miss keys, the
// dashboard's Host and Origin games, and headers a client might hope the server honours (method
// override, CORS). Each attack is a test; what it found and what held is in NEWS.md.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { createApp } from '../../src/service/http/app.js'
import { MAX_JSON_DEPTH } from '../../src/service/http/body.js'
import { createService } from '../../src/service/service.js'
import { noNamespace, tempDir } from '../helpers.js'

type Json = Record<string, unknown>

describe('http red team', () => {
  let created: Awaited<ReturnType<typeof createService>>
  let app: ReturnType<typeof createApp>['app']
  let admin: string

  before(async () => {
    created = await createService({ dataDir: tempDir('cordon-redteam-'), concurrency: 2, maxQueued: 50 })
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
  const post = (path: string, body: string, key: string | null = admin) =>
    call(path, { method: 'POST', body, key })
  const errorOf = async (res: Response) => ((await res.json()) as { error: Json }).error
  const runCount = async () =>
    ((await (await call('/v1/runs?limit=1000')).json()) as { runs: unknown[] }).runs.length

  describe('bodies that cost the thread or vanish', () => {
    it(`refuses nesting past ${MAX_JSON_DEPTH} at once (8 MiB of [ held the thread 3.4 s)`, async () => {
      const n = 4 * 1024 * 1024 - 8
      for (const body of [
        '['.repeat(n) + ']'.repeat(n),
        '{"a":'.repeat(1_000_000) + '1' + '}'.repeat(1_000_000),
      ]) {
        const started = Date.now()
        const res = await post('/v1/runs', body)
        const ms = Date.now() - started
        assert.equal(res.status, 400)
        const error = await errorOf(res)
        assert.equal(error.field, 'body')
        assert.match(String(error.message), /deeper than 64/)
        assert.ok(ms < 2000, `${ms} ms`)
      }
      // Brackets inside strings are text, and a body at the bound is taken.
      const deepEnough = `{"cmd":["echo","${'['.repeat(1000)}"],"metadata":{"a":"${'{'.repeat(1000)}"}}`
      assert.equal((await post('/v1/runs', deepEnough)).status, 201)
      const atBound = `{"cmd":["true"],"webhook":${'['.repeat(MAX_JSON_DEPTH - 1)}${']'.repeat(MAX_JSON_DEPTH - 1)}}`
      assert.equal((await errorOf(await post('/v1/runs', atBound))).field, 'webhook', 'the schema judged it')
    })

    it('refuses a "__proto__" key, naming it, instead of dropping it (a label, an env variable, a secret)', async () => {
      const before = await runCount()
      const bodies: [string, string, string][] = [
        ['/v1/runs', '{"cmd":["true"],"metadata":{"__proto__":"x"}}', 'metadata.__proto__'],
        ['/v1/runs', '{"cmd":["env"],"options":{"env":{"__proto__":"x"}}}', 'options.env.__proto__'],
        ['/v1/runs', '{"cmd":["true"],"metadata":{"\\u005f_proto__":"x"}}', 'metadata.__proto__'],
        [
          '/v1/keys',
          '{"name":"k","scopes":["runs:write"],"secrets":{"__proto__":"s3cret"}}',
          'secrets.__proto__',
        ],
      ]
      for (const [path, body, field] of bodies) {
        const res = await post(path, body)
        assert.equal(res.status, 400, body)
        assert.equal((await errorOf(res)).field, field)
      }
      assert.equal(await runCount(), before, 'no run was made')
    })

    it('takes duplicate JSON keys as JSON.parse does, once: what is judged is what runs', async () => {
      const res = await post(
        '/v1/runs',
        '{"cmd":["sh","-c","echo first"],"cmd":["echo","second"],"wait":"20s"}',
      )
      assert.equal(res.status, 201)
      const run = (await res.json()) as { result?: { stdout: string } }
      if (!noNamespace) assert.equal(run.result?.stdout, 'second\n')
    })
  })

  describe('query strings', () => {
    it('filters on a label named __proto__ rather than dropping the filter', async () => {
      await post('/v1/runs', '{"cmd":["true"],"metadata":{"proto":"y"}}')
      const listed = (await (await call('/v1/runs?metadata.__proto__=x')).json()) as { runs: unknown[] }
      assert.deepEqual(listed.runs, [], 'no run has that label')
      const unknown = await call('/v1/runs?__proto__=x')
      assert.equal(unknown.status, 400)
      assert.equal((await errorOf(unknown)).field, '__proto__')
    })

    it('answers thousands of parameters, duplicates and odd escapes at once, never 500', async () => {
      const many = Array.from({ length: 1500 }, (_, i) => `p${i}=1`).join('&')
      const dup = Array.from({ length: 1500 }, () => 'limit=1').join('&')
      const metadata = Array.from({ length: 33 }, (_, i) => `metadata.k${i}=v`).join('&')
      for (const q of [
        many,
        dup,
        metadata,
        'limit=%',
        'limit=%ff',
        'limit=1e3',
        'limit=-1',
        'cursor=%00',
        'state=finished%00',
      ]) {
        const started = Date.now()
        const res = await call(`/v1/runs?${q}`)
        assert.ok(res.status === 200 || res.status === 400, `${q.slice(0, 40)}: ${res.status}`)
        assert.ok(Date.now() - started < 1000, `${q.slice(0, 40)}: ${Date.now() - started} ms`)
      }
    })
  })

  describe('paths', () => {
    it('never answers 500 for a malformed, NUL or overlong escape in a path', async () => {
      for (const path of [
        '/v1/runs/%',
        '/v1/runs/%ff',
        '/v1/runs/%E0%80%80',
        '/v1/runs/a%00b',
        '/v1/runs/%2e%2e',
        '/v1/runs/x/output?stream=%',
        '/v1/runs/x/files/%',
        '/ui/runs/%',
        '/v1/keys/%c0%ae',
      ]) {
        const res = await call(path)
        assert.ok(res.status < 500, `${path}: ${res.status}`)
      }
    })

    it('keeps a run’s collected files to that run: no spelling of a path reaches another tenant’s', {
      skip: noNamespace,
    }, async () => {
      const made = await post('/v1/keys', '{"name":"victim","scopes":["runs:write","runs:read"]}')
      const victim = ((await made.json()) as { key: string }).key
      const mine = await post('/v1/keys', '{"name":"thief","scopes":["runs:write","runs:read"]}')
      const thief = ((await mine.json()) as { key: string }).key
      const secret = (await (
        await post(
          '/v1/runs',
          '{"cmd":["sh","-c","echo TOPSECRET > s.txt"],"collect":["s.txt"],"wait":"20s"}',
          victim,
        )
      ).json()) as { id: string }
      const own = (await (
        await post(
          '/v1/runs',
          '{"cmd":["sh","-c","mkdir d; echo mine > d/m.txt"],"collect":["d/m.txt"],"wait":"20s"}',
          thief,
        )
      ).json()) as { id: string }
      assert.equal(await (await call(`/v1/runs/${own.id}/files/d/m.txt`, { key: thief })).text(), 'mine\n')
      const other = secret.id
      const tries = [
        `../${other}/s.txt`,
        `..%2f${other}%2fs.txt`,
        `%2e%2e/${other}/s.txt`,
        `%2e%2e%2f${other}%2fs.txt`,
        `%252e%252e%252f${other}%252fs.txt`,
        `d/../../${other}/s.txt`,
        `d/%2e%2e/%2e%2e/${other}/s.txt`,
        `d%2f..%2f..%2f${other}%2fs.txt`,
        `/${'..%2f'.repeat(8)}etc/passwd`,
        `%2fetc%2fpasswd`,
        `..%5c${other}%5cs.txt`,
        `d/m.txt%00`,
        '.',
        '..',
        '',
      ]
      for (const t of tries) {
        const res = await call(`/v1/runs/${own.id}/files/${t}`, { key: thief })
        const text = await res.text()
        assert.equal(res.status, 404, `${t}: ${res.status} ${text.slice(0, 80)}`)
        assert.doesNotMatch(text, /TOPSECRET|root:/, t)
      }
      // And the victim's run by its id is not the thief's.
      assert.equal((await call(`/v1/runs/${other}/files/s.txt`, { key: thief })).status, 404)
    })
  })

  describe('keys', () => {
    it('takes the exact key only: every near miss is 401', async () => {
      const near = [
        admin.slice(0, -1),
        `${admin.slice(0, -1)}${admin.endsWith('A') ? 'B' : 'A'}`,
        `${admin}x`,
        `x${admin}`,
        admin.toUpperCase(),
        admin.replace('cordon_', 'CORDON_'),
        `${admin.slice(0, 10)} ${admin.slice(10)}`,
      ]
      for (const key of near) assert.equal((await call('/v1/runs', { key })).status, 401, JSON.stringify(key))
      for (const header of [`Basic ${admin}`, `Bearer`, `Bearer ${admin} ${admin}`, `Token ${admin}`, admin])
        assert.equal(
          (await call('/v1/runs', { key: null, headers: { authorization: header } })).status,
          401,
          header,
        )
      for (const header of [`Bearer ${admin}`, `bearer ${admin}`, `Bearer   ${admin}  `])
        assert.equal(
          (await call('/v1/runs', { key: null, headers: { authorization: header } })).status,
          200,
          header,
        )
    })
  })

  describe('headers a client hopes the server honours', () => {
    it('ignores method overrides, grants no CORS, and answers a preflight nothing', async () => {
      const made = await post('/v1/keys', '{"name":"kept","scopes":["runs:read"]}')
      const { id } = (await made.json()) as { id: string }
      for (const header of ['x-http-method-override', 'x-method-override', 'x-http-method']) {
        const res = await call(`/v1/keys/${id}`, { method: 'POST', headers: { [header]: 'DELETE' } })
        assert.equal(res.status, 404, header)
      }
      const keys = (await (await call('/v1/keys')).json()) as { keys: Json[] }
      assert.equal(keys.keys.find((k) => k.id === id)?.revokedAt, null, 'not revoked')
      const preflight = await app.request('/v1/runs', {
        method: 'OPTIONS',
        headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' },
      })
      const cross = await call('/v1/runs', { headers: { origin: 'http://evil.example' } })
      for (const res of [preflight, cross])
        for (const name of res.headers.keys()) assert.doesNotMatch(name, /^access-control-/, name)
    })
  })

  describe('the dashboard’s Host and Origin', () => {
    const signIn = (headers: Record<string, string>) =>
      app.request('/ui/session', {
        method: 'POST',
        headers: { accept: 'application/json', ...headers },
        body: new URLSearchParams({ key: admin }),
      })

    it('serves only the Hosts it should, in any spelling', async () => {
      const served = [
        '127.0.0.1:7070',
        'localhost',
        'LOCALHOST.',
        'app.localhost:1',
        '[::1]:7070',
        '10.0.0.5',
      ]
      const refused = [
        'evil.example',
        '127.0.0.1.nip.io',
        'localhost.evil.example',
        'evil.com@127.0.0.1',
        '127.0.0.1, evil.example',
        'localhost:7070.evil.example',
        'xn--localhost-.example',
      ]
      for (const host of served)
        assert.equal((await app.request('/healthz', { headers: { host } })).status, 200, host)
      for (const host of refused)
        assert.ok((await app.request('/healthz', { headers: { host } })).status >= 400, host)
    })

    it('refuses a sign-in or a request by cookie whose Origin is not this one, however spelt', async () => {
      const ok = await signIn({ host: '127.0.0.1:7070', origin: 'http://127.0.0.1:7070' })
      assert.equal(ok.status, 200)
      const cookie = /^(cordon_session=[^;]+)/.exec(ok.headers.get('set-cookie') ?? '')?.[1] as string
      const { token } = (await ok.json()) as { token: string }
      const origins = [
        'null',
        'http://127.0.0.1:7071',
        'http://127.0.0.1:7070.evil.example',
        'http://127.0.0.1:7070@evil.example',
        'http://evil.example#@127.0.0.1:7070',
        'http://localhost:7070',
        'file://',
        'not a url',
      ]
      for (const origin of origins) {
        const signin = await signIn({ host: '127.0.0.1:7070', origin })
        assert.equal(signin.status, 403, `sign-in from ${origin}`)
        const res = await app.request('/v1/runs', {
          headers: { host: '127.0.0.1:7070', origin, cookie, 'x-cordon-session': token },
        })
        assert.equal(res.status, 403, `request from ${origin}`)
      }
      const same = await app.request('/v1/runs', {
        headers: {
          host: '127.0.0.1:7070',
          origin: 'http://127.0.0.1:7070',
          cookie,
          'x-cordon-session': token,
        },
      })
      assert.equal(same.status, 200)
      // A page token of another length, or of the right length but wrong, in constant time: 401.
      for (const wrong of ['', 'x', `${token}x`, token.replace(/^./, (c) => (c === 'A' ? 'B' : 'A'))]) {
        const res = await app.request('/v1/runs', {
          headers: { host: '127.0.0.1:7070', cookie, 'x-cordon-session': wrong },
        })
        assert.equal(res.status, 401, wrong)
      }
    })
  })
})
