// The dashboard's server side, in process (hono's app.request) over the real service: the session cookie
// and its flags, the page token the cookie needs on /v1 (and the Origin check), the headers that lock the
// pages down, a revoked key or an expired session ending its sessions; and the page's ANSI reader.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { createApp } from '../../src/service/http/app.js'
import { createSessions } from '../../src/service/http/ui.js'
import { createService } from '../../src/service/service.js'
import type { KeyRecord } from '../../src/service/types.js'
import { tempDir } from '../helpers.js'

type Json = Record<string, unknown>

describe('http ui', () => {
  let created: Awaited<ReturnType<typeof createService>>
  let app: ReturnType<typeof createApp>['app']
  let admin: string

  before(async () => {
    created = await createService({ dataDir: tempDir('cordon-http-ui-'), concurrency: 2, maxQueued: 20 })
    app = createApp(created.service, { heartbeatMs: 200 }).app
    admin = created.adminKey as string
  })
  after(async () => {
    await created.service.close()
  })

  const signIn = async (key: string, extra: Record<string, string> = {}, headers: HeadersInit = {}) =>
    app.request('/ui/session', {
      method: 'POST',
      headers,
      body: new URLSearchParams({ key, ...extra }),
    })
  /** A signed-in page: the `name=value` of its session cookie, and the page token the sign-in gave it. */
  interface Signed {
    cookie: string
    token: string
  }
  /** Signs in as the page's script does (asking for JSON): the cookie, and the page token in the answer. */
  const session = async (key = admin, into = app): Promise<Signed> => {
    const res = await into.request('/ui/session', {
      method: 'POST',
      headers: { accept: 'application/json' },
      body: new URLSearchParams({ key }),
    })
    assert.equal(res.status, 200)
    const cookie = /^(cordon_session=[^;]+)/.exec(res.headers.get('set-cookie') ?? '')?.[1]
    assert.ok(cookie, 'a session cookie')
    const { token } = (await res.json()) as { token: string }
    assert.match(token, /^[\w-]{43}$/)
    return { cookie, token }
  }
  /** A request as the page makes it: the cookie and the page token. */
  const withCookie = (s: Signed, path: string, init: RequestInit = {}) =>
    app.request(path, {
      ...init,
      headers: { cookie: s.cookie, 'x-cordon-session': s.token, ...(init.headers as Record<string, string>) },
    })
  /** A request with the cookie alone: what any other service on the host receives, and can replay. */
  const cookieOnly = (s: Signed, path: string, init: RequestInit = {}) =>
    app.request(path, { ...init, headers: { cookie: s.cookie, ...(init.headers as Record<string, string>) } })
  const submit = (cookie: Signed, headers: Record<string, string>) =>
    withCookie(cookie, '/v1/runs', {
      method: 'POST',
      headers,
      body: JSON.stringify({ cmd: ['true'], metadata: { from: 'ui-test' } }),
    })

  it('sends the browser to sign in, with the locked-down headers on every page', async () => {
    const res = await app.request('/ui')
    assert.equal(res.status, 303)
    assert.equal(res.headers.get('location'), '/ui/login?next=%2Fui')
    const login = await app.request('/ui/login?next=/ui/runs/abc')
    assert.equal(login.status, 200)
    for (const r of [res, login]) {
      const csp = r.headers.get('content-security-policy') ?? ''
      assert.match(csp, /script-src 'self'/)
      assert.match(csp, /frame-ancestors 'none'/)
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/)
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff')
      // Not no-referrer: that makes the browser send `Origin: null` on the page's own posts.
      assert.equal(r.headers.get('referrer-policy'), 'same-origin')
    }
    const html = await login.text()
    assert.doesNotMatch(html, /\{\{/, 'every slot filled')
    assert.match(html, /name="next" value="\/ui\/runs\/abc"/)
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)/, 'no inline script')
  })

  it('puts nothing of the request into the sign-in page but a dashboard path', async () => {
    for (const next of ['"><script>alert(1)</script>', '//evil.example/ui', 'https://evil.example/']) {
      const html = await (await app.request(`/ui/login?next=${encodeURIComponent(next)}`)).text()
      assert.doesNotMatch(html, /evil|alert/)
      assert.match(html, /name="next" value="\/ui"/)
      const res = await signIn(admin, { next })
      assert.equal(res.headers.get('location'), '/ui', 'never redirected elsewhere')
    }
  })

  it('refuses an unknown key (401, no cookie) and a sign-in posted from another site', async () => {
    const bad = await signIn('cordon_nope')
    assert.equal(bad.status, 401)
    assert.equal(bad.headers.get('set-cookie'), null)
    assert.match(await bad.text(), /unknown or revoked/)
    const cross = await signIn(admin, {}, { origin: 'https://evil.example' })
    assert.equal(cross.status, 403)
    assert.equal(cross.headers.get('set-cookie'), null)
  })

  it('gives an HttpOnly, SameSite=Strict, Path=/ session cookie, Secure over https', async () => {
    const res = await signIn(admin, { next: '/ui/runs/r1' })
    assert.equal(res.headers.get('location'), '/ui/runs/r1')
    const flags = (res.headers.get('set-cookie') ?? '').split(/;\s*/).slice(1)
    assert.ok(flags.includes('HttpOnly'))
    assert.ok(flags.includes('SameSite=Strict'))
    assert.ok(flags.includes('Path=/'))
    assert.ok(!flags.includes('Secure'), 'not over plain http')
    assert.match(flags.join(';'), /Max-Age=43200/)
    const https = await signIn(admin, {}, { 'x-forwarded-proto': 'https' })
    assert.ok((https.headers.get('set-cookie') ?? '').split(/;\s*/).includes('Secure'))
  })

  it('lets the cookie read the API and the pages, and stream events', async () => {
    const cookie = await session()
    const list = await withCookie(cookie, '/v1/runs')
    assert.equal(list.status, 200)
    assert.ok(Array.isArray(((await list.json()) as Json).runs))
    const page = await withCookie(cookie, '/ui')
    assert.equal(page.status, 200)
    assert.match(page.headers.get('content-type') ?? '', /text\/html/)
    assert.equal(page.headers.get('cache-control'), 'no-store')
    const run = (await (await submit(cookie, {})).json()) as Json
    const runPage = await withCookie(cookie, `/ui/runs/${run.id}`)
    assert.equal(runPage.status, 200)
    const events = await withCookie(cookie, `/v1/runs/${run.id}/events`)
    assert.equal(events.status, 200)
    assert.match(await events.text(), /event: end/)
  })

  it('refuses a request by cookie from another origin, page token or not; Bearer is unchanged', async () => {
    const cookie = await session()
    for (const origin of ['https://evil.example', 'null', 'http://localhost:1']) {
      const res = await submit(cookie, { origin })
      assert.equal(res.status, 403, origin)
      assert.equal(((await res.json()) as { error: Json }).error.code, 'forbidden')
      assert.equal((await withCookie(cookie, '/v1/runs', { headers: { origin } })).status, 403, origin)
    }
    assert.equal((await submit(cookie, {})).status, 201)
    assert.equal((await submit(cookie, { origin: 'http://localhost' })).status, 201)
    const bearer = await app.request('/v1/runs', {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}` },
      body: JSON.stringify({ cmd: ['true'] }),
    })
    assert.equal(bearer.status, 201)
  })

  it('authenticates nothing on /v1 by the cookie alone: another service of the host that got it is refused', async () => {
    // A cookie is sent to every port of its host: another service there got it, and replayed it with
    // the CSRF header and this server's Origin to make an admin key.
    const cookie = await session()
    const replays: [string, RequestInit][] = [
      ['/v1/runs', {}],
      ['/v1/keys', {}],
      [
        '/v1/keys',
        {
          method: 'POST',
          headers: { 'x-cordon-csrf': '1', origin: 'http://localhost', 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'stolen', scopes: ['admin'] }),
        },
      ],
      ['/v1/runs', { method: 'POST', headers: { 'x-cordon-csrf': '1' }, body: '{"cmd":["true"]}' }],
    ]
    for (const [path, init] of replays) {
      const res = await cookieOnly(cookie, path, init)
      assert.equal(res.status, 401, `${init.method ?? 'GET'} ${path}`)
      assert.match(String(((await res.json()) as { error: Json }).error.message), /x-cordon-session/)
    }
    const keys = (await (
      await app.request('/v1/keys', { headers: { authorization: `Bearer ${admin}` } })
    ).json()) as { keys: Json[] }
    assert.ok(!keys.keys.some((k) => k.name === 'stolen'), 'no key was made')
    // The page token alone is nothing, nor is another session's with this cookie.
    const other = await session()
    const tokenOnly = await app.request('/v1/runs', { headers: { 'x-cordon-session': cookie.token } })
    assert.equal(tokenOnly.status, 401)
    assert.equal(
      (await cookieOnly(cookie, '/v1/runs', { headers: { 'x-cordon-session': other.token } })).status,
      401,
    )
    assert.equal((await withCookie(cookie, '/v1/runs')).status, 200)
    // What the cookie alone still gets, the pages, holds no page token: only the sign-in's answer does.
    for (const path of ['/ui', '/ui/runs/run_x', '/ui/assets/common.js', '/ui/login']) {
      const res = await cookieOnly(cookie, path)
      assert.ok(!(await res.text()).includes(cookie.token), path)
      assert.doesNotMatch(res.headers.get('set-cookie') ?? '', new RegExp(cookie.token))
    }
  })

  it('names the cookie __Host- over TLS, and reads only that name there', async () => {
    const https = await signIn(admin, {}, { 'x-forwarded-proto': 'https', accept: 'application/json' })
    const set = https.headers.get('set-cookie') ?? ''
    assert.match(set, /^__Host-cordon_session=/)
    const flags = set.split(/;\s*/).slice(1)
    assert.ok(flags.includes('Secure') && flags.includes('Path=/'), set)
    assert.ok(!flags.some((f) => /^domain=/i.test(f)), set)
    const { token } = (await https.json()) as { token: string }
    const id = /^__Host-cordon_session=([^;]+)/.exec(set)?.[1] as string
    const tls = { 'x-forwarded-proto': 'https', 'x-cordon-session': token }
    assert.equal(
      (await app.request('/v1/runs', { headers: { ...tls, cookie: `__Host-cordon_session=${id}` } })).status,
      200,
    )
    // The same session under the plain name (a cookie a plain-http page of the host could have set) is not read.
    assert.equal(
      (await app.request('/v1/runs', { headers: { ...tls, cookie: `cordon_session=${id}` } })).status,
      401,
    )
  })

  it('ends the sessions of a revoked key', async () => {
    const made = await app.request('/v1/keys', {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}` },
      body: JSON.stringify({ name: 'ui-revoked', scopes: ['runs:read', 'runs:write'] }),
    })
    const { id, key } = (await made.json()) as { id: string; key: string }
    const cookie = await session(key)
    assert.equal((await withCookie(cookie, '/v1/runs')).status, 200)
    const revoked = await app.request(`/v1/keys/${id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${admin}` },
    })
    assert.equal(revoked.status, 204)
    assert.equal((await withCookie(cookie, '/v1/runs')).status, 401)
    const page = await cookieOnly(cookie, '/ui')
    assert.equal(page.status, 303)
    assert.match(page.headers.get('location') ?? '', /m=expired/)
  })

  it('signs out: the session is gone and the cookie cleared', async () => {
    const cookie = await session()
    const out = await withCookie(cookie, '/ui/logout', { method: 'POST' })
    assert.equal(out.status, 303)
    assert.match(out.headers.get('set-cookie') ?? '', /cordon_session=;.*Max-Age=0/)
    assert.equal((await withCookie(cookie, '/v1/runs')).status, 401)
  })

  it('ends a session at its expiry', async () => {
    const short = createApp(created.service, { sessionTtlMs: 100 }).app
    const s = await session(admin, short)
    const headers = { cookie: s.cookie, 'x-cordon-session': s.token }
    assert.equal((await short.request('/v1/runs', { headers })).status, 200)
    await new Promise((r) => setTimeout(r, 150))
    assert.equal((await short.request('/v1/runs', { headers })).status, 401)
  })

  it('ends the event streams of a session at its sign-out, at the next heartbeat', async () => {
    const cookie = await session()
    const made = await withCookie(cookie, '/v1/runs', {
      method: 'POST',
      body: JSON.stringify({ cmd: ['sleep', '10'] }),
    })
    const { id } = (await made.json()) as { id: string }
    try {
      const events = await withCookie(cookie, `/v1/runs/${id}/events`)
      assert.equal(events.status, 200)
      const reader = (events.body as ReadableStream<Uint8Array>).getReader()
      await reader.read()
      await withCookie(cookie, '/ui/logout', { method: 'POST' })
      const ended = (async () => {
        for (;;) if ((await reader.read()).done) return true
      })()
      const late = new Promise<boolean>((r) => setTimeout(() => r(false), 2000))
      assert.equal(await Promise.race([ended, late]), true, 'the stream ended after the sign-out')
    } finally {
      await app.request(`/v1/runs/${id}/cancel`, {
        method: 'POST',
        headers: { authorization: `Bearer ${admin}` },
      })
    }
  })

  it("serves the API, whose bytes are the programs', unsniffed, sandboxed and unframed", async () => {
    const bearer = { authorization: `Bearer ${admin}` }
    const made = await app.request('/v1/runs', {
      method: 'POST',
      headers: bearer,
      body: JSON.stringify({ cmd: ['sh', '-c', 'echo "<script>alert(1)</script>"'], wait: '10s' }),
    })
    const { id } = (await made.json()) as { id: string }
    const paths = [`/v1/runs/${id}/output`, `/v1/runs/${id}`, '/v1/nothing/<b>', '/metrics', '/openapi.json']
    for (const path of paths) {
      const res = await app.request(path, { headers: bearer })
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff', path)
      const csp = res.headers.get('content-security-policy') ?? ''
      assert.match(csp, /\bsandbox\b/, path)
      assert.match(csp, /default-src 'none'/, path)
      assert.match(csp, /frame-ancestors 'none'/, path)
    }
    const page = await app.request('/ui/login')
    assert.match(
      page.headers.get('content-security-policy') ?? '',
      /script-src 'self'/,
      'the pages keep theirs',
    )
  })

  it('serves its assets with their types, and nothing else under /ui/assets', async () => {
    const types = { 'style.css': /text\/css/, 'run.js': /text\/javascript/, 'icon.svg': /image\/svg/ }
    for (const [name, type] of Object.entries(types)) {
      const res = await app.request(`/ui/assets/${name}`)
      assert.equal(res.status, 200, name)
      assert.match(res.headers.get('content-type') ?? '', type)
    }
    for (const path of ['/ui/assets/../http/ui.ts', '/ui/assets/login.html', '/ui/assets/%2e%2e%2fui.ts']) {
      assert.equal((await app.request(path)).status, 404, path)
    }
  })
})

describe('the page’s ANSI reader', () => {
  type Part = { text: string; cls: string }
  let ansiReader: () => { read(chunk: string): Part[] }
  before(async () => {
    // The page's own module, plain JS without types: loaded by a computed specifier.
    const url = new URL('../../src/service/ui/common.js', import.meta.url).href
    ansiReader = ((await import(url)) as { ansiReader: typeof ansiReader }).ansiReader
  })
  const text = (parts: Part[]) => parts.map((p) => p.text).join('')

  it('turns colours into classes and drops every other escape and control character', () => {
    const r = ansiReader()
    const parts = r.read(
      'a\x1b[31mred\x1b[0m \x1b[1;32mgo\x1b[m\x1b]0;title\x07\x1b[2J\x1b[Hz\r\x00\x07\tend\n',
    )
    assert.equal(text(parts), 'ared goz\tend\n')
    assert.deepEqual(parts.slice(0, 3), [
      { text: 'a', cls: '' },
      { text: 'red', cls: 'a31' },
      { text: ' ', cls: '' },
    ])
    assert.deepEqual(parts[3], { text: 'go', cls: 'a32 a-b' })
  })

  it('reads an escape split between two chunks whole, and carries a colour over', () => {
    const r = ansiReader()
    assert.equal(text(r.read('x\x1b[3')), 'x')
    const parts = r.read('4mblue')
    assert.deepEqual(parts, [{ text: 'blue', cls: 'a34' }])
    assert.deepEqual(r.read('more'), [{ text: 'more', cls: 'a34' }])
  })

  it('skips the numbers of 256-colour and true-colour codes', () => {
    const r = ansiReader()
    assert.deepEqual(r.read('\x1b[38;5;31ma\x1b[48;2;1;32;3;1mb'), [
      { text: 'a', cls: '' },
      { text: 'b', cls: 'a-b' },
    ])
  })

  it('leaves markup as text: it is never parsed as HTML', () => {
    const r = ansiReader()
    assert.equal(text(r.read('<script>alert(1)</script>&amp;')), '<script>alert(1)</script>&amp;')
  })
})

describe('the session store', () => {
  const keyOf = (id: string) => ({ id }) as unknown as KeyRecord
  const service = { authenticate: (token: string) => keyOf(token.replace('token-', '')) }

  it('holds a bounded number of sessions a key: one key signing in over and over evicts its own only', () => {
    const sessions = createSessions(service)
    const victim = sessions.create('token-victim', keyOf('victim')).id
    let last = ''
    for (let i = 0; i < 10_050; i++) last = sessions.create('token-flood', keyOf('flood')).id
    assert.ok(sessions.check(victim), 'another key’s session survives the flood')
    assert.ok(sessions.check(last), 'the newest of the flood lives')
    assert.ok(sessions.size <= 100, `${sessions.size} sessions held`)
  })

  it('drops expired sessions before evicting a live one when full', () => {
    let now = 0
    const sessions = createSessions(service, 1000, () => now)
    for (let i = 0; i < 10_000; i++) sessions.create(`token-k${i}`, keyOf(`k${i}`))
    now = 2000
    const live = sessions.create('token-live', keyOf('live')).id
    const next = sessions.create('token-next', keyOf('next')).id
    assert.ok(sessions.check(live))
    assert.ok(sessions.check(next))
    assert.ok(sessions.size <= 2, `${sessions.size} sessions held`)
  })
})
